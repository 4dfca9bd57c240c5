"""Scripted policies: the baselines every env is benchmarked with, and teammates for training.

A policy answers like a model would: ``act(agent, observation, info)`` returns a reply string
in the env's reply format. ``random`` (uniform over ``info["valid_actions"]``) works on every
text env; envs list their own (e.g. an ``expert``) in their registration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from teamgym.envs.metrics import EpisodeMetrics, EpisodeTracker
from teamgym.envs.registration import load_entry_point, spec

__all__ = ["Policy", "RandomPolicy", "make_baseline", "run_episode"]

_WORD = re.compile(r"[a-z]+")


@runtime_checkable
class Policy(Protocol):
    """Anything that turns an observation into a reply."""

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (re-seed any randomness)."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The reply of ``agent`` to its current observation and info."""
        ...


class RandomPolicy:
    """Uniform over the legal actions; a ``say`` action carries 1-3 words from the observation."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        """Re-seed."""
        self.rng = np.random.default_rng(seed)

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """A random legal action."""
        valid = list(info.get("valid_actions", []))
        if not valid:
            return "<action>wait</action>"
        action = valid[int(self.rng.integers(len(valid)))]
        if action != "say":
            return f"<action>{action}</action>"
        words = _WORD.findall(observation.lower()) or ["hello"]
        chosen = [
            words[int(i)] for i in self.rng.integers(len(words), size=int(self.rng.integers(1, 4)))
        ]
        return f"<say>{' '.join(chosen)}</say><action>say</action>"


def make_baseline(env_id: str, name: str, seed: int | None = None) -> Policy:
    """Build baseline ``name`` for ``env_id``: ``random``, one the env registered, or
    ``checkpoint:PATH`` (a frozen model directory answering greedily; needs the ``train``
    extra)."""
    if name == "random":
        return RandomPolicy(seed)
    if name.startswith("checkpoint:"):
        from teamgym.adapters.checkpoint_policy import CheckpointPolicy

        return CheckpointPolicy(name.removeprefix("checkpoint:"), seed=seed)
    known = dict(spec(env_id).baselines)
    if name not in known:
        raise KeyError(
            f"{env_id} has no baseline {name!r}; available: {', '.join(['random', *known])}, "
            "or checkpoint:PATH for a model directory"
        )
    return load_entry_point(known[name])(seed=seed)


def run_episode(env: Any, policies: Policy | Mapping[str, Policy], seed: int) -> EpisodeMetrics:
    """Play one episode of a text env with ``policies`` (one for all agents, or per agent)."""
    obs, infos = env.reset(seed=seed)
    per_agent = (
        policies if isinstance(policies, Mapping) else dict.fromkeys(env.possible_agents, policies)
    )
    for i, policy in enumerate(dict.fromkeys(per_agent.values())):
        if hasattr(policy, "bind"):  # privileged baselines read the true state
            policy.bind(env)
        policy.reset(seed * 1000 + i)
    tracker = EpisodeTracker(env.possible_agents)
    last_info = dict(infos)
    while env.agents:
        actions = {a: per_agent[a].act(a, obs[a], last_info[a]) for a in env.agents}
        obs, rewards, _, _, infos = env.step(actions)
        last_info.update(infos)
        tracker.step(rewards, infos)
    return tracker.metrics()
