"""Fixtures for the LLM agents: an episode player (``play``); the ``teamgym serve`` process
(``serve_process``) and the chat server doubles (``chat_server``, ``lan_chat_server``) are the
root conftest's."""

from __future__ import annotations

import asyncio
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
