"""The envs' speed: microseconds per agent-step and per reset, and the share spent building
observations, text and vector mode interleaved (see :mod:`teamgym.benchmarks.perf`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from teamgym.benchmarks.perf.report import AGENT_STEPS, Chooser, PerfResult
from teamgym.envs.registration import make


def cycling_reply(env: Any, agent: str, obs: Any, info: dict[str, Any], k: int) -> str:
    """Text mode: the k-th legal action (cycling), with a message."""
    valid = info["valid_actions"]
    choice = valid[k % len(valid)] if valid else "wait"
    return f"<say>red circle</say><action>{choice}</action>"


def cycling_index(env: Any, agent: str, obs: Any, info: dict[str, Any], k: int) -> int:
    """Vector mode: the slot of the action text mode takes (the k-th legal one, cycling), so
    both modes play the same game and their times differ by the views alone; the k-th legal
    index of the mask for an env without a slot index."""
    valid = info["valid_actions"]
    index = getattr(env.unwrapped, "_slot_index", None)
    if valid and index is not None:
        slots = index(agent)[1].get(valid[k % len(valid)])
        if slots:
            return slots[0]
    legal = np.flatnonzero(obs["action_mask"])
    return int(legal[k % len(legal)]) if len(legal) else 0


def _timed_run(env: Any, choose: Chooser, agent_steps: int) -> tuple[float, int, float, int]:
    """One run of at least ``agent_steps`` agent-steps: (seconds inside ``step``, agent-steps,
    seconds inside ``reset``, resets)."""
    clock = time.perf_counter
    step_s = reset_s = 0.0
    steps = resets = k = 0
    while steps < agent_steps:
        start = clock()
        obs, infos = env.reset(seed=resets)
        reset_s += clock() - start
        resets += 1
        while env.agents and steps < agent_steps:
            actions = {}
            for agent in env.agents:
                k += 1
                actions[agent] = choose(env, agent, obs[agent], infos[agent], k)
            start = clock()
            obs, _, _, _, infos = env.step(actions)
            step_s += clock() - start
            steps += len(actions)
    return step_s, steps, reset_s, resets


def best_of(env: Any, choose: Chooser, agent_steps: int, repeats: int) -> tuple[float, float]:
    """(us per agent-step, us per reset), each the best of ``repeats`` runs."""
    runs = [_timed_run(env, choose, agent_steps) for _ in range(repeats)]
    return (
        min(step_s / steps for step_s, steps, _, _ in runs) * 1e6,
        min(reset_s / resets for _, _, reset_s, resets in runs) * 1e6,
    )


class _TimedView:
    """A view that times another's ``observe`` (every other call goes straight through)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def observe(self, env: Any, agent: str, valid: list[str]) -> Any:
        start = time.perf_counter()
        try:
            return self.inner.observe(env, agent, valid)
        finally:
            self.seconds += time.perf_counter() - start


def _obs_share(env: Any, choose: Chooser, agent_steps: int) -> float | None:
    """Share of ``step`` and ``reset`` time inside the env's view's ``observe``, from one run
    with the view wrapped in a timer (``TextParallelEnv.view`` is replaceable for this)."""
    base = env.unwrapped
    inner = getattr(base, "view", None)
    if inner is None:
        return None
    timed = base.view = _TimedView(inner)
    try:
        step_s, _, reset_s, _ = _timed_run(env, choose, agent_steps)
    finally:
        base.view = inner
    return timed.seconds / (step_s + reset_s)


def measure(
    env_id: str,
    num_agents: int = 2,
    obs_mode: str = "text",
    agent_steps: int = AGENT_STEPS,
    repeats: int = 3,
) -> PerfResult:
    """Best of ``repeats`` timed runs of one env, then one run for the observation share."""
    env = make(env_id, num_agents=num_agents, obs_mode=obs_mode)
    choose = cycling_reply if obs_mode == "text" else cycling_index
    us_step, us_reset = best_of(env, choose, agent_steps, repeats)
    share = _obs_share(env, choose, agent_steps)
    env.close()
    return PerfResult(env_id, num_agents, obs_mode, agent_steps, us_step, us_reset, share)


def measure_modes(
    env_id: str, num_agents: int = 2, agent_steps: int = AGENT_STEPS, repeats: int = 3
) -> list[PerfResult]:
    """Text and vector mode of one env, their timed runs interleaved (text, vector, text, ...)
    so that a machine whose speed drifts over minutes weighs on both alike; best of
    ``repeats`` each, then one run each for the observation share. Both play the same game
    (see :func:`cycling_index`)."""
    modes = ("text", "vector")
    envs = {m: make(env_id, num_agents=num_agents, obs_mode=m) for m in modes}
    choose: dict[str, Chooser] = {"text": cycling_reply, "vector": cycling_index}
    runs: dict[str, list[tuple[float, int, float, int]]] = {m: [] for m in modes}
    for _ in range(repeats):
        for m in modes:
            runs[m].append(_timed_run(envs[m], choose[m], agent_steps))
    results = []
    for m in modes:
        us_step = min(step_s / steps for step_s, steps, _, _ in runs[m]) * 1e6
        us_reset = min(reset_s / resets for _, _, reset_s, resets in runs[m]) * 1e6
        share = _obs_share(envs[m], choose[m], agent_steps)
        envs[m].close()
        results.append(PerfResult(env_id, num_agents, m, agent_steps, us_step, us_reset, share))
    return results
