"""Turn-level estimators on stock verl: ``at_grpo``, ``team_at_grpo``, ``gigpo``, ``team_gigpo``.

Registered with verl's ``register_adv_est``; the arithmetic is :mod:`teamgym.adapters.credit`'s.
verl gives a custom estimator only the token-level rewards, the response mask, the row's uid
(``index``) and ``config.algorithm``, so what a turn-level estimator needs travels in those:

* **the turns** are the runs of mask-1 tokens of a trajectory (one agent's whole episode);
* **each turn's reward** is on the last token of its reply: teamgym's v1 worker
  (:class:`~teamgym.adapters.verl.workers.TeamAgentLoopWorkerTQ`) writes ``rm_scores`` from the
  trajectory's ``turn_scores`` when ``algorithm.adv_estimator`` is one of these (verl's own
  post-processing puts the whole return on the last token); every other reader of the
  rewards sums them, and the sum is the return, so verl's logs and validation are unchanged;
* **the anchor states** (GiGPO's) ride in the uid: the worker stores ``U_k~a1.a2...`` (the
  trajectory's uid and one 8-hex-digit key per turn) for the ``gigpo`` estimators in training.
  verl's replay buffer groups keys by the text before the first ``_`` (still the episode) and
  verl's own ``grpo``, which groups by the uid, is not in use then.

The ``team_`` variants group all the trained agents of an episode seed (as ``team_grpo``),
the others one agent's ``rollout.n`` copies. Padding rows get zero. verl's rejection sampling
would change the turns under them: :func:`check_turn_estimator` refuses it with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from teamgym.adapters.credit import at_grpo_advantages, gigpo_advantages, place_turn_rewards
from teamgym.adapters.verl.advantage import is_padding_uid, team_keys
from teamgym.adapters.verl.identity import TrajectoryKey

__all__ = [
    "ANCHORED_ESTIMATORS",
    "TURN_ESTIMATORS",
    "anchored_uid",
    "check_turn_estimator",
    "split_anchors",
    "turn_level_inputs",
]

#: The estimators registered here.
TURN_ESTIMATORS = ("at_grpo", "team_at_grpo", "gigpo", "team_gigpo")
#: Those that read anchor states from the uid.
ANCHORED_ESTIMATORS = ("gigpo", "team_gigpo")
#: GiGPO's weight of the step advantage (verl-agent's ``step_advantage_w`` default).
STEP_WEIGHT = 1.0


def anchored_uid(uid: str, anchors: list[str]) -> str:
    """``uid`` carrying a trajectory's anchor keys (:class:`~teamgym.adapters.verl.identity.TrajectoryKey`)."""
    return TrajectoryKey.with_anchors(uid, anchors)


def split_anchors(index: np.ndarray) -> tuple[np.ndarray, list[list[str]]]:
    """Each uid without its anchor keys, and the keys (empty for a uid that has none)."""
    parts = [TrajectoryKey.without_anchors(str(value)) for value in index]
    return np.array([uid for uid, _ in parts], dtype=object), [keys for _, keys in parts]


def turn_level_inputs(
    estimator: str,
    rewards: torch.Tensor,
    mask: torch.Tensor,
    uids: np.ndarray,
    turn_scores: Sequence[Any],
    anchors: Sequence[Any],
) -> tuple[torch.Tensor, np.ndarray]:
    """The token-level rewards and uids a turn-level ``estimator`` reads, from a batch whose
    rows carry the return on the last token and their turns in ``turn_scores`` and
    ``anchors`` (the trajectories' ``extra_fields``): what teamgym's v1 worker writes, made by
    a trainer that has verl's single final reward (the CPU trainer). A row whose turns do not
    match its mask keeps its single reward."""
    out = rewards.clone()
    index = np.array(uids, dtype=object)
    for i in range(len(index)):
        placed = place_turn_rewards(
            mask[i].tolist(), list(turn_scores[i] or []), float(rewards[i].sum())
        )
        if placed is not None:
            out[i] = placed.to(out.dtype)
        if estimator in ANCHORED_ESTIMATORS:
            index[i] = anchored_uid(str(index[i]), list(anchors[i] or []))
    return out, index


def check_turn_estimator(estimator: str, rejection: str | None = None) -> None:
    """Refuse a turn-level estimator where verl changes the response mask before it runs
    (``rejection``: the ``algorithm.rollout_correction.rollout_rs`` in force, None without
    rejection sampling)."""
    if estimator not in TURN_ESTIMATORS:
        return
    if rejection:
        raise ValueError(
            f"algorithm.adv_estimator={estimator} with algorithm.rollout_correction.rollout_rs="
            f"{rejection}: verl's rejection sampling masks tokens of the response before the "
            "estimator runs, and a turn is a run of unmasked tokens, so the turns would no "
            "longer be the agent's replies; drop rollout_rs (or set bypass_mode=true), or use "
            "grpo / team_grpo"
        )


def _groups(uids: np.ndarray, team: bool) -> np.ndarray:
    """The group of each row: the episode (``team``) or the agent's uid."""
    return team_keys(uids) if team else uids


def _estimate(
    estimator: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    config: Any,
    epsilon: float,
    norm_adv_by_std_in_grpo: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The shared body of the four estimators (padding rows zero)."""
    scale = bool(getattr(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo))
    gamma = float(getattr(config, "gamma", 1.0) if config is not None else 1.0)
    uids, anchors = split_anchors(index)
    rows = [i for i, u in enumerate(uids) if not is_padding_uid(u)]
    advantages = torch.zeros_like(token_level_rewards)
    if not rows:
        return advantages, advantages
    picked = torch.tensor(rows, dtype=torch.long)
    groups = _groups(uids[rows], estimator.startswith("team_"))
    rewards, mask = token_level_rewards[picked].float(), response_mask[picked]
    if estimator in ANCHORED_ESTIMATORS:
        adv = gigpo_advantages(
            rewards,
            mask,
            list(groups),
            [anchors[i] for i in rows],
            gamma,
            epsilon,
            scale,
            STEP_WEIGHT,
        )
    else:
        adv = at_grpo_advantages(rewards, mask, list(groups), gamma, epsilon, scale)
    advantages[picked] = adv.to(advantages.dtype)
    return advantages, advantages


def _register(name: str) -> None:
    @core_algos.register_adv_est(name)
    def estimator(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: np.ndarray,
        epsilon: float = 1e-6,
        norm_adv_by_std_in_grpo: bool = True,
        config: Any = None,
        **_: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _estimate(
            name, token_level_rewards, response_mask, index, config, epsilon,
            norm_adv_by_std_in_grpo,
        )  # fmt: skip

    estimator.__name__ = f"compute_{name}_advantage"
    estimator.__doc__ = f"teamgym's ``{name}`` (see :mod:`teamgym.adapters.verl.turn_advantage`)."


for _name in TURN_ESTIMATORS:
    if _name not in core_algos.ADV_ESTIMATOR_REGISTRY:
        _register(_name)
