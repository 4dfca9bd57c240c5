"""teamgym's advantage estimators on stock verl, registered with ``register_adv_est``:
``team_grpo`` and the turn-level ``at_grpo``, ``team_at_grpo``, ``gigpo``, ``team_gigpo`` (docs:
Train with VERL; Credit assignment, for how a turn's reward and anchors reach them).

VERL gives an estimator only the rewards, the mask, ``config.algorithm`` and each row's ``uid``
(``index``), so what teamgym groups by travels in the uid
(:class:`~teamgym.adapters.verl.identity.TrajectoryKey`). VERL's ``grpo`` groups by it: one
agent's ``rollout.n`` copies of a seed. ``team_grpo`` calls VERL's own
``compute_grpo_outcome_advantage`` with the episode (:func:`episode_of`) in place of the uid, so
that a group holds every trained agent's copies; a uid that names no episode is an error, never a
silent fallback to per-uid groups. The turn-level estimators' arithmetic is
:mod:`teamgym.adapters.credit`'s; the ``team_`` variants group the episode, the others one
agent's copies. VERL's padding rows (``trainer/ppo/padding_utils.py``: a one-token response with
``response_mask`` 0 and zero reward) and groups of one (no group mean: VERL's ``grpo`` would give
it its raw score; the episode loop drops them already) get a zero advantage and join no group.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from teamgym.adapters.credit import at_grpo_advantages, gigpo_advantages, place_turn_rewards
from teamgym.adapters.verl.errors import TeamConfigError
from teamgym.adapters.verl.identity import TrajectoryKey

__all__ = [
    "ANCHORED_ESTIMATORS",
    "TEAM_ESTIMATOR",
    "TURN_ESTIMATORS",
    "TeamRecordMissingError",
    "anchored_uid",
    "check_turn_estimator",
    "compute_team_grpo_advantage",
    "episode_of",
    "is_padding_uid",
    "split_anchors",
    "team_keys",
    "turn_level_inputs",
]

TEAM_ESTIMATOR = "team_grpo"
#: VERL's synthetic padding uid (``padding_utils.upsample_batch_to_divisible_size``).
_PADDING_UID = re.compile(r"pad[0-9a-f]{32}")


class TeamRecordMissingError(RuntimeError):
    """``team_grpo`` met rows whose uid names no episode (not made by teamgym's episode loop)."""


def is_padding_uid(uid: str) -> bool:
    """Whether ``uid`` is one of VERL's synthetic padding rows (v1's batch balancing)."""
    return bool(_PADDING_UID.fullmatch(str(uid)))


def episode_of(uid: str) -> str | None:
    """The episode (row ``U``) of a trajectory's uid ``U_k`` (see
    :mod:`teamgym.adapters.verl.identity`), None for any other uid; verl's replay buffer groups
    keys by this same prefix."""
    key = TrajectoryKey.parse(uid)
    return key.row if key is not None and not key.anchors else None


def team_keys(uids: np.ndarray) -> np.ndarray:
    """Episode key per uid (VERL's padding rows keep their own uid); raises
    :class:`TeamRecordMissingError` for a uid that names no episode."""
    uids_list = [str(u) for u in uids]
    found = [u if is_padding_uid(u) else episode_of(u) for u in uids_list]
    missing = [u for u, f in zip(uids_list, found, strict=True) if f is None]
    if missing:
        raise TeamRecordMissingError(
            f"team grouping: {len(missing)} of {len(found)} rows name no episode (first: "
            f"{missing[0]}): their trajectories were not made by teamgym's episode loop (check "
            "the rows' agent_name and rollout.agent.default_agent_loop); use "
            "adv_estimator=grpo for per-uid groups"
        )
    return np.array(found, dtype=object)


@core_algos.register_adv_est(TEAM_ESTIMATOR)
def compute_team_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO with one group per episode seed (all agents, all rollouts): VERL's own formula;
    padding rows and groups of one get a zero advantage (see the module docstring)."""
    if config is not None:
        norm_adv_by_std_in_grpo = bool(
            getattr(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
        )
    keys = team_keys(index)
    counts = Counter(keys)
    scored = [
        i for i, (u, k) in enumerate(zip(index, keys, strict=True))
        if not is_padding_uid(u) and counts[k] > 1
    ]  # fmt: skip
    advantages = torch.zeros_like(token_level_rewards)
    if scored:
        rows = torch.tensor(scored, dtype=torch.long)
        adv, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards[rows],
            response_mask[rows],
            keys[scored],
            epsilon,
            norm_adv_by_std_in_grpo,
        )
        advantages[rows] = adv.to(advantages.dtype)
    return advantages, advantages


#: The estimators registered here.
TURN_ESTIMATORS = ("at_grpo", "team_at_grpo", "gigpo", "team_gigpo")
#: Those that read anchor states from the uid.
ANCHORED_ESTIMATORS = ("gigpo", "team_gigpo")
#: ``uid`` carrying a trajectory's anchor keys (:meth:`.TrajectoryKey.with_anchors`).
anchored_uid = TrajectoryKey.with_anchors


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
    """The token-level rewards and uids a turn-level ``estimator`` reads (what teamgym's v1
    worker writes), made from a batch whose rows carry the return on the last token and their
    turns in ``turn_scores`` and ``anchors`` (the trajectories' ``extra_fields``), as the CPU
    trainer's do. A row whose turns do not match its mask keeps its single reward."""
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
    (``rejection``: the ``algorithm.rollout_correction.rollout_rs`` in force, else None)."""
    if estimator in TURN_ESTIMATORS and rejection:
        raise TeamConfigError(
            f"algorithm.adv_estimator={estimator} with algorithm.rollout_correction.rollout_rs="
            f"{rejection}: verl's rejection sampling masks tokens of the response before the "
            "estimator runs, and a turn is a run of unmasked tokens, so the turns would no "
            "longer be the agent's replies; drop rollout_rs (or set bypass_mode=true), or use "
            "grpo / team_grpo"
        )


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
    # the group of each row: the episode (team_) or the agent's uid
    groups = team_keys(uids[rows]) if estimator.startswith("team_") else uids[rows]
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
            1.0,  # GiGPO's step-advantage weight (verl-agent's step_advantage_w default)
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
    estimator.__doc__ = f"teamgym's ``{name}`` (see :mod:`teamgym.adapters.verl.estimators`)."


for _name in TURN_ESTIMATORS:
    if _name not in core_algos.ADV_ESTIMATOR_REGISTRY:
        _register(_name)
