"""Advantage options for shared-reward GRPO.

* ``grpo`` (VERL's own, the default): each dataset row is one (seed, agent), so VERL's ``uid``
  groups the ``rollout.n`` trajectories of one agent in one episode seed. The baseline is that
  agent's mean return on that seed. Use it when agents have distinct roles or parameters.
* ``team_grpo`` (registered here): groups the trajectories of *all* agents of the same episode
  seed (``rollout.n x num_agents`` per group). Use it with parameter sharing in symmetric games,
  where one model plays every agent and the agents' returns are comparable.

VERL gives an estimator only the rewards, the mask and the ``uid`` of each row, so the agent
loops record ``uid -> episode`` as they run, and ``team_grpo`` reads that map and then calls
VERL's own ``compute_grpo_outcome_advantage`` with episode ids in place of uids. The loops run
in agent-loop worker actors and the estimator in the trainer actor, so when Ray is up the map
lives in a *detached* named actor (``teamgym/teamgym_team_registry``): a non-detached actor
would be collected as soon as the worker that made it dropped its handle. A uid that has no
record is an error, never a silent fallback to per-uid groups.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

__all__ = [
    "TEAM_ESTIMATOR",
    "TeamRecordMissingError",
    "compute_team_grpo_advantage",
    "record_team",
    "team_keys",
]

TEAM_ESTIMATOR = "team_grpo"
REGISTRY_NAME = "teamgym_team_registry"
REGISTRY_NAMESPACE = "teamgym"
#: Records kept (oldest dropped first): a few thousand steps of large batches.
REGISTRY_CAPACITY = 2_000_000


class TeamRecordMissingError(RuntimeError):
    """``team_grpo`` met rows whose episode no agent loop recorded."""


class _TeamRegistry:
    """uid -> episode key, bounded (oldest first out); the body of the Ray actor and of the
    in-process map."""

    def __init__(self, capacity: int = REGISTRY_CAPACITY) -> None:
        self.capacity = capacity
        self.teams: OrderedDict[str, str] = OrderedDict()

    def put(self, uid: str, team: str) -> None:
        self.teams[uid] = team
        while len(self.teams) > self.capacity:
            self.teams.popitem(last=False)

    def get(self, uids: list[str]) -> list[str | None]:
        return [self.teams.get(u) for u in uids]


_LOCAL = _TeamRegistry()
"""Owned by :func:`record_team` / :func:`team_keys`: this process's records (the CPU trainer and
the legacy in-process worker read them here), bounded like the Ray actor's."""


def _ray_registry(create: bool) -> Any:
    """The cluster's registry actor (created detached on first use), or None without Ray."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    if create:
        return (
            ray.remote(num_cpus=0)(_TeamRegistry)
            .options(
                name=REGISTRY_NAME,
                namespace=REGISTRY_NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
            )
            .remote()
        )
    try:
        return ray.get_actor(REGISTRY_NAME, namespace=REGISTRY_NAMESPACE)
    except ValueError:
        return None


async def record_team(uid: str, team: str) -> None:
    """Note that row ``uid`` belongs to episode ``team`` (awaited by the agent loops, so the
    record is stored before the trajectory can reach the trainer)."""
    _LOCAL.put(uid, team)
    actor = _ray_registry(create=True)
    if actor is not None:
        await actor.put.remote(uid, team)


def team_keys(uids: np.ndarray) -> np.ndarray:
    """Episode key per uid; raises :class:`TeamRecordMissingError` for a uid never recorded."""
    uids_list = [str(u) for u in uids]
    found = _LOCAL.get(uids_list)
    if any(f is None for f in found):
        actor = _ray_registry(create=False)
        if actor is not None:
            import ray

            remote = ray.get(actor.get.remote(uids_list))
            found = [f if f is not None else r for f, r in zip(found, remote, strict=True)]
    missing = [u for u, f in zip(uids_list, found, strict=True) if f is None]
    if missing:
        raise TeamRecordMissingError(
            f"team_grpo: {len(missing)} of {len(found)} rows have no recorded episode "
            f"(first: {missing[0]}). Their trajectories were not made by teamgym's agent loop "
            "(check the rows' agent_name and rollout.agent.default_agent_loop), or the loop "
            "ran in a process that cannot reach this one (no Ray, or another Ray cluster). "
            "Use adv_estimator=grpo for per-row groups."
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
    """GRPO with one group per episode seed (all agents, all rollouts): VERL's own formula."""
    if config is not None:
        norm_adv_by_std_in_grpo = bool(
            getattr(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
        )
    return core_algos.compute_grpo_outcome_advantage(
        token_level_rewards, response_mask, team_keys(index), epsilon, norm_adv_by_std_in_grpo
    )
