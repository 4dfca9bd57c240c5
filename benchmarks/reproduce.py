"""Whether two benchmark runs reproduced each other, episode by episode: the same episodes, each
with the same status, trajectory hash and metrics (``teamgym bench compare``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from teamgym.benchmarks.report import load_run

__all__ = ["Comparison", "compare_runs"]


@dataclass
class Comparison:
    """Episode-by-episode agreement of two runs (see :func:`compare_runs`)."""

    same: list[str] = field(default_factory=list)
    different: list[tuple[str, str]] = field(default_factory=list)
    """(key, what differs)."""
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    versions: tuple[set[str], set[str]] = field(default_factory=lambda: (set(), set()))

    @property
    def reproduced(self) -> bool:
        """Every episode of each run is in the other, with the same trajectory and metrics."""
        return bool(self.same) and not (self.different or self.only_a or self.only_b)


def compare_runs(run_a: str | Path, run_b: str | Path) -> Comparison:
    """Match the episodes of two runs by key and compare status, trajectory hash and metrics."""
    a, b = load_run(run_a), load_run(run_b)
    out = Comparison(
        versions=(
            {r["package_version"] for r in a.values()},
            {r["package_version"] for r in b.values()},
        )
    )
    for key in sorted(set(a) | set(b)):
        if key not in b:
            out.only_a.append(key)
        elif key not in a:
            out.only_b.append(key)
        else:
            ra, rb = a[key], b[key]
            diffs = [
                name
                for name in ("status", "trajectory_hash", "metrics")
                if ra.get(name) != rb.get(name)
            ]
            if diffs:
                out.different.append((key, ", ".join(diffs)))
            else:
                out.same.append(key)
    return out
