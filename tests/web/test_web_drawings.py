"""Every env's drawing on the page, in a real headless Chromium at a laptop's 1280 x 800: the
picture is rendered (an SVG with content, many colours in its screenshot) and within the
viewport, the page never scrolls sideways (nor at 200 % zoom), the message box shows only where
the seat may send a message, what is drawn is the env's state at that turn (replayed from the
episode's seed), and clicking the picture (or a key, or Enter on a focused part of it) sends the
action it stands for.

``TEAMGYM_WRITE_DOC_IMAGES=1`` writes each env's screenshot to ``docs/images/web-NAME.png``, the
pictures of the web guide."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("selenium.webdriver")

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from teamgym.envs import make, registry
from teamgym.envs.hanabi.rules import COLOURS
from teamgym.envs.registration import latest_versions

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"
LAPTOP = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
ZOOMED = {"width": 640, "height": 400, "deviceScaleFactor": 2, "mobile": False}  # 200 %
#: env id -> (the play command's options, whether the person's first turn takes a message)
CASES: dict[str, tuple[list[str], bool]] = {
    "hanabi-v0": (["--teammates", "expert"], False),
    "kitchen-v0": (["--teammates", "expert"], True),
    "signal-v1": (["--teammates", "expert", "--agent", "robot_1"], False),  # the listener
    "foraging-v1": (["--teammates", "expert"], True),
    "keydoor-v0": (["--teammates", "expert"], True),
    "publicgoods-v0": (["--teammates", "expert"], False),  # a contribute phase: no talk
    "thor-assembly-v0": (["--teammates", "expert"], True),
}

_LAYOUT = """
const turn = document.querySelector('.turn');
if (!turn) return null;
const figure = document.querySelector(`figure.drawing[data-seat='${turn.dataset.seat}']`);
const svg = figure && figure.querySelector('svg');
if (!svg) return null;
const r = svg.getBoundingClientRect();
return {seat: turn.dataset.seat, step: Number(turn.dataset.step),
        scroll: document.documentElement.scrollWidth, width: innerWidth, height: innerHeight,
        left: r.left, right: r.right, top: r.top, bottom: r.bottom,
        children: svg.childElementCount, say: !!turn.querySelector('input.say'),
        live: figure.querySelectorAll('.act.live').length};
"""
_DRAWN = """
return [...document.querySelectorAll(`figure.drawing ${arguments[0]}`)]
  .map(n => Object.assign({}, n.dataset));
"""


def _turn(browser: Any, after: int = -1, timeout: float = 120) -> dict[str, Any]:
    """The page's open turn past step ``after``, its picture drawn."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = browser.execute_script(_LAYOUT)
        if shown and shown["step"] > after:
            return shown
        time.sleep(0.05)
    raise AssertionError(f"no turn past step {after} with a picture:\n{browser.page_source[:2000]}")


def _fonts_loaded(browser: Any) -> None:
    """Wait until the page's fonts are in (they change the picture's measured size)."""
    browser.execute_async_script("document.fonts.ready.then(() => arguments[0]())")


def _sent(play: Any, seat: str, step: int, action: str, timeout: float = 60) -> None:
    """The page sent ``action`` for ``seat`` at ``step`` (the episode's history says so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        history = [h for e in play.state()["episodes"] for h in e["history"]]
        done = [h for h in history if (h["seat"], h["step"]) == (seat, step)]
        if done:
            assert done[0]["reply"] == f"<action>{action}</action>", done
            return
        time.sleep(0.05)
    raise AssertionError(f"{seat} sent nothing at step {step}")


def _click(browser: Any, css: str) -> None:
    (node,) = browser.find_elements(By.CSS_SELECTOR, f"figure.drawing {css}")
    ActionChains(browser).move_to_element(node).click().perform()


def _menu(browser: Any) -> list[str]:
    buttons = browser.find_elements(By.CSS_SELECTOR, ".menu button.menu-action")
    return [b.get_attribute("data-action") for b in buttons]


def _choose(browser: Any, action: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f".menu button[data-action='{action}']").click()


def _colours(png: bytes, shown: dict[str, Any]) -> int:
    """Distinct colours of the screenshot's part where the picture is."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    box = (
        int(shown["left"]),
        int(max(shown["top"], 0)),
        int(shown["right"]),
        int(min(shown["bottom"], shown["height"])),
    )
    colours = image.crop(box).getcolors(maxcolors=1 << 20)
    return len(colours or [])


def test_every_registered_env_has_a_case_here() -> None:
    assert set(latest_versions(sorted(registry()))) == set(CASES)


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_the_page_draws_the_game_fits_a_laptop_and_acts_on_clicks(
    env_id, tmp_path, browser, web_play
) -> None:
    options, speaks = CASES[env_id]
    play = web_play(
        ["play", env_id, "--web", "--port", "0", "--out", str(tmp_path / "run"), *options]
    )
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", LAPTOP)
    try:
        browser.get(play.links["player"])
        _turn(browser)
        _fonts_loaded(browser)
        shown = _turn(browser)
        # rendered and within a laptop's screen; no sideways scroll
        assert shown["scroll"] <= shown["width"] == 1280, shown
        assert 0 <= shown["left"] < shown["right"] <= 1280 and shown["top"] < 800, shown
        assert shown["bottom"] - shown["top"] > 150 and shown["children"] > 3, shown
        assert shown["live"] > 0, "nothing on the picture can be clicked"
        assert shown["say"] is speaks, "the message box shows where no message is delivered"
        assert _colours(browser.get_screenshot_as_png(), shown) > 12, "the picture looks blank"
        # what is drawn is the env's state at that turn, replayed from the episode's seed
        (episode,) = play.state()["episodes"]
        env = make(env_id)
        env.reset(seed=episode["seed"])
        CHECKS[env_id](env.unwrapped, lambda css: browser.execute_script(_DRAWN, css), shown)
        # at 200 % zoom (a 640-pixel-wide page) nothing scrolls sideways either
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", ZOOMED)
        zoomed = browser.execute_script(_LAYOUT)
        assert zoomed["scroll"] <= zoomed["width"] == 640, zoomed
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", LAPTOP)
        last = ACTS[env_id](browser, play, shown)
        # a turn later in the game (the guide's picture): still drawn, still no sideways scroll
        _turn(browser, after=last)
        _fonts_loaded(browser)
        later = _turn(browser, after=last)
        assert later["scroll"] <= 1280 and later["right"] <= 1280, later
        png = browser.get_screenshot_as_png()
        assert _colours(png, later) > 12, "the picture looks blank"
        if os.environ.get("TEAMGYM_WRITE_DOC_IMAGES"):
            (DOCS / f"web-{env_id.rpartition('-v')[0]}.png").write_bytes(png)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


# -- what each picture must show (the env at the person's first turn) ------------------------
def _hanabi(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    cards = drawn(".card")
    theirs = [(c["colour"], int(c["rank"])) for c in cards if c["player"] == "robot_1"]
    assert theirs == [(COLOURS[c], r + 1) for c, r in env.game.hands[1]]
    own = [c for c in cards if c["player"] == "you"]
    assert len(own) == 5 and not [c for c in own if "colour" in c or "rank" in c]
    assert {f["colour"]: int(f["height"]) for f in drawn(".firework")} == dict.fromkeys(COLOURS, 0)


def _kitchen(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    facing = {(0, -1): "up", (0, 1): "down", (1, 0): "right", (-1, 0): "left"}
    chefs = [(int(c["x"]), int(c["y"]), c["facing"]) for c in drawn(".chef")]
    assert chefs == [(c.pos[0], c.pos[1], facing[c.facing]) for c in env.kitchen.chefs]
    assert len(drawn(".pot")) == len(env.layout.pots)


def _signal(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    words = [o["words"] for o in drawn(".object")]  # robot_1 listens; its own order
    assert words == [env._names[i] for i in env.round.orders["robot_1"]]
    assert not [o for o in drawn(".object") if "target" in o]


def _foraging(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    f, here = env.field, env.field.pos["robot_0"]
    items = {(int(i["row"]), int(i["col"])): int(i["level"]) for i in drawn(".item")}
    assert items == {c: lv for c, lv in f.items.items() if env._visible(here, c)}
    agents = {a["seat"]: (int(a["row"]), int(a["col"])) for a in drawn(".agent")}
    assert agents == {a: c for a, c in f.pos.items() if a == "robot_0" or env._visible(here, c)}


def _keydoor(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    agents = {a["seat"]: (int(a["x"]), int(a["y"])) for a in drawn(".agent")}
    assert agents == env.pos
    assert [d["state"] for d in drawn(".door")] == ["closed"] and not drawn(".treasure")


def _publicgoods(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    coins = [int(c["coins"]) for c in drawn(".act[data-coins]")]
    assert coins == list(range(env.endowment + 1)) and not drawn(".bar")


def _thor(env: Any, drawn: Any, shown: dict[str, Any]) -> None:
    state = env.assembly
    assert [p["place"] for p in drawn("[data-place]")] == [state.names[p] for p in state.place_ids]
    assert [c["state"] for c in drawn("[data-connection]")] == ["?"] * len(state.connections)


CHECKS = {
    "hanabi-v0": _hanabi,
    "kitchen-v0": _kitchen,
    "signal-v1": _signal,
    "foraging-v1": _foraging,
    "keydoor-v0": _keydoor,
    "publicgoods-v0": _publicgoods,
    "thor-assembly-v0": _thor,
}


# -- acting on the picture -------------------------------------------------------------------
def _act_hanabi(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    _click(browser, ".card.own[data-slot='1']")
    assert _menu(browser) == ["play 1"]  # discarding needs a spent information token
    _choose(browser, "play 1")
    _sent(play, "robot_0", shown["step"], "play 1")
    later = _turn(browser, after=shown["step"])
    _click(browser, ".card[data-player='robot_1'][data-slot='2']")
    offered = _menu(browser)
    assert len(offered) == 2 and all(a.startswith("hint robot_1 ") for a in offered), offered
    _choose(browser, offered[1])  # the rank
    _sent(play, "robot_0", later["step"], offered[1])
    return later["step"]


def _act_kitchen(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    moves = browser.execute_script(
        "return [...document.querySelectorAll('figure.drawing .act.live')]"
        ".map(n => JSON.parse(n.dataset.actions)[0])"
    )
    move = next(m for m in moves if m in ("up", "down", "left", "right"))
    _click(browser, f""".act.live[data-actions='["{move}"]']""")
    _sent(play, "robot_0", shown["step"], move)
    later = _turn(browser, after=shown["step"])
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()  # keys move the chef
    _sent(play, "robot_0", later["step"], "left")
    again = _turn(browser, after=later["step"])
    ActionChains(browser).send_keys("s").perform()
    _sent(play, "robot_0", again["step"], "stay")
    return again["step"]


def _act_signal(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    _click(browser, ".object[data-number='2']")
    _sent(play, "robot_1", shown["step"], "pick 2")
    return shown["step"]  # next: robot_1 speaks in round 2, the target framed


def _act_foraging(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    """Keyboard only: Tab-focus a part of the picture, Enter sends it."""
    node = browser.find_element(By.CSS_SELECTOR, "figure.drawing .act.live:not([data-menu])")
    action = node.get_attribute("data-actions").strip('[]"')
    browser.execute_script("arguments[0].focus()", node)
    assert browser.switch_to.active_element == node
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    _sent(play, "robot_0", shown["step"], action)
    return shown["step"]


def _act_keydoor(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    live = browser.execute_script(
        "return [...document.querySelectorAll('figure.drawing .act.live')]"
        ".map(n => JSON.parse(n.dataset.actions)).filter(a => a.length === 1).map(a => a[0])"
    )
    move = live[0]
    _click(browser, f""".act.live[data-actions='["{move}"]']""")
    _sent(play, "robot_0", shown["step"], move)
    return shown["step"]


def _act_publicgoods(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    _click(browser, ".act[data-coins='7']")
    _sent(play, "robot_0", shown["step"], "contribute 7")
    return shown["step"]


def _act_thor(browser: Any, play: Any, shown: dict[str, Any]) -> int:
    bench = next(
        p for p in browser.execute_script(_DRAWN, "[data-place]") if "workbench" in p["label"]
    )
    _click(browser, f"[data-place='{bench['place']}']")
    assert _menu(browser) == [f"goto {bench['place']}"]
    _choose(browser, f"goto {bench['place']}")
    _sent(play, "robot_0", shown["step"], f"goto {bench['place']}")
    return shown["step"]


ACTS = {
    "hanabi-v0": _act_hanabi,
    "kitchen-v0": _act_kitchen,
    "signal-v1": _act_signal,
    "foraging-v1": _act_foraging,
    "keydoor-v0": _act_keydoor,
    "publicgoods-v0": _act_publicgoods,
    "thor-assembly-v0": _act_thor,
}
