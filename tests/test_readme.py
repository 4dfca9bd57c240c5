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
