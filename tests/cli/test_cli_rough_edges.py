"""Rough edges a new user hit (issue 27): a preflight request to each LLM server before a run,
``--ray`` without Ray, errors of a ``--agent`` flag, ``model init --out`` into a directory that
is not a model's, and progress lines when stdout is not a terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from teamgym import cli

pytest.importorskip("httpx")


@pytest.fixture
def server(chat_server: Any) -> Any:
    """The chat server double (root conftest) serving model ``m``: it lists ``models`` and
    answers a chat request for ``chat_model`` (default: the first listed, or any when none is)
    and a 404 naming any other model, as vLLM and OpenAI do."""
    chat_server.models = ["m"]
    chat_server.chat_model = None

    def answer(n: int, body: dict[str, Any]) -> Any:
        known = chat_server.chat_model or (chat_server.models or [body["model"]])[0]
        if body["model"] != known:
            error = {"error": {"message": f"The model `{body['model']}` does not exist."}}
            return chat_server.Reply(error, status=404)
        return chat_server.Reply(chat_server.completion("<action>wait</action>"))

    chat_server.script = answer
    return chat_server


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


def _bench_run(out: Path, agent: str, *flags: str) -> int:
    argv = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "1", "--quiet"]
    return cli.main([*argv, "--agent", agent, "--out", str(out), *flags])


def _openai(model: str, url: str, **options: Any) -> str:
    return json.dumps({"kind": "openai", "model": model, "base_url": url, **options})


# 1. preflight


def test_preflight_a_dead_server_is_one_error_before_the_run_dir(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    code = _bench_run(out, _openai("x", "http://127.0.0.1:1/v1", timeout=5))
    said = _said(capsys)
    assert code == 2, said
    assert "error: agent openai:x: no LLM server answers at http://127.0.0.1:1/v1" in said, said
    assert "--no-preflight" in said and not out.exists(), said


def test_preflight_a_model_the_server_does_not_list(tmp_path: Path, server, capsys) -> None:
    server.models = ["served-a", "served-b"]
    out = tmp_path / "run"
    assert _bench_run(out, _openai("wrong", server.url)) == 2
    said = _said(capsys)
    assert "does not serve the model 'wrong'; it serves 'served-a', 'served-b'" in said, said
    assert not out.exists()
    assert [(r.method, r.path) for r in server.seen] == [("GET", "/v1/models")]  # one request


def test_preflight_a_refused_key(tmp_path: Path, server, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TEAMGYM_TEST_KEY", "bad-key")
    server.refusal = server.Reply({"error": {"message": "invalid api key"}}, status=401)
    out = tmp_path / "run"
    assert _bench_run(out, _openai("m", server.url, api_key_env="TEAMGYM_TEST_KEY")) == 2
    said = _said(capsys)
    assert "refused the key in $TEAMGYM_TEST_KEY with HTTP 401" in said, said
    auth = {k.lower(): v for k, v in server.seen[0].headers.items()}["authorization"]
    assert auth == "Bearer bad-key" and not out.exists()


def test_preflight_without_a_models_route_asks_one_token(tmp_path: Path, server, capsys) -> None:
    server.models, server.chat_model = None, "served"
    out = tmp_path / "run"
    assert _bench_run(out, _openai("wrong", server.url)) == 2
    said = _said(capsys)
    assert "refused a one-token request with HTTP 404" in said and "'wrong'" in said, said
    assert server.seen[-1].body["max_tokens"] == 1 and not out.exists()
    server.seen.clear()
    assert _bench_run(tmp_path / "ok", _openai("served", server.url)) == 0, _said(capsys)
    assert server.seen[1].body["max_tokens"] == 1  # after GET /models: the preflight's request


def test_a_good_server_passes_and_no_preflight_skips(tmp_path: Path, server, capsys) -> None:
    assert _bench_run(tmp_path / "a", _openai("m", server.url)) == 0, _said(capsys)
    assert (server.seen[0].method, server.seen[0].path) == ("GET", "/v1/models")
    server.seen.clear()
    server.models = ["other"]  # would fail the preflight
    server.chat_model = "m"
    assert _bench_run(tmp_path / "b", _openai("m", server.url), "--no-preflight") == 0
    assert all(r.method == "POST" for r in server.seen) and server.seen


def test_a_finished_run_asks_no_server(tmp_path: Path, server, capsys) -> None:
    assert _bench_run(tmp_path / "run", _openai("m", server.url)) == 0, _said(capsys)
    server.seen.clear()
    server.models = ["other"]  # would fail the preflight
    assert _bench_run(tmp_path / "run", _openai("m", server.url)) == 0
    assert "is complete" in _said(capsys) and server.seen == []


# 2. --ray without Ray


def test_ray_missing_names_ray_and_creates_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    out = tmp_path / "run"
    code = cli.main(["bench", "run", "smoke", "--env", "signal-v1", "--out", str(out), "--ray"])
    said = _said(capsys)
    assert code == 2 and "pip install 'ray>=2.60'" in said and "verl" not in said, said
    assert not out.exists()


# 3. errors of a --agent flag


def test_an_agent_flag_error_names_the_flag_not_the_suite_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    for agent, message in (
        ("oracle", "error: --agent 'oracle': signal-v1 has no baseline 'oracle'"),
        ("{kind: openai}", "error: --agent '{kind: openai}': agent kind 'openai' needs 'model'"),
    ):
        assert _bench_run(out, agent) == 2
        said = _said(capsys)
        assert message in said and "smoke.yaml" not in said and "envs[0]" not in said, said
    suite = tmp_path / "mine.yaml"  # an agent written in a file still names the file
    suite.write_text("envs: [{id: signal-v1, agents: [oracle]}]\n")
    assert cli.main(["bench", "run", str(suite), "--out", str(out)]) == 2
    assert f"error: {suite}: envs[0]: agent 'oracle'" in _said(capsys)


# 4. model init --out


def test_model_init_refuses_a_directory_that_is_not_a_model(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}\n")
    assert cli.main(["model", "init", "--out", str(run_dir)]) == 2
    said = _said(capsys)
    assert f"error: --out {run_dir} is not empty and not a model directory" in said, said
    assert "--force" in said and sorted(p.name for p in run_dir.iterdir()) == ["run.json"]


def test_model_init_into_a_model_dir_or_with_force(tmp_path: Path, capsys, monkeypatch) -> None:
    from teamgym.adapters.agents import local_model

    def fake(out: Path, config: Any) -> Path:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "config.json").write_text("{}\n")
        return Path(out)

    monkeypatch.setattr(local_model, "build_local_model", fake)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    assert cli.main(["model", "init", "--out", str(other), "--force"]) == 0, _said(capsys)
    assert cli.main(["model", "init", "--out", str(other)]) == 0, _said(capsys)  # a model dir now


def test_a_failed_model_init_leaves_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    from teamgym.adapters.agents import local_model

    def missing(config: Any) -> Any:
        raise ModuleNotFoundError("No module named 'tokenizers'", name="tokenizers")

    monkeypatch.setattr(local_model, "build_tokenizer", missing)
    out = tmp_path / "new" / "model"
    assert cli.main(["model", "init", "--out", str(out)]) == 2
    assert "teamgym[train]" in _said(capsys)
    assert list(tmp_path.iterdir()) == []  # neither model/ nor the new/ made for it
    kept = tmp_path / "empty"
    kept.mkdir()
    assert cli.main(["model", "init", "--out", str(kept)]) == 2
    assert kept.is_dir() and list(kept.iterdir()) == []  # not ours to remove


# 5. progress when stdout is not a terminal


def test_progress_lines_when_not_a_terminal(tmp_path: Path, capsys) -> None:
    """Issue 39: progress goes to stderr (a redirected stdout holds the table alone) and has
    no run-wide success rate (it averaged every env and agent together)."""
    argv = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "2"]
    assert cli.main([*argv, "--out", str(tmp_path / "a")]) == 0
    said = capsys.readouterr()
    lines = [x for x in said.err.splitlines() if "episodes/s" in x]
    assert len(lines) >= 2 and lines[-1].startswith("smoke: 10/10 episodes, "), lines
    assert not any("success" in x for x in lines), lines
    assert "episodes/s" not in said.out and "signal-v1" in said.out  # the table, alone
    assert cli.main([*argv, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    said = capsys.readouterr()
    assert "episodes/s" not in said.out + said.err


def test_teamgym_warnings_are_one_line_without_python_source(tmp_path: Path, capsys) -> None:
    """Issue 39: ``--agent openai:gpt-4o`` (no URL) printed Python's ``file:line: Category:``
    header and source line before the clean error; now one ``warning:`` line on stderr."""
    argv = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "1"]
    assert cli.main([*argv, "--agent", "openai:gpt-4o", "--out", str(tmp_path / "r")]) == 2
    said = capsys.readouterr()
    [warning] = [x for x in said.err.splitlines() if x.strip()]
    assert warning.startswith("warning: openai:gpt-4o names no server"), said.err
    assert "DefaultURLWarning" not in said.err and "kinds.py" not in said.err
    assert "no LLM server answers" in said.out


def test_the_progress_pace_reads_as_seconds_per_episode_when_slow() -> None:
    """An LLM's episodes take seconds each: "0.0 episodes/s" read as a hang (issue 60)."""
    from teamgym.cli.playing import pace

    assert pace(4, 135.0) == "34 s/episode"
    assert pace(100, 2.0) == "50.0 episodes/s"
    assert pace(0, 5.0) == "0.0 episodes/s"
