"""The README is a newcomer's path: its commands and examples must stay true."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


README = (REPO / "README.md").read_text()


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    commands = re.findall(r"^(python3 -m venv .*)$", README, re.MULTILINE)
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


def test_python_examples_run(run_python) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    assert blocks
    for block in blocks:
        if "MyEnv" in block or "mypkg" in block:
            continue  # placeholders for the reader's own code
        run_python(block, cwd=REPO)


def test_the_main_job_prints_the_readme_table(tmp_path) -> None:
    """``teamgym bench run smoke`` (the first command) reproduces the README's table exactly."""
    import subprocess
    import sys

    block = README.split("The first command\nprints", 1)[1].split("```", 2)[1]
    expected = [line.split() for line in block.splitlines() if re.search(r"[0-9a-f]{16}$", line)]
    assert len(expected) >= 10, block
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "bench", "run", "smoke", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = [
        line.split() for line in proc.stdout.splitlines() if re.search(r"[0-9a-f]{16}\s*$", line)
    ]
    assert printed == expected
    assert (tmp_path / "runs" / "smoke" / "report.md").is_file()
    assert (tmp_path / "runs" / "smoke" / "success.png").is_file()
