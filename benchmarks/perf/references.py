"""Reference packages timed like the envs (lbforaging, MPE's simple_spread) and the ratios of
the envs' figures to theirs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from teamgym.benchmarks.perf.envs import best_of
from teamgym.benchmarks.perf.report import (
    AGENT_STEPS,
    COMPARED_WITH,
    LBFORAGING,
    MPE,
    PerfResult,
    Ratio,
)


def measure_mpe(
    num_agents: int = 3, agent_steps: int = AGENT_STEPS, repeats: int = 3
) -> PerfResult:
    """PettingZoo MPE ``simple_spread`` (package ``mpe2``; discrete actions, its default 25
    cycles) with random actions; ImportError when ``mpe2`` is not installed."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=num_agents)
    rng = np.random.default_rng(0)

    def random_action(env: Any, agent: str, obs: Any, info: dict[str, Any], k: int) -> int:
        return int(rng.integers(env.action_space(agent).n))

    us_step, us_reset = best_of(env, random_action, agent_steps, repeats)
    env.close()
    return PerfResult(MPE, num_agents, "vector", agent_steps, us_step, us_reset)


def measure_lbforaging(
    num_agents: int = 2, agent_steps: int = AGENT_STEPS, repeats: int = 3
) -> PerfResult:
    """The ``lbforaging`` package on foraging-v0's default field (8x8, 3 items, levels up to 3)
    with random actions, its observations included; ImportError when it is not installed."""
    from lbforaging.foraging.environment import ForagingEnv

    env = ForagingEnv(
        players=num_agents, min_player_level=1, max_player_level=3, min_food_level=1,
        max_food_level=None, field_size=(8, 8), max_num_food=3, sight=3,
        max_episode_steps=80, force_coop=False,
    )  # fmt: skip
    rng, clock = np.random.default_rng(0), time.perf_counter
    best_step = best_reset = float("inf")
    for _ in range(repeats):
        step_s = reset_s = 0.0
        steps = resets = 0
        while steps < agent_steps:
            start = clock()
            env.reset(seed=resets)
            reset_s += clock() - start
            resets, done = resets + 1, False
            while not done and steps < agent_steps:
                actions = [int(a) for a in rng.integers(6, size=num_agents)]
                start = clock()
                _, _, done, truncated, _ = env.step(actions)
                step_s += clock() - start
                steps, done = steps + num_agents, done or truncated
        best_step = min(best_step, step_s / steps * 1e6)
        best_reset = min(best_reset, reset_s / resets * 1e6)
    return PerfResult(LBFORAGING, num_agents, "vector", agent_steps, best_step, best_reset)


def ratios(speed: Sequence[PerfResult], references: Sequence[PerfResult]) -> list[Ratio]:
    """Each env's microseconds per agent-step over each reference's at the same team size."""
    out = []
    for ref in references:
        for env_id in dict.fromkeys(r.env_id for r in speed):
            if COMPARED_WITH.get(ref.env_id, env_id) != env_id:
                continue
            us = {
                r.obs_mode: r.us_per_agent_step / ref.us_per_agent_step
                for r in speed
                if r.env_id == env_id and r.num_agents == ref.num_agents
            }
            if us:
                out.append(
                    Ratio(
                        env_id,
                        ref.num_agents,
                        ref.env_id,
                        ref.us_per_agent_step,
                        us.get("text"),
                        us.get("vector"),
                    )
                )
    return out
