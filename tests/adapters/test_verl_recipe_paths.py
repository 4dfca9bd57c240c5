"""Where the GPU recipe (``scripts/train_verl_grpo.sh``) writes by default: under the project's
git-ignored ``runs/``, never outside it (issue: the laptop recipe wrote its dataset to
``~/data``). The script runs with stand-ins for ``teamgym`` and ``python`` that print their
arguments, so no VERL is needed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_recipe_writes_its_dataset_under_runs(tmp_path: Path) -> None:
    stub = tmp_path / "stub"
    stub.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$0" "$@"\n')
    stub.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATA", "RUN_DIR")},
        "HOME": str(home),
        "CHECK_ONLY": "1",
        "TEAMGYM": str(stub),
        "PYTHON": str(stub),
    }
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_verl_grpo.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.splitlines()
    data = printed[printed.index("--out") + 1]
    assert data == str(tmp_path / "runs" / "verl-data" / "signal-v0-4agents"), data
    assert f"teamgym.dataset_dir={data}" in printed
    assert not any(str(home) in line for line in printed), "the recipe reads or writes ~"
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "runs/verl-data/signal-v0-4agents"],
        cwd=REPO,
        capture_output=True,
    )
    assert ignored.returncode == 0, "runs/ is no longer git-ignored"
