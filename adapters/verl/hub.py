"""The episode hub: where the agent loops of one episode meet and step their env together.

VERL runs one agent loop per dataset row, and a row is one (episode seed, agent). The loops of
one episode join the hub under the episode's key; the hub builds the env once, resets it with
the seed, and steps it when every live agent has submitted its reply, so each env step costs
one model latency, not one per agent. The API is plain data (``join``, ``submit``, ``leave``)
so the same object serves in-process (one worker) and as a Ray actor (episodes across workers).

What never hangs:

* **Copies.** ``rollout.n`` copies of a row are identical. A loop that knows its copy number
  (``slot``: the agent loop counts them in batch order, before its first ``await``) joins the
  instance of that slot, so the k-th copies of every agent meet and ids are reproducible;
  otherwise the k-th loop of an agent to join takes the first open instance that lacks that
  agent. Either way each instance gets one row per agent whatever the arrival order.
* **Missing rows** (a shuffled sampler or chunking that split an episode): after
  ``join_timeout`` the instance starts anyway; absent agents reply nothing (a no-op) and every
  output carries ``missing_agents``.
* **A crashed or stalled loop**: ``leave`` (called by the loop on any exception) or a turn
  waiting longer than ``turn_timeout`` ends the instance for everyone with ``aborted`` set.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from teamgym.adapters.verl.episode_env import EpisodeEnv, StepResult
from teamgym.adapters.verl.partners import split_teammates
from teamgym.adapters.verl.settings import AgentLoopSettings
from teamgym.envs.registration import make
from teamgym.envs.sharing import RewardSharing

__all__ = ["EpisodeHub", "JoinResult", "StepResult", "get_ray_hub"]

_DEFAULT = AgentLoopSettings()
"""Where the timeouts' defaults come from: the agent loop's settings own them."""


@dataclass(frozen=True)
class JoinResult:
    """What a loop gets when its episode instance starts."""

    instance: str
    """Id of the episode instance, for ``submit`` and ``leave``."""
    observation: str
    """The agent's first observation (must equal the dataset prompt's: checked by the loop)."""
    missing_agents: tuple[str, ...] = ()
    """Agents whose rows never joined (played as no-ops)."""
    valid_actions: tuple[str, ...] = ()
    """The agent's valid actions on its first turn."""


@dataclass
class _Instance:
    id: str
    key: str
    episode: EpisodeEnv
    expected: tuple[str, ...]
    joined: dict[str, asyncio.Future] = field(default_factory=dict)
    started: bool = False
    pending: dict[str, Any] = field(default_factory=dict)
    waiters: dict[str, asyncio.Future] = field(default_factory=dict)
    aborted: str | None = None
    finished: bool = False
    slot: int | None = None


class EpisodeHub:
    """Meets the loops of each episode and steps its env; one per process (or one Ray actor).

    Args:
        join_timeout: seconds an instance waits for all its agents before starting without them.
        turn_timeout: seconds a step waits for the slowest live agent before aborting.
        env_factory: builds an env from (env id, kwargs); ``teamgym.envs.make`` by default.
    """

    def __init__(
        self,
        join_timeout: float = _DEFAULT.join_timeout,
        turn_timeout: float = _DEFAULT.turn_timeout,
        env_factory: Callable[..., Any] | None = None,
    ) -> None:
        self.join_timeout = join_timeout
        self.turn_timeout = turn_timeout
        self.env_factory = env_factory or (lambda env_id, kwargs: make(env_id, **kwargs))
        self._open: dict[str, list[_Instance]] = {}
        self._by_id: dict[str, _Instance] = {}
        self._ids = itertools.count()
        self._slotted: dict[tuple[str, int], _Instance] = {}

    # ------------------------------------------------------------------ API
    async def join(
        self,
        *,
        key: str,
        agent: str,
        env_id: str,
        env_kwargs: dict[str, Any],
        seed: int,
        sharing: RewardSharing | None = None,
        teammates: dict[str, str] | None = None,
        slot: int | None = None,
    ) -> JoinResult:
        """Join an instance of episode ``key`` as ``agent``; returns when the instance starts.
        Keyword arguments only (they cross a Ray actor boundary by name). A new instance builds
        ``env_id`` with ``env_kwargs``, rewards mixed by ``sharing`` (``RewardSharing()`` when
        None), reset with ``seed``. ``teammates`` maps agents played by a baseline policy (e.g.
        ``{"robot_0": "expert"}``) to its name: the hub answers for them, no dataset row does.
        ``slot`` (the copy number of the row, when the caller knows it) pairs the k-th copies of
        each agent together whatever order they arrive in, so instance ids and pairings are
        reproducible."""
        inst = None
        if slot is not None:
            inst = self._slotted.get((key, slot))
            if inst is not None and (agent in inst.joined or inst.started):
                inst, slot = None, None  # copy number taken (counted in another process)
        if inst is None and slot is None:
            inst = next(
                (i for i in self._open.get(key, []) if agent not in i.joined and not i.started),
                None,
            )
        if inst is None:
            llm = split_teammates(teammates or {})[1]
            if llm:  # the hub steps the env at once when the rows' replies are in
                raise ValueError(
                    f"{key}: LLM partners ({', '.join(sorted(set(llm.values())))}) play on the "
                    "episode layout only: rebuild the dataset with `teamgym verl-data --layout "
                    "episode` (verl's v1 trainer)"
                )
            episode = EpisodeEnv(
                env_id, env_kwargs, seed, sharing, teammates, self.env_factory, keep=(agent,)
            )
            name = f"{key}#{next(self._ids)}" if slot is None else f"{key}#s{slot}"
            if name in self._by_id:
                name = f"{name}.{next(self._ids)}"
            inst = _Instance(name, key, episode, episode.trained, slot=slot)
            self._by_id[inst.id] = inst
            if slot is not None:
                self._slotted[(key, slot)] = inst
            self._open.setdefault(key, []).append(inst)
            asyncio.get_running_loop().call_later(self.join_timeout, self._start, inst)
        loop = asyncio.get_running_loop()
        inst.joined[agent] = loop.create_future()
        if set(inst.joined) >= set(inst.expected):
            self._start(inst)
        try:
            return await inst.joined[agent]
        except asyncio.CancelledError:  # the worker gave up on this row (another row failed)
            self._withdraw(inst, agent)
            raise

    def _withdraw(self, inst: _Instance, agent: str) -> None:
        """``agent``'s loop was cancelled while joining: an instance it already started is
        aborted (its teammates would wait for it), one that nobody else joined is dropped."""
        if inst.started:
            self._abort(inst, f"{agent} was cancelled")
            return
        inst.joined.pop(agent, None)
        if not inst.joined:
            self._open[inst.key].remove(inst)
            inst.started = True  # the pending join_timeout call does nothing
            self._finish(inst)

    async def submit(self, instance: str, agent: str, reply: str) -> StepResult:
        """Give ``agent``'s reply for this turn; returns once the env stepped."""
        inst = self._by_id.get(instance)
        if inst is None or inst.finished:
            return StepResult("", 0.0, True, None, "episode already ended")
        future = asyncio.get_running_loop().create_future()
        inst.waiters[agent] = future
        inst.pending[agent] = reply
        self._maybe_step(inst)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=self.turn_timeout)
        except asyncio.TimeoutError:
            late = sorted(a for a in inst.episode.env.agents if a not in inst.pending)
            self._abort(
                inst, f"turn timed out after {self.turn_timeout}s waiting for {', '.join(late)}"
            )
            return future.result()

    async def leave(self, instance: str, agent: str, reason: str) -> None:
        """``agent``'s loop failed: end the instance for everyone with ``reason``."""
        inst = self._by_id.get(instance)
        if inst is not None and not inst.finished:
            self._abort(inst, f"{agent} left: {reason}")

    def live_instances(self) -> int:
        """Instances not yet finished (for tests and monitoring)."""
        return sum(1 for i in self._by_id.values() if not i.finished)

    # ------------------------------------------------------------------ internals
    def _start(self, inst: _Instance) -> None:
        if inst.started:
            return
        inst.started = True
        self._open[inst.key].remove(inst)
        inst.episode.missing = tuple(a for a in inst.expected if a not in inst.joined)
        first = inst.episode.reset()
        for agent, future in inst.joined.items():
            if not future.done():
                obs, valid = first[agent]
                future.set_result(JoinResult(inst.id, obs, inst.episode.missing, valid))

    def _maybe_step(self, inst: _Instance) -> None:
        episode = inst.episode
        live = [a for a in episode.live if a not in episode.missing]
        if inst.finished or any(a not in inst.pending for a in live):
            return
        replies, inst.pending = inst.pending, {}
        results = episode.step(replies)  # missing agents: no-op
        for agent, future in list(inst.waiters.items()):
            if not future.done():  # (an agent the step left out: its part is over)
                future.set_result(results.get(agent, StepResult("", 0.0, True)))
        inst.waiters = {}
        if not episode.env.agents:
            self._finish(inst)

    def _abort(self, inst: _Instance, reason: str) -> None:
        if inst.finished:
            return
        inst.aborted = reason
        metrics = inst.episode.metrics(reason)
        for future in inst.waiters.values():
            if not future.done():
                future.set_result(StepResult("", 0.0, True, metrics, reason))
        inst.waiters = {}
        self._finish(inst)

    def _finish(self, inst: _Instance) -> None:
        inst.finished = True
        inst.episode.close()
        self._by_id.pop(inst.id, None)
        if inst.slot is not None and self._slotted.get((inst.key, inst.slot)) is inst:
            del self._slotted[(inst.key, inst.slot)]


_LOCAL_HUB: EpisodeHub | None = None
"""Owned by :func:`local_hub`: one per process, lives as long as the process (instances end
with their episodes, so it holds nothing between batches)."""


def local_hub(
    join_timeout: float = _DEFAULT.join_timeout, turn_timeout: float = _DEFAULT.turn_timeout
) -> EpisodeHub:
    """The process-wide in-process hub (created on first use; the timeouts are the run's)."""
    global _LOCAL_HUB
    if _LOCAL_HUB is None:
        _LOCAL_HUB = EpisodeHub(join_timeout, turn_timeout)
    _LOCAL_HUB.join_timeout, _LOCAL_HUB.turn_timeout = join_timeout, turn_timeout
    return _LOCAL_HUB


_RAY_HUBS: dict[str, Any] = {}
"""Owned by :func:`get_ray_hub`: this process's handles on the job's named hub actors, kept for
the life of the process (the actor lives while a handle does)."""


def get_ray_hub(
    name: str = "teamgym_episode_hub",
    join_timeout: float = _DEFAULT.join_timeout,
    turn_timeout: float = _DEFAULT.turn_timeout,
) -> Any:
    """The job's named Ray actor running an :class:`EpisodeHub` (created on first use), for
    episodes whose rows land on different agent-loop workers. The handle is kept for the life of
    this process, so the actor lives as long as the first worker that created it."""
    if name not in _RAY_HUBS:
        import ray

        actor_cls = ray.remote(num_cpus=0, max_concurrency=10_000)(EpisodeHub)  # type: ignore[call-overload]
        _RAY_HUBS[name] = actor_cls.options(name=name, get_if_exists=True).remote(
            join_timeout, turn_timeout
        )
    return _RAY_HUBS[name]
