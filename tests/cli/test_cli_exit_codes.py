"""Exit statuses and one-line messages a user (or a CI job) relies on: ``bench run`` fails when
episodes errored, bad numbers are ``error:`` lines (status 2), never tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from teamgym import cli
from teamgym.cli.bench import EXIT_ERRORED

#: an LLM agent whose server is not there: every episode errors, quickly (no retries)
DEAD = "{kind: openai, model: x, base_url: 'http://127.0.0.1:1/v1', max_retries: 0}"


def _teamgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args], capture_output=True, text=True, timeout=600
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _dead_run(out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return _teamgym(
        "bench", "run", "smoke", "--env", "signal-v1", "--episodes", "2", "--agent", DEAD,
        "--out", str(out), "--quiet", "--no-preflight", *flags,
    )  # fmt: skip


def test_bench_run_exits_non_zero_when_every_episode_errored(tmp_path: Path) -> None:
    proc = _dead_run(tmp_path / "run")
    out = _one_line(proc.stdout)
    assert EXIT_ERRORED not in (0, 1, 2, 130)
    assert proc.returncode == EXIT_ERRORED, proc.stdout + proc.stderr
    assert "error: 2 of 2 episodes errored" in out, out
    assert "report.md" in out and "results.jsonl" in out, out
    assert "Traceback" not in proc.stderr


def test_allow_errors_opts_out(tmp_path: Path) -> None:
    proc = _dead_run(tmp_path / "run", "--allow-errors")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 episodes errored" in _one_line(proc.stdout)


def test_bench_run_help_documents_the_exit_statuses(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["bench", "run", "--help"])
    text = _one_line(capsys.readouterr().out)
    assert f"{EXIT_ERRORED} when episodes errored" in text and "--allow-errors" in text, text
    assert "``" not in text, text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play", "signal-v1", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
        (["baselines", "--seed", "-5"], "argument --seed: must be at least 0, got -5"),
        (["serve", "model", "--port", "70000"], "argument --port: a port is 0 to 65535"),
        (
            ["bench", "run", "smoke", "--metrics-port", "70000"],
            "argument --metrics-port: a port is 0 to 65535, got 70000",
        ),
        (["bench", "run", "smoke", "--metrics-port", "-1"], "argument --metrics-port: must be"),
    ],
)
def test_out_of_range_numbers_are_usage_errors(argv: list[str], message: str) -> None:
    proc = _teamgym(*argv)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_metrics_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = str(taken.getsockname()[1])
        proc = _teamgym(
            "bench", "run", "smoke", "--env", "signal-v1", "--episodes", "1",
            "--out", str(tmp_path / "run"), "--quiet", "--metrics-port", busy,
        )  # fmt: skip
    out = _one_line(proc.stdout)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert f"error: cannot serve metrics on port {busy}" in out and "in use" in out, out


def test_an_out_dir_that_cannot_be_created_is_one_error_line() -> None:
    proc = _teamgym("bench", "run", "smoke", "--env", "signal-v1", "--out", "/proc/nope")
    out = _one_line(proc.stdout)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "error: cannot create the run directory /proc/nope" in out, out


def test_version_flag_prints_the_package_version() -> None:
    from teamgym import __version__

    proc = _teamgym("--version")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"teamgym {__version__}"


def _helps(parser, path: tuple[str, ...] = ()):
    """Every (sub)command's ``--help`` text."""
    import argparse

    yield path, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, inner in action.choices.items():
                yield from _helps(inner, (*path, name))


def test_help_texts_are_plain_and_current() -> None:
    helps = dict(_helps(cli.build_parser()))
    for path, text in helps.items():
        assert "``" not in text and ":mod:" not in text, (path, text)
    assert "signal-v1" in helps[("play",)] and "signal-v0" not in helps[("play",)]
    assert "signal-v0" not in helps[("verl-data",)]
    perf_env = _one_line(helps[("perf",)]).split("--env ENV", 1)[1].split("--agents", 1)[0]
    assert "'' for none" not in perf_env and "default: none" not in perf_env, perf_env


def test_a_missing_extra_names_the_package_and_the_clone_install(monkeypatch, capsys) -> None:
    from teamgym.cli import envs

    def missing(args, console):
        raise ModuleNotFoundError("No module named 'httpx'", name="httpx")

    monkeypatch.setattr(envs, "run", missing)
    assert cli.main(["envs"]) == 2
    out = _one_line(capsys.readouterr().out)
    assert "pip install 'teamgym[llm]' (or pip install -e '.[llm]' in a clone)" in out, out


def test_a_finished_run_says_complete_and_names_the_plots_it_wrote(tmp_path: Path) -> None:
    argv = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "2", "--quiet"]
    first = _teamgym(*argv, "--out", str(tmp_path / "run"))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "report.md and plots (" in first.stdout and "success.png" in first.stdout
    again = _teamgym(*argv, "--out", str(tmp_path / "run"))
    out = _one_line(again.stdout)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming" not in out and "is complete: all 10 episodes done" in out, out  # 5 agents


def test_no_plots_are_claimed_when_none_was_written(tmp_path: Path) -> None:
    proc = _dead_run(tmp_path / "run", "--allow-errors")  # no episode ok: nothing to plot
    out = _one_line(proc.stdout)
    assert "report.md (no plots) in" in out and "and plots" not in out, out
    assert not list((tmp_path / "run").glob("*.png"))


def test_perf_writes_into_runs_by_default_and_says_where(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    proc = _teamgym("bench", "perf", "--quick", "--env", "signal-v1", "--agents", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "runs" / "perf.json").is_file() and not (tmp_path / "perf.json").exists()
    assert str(tmp_path / "runs" / "perf.json") in _one_line(proc.stdout).replace(" ", "")


def test_an_agent_error_names_the_agent_once_and_verbatim(tmp_path: Path) -> None:
    """A spec like ``openai:m@...`` is printed as typed: no rich emoji (``:m:``), the label once."""
    import os

    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "bench", "run", "smoke", "--out", str(tmp_path / "r"),
         "--agent", "openai:m@http://api.openai.com/v1"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OPENAI_API_KEY": "not-a-key"},
    )  # fmt: skip
    said = _one_line(proc.stdout + proc.stderr)
    assert proc.returncode == 2, said
    assert "error: agent openai:m: base_url http://api.openai.com/v1 is plain HTTP" in said
    assert said.count("openai:m") == 1


def test_counts_of_episodes_read_as_english(tmp_path: Path) -> None:
    """Issue 60: an interrupted run said 'the 1 episodes finished'."""
    from teamgym.cli.playing import _episodes, _interrupted

    assert (_episodes(1), _episodes(0), _episodes(3)) == ("1 episode", "0 episodes", "3 episodes")
    assert "the 1 episode finished in this session is saved in" in _interrupted(1, tmp_path)
    assert "the 2 episodes finished in this session are saved in" in _interrupted(2, tmp_path)
    assert _interrupted(0, tmp_path).startswith("interrupted: no episode finished")
