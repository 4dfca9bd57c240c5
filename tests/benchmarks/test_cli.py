"""The ``teamgym`` command line, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from teamgym.benchmarks.baselines import run_baselines
from teamgym.benchmarks.perf import measure


def _teamgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args], capture_output=True, text=True, timeout=600
    )


def test_baselines_prints_a_results_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "res.json"
    proc = _teamgym("baselines", "--episodes", "20", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "signal-v0" in proc.stdout and "expert" in proc.stdout and "random" in proc.stdout
    rows = {r["baseline"]: r for r in json.loads(out.read_text())}
    assert rows["expert"]["success_rate"] == 1.0
    assert rows["random"]["success_rate"] < 0.5
    # a rerun reproduces the numbers exactly
    again = _teamgym("baselines", "--episodes", "20", "--quiet", "--out", str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text()) == json.loads(out.read_text()), (
        again.stderr
    )


def test_baselines_env_args_and_errors() -> None:
    proc = _teamgym(
        "baselines", "--env", "signal-v0", "--episodes", "3", "--env-arg", "num_agents=4", "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    proc = _teamgym("baselines", "--env", "signl-v0", "--episodes", "1")
    assert proc.returncode == 2 and "Did you mean 'signal-v0'" in proc.stdout
    proc = _teamgym("baselines", "--episodes", "1", "--env-arg", "num_agent=4")
    assert proc.returncode == 2 and "accepted:" in proc.stdout


def test_envs_lists_the_registry() -> None:
    proc = _teamgym("envs")
    assert proc.returncode == 0 and "signal-v0" in proc.stdout


def test_results_are_deterministic_in_process() -> None:
    a = run_baselines(["signal-v0"], episodes=5, seed=3)
    b = run_baselines(["signal-v0"], episodes=5, seed=3)
    assert a == b
    assert run_baselines(["signal-v0"], episodes=5, seed=4)[0].fingerprint != a[0].fingerprint


def test_perf_measures_something() -> None:
    r = measure("signal-v0", num_agents=2, obs_mode="text", agent_steps=2000, repeats=1)
    assert r.us_per_agent_step > 0 and r.agent_steps == 2000


def test_teammate_checkpoint_paths_become_absolute(tmp_path: Path, monkeypatch) -> None:
    """Rows name their teammates; a relative checkpoint path must not depend on the reader's cwd."""
    from teamgym.benchmarks.cli import _teammates, build_parser

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(
        [
            "verl-data",
            "--env",
            "signal-v0",
            "--out",
            "d",
            "--train-episodes",
            "1",
            "--teammate",
            "robot_0=checkpoint:models/speaker",
            "--teammate",
            "robot_2=expert",
        ]
    )
    assert _teammates(args) == {
        "robot_0": f"checkpoint:{tmp_path / 'models' / 'speaker'}",
        "robot_2": "expert",
    }
