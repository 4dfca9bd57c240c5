"""Advantage options for shared-reward GRPO.

* ``grpo`` (VERL's own, the default): VERL's ``uid`` groups the ``rollout.n`` trajectories of
  one agent in one episode seed (an episode-layout row stores agent ``k``'s trajectories under
  uid ``U_k``; a per-agent row is one agent). The baseline is that agent's mean return on that
  seed. Use it when agents have distinct roles or parameters.
* ``team_grpo`` (registered here): groups the trajectories of *all* agents of the same episode
  seed (``rollout.n x num_agents`` per group). Use it with parameter sharing in symmetric games,
  where one model plays every agent and the agents' returns are comparable.

VERL gives an estimator only the rewards, the mask and the ``uid`` of each row. An
episode-layout uid names its episode (the text before its ``_``). For per-agent rows the agent
loops record ``uid -> episode`` as they run, and ``team_grpo`` reads that map and then calls
VERL's own ``compute_grpo_outcome_advantage`` with episode ids in place of uids. The loops run
in agent-loop worker actors and the estimator in the trainer actor, so when Ray is up the map
lives in a named actor of the job (``teamgym/teamgym_team_registry:<job id>``), owned by the
first worker that records (a worker lives as long as the job): its records belong to that job,
another job on the same cluster has its own, and Ray removes it when the job ends. A uid that
has no record is an error, never a silent fallback to per-uid groups.

Rows that are not episodes' trajectories get a zero advantage and enter no group:

* VERL's **padding rows** (``trainer/ppo/padding_utils.py``: the v1 trainer pads the batch to a
  multiple of its data-parallel and mini-batch sizes with synthetic rows whose uid is ``pad`` +
  32 hex digits, a one-token response with ``response_mask`` 0 and zero reward);
* a **group of one** (a lone trajectory has no baseline: VERL's ``grpo`` would give it its raw
  score). The agent loop already drops an episode seed that kept fewer than two complete
  copies (see :mod:`teamgym.adapters.verl.agent_loop`), so both estimators see the same rows.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, OrderedDict
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

__all__ = [
    "TEAM_ESTIMATOR",
    "TeamRecordMissingError",
    "compute_team_grpo_advantage",
    "episode_of",
    "is_padding_uid",
    "record_team",
    "team_keys",
]

TEAM_ESTIMATOR = "team_grpo"
REGISTRY_NAME = "teamgym_team_registry"
REGISTRY_NAMESPACE = "teamgym"
#: Records kept per job (oldest dropped first): a uid is read once, in the step that made it.
REGISTRY_CAPACITY = 1_000_000
#: VERL's synthetic padding uid (``padding_utils.upsample_batch_to_divisible_size``).
_PADDING_UID = re.compile(r"pad[0-9a-f]{32}")
#: An episode-layout trajectory's uid: verl's row uid (``uuid4``) and the agent's seat.
_EPISODE_UID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_(\d+)")


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

    def put_many(self, records: list[tuple[str, str]]) -> None:
        for uid, team in records:
            self.put(uid, team)

    def get(self, uids: list[str]) -> list[str | None]:
        return [self.teams.get(u) for u in uids]

    def size(self) -> int:
        return len(self.teams)


_LOCAL = _TeamRegistry()
"""Owned by :func:`record_team` / :func:`team_keys`: this process's records (the CPU trainer and
the legacy in-process worker read them here), bounded like the Ray actor's."""

_RAY_REGISTRY: dict[str, Any] = {}
"""Owned by :func:`_ray_registry`: this process's handle on its job's registry actor, kept for
the life of the process (a non-detached actor lives while its creator does)."""


def registry_name() -> str:
    """The name of this job's registry actor (``teamgym_team_registry:<job id>``)."""
    import ray

    return f"{REGISTRY_NAME}:{ray.get_runtime_context().get_job_id()}"


def _ray_registry(create: bool) -> Any:
    """This job's registry actor (created on first use, owned by the creating process), or None
    without Ray."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    name = registry_name()
    # job ids restart with every Ray instance: a process that outlives one (a test session)
    # must not reuse a handle on the previous instance's registry
    key = f"{ray.get_runtime_context().get_node_id()}/{name}"
    if key in _RAY_REGISTRY:
        return _RAY_REGISTRY[key]
    if create:
        actor = (
            ray.remote(num_cpus=0)(_TeamRegistry)
            .options(name=name, namespace=REGISTRY_NAMESPACE, get_if_exists=True)
            .remote()
        )
        _RAY_REGISTRY[key] = actor
        return actor
    try:
        return ray.get_actor(name, namespace=REGISTRY_NAMESPACE)
    except ValueError:
        return None


async def record_team(uid: str, team: str) -> None:
    """Note that row ``uid`` belongs to episode ``team`` (awaited by the agent loops, so the
    record is stored before the trajectory can reach the trainer). The rows recorded in one
    turn of the event loop (a batch's loops start together) reach the actor in one call."""
    _LOCAL.put(uid, team)
    actor = _ray_registry(create=True)
    if actor is None:
        return
    loop = asyncio.get_running_loop()
    batch = _BATCHES.get(loop)
    if batch is None:
        batch = _BATCHES[loop] = ([], loop.create_future())
        loop.call_soon(_start_flush, loop, actor)
    batch[0].append((uid, team))
    await asyncio.shield(batch[1])


def _start_flush(loop: asyncio.AbstractEventLoop, actor: Any) -> None:
    """Close this turn's batch (later records start a new one) and send it in a task."""
    records, done = _BATCHES.pop(loop)
    task = loop.create_task(_flush(actor, records, done))
    _KEEP.add(task)
    task.add_done_callback(_KEEP.discard)
    task.add_done_callback(lambda t: done.cancel() if t.cancelled() else None)


async def _flush(actor: Any, records: list[tuple[str, str]], done: asyncio.Future) -> None:
    """Send one batch of records; its waiters wake with the result (or the error)."""
    try:
        await actor.put_many.remote(records)
    except Exception as exc:  # every waiter raises it
        done.set_exception(exc)
    else:
        done.set_result(None)


_BATCHES: dict[asyncio.AbstractEventLoop, tuple[list[tuple[str, str]], asyncio.Future]] = {}
"""Owned by :func:`record_team`: per event loop, the records of this turn and their future."""
_KEEP: set[asyncio.Task] = set()
"""The flush tasks in flight (asyncio keeps only weak references to tasks)."""


def is_padding_uid(uid: str) -> bool:
    """Whether ``uid`` is one of VERL's synthetic padding rows (v1's batch balancing)."""
    return bool(_PADDING_UID.fullmatch(str(uid)))


def episode_of(uid: str) -> str | None:
    """The episode of an episode-layout trajectory's uid (``U_k``: row ``U``, a UUID as verl
    makes them, and the agent's seat ``k``; see :mod:`teamgym.adapters.verl.episode_loop`), None
    for any other uid. verl's replay buffer groups keys by this same prefix."""
    match = _EPISODE_UID.fullmatch(uid)
    return match.group(1) if match else None


def team_keys(uids: np.ndarray) -> np.ndarray:
    """Episode key per uid: the row of an episode-layout uid, the recorded episode of a
    per-agent row (VERL's padding rows keep their own uid); raises
    :class:`TeamRecordMissingError` for any other uid never recorded."""
    uids_list = [str(u) for u in uids]
    found = [episode_of(u) for u in uids_list]
    if any(f is None for f in found):
        recorded = _LOCAL.get(uids_list)
        found = [f if f is not None else r for f, r in zip(found, recorded, strict=True)]
    if any(f is None and not is_padding_uid(u) for f, u in zip(found, uids_list, strict=True)):
        actor = _ray_registry(create=False)
        if actor is not None:
            import ray

            remote = ray.get(actor.get.remote(uids_list))
            found = [f if f is not None else r for f, r in zip(found, remote, strict=True)]
    found = [
        u if f is None and is_padding_uid(u) else f for f, u in zip(found, uids_list, strict=True)
    ]
    missing = [u for u, f in zip(uids_list, found, strict=True) if f is None]
    if missing:
        raise TeamRecordMissingError(
            f"team grouping: {len(missing)} of {len(found)} rows have no recorded episode "
            f"(first: {missing[0]}). Their trajectories were not made by teamgym's agent loop "
            "(check the rows' agent_name and rollout.agent.default_agent_loop), or the loop "
            "ran in a process that cannot reach this one (no Ray, or another Ray job). "
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
