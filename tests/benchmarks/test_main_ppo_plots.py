"""scripts/plot_main_ppo_runs.py: held-out curves read from verl's file logger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).parents[2] / "scripts"


def _run(folder: Path, points: dict[int, float]) -> Path:
    """A run directory whose ``metrics.jsonl`` is as verl's file logger writes it."""
    folder.mkdir()
    rows = []
    for step in range(max(points) + 1):
        data = {"critic/score/mean": 0.5}
        if step in points:
            data["val-aux/signal-v0/success/mean@1"] = points[step]
        rows.append(json.dumps({"step": step, "data": data}))
    (folder / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    return folder


def test_each_runs_validations_make_its_curve_and_the_figure_is_written(tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    try:
        from plot_main_ppo_runs import main_ppo_curve
    finally:
        sys.path.remove(str(SCRIPTS))
    a = _run(tmp_path / "a", {0: 0.25, 5: 0.5, 10: 0.75})
    b = _run(tmp_path / "b", {0: 0.5, 5: 0.5})
    assert main_ppo_curve(a) == ([0, 5, 10], [0.25, 0.5, 0.75])

    out = tmp_path / "fig" / "curves.png"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "plot_main_ppo_runs.py"), str(out), f"{a}=x,seed 0", str(b)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_without_its_metrics_is_an_error_naming_it(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "plot_main_ppo_runs.py"), str(tmp_path / "o.png"), "nope"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "nope" in done.stderr
