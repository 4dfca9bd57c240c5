"""Shared fixtures: run Python in a fresh process, the repository root, the reference engines."""

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


def _sigkill_after(cmd: list[str], lines_file: Path, lines: int, timeout: float = 120) -> int:
    """Start ``cmd``, SIGKILL it once ``lines_file`` holds ``lines`` lines (or at the timeout);
    returns the lines it holds after the kill."""
    import signal
    import time

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lines_file.exists() and lines_file.read_bytes().count(b"\n") >= lines:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return lines_file.read_bytes().count(b"\n")


@pytest.fixture
def sigkill_after():
    """``sigkill_after(cmd, lines_file, lines)``: run a command and kill it half-way, once its
    results file holds ``lines`` lines; the lines it holds then (the resume tests)."""
    return _sigkill_after


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


#: The reference engines, pinned: what the rule and dynamics tests compare against.
PACKAGES = ("hanabi-learning-environment==0.0.4", "overcooked-ai==1.1.0")
#: Where the venv lives (ignored by git); ``TEAMGYM_REFERENCE_VENV`` overrides it.
DEFAULT_DIR = Path(__file__).resolve().parents[1] / ".venv-ref"
_PROBE = "import hanabi_learning_environment.pyhanabi, overcooked_ai_py.mdp.overcooked_mdp"


def build_reference_venv() -> Path:
    """The interpreter of a venv holding :data:`PACKAGES`, built on first use (about 45 s on
    2 cores); raises ``RuntimeError`` with pip's output when it cannot be built."""
    root = Path(os.environ.get("TEAMGYM_REFERENCE_VENV", DEFAULT_DIR))
    python = root / "bin" / "python"
    if python.exists() and _works(python):
        return python
    env = {
        **os.environ,
        "CMAKE_POLICY_VERSION_MINIMUM": "3.5",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(root)],
        [str(python), "-m", "pip", "install", "-q", *PACKAGES],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(
                f"cannot build the reference-engine venv at {root} ({' '.join(cmd[:4])} ...): "
                f"{(proc.stdout + proc.stderr)[-3000:]}"
            )
    if not _works(python):
        raise RuntimeError(f"the reference venv at {root} was built but cannot import {PACKAGES}")
    return python


def _works(python: Path) -> bool:
    """Whether ``python`` imports both reference engines."""
    proc = subprocess.run([str(python), "-c", _PROBE], capture_output=True, timeout=120)
    return proc.returncode == 0


@pytest.fixture(scope="session")
def reference_python() -> Path:
    """The interpreter of the reference-engine venv (``.venv-ref``, built on first use): run
    a driver of ``tests/reference/`` with it. Without it (no package index) the test skips,
    except under ``CI=true``, where a missing reference is a failure."""
    try:
        return build_reference_venv()
    except RuntimeError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(str(exc))
        pytest.skip(f"reference engines unavailable: {exc}")
