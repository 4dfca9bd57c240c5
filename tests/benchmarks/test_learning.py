"""The proof that the whole path learns: the listener stage of ``teamgym learn-bench``, cut
short, on a fixed seed. A local model is built, warmed up on random valid replies (near
chance), and trained with GRPO through VERL's agent loop; its held-out success must then be
clearly above the warm-up's on the same held-out seeds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("verl")

from teamgym.benchmarks.learn import STAGES, run_stage, summarize, two_proportion_z

STEPS = 20


@pytest.mark.slow
def test_listener_learns_to_follow_the_speaker(tmp_path) -> None:
    stage = STAGES["listener"]
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "teamgym", "learn-bench", "listener"),
            *("--out", str(tmp_path), "--steps", str(STEPS), "--quiet"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "held-out success" in proc.stdout and "target 0.90" in proc.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    n = stage.settings.eval_episodes
    before, after = summary["warmup_success"], summary["final_success"]
    # the warm-up taught the format, not the strategy: at most chance (0.5 among valid picks)
    assert before <= 0.55, f"warm-up success {before}"
    # statistically clear improvement on the same held-out seeds: one-sided p < 0.001
    z = two_proportion_z(before, n, after, n)
    assert z > 3.1, f"held-out success {before:.2f} -> {after:.2f} (z = {z:.2f})"
    # the summary is the run's metrics, and the curve is drawn
    assert summary["steps"] == STEPS and summary["seed"] == 0
    assert summarize(tmp_path / "run", stage.target)["evals"] == [
        tuple(e) for e in summary["evals"]
    ]
    assert (tmp_path / "run" / "curve.png").stat().st_size > 0


def test_two_proportion_z() -> None:
    assert two_proportion_z(0.5, 100, 0.5, 100) == 0.0
    assert two_proportion_z(0.2, 128, 0.5, 128) == pytest.approx(5.04, abs=0.01)
    assert two_proportion_z(0.5, 128, 0.2, 128) < 0
    assert two_proportion_z(0.0, 10, 0.0, 10) == 0.0


def test_unknown_stage_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="choose one of listener, team"):
        run_stage("speaker", tmp_path)
