"""The docs site builds with warnings as errors, and its Python examples run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").rglob("*.md"))


def test_the_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    """``sphinx-build -W docs``, the README's command: a broken link, a page outside every
    toctree or a docstring Sphinx cannot read fails here; the env pages' generated tables
    (arguments, an observation, the baselines) come out of the code."""
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "docs", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    foraging = (tmp_path / "envs" / "foraging.html").read_text()
    assert "30955558b078d2be" in foraging  # the random baseline's fingerprint, as in the README
    assert "max_agent_level" in foraging and "You are robot_0" in foraging
    footer = re.search(r'<div class="copyright">(.*?)</div>', foraging, re.S)
    assert footer and "teamgym developers" in footer.group(1), "the footer names no holder"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO / "docs")))
def test_python_examples_run(page: Path, run_python) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
    for block in blocks:
        if "MyEnv" in block or "mypkg" in block:
            continue  # placeholders for the reader's own code
        run_python(block, cwd=REPO)


def test_the_commands_shown_write_only_where_git_ignores() -> None:
    """Every ``--out``/``--json`` path a shown command writes, relative to the clone, is one git
    ignores (issue 39: ``--json paired.json`` left an untracked file in the repository root)."""
    shown: set[str] = set()
    for page in [*PAGES, REPO / "README.md"]:
        for block in re.findall(r"```(?:bash|console|sh)\n(.*?)```", page.read_text(), re.DOTALL):
            shown |= set(re.findall(r"--(?:out|json) ([^\s`]+)", block))
    relative = sorted(p for p in shown if not p.startswith(("/", "~", "$")) and not p.isupper())
    assert "runs/paired.json" in relative, relative  # the pages still show the commands checked
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", *relative], cwd=REPO, capture_output=True, text=True
    )
    ignored = set(proc.stdout.split())
    assert not set(relative) - ignored, f"not ignored by git: {sorted(set(relative) - ignored)}"
