"""Speed of the environments: microseconds per agent-step, observations included.

``teamgym perf`` (or ``python -m teamgym.benchmarks.perf``) plays scripted legal replies and
prints the figure for each registered env and team size it supports. Target for
``signal-v0`` in text mode: at most 50 us per agent-step on a 2-core laptop; ``foraging-v0`` in
text mode at most what the ``lbforaging`` package itself costs, timed in the same run
(:func:`measure_lbforaging`, when it is installed). A benchmark that prints figures, not a
timed test.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from teamgym.envs.registration import make

__all__ = ["PerfResult", "measure", "measure_lbforaging", "run"]


@dataclass(frozen=True)
class PerfResult:
    """One measurement."""

    env_id: str
    num_agents: int
    obs_mode: str
    agent_steps: int
    us_per_agent_step: float


def measure(
    env_id: str,
    num_agents: int = 2,
    obs_mode: str = "text",
    agent_steps: int = 50_000,
    repeats: int = 3,
) -> PerfResult:
    """Best of ``repeats`` timings of ``agent_steps`` agent-steps with cycling legal replies."""
    env = make(env_id, num_agents=num_agents, obs_mode=obs_mode)
    best = float("inf")
    for _ in range(repeats):
        done_steps, episode, k = 0, 0, 0
        obs, infos = env.reset(seed=episode)
        start = time.perf_counter()
        while done_steps < agent_steps:
            if not env.agents:
                episode += 1
                obs, infos = env.reset(seed=episode)
            actions = {}
            for agent in env.agents:
                valid = infos[agent]["valid_actions"]
                k += 1
                if obs_mode == "text":
                    choice = valid[k % len(valid)]
                    actions[agent] = f"<say>red circle</say><action>{choice}</action>"
                else:
                    actions[agent] = int(obs[agent]["action_mask"].argmax())
            done_steps += len(actions)
            obs, _, _, _, infos = env.step(actions)
        best = min(best, (time.perf_counter() - start) / done_steps * 1e6)
    return PerfResult(env_id, num_agents, obs_mode, agent_steps, best)


def measure_lbforaging(
    num_agents: int = 2, agent_steps: int = 50_000, repeats: int = 3
) -> PerfResult | None:
    """The ``lbforaging`` package's own cost per agent-step on foraging-v0's default field
    (8x8, 3 items, levels up to 3), random legal actions, its observations included; None
    when the package is not installed."""
    try:
        from lbforaging.foraging.environment import ForagingEnv
    except ImportError:
        return None
    import numpy as np

    env = ForagingEnv(
        players=num_agents, min_player_level=1, max_player_level=3, min_food_level=1,
        max_food_level=None, field_size=(8, 8), max_num_food=3, sight=3,
        max_episode_steps=80, force_coop=False,
    )  # fmt: skip
    rng, best = np.random.default_rng(0), float("inf")
    for _ in range(repeats):
        env.reset(seed=0)
        done_steps, episode = 0, 0
        start = time.perf_counter()
        while done_steps < agent_steps:
            _, _, done, _, _ = env.step([int(a) for a in rng.integers(6, size=num_agents)])
            done_steps += num_agents
            if done:
                episode += 1
                env.reset(seed=episode)
        best = min(best, (time.perf_counter() - start) / done_steps * 1e6)
    return PerfResult("lbforaging (reference)", num_agents, "its own", agent_steps, best)


def _supports(env_id: str, num_agents: int) -> bool:
    try:
        make(env_id, num_agents=num_agents).close()
    except ValueError:
        return False
    return True


def run(
    env_ids: Sequence[str], team_sizes: Sequence[int] = (2, 4, 8), agent_steps: int = 50_000
) -> list[PerfResult]:
    """Measure every env, team size it supports and observation mode (and lbforaging's own
    cost next to foraging-v0)."""
    results = []
    for env_id in env_ids:
        for n in team_sizes:
            if not _supports(env_id, n):
                continue
            results += [measure(env_id, n, mode, agent_steps) for mode in ("text", "vector")]
            if env_id == "foraging-v0":
                reference = measure_lbforaging(n, agent_steps)
                results += [reference] if reference else []
    return results


if __name__ == "__main__":
    from teamgym.benchmarks.commands.tables import console, perf_table
    from teamgym.envs import registry

    console().print(perf_table(run(list(registry())), agent_steps=50_000))
