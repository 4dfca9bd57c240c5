"""``teamgym bench run --ray [ADDRESS]``: the same episodes, spread over a Ray cluster.

Episodes go to Ray tasks in small chunks; each task plays its chunk with
:func:`teamgym.benchmarks.episodes.play_jobs` (building its own agents) and returns the lines, and
the driver appends them as chunks finish, so ``results.jsonl`` stays the only writer's and a
killed driver resumes like a serial run. Episodes are deterministic in their seed, so the lines
equal the serial run's (except ``wall_s``). Every node needs teamgym installed (and the extras
its agents use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from teamgym.benchmarks.episodes import play_jobs
from teamgym.benchmarks.suites import Job

__all__ = ["play_on_ray", "require_ray"]

#: what ``--ray`` needs installed (the ``rllib`` extra has it too, with much more)
RAY_INSTALL = "pip install 'ray>=2.60'"


def require_ray() -> None:
    """Raise ``ImportError`` saying what to install when Ray is not there."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ImportError(
            f"--ray needs Ray, which is not installed: {RAY_INSTALL}", name="ray"
        ) from None


def _chunks(jobs: Sequence[Job], size: int) -> list[list[Job]]:
    return [list(jobs[i : i + size]) for i in range(0, len(jobs), size)]


def play_on_ray(
    jobs: Sequence[Job],
    address: str,
    concurrency: int,
    save_observations: bool,
    on_done: Callable[[dict, dict], None],
) -> None:
    """Play ``jobs`` as Ray tasks (``address="local"``: a Ray instance on this machine)."""
    require_ray()
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(
            address=None if address == "local" else address,
            include_dashboard=False,
            log_to_driver=False,
            ignore_reinit_error=True,
        )
    try:
        remote = ray.remote(num_cpus=1)(play_jobs)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        size = max(1, min(16, len(jobs) // (4 * cpus) or 1))
        pending: list[Any] = [
            remote.remote(chunk, concurrency, save_observations) for chunk in _chunks(jobs, size)
        ]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for result, trajectory in ray.get(ready[0]):
                on_done(result, trajectory)
    finally:
        if started:
            ray.shutdown()
