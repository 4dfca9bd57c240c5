"""``teamgym bench perf --compare OLD.json [--against NEW.json]``: figures matched by key with
their ratio new/old, rows in one report only listed as new or gone, bad files refused up front."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamgym.benchmarks import perf as perf_module
from teamgym.benchmarks.perf.compare import FigureChange, check_report, compare_reports
from teamgym.cli import main

QUICK = ["bench", "perf", "--quick", "--env", "signal-v1", "--agents", "2"]


def _speed(n: int, mode: str, us: float, reset: float, share: float | None) -> dict[str, Any]:
    return {
        "env_id": "a-v0",
        "num_agents": n,
        "obs_mode": mode,
        "agent_steps": 300,
        "us_per_agent_step": us,
        "us_per_reset": reset,
        "obs_share": share,
    }


def _tokens(mean: float) -> dict[str, Any]:
    return {
        "env_id": "a-v0",
        "num_agents": 2,
        "episodes": 1,
        "observations": 10,
        "mean": mean,
        "max": 80,
        "first": 40.0,
        "last": 60.0,
        "growth": 0.1,
        "flat": True,
        "instructions": 100.0,
    }


VERL = {
    "episodes": 2,
    "num_agents": 2,
    "turns": 4,
    "latency_s": 0.01,
    "seconds": 0.5,
    "overhead_s": 0.46,
    "overhead_per_turn_ms": 115.0,
    "ratio": 12.5,
}


def test_compare_reports_matches_figures_by_key_new_ones_first_gone_ones_last() -> None:
    old = {
        "speed": [_speed(2, "text", 10.0, 100.0, 0.5), _speed(4, "text", 20.0, 200.0, 0.25)],
        "tokens": [_tokens(50.0)],
        "verl": None,
    }
    new = {
        "speed": [_speed(8, "text", 40.0, 400.0, 0.75), _speed(2, "text", 15.0, 50.0, None)],
        "tokens": [_tokens(25.0)],
        "verl": VERL,
    }
    a2, a4, a8 = (("a-v0", n, "text") for n in (2, 4, 8))
    tok, verl = ("a-v0", 2), (2, 2, 0.01)
    changes = compare_reports(old, new)
    assert changes == [
        FigureChange("speed", a8, "us_per_agent_step", None, 40.0),
        FigureChange("speed", a8, "us_per_reset", None, 400.0),
        FigureChange("speed", a8, "obs_share", None, 0.75),
        FigureChange("speed", a2, "us_per_agent_step", 10.0, 15.0),
        FigureChange("speed", a2, "us_per_reset", 100.0, 50.0),
        FigureChange("speed", a2, "obs_share", 0.5, None),  # not measured in the new run
        FigureChange("speed", a4, "us_per_agent_step", 20.0, None),
        FigureChange("speed", a4, "us_per_reset", 200.0, None),
        FigureChange("speed", a4, "obs_share", 0.25, None),
        FigureChange("tokens", tok, "mean", 50.0, 25.0),
        FigureChange("tokens", tok, "max", 80, 80),
        FigureChange("tokens", tok, "first", 40.0, 40.0),
        FigureChange("tokens", tok, "last", 60.0, 60.0),
        FigureChange("tokens", tok, "instructions", 100.0, 100.0),
        FigureChange("verl", verl, "seconds", None, 0.5),
        FigureChange("verl", verl, "overhead_per_turn_ms", None, 115.0),
        FigureChange("verl", verl, "ratio", None, 12.5),
    ]
    assert [c.ratio for c in changes[3:6]] == [1.5, 0.5, None]
    assert changes[9].ratio == 0.5 and changes[10].ratio == 1.0
    assert changes[0].ratio is None and changes[6].ratio is None
    assert FigureChange("speed", a2, "us_per_reset", 0.0, 5.0).ratio is None


@pytest.mark.parametrize(
    ("report", "message"),
    [
        ([], "no 'speed' list"),
        ({"tokens": []}, "no 'speed' list"),
        ({"speed": {}}, "no 'speed' list"),
        ({"speed": [], "settings": []}, "'settings' is not a mapping"),
        ({"speed": [{"env_id": "a-v0", "num_agents": 2}]}, "'speed' is not a list of rows"),
        (
            {"speed": [{**_speed(2, "text", 1.0, 1.0, None), "us_per_reset": "fast"}]},
            "'speed' is not a list of rows",
        ),
        ({"speed": [], "tokens": "many"}, "'tokens' is not a list of rows"),
        ({"speed": [], "verl": {"seconds": 1.0}}, "'verl' is not a list of rows"),
    ],
)
def test_malformed_reports_are_refused(report: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_report(report)
    with pytest.raises(ValueError, match=message):
        compare_reports({"speed": []}, report)


# ------------------------------------------------------------------ the command
@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of an earlier quick run of signal-v1 with 2 agents."""
    out = tmp_path_factory.mktemp("earlier") / "perf.json"
    assert main([*QUICK, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _cells(out: str, *lead: str) -> list[str]:
    """The cells of the one table row of ``out`` that starts with the cells ``lead``."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()]
    found = [row for row in rows if tuple(row[: len(lead)]) == lead]
    assert len(found) == 1, (lead, out)
    return found[0]


def _no_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("measured")

    monkeypatch.setattr(perf_module, "run", refuse)


def test_quick_run_compared_with_an_earlier_one(
    earlier: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    old = copy.deepcopy(earlier)
    text, vector = old["speed"]
    # the new run is then ~1000 times slower: a quick run's own speed varies several-fold
    # between two runs on a loaded machine (the earlier one pays first-run costs), so a
    # factor of 10 could come out below 2 (as it did once in CI)
    text["us_per_agent_step"] /= 1000
    vector["num_agents"] = 4  # 4 agents' row gone, 2 agents' new
    old["settings"]["agent_steps"] = 5000
    monkeypatch.chdir(tmp_path)
    Path("old.json").write_text(json.dumps(old))
    assert main([*QUICK, "--out", "new.json", "--compare", "old.json"]) == 0
    out, new = capsys.readouterr().out, json.loads(Path("new.json").read_text())
    assert "Speed: this run vs old.json" in out and "new/old (>1 slower)" in out
    before, after = text["us_per_agent_step"], new["speed"][0]["us_per_agent_step"]
    row = _cells(out, "signal-v1", "2", "text", "us/step")
    assert row[4:] == [f"{before:.1f}", f"{after:.1f}", f"{after / before:.2f}"]
    assert float(row[6]) > 2, "new/old, not old/new"
    vector_us = f"{new['speed'][1]['us_per_agent_step']:.1f}"
    assert _cells(out, "signal-v1", "2", "vector", "us/step")[4:] == ["-", vector_us, "new"]
    assert _cells(out, "signal-v1", "4", "vector", "obs share")[6] == "gone"
    assert "note: measured with other settings: agent_steps: 5000 -> 300" in out
    assert "3 new, 3 gone" in out.splitlines()[-1]


def test_two_saved_reports_compared_without_running(
    earlier: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    new = copy.deepcopy(earlier)
    new["speed"][1]["us_per_reset"] *= 3
    Path("old.json").write_text(json.dumps(earlier))
    Path("new.json").write_text(json.dumps(new))
    assert main(["bench", "perf", "--compare", "old.json", "--against", "new.json"]) == 0
    out = capsys.readouterr().out
    assert "Speed: new.json vs old.json" in out
    assert _cells(out, "signal-v1", "2", "vector", "us/reset")[6] == "3.00"
    assert _cells(out, "signal-v1", "2", "text", "us/reset")[6] == "1.00"
    assert "0 new, 0 gone" in out and "note:" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "old.json"]  # no perf.json


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--against", "old.json"], "--against NEW.json needs --compare OLD.json"),
        (
            ["--compare", "old.json", "--against", "old.json", "--quick", "--out", "x.json"],
            "--against compares two saved reports and measures nothing: drop --quick, --out",
        ),
        (
            ["--compare", "old.json", "--against", "missing.json"],
            "--against: cannot read missing.json: No such file or directory",
        ),
    ],
)
def test_against_needs_compare_and_no_measurement_flags(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    Path("old.json").write_text(json.dumps({"speed": []}))
    assert main(["bench", "perf", *argv]) == 2
    assert capsys.readouterr().out == f"error: {message}\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--compare: cannot read old.json: No such file or directory"),
        ("{", "--compare: old.json is not JSON: Expecting property name enclosed in double quotes"),
        ('{"episodes": 3}', "--compare: old.json is not a bench perf report: no 'speed' list"),
    ],
)
def test_bad_compare_file_is_one_error_line_before_measuring(
    content: str | None,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    if content is not None:
        Path("old.json").write_text(content)
    assert main([*QUICK, "--out", "new.json", "--compare", "old.json"]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"error: {message}") and out.count("\n") == 1, out
    assert not Path("new.json").exists()


def test_bad_compare_file_exits_2_from_the_shell(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", *QUICK, "--compare", "missing.json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "error: --compare: cannot read missing.json: No such file or directory\n"
    assert list(tmp_path.iterdir()) == []  # no perf.json


def test_help_documents_both_compare_modes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "perf", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--compare OLD.json" in text and "--against NEW.json" in text
    assert "'perf --compare OLD.json --against NEW.json' compares two saved reports" in text
