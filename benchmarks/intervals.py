"""The intervals a benchmark report gives its figures: Wilson's for a success rate, Student's t
for a mean, clipped to the values a metric can take; what each is called in a caption."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

__all__ = ["RANGES", "T975", "Z95", "interval_name", "mean_ci", "wilson"]

Z95 = 1.959963984540054
#: Student's t 97.5% quantiles for 1..30 degrees of freedom (beyond: the normal's)
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
#: metric -> (least, greatest) value it can take (None: unbounded); intervals are clipped to it
RANGES: dict[str, tuple[float | None, float | None]] = {
    "success": (0.0, 1.0),
    "episode_length": (0.0, None),
    "collaboration_index": (0.0, 1.0),
    "communication_frequency": (0.0, None),
    "invalid_action_rate": (0.0, 1.0),
    "contribution_gini": (0.0, 1.0),
}


def interval_name(metric: str) -> str:
    """The interval ``teamgym.benchmarks.report.summarise`` gives ``metric``, in words (the
    plots' and the report's captions)."""
    return "95% Wilson score interval" if metric == "success" else "95% Student-t interval"


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion (sound at 0 % and 100 %, unlike the normal one)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def mean_ci(
    values: Iterable[float | None], bounds: tuple[float | None, float | None] = (None, None)
) -> dict[str, float | None]:
    """Mean and Student-t 95% interval of the non-None values (no interval below 2 values),
    the interval clipped to ``bounds`` (the values the metric can take, :data:`RANGES`)."""
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    mean = statistics.fmean(kept)
    if len(kept) < 2:
        return {"mean": mean, "lo": None, "hi": None, "n": 1}
    t = T975[len(kept) - 2] if len(kept) - 1 <= len(T975) else Z95
    half = t * statistics.stdev(kept) / math.sqrt(len(kept))
    least, greatest = bounds
    lo = mean - half if least is None else max(least, mean - half)
    hi = mean + half if greatest is None else min(greatest, mean + half)
    return {"mean": mean, "lo": lo, "hi": hi, "n": len(kept)}
