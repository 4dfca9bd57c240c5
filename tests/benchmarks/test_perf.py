"""``teamgym bench perf``: every figure asked for is measured and written; missing packages are
skipped rows, unknown envs bad input. Figures, not timings: only their presence is checked."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from teamgym.benchmarks.perf import (
    LBFORAGING,
    MPE,
    REFERENCES,
    PerfArgs,
    PerfResult,
    Ratio,
    measure,
    ratios,
    run,
)
from teamgym.cli import main


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def test_measure_times_steps_resets_and_observations() -> None:
    r = measure("signal-v0", num_agents=2, obs_mode="text", agent_steps=2000, repeats=1)
    assert r.agent_steps == 2000
    assert r.us_per_agent_step > 0 and r.us_per_reset > 0, r
    assert r.obs_share is not None and 0 < r.obs_share < 1, r


def test_quick_run_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "perf.json"
    envs, sizes = ("signal-v0", "foraging-v0"), (2, 8)
    argv = ["perf", "--quick", "--env", envs[0], "--env", envs[1], "--agents", "2", "8"]
    assert main([*argv, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == {
        "settings",
        "speed",
        "references",
        "ratios",
        "tokenizer",
        "tokens",
        "verl",
        "skipped",
    }
    assert report["settings"]["agent_steps"] == 300 and report["verl"] is None
    rows = {(r["env_id"], r["num_agents"], r["obs_mode"]): r for r in report["speed"]}
    assert set(rows) == {(e, n, m) for e in envs for n in sizes for m in ("text", "vector")}
    for key, r in rows.items():
        assert r["us_per_agent_step"] > 0 and r["us_per_reset"] > 0, key
        assert 0 < r["obs_share"] < 1, key
    done = {(r["env_id"], r["num_agents"]) for r in report["references"]}
    skipped = {s["what"] for s in report["skipped"]}
    for name, n in REFERENCES:
        assert (name, n) in done or f"{name} ({n} agents)" in skipped, (name, n)
    assert all(r["us_per_agent_step"] > 0 for r in report["references"])
    if _installed("lbforaging"):
        assert {"env_id": "foraging-v0", "num_agents": 2, "reference": LBFORAGING}.items() <= (
            report["ratios"][0].items()
        )
    if _installed("transformers"):
        tokens = {(t["env_id"], t["num_agents"]): t for t in report["tokens"]}
        assert set(tokens) == {(e, n) for e in envs for n in sizes}
        for key, t in tokens.items():
            assert 0 < t["mean"] <= t["max"] and t["first"] > 0 and t["last"] > 0, key
            assert t["flat"], f"{key}: observations grow by {t['growth']:.0%} over an episode"
    else:
        assert "tokens per observation" in skipped


def test_unknown_env_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "perf.json"
    assert main(["bench", "perf", "--quick", "--env", "nope-v0", "--out", str(out)]) == 2
    assert "nope-v0" in capsys.readouterr().out
    assert not out.exists()


def test_missing_packages_are_skipped_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("mpe2", "lbforaging.foraging.environment", "tokenizers", "transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError
    report = run(PerfArgs(env=["signal-v0"], agents=(2,), quick=True))
    assert report.references == [] and report.tokens == [] and report.tokenizer is None
    reasons = {s.what: s.reason for s in report.skipped}
    assert set(reasons) == {f"{name} ({n} agents)" for name, n in REFERENCES} | {
        "tokens per observation"
    }
    assert "mpe2 is not installed" in reasons[f"{MPE} (3 agents)"], reasons
    assert "lbforaging is not installed" in reasons[f"{LBFORAGING} (2 agents)"], reasons
    assert [r.obs_mode for r in report.speed] == ["text", "vector"]


def test_ratios_pair_each_env_with_references_at_its_team_size() -> None:
    speed = [
        PerfResult("foraging-v0", 2, "text", 1, 50.0),
        PerfResult("foraging-v0", 2, "vector", 1, 25.0),
        PerfResult("signal-v0", 2, "text", 1, 10.0),
        PerfResult("signal-v0", 8, "text", 1, 30.0),
    ]
    references = [
        PerfResult(LBFORAGING, 2, "vector", 1, 100.0),
        PerfResult(MPE, 3, "vector", 1, 200.0),
        PerfResult(MPE, 8, "vector", 1, 300.0),
    ]
    assert ratios(speed, references) == [
        Ratio("foraging-v0", 2, LBFORAGING, 100.0, 0.5, 0.25),
        Ratio("signal-v0", 8, MPE, 300.0, 0.1, None),
    ]
