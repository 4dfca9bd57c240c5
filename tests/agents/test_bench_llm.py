"""``teamgym bench run`` with LLM agents, end to end: a dead server marks episodes ``errored``
(the run goes on, and the same command retries them), and a local model served over HTTP by
``teamgym serve`` scores exactly as the same model loaded in-process."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

pytest.importorskip("httpx")

from teamgym.benchmarks.report import load_run


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", "bench", "run", *args, "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )


def _suite(tmp_path: Path, agents: list, envs: list, name: str = "llm") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "episodes": 2, "agents": agents, "envs": envs}))
    return path


def test_a_dead_server_marks_episodes_errored_and_the_run_goes_on(tmp_path: Path) -> None:
    dead = {
        "kind": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",  # the discard port: nothing answers
        "max_retries": 1,
        "backoff": 0.01,
        "timeout": 2,
    }
    suite = _suite(tmp_path, [dead, "expert"], [{"id": "signal-v0"}])
    out = tmp_path / "run"
    proc = _bench(str(suite), "--out", str(out), "--no-preflight")  # the episodes meet it
    assert proc.returncode == 3, proc.stdout + proc.stderr  # episodes errored (--allow-errors: 0)
    assert "2 episodes errored" in proc.stdout and "run the same command again" in proc.stdout
    results = load_run(out)
    errored = [r for r in results.values() if r["status"] == "errored"]
    assert len(errored) == 2 and all(r["metrics"] is None for r in errored)
    assert all("127.0.0.1:9" in r["error"] for r in errored), errored[0]["error"]
    assert sum(r["status"] == "ok" for r in results.values()) == 2  # the expert still played
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errored"] == 2 and summary["episodes"] == 2
    dead_row = next(r for r in summary["rows"] if r["agent"].startswith("openai:"))
    assert dead_row["success"]["mean"] is None  # no silent zero score
    assert "Errored episodes" in (out / "report.md").read_text()
    again = _bench(str(suite), "--out", str(out), "--no-preflight")  # retries the errored only
    assert "resuming" in again.stdout and "2 of 4 episodes done" in again.stdout
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6


@pytest.mark.slow
def test_a_served_model_scores_as_the_same_model_in_process(tmp_path: Path, model_dir) -> None:
    pytest.importorskip("transformers")
    from teamgym.adapters.agents.serve import make_server

    server = make_server(model_dir, port=0, device="cpu", quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        over_http = {
            "kind": "openai",
            "model": str(model_dir),
            "base_url": server.url,
            "max_tokens": 24,
        }
        local = {"kind": "transformers", "path": str(model_dir), "max_tokens": 24, "device": "cpu"}
        runs = {}
        for name, agent in (("http", over_http), ("local", local)):
            out = tmp_path / name
            smoke = ["smoke", "--env", "signal-v1", "--env", "publicgoods-v0", "--episodes", "2"]
            proc = _bench(*smoke, "--agent", json.dumps(agent), "--out", str(out))
            assert proc.returncode == 0, proc.stdout + proc.stderr
            runs[name] = {(r["env_id"], r["seed"]): r for r in load_run(out).values()}
    finally:
        server.shutdown()
    assert set(runs["http"]) == set(runs["local"]) and len(runs["http"]) == 4
    for key, via_http in runs["http"].items():
        in_process = runs["local"][key]
        assert via_http["status"] == in_process["status"] == "ok", via_http["error"]
        assert via_http["trajectory_hash"] == in_process["trajectory_hash"], key
        assert via_http["metrics"] == in_process["metrics"], key
        # the server's usage counts are the in-process model's token counts
        assert via_http["llm"] == in_process["llm"] and in_process["llm"]["replies"] > 0, key
    summary = json.loads((tmp_path / "local" / "summary.json").read_text())
    llm = summary["rows"][0]["llm"]
    assert llm["generated_tokens_per_episode"] > 0 and llm["replies_per_episode"] > 0
    assert "## LLM replies and tokens" in (tmp_path / "local" / "report.md").read_text()


def test_an_llm_agent_plays_the_partner_seats_of_a_crossplay_setting(
    tmp_path: Path, chat_server
) -> None:
    """Cross-play with an LLM partner: it answers for its seats only (its requests carry
    their observations), the scripted agent plays the others, and its exchanges are saved."""
    from teamgym.benchmarks.crossplay import crossplay_source
    from teamgym.benchmarks.results import JsonLines
    from teamgym.benchmarks.runner import run_suite
    from teamgym.benchmarks.suites import parse_suite

    chat_server.script = lambda n, body: chat_server.Reply(
        chat_server.completion("<action>contribute 7</action>")
    )
    llm = {"kind": "openai", "model": "m", "base_url": chat_server.url, "label": "llm"}
    source = crossplay_source(
        ["publicgoods-v0"],
        ["freerider", llm],
        episodes=1,
        seed=3,
        partner_seats=["robot_2"],
        kwargs={"num_agents": 3, "communication": False, "num_rounds": 2},
    )
    run_suite(parse_suite(source), tmp_path / "run")
    results = load_run(tmp_path / "run")
    assert all(r["status"] == "ok" for r in results.values()) and len(results) == 4
    (mixed,) = [r for r in results.values() if r["agent"] == "freerider+robot_2=llm"]
    trajectories = {t["key"]: t for t in JsonLines(tmp_path / "run/trajectories.jsonl").load()}
    trajectory = trajectories[mixed["key"]]
    for step in trajectory["steps"]:
        assert step["actions"]["robot_2"] == "<action>contribute 7</action>"
        assert (
            step["actions"]["robot_0"]
            == step["actions"]["robot_1"]
            == "<action>contribute 0</action>"
        )
    records = trajectory["agent_records"]  # the partner's two requests, one per round
    assert [r["agent"] for r in records] == ["robot_2", "robot_2"]
    assert "You are robot_2" in records[0]["system"]


def test_an_llm_that_is_only_a_partner_is_checked_before_any_episode() -> None:
    """A suite whose only LLM agent is a ``partner:`` gets the same preflight as an agent
    under test: a dead server is one error naming it, before any episode."""
    from teamgym.benchmarks.runner import check_agents, preflight
    from teamgym.benchmarks.suites import parse_suite

    dead = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "label": "llm"}
    suite = parse_suite(
        {"episodes": 1, "agents": ["random"], "envs": [{"id": "keydoor-v0", "partner": dead}]}
    )
    check_agents(suite)  # builds it: the options are fine
    with pytest.raises(ValueError, match="agent llm: no LLM server answers at http://127.0.0.1:9"):
        preflight(suite)
