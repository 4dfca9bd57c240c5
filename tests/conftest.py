"""Shared fixtures: run Python in a fresh process, the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run_python(
    code: str, *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this interpreter in a new process; fail the test with its stderr."""
    merged = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=merged,
        cwd=cwd,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(f"subprocess failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture
def run_python():
    """``run_python(code, env=..., cwd=...)``: run code in a fresh interpreter process."""
    return _run_python


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """A local model built by our code (tokenizer trained on the envs' text; no download)."""
    pytest.importorskip("transformers")
    from teamgym.adapters.agents.local_model import build_local_model

    return build_local_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def tokenizer(model_dir):
    """The local model's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)
