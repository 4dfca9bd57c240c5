"""Advantage options for shared-reward GRPO.

* ``grpo`` (VERL's own, the default): VERL's ``uid`` groups the ``rollout.n`` trajectories of
  one agent in one episode seed (row ``U`` stores agent ``k``'s trajectories under uid
  ``U_k``). The baseline is that agent's mean return on that
  seed. Use it when agents have distinct roles or parameters.
* ``team_grpo`` (registered here): groups the trajectories of *all* agents of the same episode
  seed (``rollout.n x num_agents`` per group). Use it with parameter sharing in symmetric games,
  where one model plays every agent and the agents' returns are comparable.

VERL gives an estimator only the rewards, the mask and the ``uid`` of each row: a trajectory's
uid names its episode (the text before its ``_``, see :func:`episode_of`), so ``team_grpo``
calls VERL's own ``compute_grpo_outcome_advantage`` with episode ids in place of uids. A uid
that names no episode is an error, never a silent fallback to per-uid groups.

Rows that are not episodes' trajectories get a zero advantage and enter no group:

* VERL's **padding rows** (``trainer/ppo/padding_utils.py``: the v1 trainer pads the batch to a
  multiple of its data-parallel and mini-batch sizes with synthetic rows whose uid is ``pad`` +
  32 hex digits, a one-token response with ``response_mask`` 0 and zero reward);
* a **group of one** (a lone trajectory has no baseline: VERL's ``grpo`` would give it its raw
  score). The episode loop already drops an episode seed that kept fewer than two complete
  copies (see :mod:`teamgym.adapters.verl.episode_loop`), so both estimators see the same rows.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from teamgym.adapters.verl.identity import TrajectoryKey

__all__ = [
    "TEAM_ESTIMATOR",
    "TeamRecordMissingError",
    "compute_team_grpo_advantage",
    "episode_of",
    "is_padding_uid",
    "team_keys",
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
    """The episode of a trajectory's uid (``U_k``: row ``U``, a UUID as verl
    makes them, and the agent's seat ``k``; see :mod:`teamgym.adapters.verl.episode_loop`), None
    for any other uid. verl's replay buffer groups keys by this same prefix."""
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
