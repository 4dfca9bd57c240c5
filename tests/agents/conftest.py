"""Fixtures for the LLM agents: an episode player (``play``), a vLLM server of a model
directory (``vllm_server``); SmolLM2-135M-Instruct imported from its wheel (``smollm2_wheel``,
``smollm2_dir``), the ``teamgym serve`` process (``serve_process``) and the chat server doubles
(``chat_server``, ``lan_chat_server``) are the root conftest's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def play() -> Callable[..., Any]:
    """``await play(run_agent, env_id, seed, **env_kwargs)``: see :func:`_play`."""
    return _play


async def _play(run_agent: Any, env_id: str, seed: int, **env_kwargs: Any) -> tuple[list, Any]:
    """Play one episode of ``env_id`` with ``run_agent`` for every agent, acting concurrently
    as the benchmark runner does; returns (the replies of each step, the episode agent)."""
    from teamgym.envs import make

    env = make(env_id, **env_kwargs)
    obs, infos = env.reset(seed=seed)
    last_info = dict(infos)
    episode = run_agent.episode(env, seed)
    steps = []
    while env.agents:
        names = list(env.agents)
        replies = await asyncio.gather(*(episode.act(a, obs[a], last_info[a]) for a in names))
        steps.append(dict(zip(names, replies, strict=True)))
        obs, _, _, _, infos = env.step(steps[-1])
        last_info.update(infos)
    env.close()
    return steps, episode


@pytest.fixture(scope="session")
def vllm_server() -> Callable[..., Any]:
    """``with vllm_server(model_dir, log_dir) as url``: see :func:`_vllm_server`."""
    return _vllm_server


@contextlib.contextmanager
def _vllm_server(model_dir: Path, log_dir: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of vLLM's OpenAI-compatible server of ``model_dir``, started
    as the docs say (``python -m vllm.entrypoints.openai.api_server``: the CPU build's ``vllm``
    command asks for the distribution ``vllm``), in float32 so that greedy decoding picks what
    the in-process float32 model picks, eager (no compile at start); stopped, and its
    ``/dev/shm`` files removed, on exit."""
    from teamgym.adapters.verl.cpu_host.shm import remove_shm_leftovers, shm_entries

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log = log_dir / "server.log"
    before = shm_entries()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--seed", "0"]
    cmd += ["--enforce-eager"]  # inductor's compile would add ~80 s to SmolLM2's start on CPU
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
