"""Advantage options for shared-reward GRPO.

* ``grpo`` (VERL's own, the default): each dataset row is one (seed, agent), so VERL's ``uid``
  groups the ``rollout.n`` trajectories of one agent in one episode seed. The baseline is that
  agent's mean return on that seed. Use it when agents have distinct roles or parameters.
* ``team_grpo`` (registered here): groups the trajectories of *all* agents of the same episode
  seed (``rollout.n x num_agents`` per group). Use it with parameter sharing in symmetric games,
  where one model plays every agent and the agents' returns are comparable.

VERL gives an estimator only the rewards, the mask and the ``uid`` of each row, so the agent
loops record ``uid -> episode`` as they run (in this process, and in a Ray named actor when Ray
is up); ``team_grpo`` reads that map and then calls VERL's own
``compute_grpo_outcome_advantage`` with episode ids in place of uids.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

__all__ = ["TEAM_ESTIMATOR", "compute_team_grpo_advantage", "record_team", "team_keys"]

TEAM_ESTIMATOR = "team_grpo"
_REGISTRY_ACTOR = "teamgym_team_registry"
_TEAM_OF_UID: dict[str, str] = {}
log = logging.getLogger(__name__)


class _TeamRegistry:
    """Ray actor body: uid -> episode key, shared by the agent-loop workers and the driver."""

    def __init__(self) -> None:
        self.teams: dict[str, str] = {}

    def put(self, uid: str, team: str) -> None:
        self.teams[uid] = team

    def get(self, uids: list[str]) -> list[str | None]:
        return [self.teams.get(u) for u in uids]


def _ray_registry(create: bool) -> Any:
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    if create:
        return (
            ray.remote(num_cpus=0)(_TeamRegistry)
            .options(name=_REGISTRY_ACTOR, get_if_exists=True)
            .remote()
        )
    try:
        return ray.get_actor(_REGISTRY_ACTOR)
    except ValueError:
        return None


def record_team(uid: str, team: str) -> None:
    """Note that row ``uid`` belongs to episode ``team`` (called by the agent loops)."""
    _TEAM_OF_UID[uid] = team
    actor = _ray_registry(create=True)
    if actor is not None:
        actor.put.remote(uid, team)


def team_keys(uids: np.ndarray) -> np.ndarray:
    """Episode key per uid; a uid never recorded keeps its own group (with a warning)."""
    uids_list = [str(u) for u in uids]
    found: list[str | None] = [_TEAM_OF_UID.get(u) for u in uids_list]
    if any(f is None for f in found):
        actor = _ray_registry(create=False)
        if actor is not None:
            import ray

            remote = ray.get(actor.get.remote(uids_list))
            found = [f if f is not None else r for f, r in zip(found, remote, strict=True)]
    missing = sum(f is None for f in found)
    if missing:
        log.warning(
            "team_grpo: %d of %d rows have no recorded episode; grouped by uid", missing, len(found)
        )
    return np.array(
        [f if f is not None else u for f, u in zip(found, uids_list, strict=True)], dtype=object
    )


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
    """GRPO with one group per episode seed (all agents, all rollouts): VERL's own formula."""
    if config is not None:
        norm_adv_by_std_in_grpo = bool(
            getattr(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
        )
    return core_algos.compute_grpo_outcome_advantage(
        token_level_rewards, response_mask, team_keys(index), epsilon, norm_adv_by_std_in_grpo
    )
