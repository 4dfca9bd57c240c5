"""teamgym's replay buffer for verl's v1 trainer: verl's own, with a poll that fits the rollout
and the wait it causes measured (docs: Speed).

:func:`team_replay_buffer` (the overlay's ``trainer.v1.sampler.custom_sampler``) builds verl's
``ReplayBuffer`` or ``ReplayBufferAsync`` polling as :class:`FittingPoll` says, not every 2 s
(``replay_buffer.py:144``), and logs ``teamgym/wait_after_last_s`` from the batch's last
episode's end (the ``teamgym_done_at`` tag): a measurement, never an input (clocks of different
nodes, and trajectories restored by verl's rollout skip, make it wrong). verl hands a custom
sampler neither DAPO's settings nor the refill switch (``trainer_base.py:_build_replay_buffer``):
:func:`sampler_settings` computes them as verl does, and the train entry passes them.
"""

from __future__ import annotations

import time
from typing import Any

from omegaconf import DictConfig
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

from teamgym.adapters.verl.config import poll_intervals
from teamgym.adapters.verl.tq_writes import DONE_AT

__all__ = [
    "VERL_SETTINGS",
    "FittingPoll",
    "TeamReplayBuffer",
    "TeamReplayBufferAsync",
    "sampler_settings",
    "team_replay_buffer",
]

#: verl's settings of its own sampler that a custom one must be given (``sampler_kwargs``).
VERL_SETTINGS = (
    "filter_groups_metric",
    "sync_refill_failed_groups",
    "train_batch_size",
    "gen_batch_size",
    "max_inflight_gen_batches",
)


class FittingPoll:
    """The poll of verl's replay buffer, fitted: ``min_poll_interval`` (0.05 s) after a group
    finished, doubling while none did, at most ``max_poll_interval`` (0.5 s); a mixin."""

    # what verl's ReplayBuffer has (this mixin sits before it)
    sampler_kwargs: Any
    poll_interval: float
    finished_keys: dict[str, set]
    failure_keys: dict[str, set]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]  # verl's buffer, next in the MRO
        intervals = poll_intervals(dict(self.sampler_kwargs or {}))
        self.min_poll_interval, self.max_poll_interval = intervals
        self.poll_interval = self.min_poll_interval
        self._seen: int | None = None
        self.polls = 0

    def _wait_for_next_poll(self, partition_id: str, last_debug_time: float) -> float:
        """verl's wait (and its debug log), for as long as fits: short right after progress."""
        # groups that reached a terminal status: what can make a batch (a trajectory arriving
        # alone cannot, and on a large rollout one arrives almost all the time)
        seen = len(self.finished_keys[partition_id]) + len(self.failure_keys[partition_id])
        if seen != self._seen:
            self.poll_interval = self.min_poll_interval
        else:
            self.poll_interval = min(2 * self.poll_interval, self.max_poll_interval)
        self._seen = seen
        self.polls += 1
        return super()._wait_for_next_poll(partition_id, last_debug_time)  # type: ignore[misc]

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        """verl's ``sample``, with the polls it took, the seconds it waited and, for episode
        rows, the seconds from the last episode's end to the batch."""
        start, self.polls, self._seen = time.time(), 0, None
        self.poll_interval = self.min_poll_interval
        batch, metrics = super().sample(global_steps, partition_id, batch_size)  # type: ignore[misc]
        now = time.time()
        prefix = "training" if partition_id == "train" else "validation"
        metrics[f"{prefix}/teamgym/sample_polls"] = self.polls
        metrics[f"{prefix}/teamgym/sample_wait_s"] = now - start
        done = [tag[DONE_AT] for tag in batch.tags if DONE_AT in tag]
        if done:
            metrics[f"{prefix}/teamgym/wait_after_last_s"] = now - max(done)
        return batch, metrics


class TeamReplayBuffer(FittingPoll, ReplayBuffer):
    """verl's sync ``ReplayBuffer`` with :class:`FittingPoll`."""


class TeamReplayBufferAsync(FittingPoll, ReplayBufferAsync):
    """verl's ``ReplayBufferAsync`` (the async trainers') with :class:`FittingPoll`."""


def team_replay_buffer(**kwargs: Any) -> ReplayBuffer:
    """What verl's ``_build_replay_buffer`` calls for ``custom_sampler``: the buffer for its
    ``trainer_mode``, with verl's own DAPO and refill settings (:data:`VERL_SETTINGS`) taken
    from ``sampler_kwargs``, where :func:`sampler_settings` put them."""
    given = dict(kwargs["sampler_kwargs"] or {})
    missing = [k for k in VERL_SETTINGS if k not in given]
    if missing:  # verl would run without DAPO or refills, silently
        raise ValueError(
            f"trainer.v1.sampler.sampler_kwargs lacks {', '.join(missing)}: verl gives a custom "
            "sampler no DAPO or refill settings; run through `python -m "
            "teamgym.adapters.verl.train`, which adds them, or unset "
            "trainer.v1.sampler.custom_sampler for verl's own sampler"
        )
    extra = {k: given[k] for k in VERL_SETTINGS}
    if kwargs["trainer_mode"] == "sync":
        return TeamReplayBuffer(**kwargs, **extra)
    # verl's async buffer takes the filter and the refill switch, not the batch sizes
    extra = {k: extra[k] for k in ("filter_groups_metric", "sync_refill_failed_groups")}
    return TeamReplayBufferAsync(**kwargs, **extra)


def sampler_settings(cfg: DictConfig) -> dict[str, Any]:
    """The settings verl's ``_build_replay_buffer`` (0.9.1) gives its own sampler, from the
    config, for :func:`team_replay_buffer`'s ``sampler_kwargs``."""
    filter_groups = cfg.algorithm.get("filter_groups") or {}
    metric = str(filter_groups.get("metric")) if filter_groups.get("enable") else None
    refill = bool(cfg.trainer.v1.sampler.get("sync_refill_failed_groups", False))
    batch = int(cfg.data.train_batch_size)
    return {
        "filter_groups_metric": metric,
        "sync_refill_failed_groups": refill,
        "train_batch_size": batch,
        "gen_batch_size": 1
        if metric is not None or refill
        else int(cfg.data.get("gen_batch_size") or batch),
        "max_inflight_gen_batches": int(filter_groups.get("max_inflight_gen_batches", 1))
        if metric is not None
        else 1,
    }
