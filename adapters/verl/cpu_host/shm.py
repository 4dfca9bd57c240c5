"""Not a patch: vLLM's processes leave ``psm_*`` and ``sem.mp-*`` files in ``/dev/shm`` when Ray
ends them; :func:`remove_shm_leftovers` (the train entry's ``--cpu`` calls it after the run)
removes those a run created, and nothing older or another user's."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["SHM", "SHM_LEFTOVERS", "remove_shm_leftovers", "shm_entries"]

SHM = Path("/dev/shm")
#: Shared-memory names vLLM's CPU processes create and, when Ray ends them at shutdown, leave
#: behind (its message queues' ``psm_*`` segments and their ``sem.mp-*`` semaphores; verl's
#: weight buckets ``verl_weights_*`` after a failed sync).
SHM_LEFTOVERS = ("psm_", "sem.mp-", "verl_weights_")


def shm_entries() -> set[str]:
    """The names in ``/dev/shm`` now (empty where there is none)."""
    return {p.name for p in SHM.iterdir()} if SHM.is_dir() else set()


def _shm_in_use() -> set[str]:
    """The ``/dev/shm`` names a live process has open or mapped (read from ``/proc``)."""
    used: set[str] = set()
    prefix = f"{SHM}/"
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith(prefix):
                    used.add(target[len(prefix) :].split(" ")[0])
            for line in (proc / "maps").read_text().splitlines():
                if prefix in line:
                    used.add(line.split(prefix, 1)[1].split(" ")[0])
        except OSError:  # the process ended, or is not ours to read
            continue
    return used


def remove_shm_leftovers(before: set[str], wait: float = 0.0) -> list[str]:
    """Remove the vLLM leftovers that appeared in ``/dev/shm`` since ``before`` (older entries are
    another program's), owned by this user and held by no live process; returns their names.
    ``wait``: seconds to keep trying while one is held (vLLM's processes end a moment after Ray's
    shutdown returns, later on a loaded machine). Never raises: a name it cannot remove stays."""
    removed: list[str] = []
    deadline = time.monotonic() + wait
    while True:
        candidates = sorted(n for n in shm_entries() - before if n.startswith(SHM_LEFTOVERS))
        in_use = _shm_in_use() if candidates else set()
        for name in candidates:
            path = SHM / name
            try:
                if name in in_use or path.stat().st_uid != os.getuid():
                    continue
                path.unlink()
            except OSError:
                continue
            removed.append(name)
        held = [n for n in candidates if n in in_use]
        if not held or time.monotonic() >= deadline:
            return removed
        time.sleep(0.25)
