"""Difference rewards' counterfactual: a step replayed, from a copy of the state before it, with
one agent idle (``TextParallelEnv.counterfactual_rewards``; ``RewardSharing(mode="difference")``
subtracts its team score)."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["Snapshot", "idle_rewards", "snapshot"]

Snapshot = tuple[Any, dict[str, Any]]
"""The env as it was before a step (a deep copy, sharing its tokenizer) and the step's replies."""


def snapshot(env: Any, actions: dict[str, Any]) -> Snapshot:
    """``env`` before it applies ``actions``, kept for :func:`idle_rewards`."""
    env._before_step = None  # the copy must not hold the previous step's copy
    return _copy(env), dict(actions)


def idle_rewards(env: Any, agent: str) -> dict[str, float]:
    """The last step's rewards had ``agent`` sent its first valid idle action (an empty,
    invalid reply where none is valid), the others' replies unchanged."""
    kept: Snapshot | None = env._before_step
    if kept is None:
        raise RuntimeError(
            "counterfactual_rewards needs keep_counterfactuals set before the step "
            "(SharedReward sets it for mode='difference')"
        )
    if env.obs_mode != "text":
        raise ValueError("counterfactual rewards are defined in text mode only")
    before, actions = kept
    clone = _copy(before)
    clone.keep_counterfactuals = False
    idle = next((a for a in clone._game_valid_actions(agent) if a in env.idle_actions), None)
    _, rewards, *_ = clone.step({**actions, agent: f"<action>{idle}</action>" if idle else ""})
    return dict(rewards)


def _copy(env: Any) -> Any:
    return copy.deepcopy(env, {id(env.tokenizer): env.tokenizer})
