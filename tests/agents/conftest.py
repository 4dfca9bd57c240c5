"""Fixtures for the LLM agents: an episode player (``play``), a ``teamgym serve`` process
(``serve_process``); the chat server doubles (``chat_server``, ``lan_chat_server``) are the
root conftest's."""

from __future__ import annotations

import asyncio
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
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


class Served:
    """A ``teamgym serve`` process and the base URL it printed."""

    def __init__(self, model_dir) -> None:
        command = ["serve", str(model_dir), "--port", "0", "--device", "cpu", "--quiet"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "teamgym.benchmarks.cli", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Ctrl-C as for a program a person starts, even from a background job (whose
            # shell leaves SIGINT ignored, and a child inherits that)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.output: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=180)
            except queue.Empty:
                self.proc.kill()
                pytest.fail(f"teamgym serve printed no URL in 180 s:\n{''.join(self.output)}")
            self.output.append(line)
            found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
            if found:
                self.url = found.group(0)
                return
            if self.proc.poll() is not None and self.lines.empty():
                pytest.fail(f"teamgym serve exited:\n{''.join(self.output)}")

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)

    def stop(self) -> str:
        """Ctrl-C, as a user stops it; returns what it printed after the URL."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("teamgym serve did not stop on Ctrl-C")
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        assert code == 0, f"teamgym serve exited with {code}:\n{''.join(self.output + rest)}"
        return "".join(rest)


@pytest.fixture(scope="session")
def serve_process() -> type[Served]:
    """``serve_process(model_dir)``: a ``teamgym serve`` of ``model_dir`` on a free port
    (:class:`Served`; ``.url``, ``.stop()``)."""
    return Served
