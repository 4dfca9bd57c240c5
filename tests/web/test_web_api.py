"""``teamgym play --web`` through the HTTP API the page uses, as a user runs it: whole episodes
into a run directory that ``bench report`` reads, replays that reproduce the trajectory hashes,
bad requests refused with the episode untouched, a stop and a resume, every registered env
(a plugin's too) in one ``bench run``, and a ``bench crossplay`` matrix with a human row."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from teamgym.envs import registry


def _results(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _trajectories(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def listener_pick(turn: dict[str, Any]) -> dict[str, Any]:
    """What a person reading the page does: names the target (speaker), or picks the object
    whose words hold the speaker's (listener)."""
    text = turn["observation"]
    target = re.search(r"^The target is: (.+)$", text, re.M)
    if target and "say" in turn["valid_actions"]:
        return {"action": "say", "say": target.group(1)}
    said = re.findall(r"^- robot_\d+: (.+)$", text, re.M)
    words = set(said[-1].lower().split()) if said else set()
    for number, item in re.findall(r"^(\d+)\. (.+)$", text, re.M):
        if f"pick {number}" in turn["valid_actions"] and words <= set(item.split()):
            return {"action": f"pick {number}"}
    return {"action": turn["valid_actions"][0]}


def _play(env_id: str, out: Path, *extra: str) -> list[str]:
    return ["play", env_id, "--web", "--port", "0", "--out", str(out), *extra]


def test_a_listener_plays_signal_with_the_expert_into_a_run_that_replays(tmp_path, web_play):
    out = tmp_path / "run"
    args = ["--agent", "robot_1", "--episodes", "2"]
    play = web_play(_play("signal-v1", out, *args))
    turns = play.play_out(listener_pick)
    code, printed = play.finish()
    assert code == 0, printed
    assert len(turns) == 4  # two episodes of two rounds: one listened, one spoken
    lines = _results(out)
    assert [r["status"] for r in lines] == ["ok", "ok"]
    assert {r["agent"] for r in lines} == {"human:player+robot_0=expert"}
    assert all(r["partner"] == "expert" and r["partner_seats"] == ["robot_0"] for r in lines)
    assert all(r["metrics"]["success"] for r in lines), [r["metrics"] for r in lines]
    assert "llm" not in lines[0]  # a person's replies are not an LLM's usage
    for trajectory in _trajectories(out):
        records = trajectory["agent_records"]
        assert {r["kind"] for r in records} == {"human"} and {r["seat"] for r in records} == {
            "robot_1"
        }
        asked = [r["reply"] for r in records if r["how"] == "asked"]
        sent = [s["actions"]["robot_1"] for s in trajectory["steps"]]
        assert asked and all(reply in sent for reply in asked)
    assert not list((out / "human").glob("*.jsonl"))  # finished episodes leave no journal

    report = _cli("bench", "report", str(out))
    assert report.returncode == 0, report.stderr
    assert "human:player" in report.stdout
    # the person against the expert listener on the same episodes
    suite = {
        "name": "x",
        "seed": 0,
        "episodes": 2,
        "envs": [
            {
                "id": "signal-v1",
                "agents": ["expert"],
                "partner": "expert",
                "partner_seats": ["robot_0"],
            }
        ],
    }
    (tmp_path / "expert.yaml").write_text(json.dumps(suite))
    ran = _cli(
        "bench", "run", str(tmp_path / "expert.yaml"), "--out", str(tmp_path / "ex"), "--quiet"
    )
    assert ran.returncode == 0, ran.stderr
    paired = _cli("bench", "compare", "--paired", str(out), str(tmp_path / "ex"))
    assert paired.returncode == 0, paired.stdout + paired.stderr
    assert "human:player" in paired.stdout and "2" in paired.stdout

    again = _cli("play", "signal-v1", *args, "--replay", str(out), "--out", str(tmp_path / "re"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "replay: 2 of 2 recorded episodes reproduce their trajectory hash" in again.stdout

    # a replay that is fed another reply does not reproduce, and says so
    trajectories = _trajectories(out)
    step = next(
        s for s in trajectories[0]["steps"] if s["actions"]["robot_1"].startswith("<action>pick")
    )
    step["actions"]["robot_1"] = (
        "<action>pick 4</action>"
        if "pick 4" not in step["actions"]["robot_1"]
        else "<action>pick 1</action>"
    )
    (out / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trajectories))
    changed = _cli("play", "signal-v1", *args, "--replay", str(out), "--out", str(tmp_path / "x"))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "replay: 1 of 2 recorded episodes reproduce" in changed.stdout


BAD = [
    # (what is wrong, how the request is changed, status, words of the error)
    ("no token", {"token": None}, 401, "no token"),
    ("wrong token", {"token": "nope"}, 401, "unknown player or wrong token"),
    ("another person", {"name": "mallory"}, 401, "unknown player or wrong token"),
    ("wrong seat", {"seat": "robot_0"}, 403, "robot_1's"),
    ("stale step", {"step": 0}, 409, "stale step"),
    ("no such turn", {"turn": 999}, 409, "no longer open"),
    ("invalid action", {"action": "pick 9"}, 422, "not a valid action"),
    ("oversized reply", {"text": "x" * 2001, "action": None}, 413, "at most 2000"),
    ("oversized body", {"say": "y" * 20_000}, 413, "over 16384 bytes"),
    ("not a string", {"action": 3}, 422, "must be a string"),
    ("tags in a short form", {"action": "<action>pick 1</action>"}, 422, "plain words"),
    ("text and action", {"text": "<action>pick 1</action>"}, 422, "either"),
    ("not JSON", {"raw": b"{not json"}, 400, "not JSON"),
    ("not an object", {"raw": b"[1, 2]"}, 400, "JSON object"),
    ("nested too deep", {"raw": b"[" * 5000 + b"]" * 5000}, 400, "nested too deep"),
]


def test_bad_requests_get_a_clear_error_and_leave_the_turn_open(tmp_path, web_play):
    play = web_play(_play("signal-v1", tmp_path / "run", "--agent", "robot_1"))
    turn = play.open_turn()
    before = play.state()
    for what, change, status, words in BAD:
        change = dict(change)
        name = change.pop("name", "player")
        token = change.pop("token", play.tokens["player"])
        raw = change.pop("raw", None)
        body = {
            "turn": turn["turn"],
            "seat": turn["seat"],
            "step": turn["step"],
            "action": "pick 1",
        }
        body.update(change)
        body = {k: v for k, v in body.items() if v is not None}
        params = {} if token is None else {"token": token}
        url = f"/api/{name}/reply"
        response = (
            play.http.post(url, params=params, content=raw)
            if raw is not None
            else play.http.post(url, params=params, json=body)
        )
        assert response.status_code == status, (what, response.text)
        assert words in response.json()["error"], (what, response.json())
        assert play.state() == before, what  # nothing moved
    assert play.http.get("/api/player/state").status_code == 401
    page = play.http.get("/play/player")
    assert page.headers["referrer-policy"] == "no-referrer"  # the link's token stays here
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert play.reply(turn, action="pick 1").status_code == 200
    assert play.reply(turn, action="pick 1").status_code == 409  # the same turn twice
    play.play_out()
    code, printed = play.finish()
    assert code == 0, printed


def test_a_stopped_server_loses_nothing_and_the_same_command_resumes(tmp_path, web_play):
    out = tmp_path / "run"
    args = _play("signal-v1", out, "--agent", "robot_1")
    play = web_play(args)
    first = play.open_turn()
    assert play.reply(first, action="pick 3").status_code == 200
    second = play.open_turn()
    assert second["step"] > first["step"]
    code, printed = play.interrupt()
    assert code == 130, printed
    assert "run the same command to resume" in " ".join(printed.split())
    assert [r for r in _results(out) if r["status"] == "ok"] == []  # unfinished: not a result
    journal = [p for p in (out / "human").glob("*.jsonl")]
    assert len(journal) == 1 and '"reply": "<action>pick 3</action>"' in journal[0].read_text()

    resumed = web_play(args)
    assert resumed.tokens == play.tokens  # the same link (on a fixed --port) still works
    assert (out / "human" / "tokens.json").stat().st_mode & 0o777 == 0o600
    turn = resumed.open_turn()
    assert (turn["step"], turn["observation"]) == (second["step"], second["observation"])
    history = resumed.state()["episodes"][0]["history"]
    assert [h["how"] for h in history if h["reply"].startswith("<action>pick")] == ["journal"]
    resumed.play_out()
    code, printed = resumed.finish()
    assert code == 0, printed
    (line,) = _results(out)
    assert line["status"] == "ok"
    sent = [s["actions"]["robot_1"] for s in _trajectories(out)[-1]["steps"]]
    assert sent[first["step"]] == "<action>pick 3</action>"
    assert not list((out / "human").glob("*.jsonl"))


PLUGIN = '''
"""A user's own env, registered through an installed package's entry point."""
from teamgym.envs.signal import SignalEnv


class MySignal(SignalEnv):
    """A user's referential game."""
'''


def test_every_registered_env_and_a_plugin_play_through_the_page(tmp_path, web_play):
    """One ``bench run`` seats a person in the first seat of every env (random partners)."""
    (tmp_path / "userpkg").mkdir()
    (tmp_path / "userpkg" / "__init__.py").write_text(PLUGIN)
    dist = tmp_path / "userpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: userpkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[teamgym.envs]\nmy-signal-v0 = userpkg:MySignal\n")
    (dist / "RECORD").write_text("")
    envs = [*sorted(registry()), "my-signal-v0"]
    human = {"kind": "human", "name": "player", "port": 0, "journal": str(tmp_path / "j")}
    suite = {
        "name": "web-all",
        "seed": 7,
        "episodes": 1,
        "envs": [
            {"id": e, "kwargs": {"max_steps": 3}, "agents": [human], "partner": "random"}
            for e in envs
        ],
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))
    out = tmp_path / "run"
    play = web_play(
        ["bench", "run", str(tmp_path / "suite.yaml"), "--out", str(out), "--quiet"],
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
    )
    pictures: dict[str, bool] = {}
    drawings: dict[str, str] = {}

    def choose(turn: dict[str, Any]) -> dict[str, Any]:
        episode = next(e for e in play.state()["episodes"] if e["turns"])
        seen = episode["last"][turn["seat"]]
        assert seen["observation"] == turn["observation"]
        pictures[episode["env_id"]] = seen["picture"] is not None
        drawings[episode["env_id"]] = (seen["drawing"] or {}).get("svg", "")
        return {"action": turn["valid_actions"][-1]}

    play.play_out(choose)
    code, printed = play.finish()
    assert code == 0, printed
    lines = _results(out)
    assert sorted(r["env_id"] for r in lines) == sorted(envs)
    assert all(r["status"] == "ok" and r["agent"].startswith("human:player+") for r in lines)
    assert pictures["hanabi-v0"] and pictures["kitchen-v0"]
    assert not pictures["signal-v1"] and not pictures["my-signal-v0"]  # no picture to hide
    # every env (the plugin's, a SignalEnv, too) sends its drawing for the person's seat
    assert sorted(drawings) == sorted(envs) and all(d.startswith("<svg") for d in drawings.values())


def test_a_crossplay_matrix_gets_a_human_row(tmp_path, web_play):
    out = tmp_path / "run"
    human = json.dumps(
        {"kind": "human", "name": "alice", "port": 0, "journal": str(tmp_path / "j")}
    )
    play = web_play(
        [
            "bench",
            "crossplay",
            "--env",
            "signal-v1",
            "--agent",
            human,
            "--agent",
            "expert",
            "--agent",
            "random",
            "--episodes",
            "2",
            "--out",
            str(out),
            "--quiet",
        ],
        names=("alice",),
    )
    turns = play.play_out(listener_pick, name="alice")
    code, printed = play.finish()
    assert code == 0, printed
    assert len(turns) == 2 * 2 * 2  # two partners, two episodes, two rounds each
    (matrix,) = json.loads((out / "crossplay.json").read_text())
    assert matrix["agents"][0] == "human:alice"
    row = matrix["cells"]["human:alice"]
    assert sorted(row) == ["expert", "random"] and all(c["episodes"] == 2 for c in row.values())
    assert all("human:alice" not in matrix["cells"].get(a, {}) for a in ("expert", "random"))
    assert "human:alice" in printed


def test_a_human_spec_is_checked_when_parsed() -> None:
    from teamgym.adapters.agents import parse_agent_spec

    spec = parse_agent_spec("human:alice+bob")
    assert spec.label == "human:alice+bob" and spec.config() == {
        "kind": "human",
        "name": "alice+bob",
    }
    for bad, words in [
        ("human:al ice", "human names"),
        ({"kind": "human", "name": "a", "port": 70000}, "0 to 65535"),
        ({"kind": "human", "name": "a", "colour": 1}, "no option(s) colour"),
    ]:
        with pytest.raises(ValueError, match=re.escape(words)):
            parse_agent_spec(bad)


def test_the_page_needs_the_web_extra_and_says_how(tmp_path, run_python) -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.modules["uvicorn"] = None  # as if teamgym[web] were not installed
        from teamgym.cli import main
        print("EXIT", main(["play", "signal-v1", "--web", "--out", {str(tmp_path)!r}]))
    """)
    result = run_python(code)
    assert "EXIT 2" in result.stdout
    assert "pip install 'teamgym[web]'" in result.stdout + result.stderr


def test_two_people_each_see_only_their_own_seat(tmp_path, web_play) -> None:
    args = _play("hanabi-v0", tmp_path / "run", "--name", "alice", "--name", "bob")
    play = web_play(
        [*args, "--agent", "robot_1,robot_0", "--env-arg", "max_steps=4"], names=("alice", "bob")
    )
    for name, seat, other in (("alice", "robot_1", "robot_0"), ("bob", "robot_0", "robot_1")):
        deadline = time.monotonic() + 60
        while not (episodes := play.state(name)["episodes"]) or seat not in episodes[0]["last"]:
            assert time.monotonic() < deadline, play.state(name)
            time.sleep(0.05)
        (episode,) = episodes
        assert set(episode["last"]) == {seat} and set(episode["instructions"]) <= {seat}
        assert other not in json.dumps(episode["turns"]) or all(
            t["seat"] == seat for t in episode["turns"]
        )
        picture = episode["last"][seat]["picture"]
        assert f"{seat}: ?? ??" in picture  # their own cards hidden, the other's shown
    deadline = time.monotonic() + 120
    while play.proc.poll() is None and time.monotonic() < deadline:
        try:
            for name in ("alice", "bob"):
                for turn in (t for e in play.state(name)["episodes"] for t in e["turns"]):
                    play.reply(turn, name, action=turn["valid_actions"][0])
        except httpx.TransportError:  # the last move ended the session, and its server
            break
        time.sleep(0.05)
    code, printed = play.finish()
    assert code == 0, printed
    (line,) = _results(tmp_path / "run")
    assert line["agent"].startswith("human:alice+bob")


def test_mistakes_on_the_command_line_are_usage_errors(tmp_path) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = str(taken.getsockname()[1])
    cases = [
        (
            ["play", "signal-v1", "--web", "--port", port, "--out", str(tmp_path / "a")],
            "pass another --port",
        ),
        (
            [
                "play",
                "signal-v1",
                "--web",
                "--name",
                "a",
                "--name",
                "b",
                "--out",
                str(tmp_path / "b"),
            ],
            "2 people for 1 seat(s)",
        ),
        (
            [
                "play",
                "signal-v1",
                "--web",
                "--teammates",
                "transformers:/nowhere",
                "--out",
                str(tmp_path / "c"),
            ],
            "/nowhere",
        ),
        (["play", "signal-v1", "--episodes", "3"], "--episodes need --web"),
        (["play", "signal-v1", "--web", "--ask-on-wait"], "--ask-on-wait is the terminal's"),
        (
            ["play", "signal-v1", "--replay", str(tmp_path), "--out", str(tmp_path)],
            "another --out than the run it replays",
        ),
    ]
    try:
        for args, words in cases:
            done = _cli(*args)
            assert done.returncode == 2, (args, done.stdout, done.stderr)
            assert words in " ".join((done.stdout + done.stderr).split()), (args, done.stderr)
            assert "Traceback" not in done.stderr
    finally:
        taken.close()
