"""CPU time by process: this process and those it started (Ray's workers and daemons,
TransferQueue), by role, and a call timed after an idle second so that what the processes burn
idle (polling) can be told apart from what the call costs. ``teamgym verl-bench`` reads the
adapter's share of a rollout with it (:mod:`teamgym.benchmarks.verl_throughput`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

__all__ = ["cpu_seconds", "timed"]


def cpu_seconds(
    include_self: bool = True, worker_pid: int | Collection[int] | None = None
) -> dict[str, float]:
    """User + system CPU of every live process this one started (Ray's workers and daemons,
    TransferQueue), and of this process itself with ``include_self``, by role: ``worker`` (the
    process(es) at ``worker_pid``: the agent-loop workers, our loop inside them), else the
    process title (``ray::SimpleStorageUnit``) or program name (``raylet``)."""
    import psutil

    workers = {worker_pid} if isinstance(worker_pid, int) else set(worker_pid or ())

    me = psutil.Process()
    totals: dict[str, float] = {}
    for proc in ([me] if include_self else []) + me.children(recursive=True):
        try:
            times = proc.cpu_times()
            role = "worker" if proc.pid in workers else _role(proc)
        except psutil.Error:  # ended meanwhile
            continue
        totals[role] = totals.get(role, 0.0) + times.user + times.system
    return totals


def _role(proc: Any) -> str:
    """A process's title as Ray sets it (``ray::TransferQueueController``), else its program."""
    cmdline = proc.cmdline()
    first = cmdline[0] if cmdline else proc.name()
    if first.startswith("ray::"):
        return first.split(".")[0]
    scripts = [Path(a).name for a in cmdline[1:3] if a.endswith(".py")]
    return scripts[0] if scripts else Path(first).name


def timed(
    fn: Callable[[], Any],
    include_self: bool = True,
    worker_pid: int | Collection[int] | None = None,
) -> tuple[Any, float, dict[str, float], dict[str, float]]:
    """Run ``fn`` after a second of idling: its result, wall seconds, CPU seconds by process
    role (see :func:`cpu_seconds`) and, by role, the CPU per second burnt in the idle second."""

    def cpu() -> dict[str, float]:
        return cpu_seconds(include_self, worker_pid)

    before = cpu()
    time.sleep(1.0)
    start_cpu, start = cpu(), time.perf_counter()
    idle = {role: start_cpu.get(role, 0.0) - v for role, v in before.items()}
    out = fn()
    seconds, end_cpu = time.perf_counter() - start, cpu()
    used = {role: v - start_cpu.get(role, 0.0) for role, v in end_cpu.items()}
    return out, seconds, used, idle
