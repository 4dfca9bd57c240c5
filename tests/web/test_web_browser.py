"""The page in a real headless Chromium (Debian's, driven by Selenium): a person plays whole
episodes by clicking, with an LLM teammate (``teamgym serve`` on loopback) and with the expert;
what the page shows at each turn is the env's observation, the picture hides the person's own
Hanabi cards, a closed tab resumes from its link, and a screenshot shows a rendered page
(``TEAMGYM_WRITE_DOC_IMAGES=1`` keeps the end of the LLM episode for the web guide)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("selenium.webdriver")

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from teamgym.envs import make

SECRET = "sk-teamgym-web-test-0123456789"  # the LLM teammate's key: never on the page
DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"


def _wait(browser: Any, css: str, timeout: float = 120) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = browser.find_elements(By.CSS_SELECTOR, css)
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {css} on the page in {timeout} s:\n{browser.page_source[:3000]}")


_SNAPSHOT = """
const turn = document.querySelector('.turn');
if (!turn) return null;
const seat = turn.dataset.seat;
return {seat: seat, step: Number(turn.dataset.step),
        observation: document.querySelector(`pre.observation[data-seat='${seat}']`).textContent,
        actions: [...turn.querySelectorAll('button.action')].map(b => b.dataset.action)};
"""


def _next_turn(browser: Any, play: Any) -> dict[str, Any] | None:
    """The open turn the page shows (read in one script: the page redraws as it polls), or
    None once the episode's result is shown."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        turn = browser.execute_script(_SNAPSHOT)
        if turn:
            return turn
        if browser.find_elements(By.CSS_SELECTOR, ".result") or play.proc.poll() is not None:
            return None
        time.sleep(0.05)
    raise AssertionError("the page showed neither a turn nor a result")


def _text(element: Any) -> str:
    return element.get_attribute("textContent")


def _answer(browser: Any, turn: dict[str, Any], action: str, words: str) -> None:
    """Type the message and click the action's button, as a person does (again if the page
    redrew under the pointer)."""
    for _ in range(20):
        try:
            box = browser.find_element(By.CSS_SELECTOR, f".turn[data-step='{turn['step']}']")
            if words:
                say = box.find_element(By.CSS_SELECTOR, "input.say")
                say.clear()
                say.send_keys(words)
            box.find_element(By.CSS_SELECTOR, f"button.action[data-action='{action}']").click()
            return
        except StaleElementReferenceException:
            time.sleep(0.05)
    raise AssertionError("the page kept redrawing the turn")


def _play_in_browser(browser: Any, play: Any, choose: Any) -> list[tuple[str, int, str]]:
    """Click through the episode; returns (seat, step, observation shown) per turn."""
    browser.get(play.links["player"])
    _wait(browser, "body[data-ready='1']")
    shown = []
    while (turn := _next_turn(browser, play)) is not None:
        shown.append((turn["seat"], turn["step"], turn["observation"]))
        _answer(browser, turn, *choose(turn["observation"], turn["actions"]))
        deadline = time.monotonic() + 60  # the page redraws once the reply is taken
        while time.monotonic() < deadline:
            now = browser.execute_script(_SNAPSHOT)
            if not now or (now["seat"], now["step"]) != (turn["seat"], turn["step"]):
                break
            time.sleep(0.05)
    return shown


def _env_observations(run_dir: Path, env_id: str, kwargs: dict[str, Any]) -> list[dict[str, str]]:
    """The env's observations at every step, replayed from the recorded actions."""
    (trajectory,) = [
        json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()
    ]
    env = make(env_id, **kwargs)
    obs, _ = env.reset(seed=trajectory["seed"])
    seen = [dict(obs)]
    for step in trajectory["steps"]:
        obs, *_ = env.step(step["actions"])
        seen.append(dict(obs))
    return seen


def signal_choice(observation: str, actions: list[str]) -> tuple[str, str]:
    target = re.search(r"^The target is: (.+)$", observation, re.M)
    if target and "say" in actions:
        return "say", target.group(1)
    said = re.findall(r"^- robot_\d+: (.+)$", observation, re.M)
    words = set(said[-1].lower().split()) if said else set()
    for number, item in re.findall(r"^(\d+)\. (.+)$", observation, re.M):
        if f"pick {number}" in actions and words <= set(item.split()):
            return f"pick {number}", ""
    return actions[0], ""


def test_a_person_plays_signal_with_an_llm_teammate_in_the_browser(
    tmp_path, browser, web_play, serve_process, model_dir
) -> None:
    server = serve_process(model_dir)
    try:
        out = tmp_path / "run"
        teammate = {"kind": "openai", "model": str(model_dir), "base_url": server.url}
        teammate["api_key_env"] = "WEB_TEST_KEY"
        args = ["play", "signal-v1", "--web", "--port", "0", "--agent", "robot_1"]
        args += ["--teammates", json.dumps(teammate), "--out", str(out)]
        play = web_play(args, env={"WEB_TEST_KEY": SECRET})
        states: list[str] = []  # the page's API, read while a turn is open (the server stops
        # once the page has shown the end, so a read after the last reply races its exit)

        def choose(observation: str, actions: list[str]) -> tuple[str, str]:
            states.append(json.dumps(play.state()))
            return signal_choice(observation, actions)

        shown = _play_in_browser(browser, play, choose)
        assert SECRET not in browser.page_source
        assert states and not [s for s in states if SECRET in s]
        result = _text(_wait(browser, ".result")[0])
        _wait(browser, "body[data-over='1']")  # the page says the session is over
        assert "The session has ended" in _text(browser.find_element(By.ID, "waiting"))
        browser.save_screenshot(str(tmp_path / "signal.png"))
        if os.environ.get("TEAMGYM_WRITE_DOC_IMAGES"):  # the web guide's picture of the end
            browser.save_screenshot(str(DOCS / "web-signal-result.png"))
        code, printed = play.finish()
    finally:
        server.stop()
    assert code == 0, printed
    assert len(shown) == 2  # one round listened, one spoken
    env_obs = _env_observations(out, "signal-v1", {})
    for seat, step, observation in shown:
        assert observation == env_obs[step][seat], (seat, step)
    (line,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert line["status"] == "ok" and line["partner"].startswith("openai:")
    assert ("The team succeeded" in result) == line["metrics"]["success"]
    records = json.loads((out / "trajectories.jsonl").read_text())["agent_records"]
    assert {r.get("kind") for r in records} == {"human", None}  # the person's, the LLM's
    _assert_rendered(tmp_path / "signal.png")
    assert not [p for p in out.rglob("*.json*") if SECRET in p.read_text()]


@pytest.mark.parametrize("env_id", ["hanabi-v0", "kitchen-v0"])
def test_a_person_plays_with_the_expert_sees_the_picture_and_a_closed_tab_resumes(
    env_id, tmp_path, browser, web_play
) -> None:
    out = tmp_path / "run"
    play = web_play(
        [
            "play",
            env_id,
            "--web",
            "--port",
            "0",
            "--teammates",
            "expert",
            "--env-arg",
            "max_steps=6",
            "--out",
            str(out),
        ]
    )
    browser.get(play.links["player"])
    _wait(browser, ".turn")
    first = _next_turn(browser, play)
    before = first["observation"]
    picture = browser.execute_script(
        "return document.querySelector(\"pre.picture[data-seat='robot_0']\").textContent"
    )
    browser.save_screenshot(str(tmp_path / "page.png"))
    if env_id == "hanabi-v0":  # the table as robot_0 sees it: its own cards hidden
        assert "fireworks" in picture and "robot_0: ?? ??" in picture and "robot_1: " in picture
        assert "?" not in picture.split("robot_1: ")[1].splitlines()[0]
    else:
        assert "robot_0:" in picture and "robot_1:" in picture
    step = first["step"]
    browser.get("about:blank")  # the tab is closed; the episode waits
    time.sleep(1.0)
    assert [t["step"] for e in play.state()["episodes"] for t in e["turns"]] == [int(step)]
    shown = _play_in_browser(browser, play, lambda obs, actions: (actions[0], ""))
    assert shown[0][1] == int(step) and shown[0][2] == before  # the same turn, from the link
    _wait(browser, ".result")
    code, printed = play.finish()
    assert code == 0, printed
    env_obs = _env_observations(out, env_id, {"max_steps": 6})
    for seat, at, observation in shown:
        assert observation == env_obs[at][seat], (seat, at)
    _assert_rendered(tmp_path / "page.png")


def _assert_rendered(png: Path) -> None:
    """A real screenshot: a PNG of the window's size with more than a few colours."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    assert image.size[0] >= 800 and image.size[1] >= 600
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20
