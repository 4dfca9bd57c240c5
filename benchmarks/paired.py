"""Is agent A better than agent B on the same episodes? ``bench compare --paired``: episodes of
two runs matched by env, arguments, teammates and seed, with McNemar's exact test on success,
Newcombe's paired interval, Wilcoxon's signed-rank test and a paired t interval on score."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamgym.benchmarks.intervals import Z95, mean_ci, wilson
from teamgym.benchmarks.report import load_run

__all__ = [
    "PairedComparison",
    "PairedGroup",
    "PairingError",
    "mcnemar_exact",
    "newcombe_paired",
    "paired_compare",
    "wilcoxon_signed_rank",
]


class PairingError(ValueError):
    """Two runs, or the agents picked from them, that cannot be paired (bad input)."""


#: up to this many nonzero score differences, :func:`wilcoxon_signed_rank` is exact
WILCOXON_EXACT_MAX = 400


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """McNemar's exact two-sided p-value: the binomial test of the discordant pairs
    (``a_only`` episodes only A won, ``b_only`` only B won) against 1/2,
    ``min(1, 2 * BinomCDF(min(a_only, b_only); a_only + b_only, 1/2))``; 1 with no discordant pair.

    >>> mcnemar_exact(2, 9)  # 2 * (1 + 11 + 55) / 2**11
    0.0654296875
    """
    n = a_only + b_only
    tail = sum(math.comb(n, k) for k in range(min(a_only, b_only) + 1))
    return min(1.0, 2 * tail / 2**n)


def newcombe_paired(
    both: int, a_only: int, b_only: int, neither: int, z: float = Z95
) -> tuple[float, float]:
    """95% interval of the paired difference of two success rates, A's minus B's: Newcombe's
    hybrid score interval (1998, method 10) from the two rates' Wilson intervals and the
    continuity-corrected phi correlation of the pairs; sound at 0 % and 100 %, unlike Wald's."""
    n = both + a_only + b_only + neither
    if n == 0:
        return (-1.0, 1.0)
    p1, p2 = (both + a_only) / n, (both + b_only) / n
    (l1, u1), (l2, u2) = wilson(both + a_only, n, z), wilson(both + b_only, n, z)
    cross: float = both * neither - a_only * b_only
    if cross > 0:
        cross = max(cross - n / 2, 0.0)
    margins = (both + a_only) * (neither + b_only) * (both + b_only) * (neither + a_only)
    phi = cross / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    lo = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = d + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return (max(-1.0, lo), min(1.0, hi))


def wilcoxon_signed_rank(differences: Iterable[float]) -> tuple[float, str]:
    """Two-sided p-value of Wilcoxon's signed-rank test that paired differences are centred on
    0, and ``"exact"`` or ``"normal"``: how it was computed.

    Zero differences are dropped (Wilcoxon's method) and tied absolute differences share their
    mean rank. With up to :data:`WILCOXON_EXACT_MAX` nonzero differences the p-value is exact:
    the statistic's distribution over all 2**n signs of the observed ranks, so exact under ties
    too; beyond that, the normal approximation with the ties' variance and a continuity
    correction. ``p = min(1, 2 * min(P(T+ <= t), P(T+ >= t)))``.
    """
    nonzero = [float(d) for d in differences if d != 0]
    n = len(nonzero)
    if n == 0:
        return (1.0, "exact")
    order = sorted(range(n), key=lambda i: abs(nonzero[i]))
    doubled = [0] * n  # twice each mean rank: integers under ties
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(nonzero[order[j + 1]]) == abs(nonzero[order[i]]):
            j += 1
        for k in range(i, j + 1):
            doubled[order[k]] = i + j + 2  # 2 * mean of ranks i+1 .. j+1
        i = j + 1
    t = sum(r for r, d in zip(doubled, nonzero, strict=True) if d > 0)
    if n <= WILCOXON_EXACT_MAX:
        import numpy as np

        dist = np.zeros(sum(doubled) + 1)
        dist[0] = 1.0
        for r in doubled:
            shifted = np.zeros_like(dist)
            shifted[r:] = dist[:-r]
            dist = 0.5 * (dist + shifted)
        lower, upper = float(dist[: t + 1].sum()), float(dist[t:].sum())
        return (min(1.0, 2 * min(lower, upper)), "exact")
    mean = sum(doubled) / 4  # in ranks: E[T+] = sum(rank) / 2, Var[T+] = sum(rank**2) / 4
    sd = math.sqrt(sum(r * r for r in doubled) / 16)
    z = max(0.0, abs(t / 2 - mean) - 0.5) / sd
    return (min(1.0, math.erfc(z / math.sqrt(2))), "normal")


@dataclass(frozen=True)
class PairedGroup:
    """Agent A against agent B on the seeds both played in one setting (env, arguments,
    teammates); A's minus B's for every difference."""

    env_id: str
    kwargs: dict[str, Any]
    """The env arguments."""
    teammates: dict[str, Any]
    """The scripted teammates, when the setting has any."""
    pairs: int
    """Seeds both agents finished (``ok``): the episodes every figure below is computed from."""
    errored: int
    """Shared seeds left out because A's or B's episode errored."""
    success_a: float | None
    """A's success rate over the pairs (None without pairs); ``success_b``: B's."""
    success_b: float | None
    both: int
    """Pairs both won; with ``a_only``, ``b_only`` and ``neither``, McNemar's 2x2 table."""
    a_only: int
    b_only: int
    neither: int
    success_diff: float | None
    success_diff_ci: tuple[float, float]
    """Newcombe's hybrid score 95% interval (:func:`newcombe_paired`)."""
    mcnemar_p: float
    """McNemar's exact test (:func:`mcnemar_exact`)."""
    score_pairs: int
    """Pairs where both episodes have a score."""
    score_a: float | None
    score_b: float | None
    score_diff: float | None
    score_diff_ci: tuple[float | None, float | None]
    """Student-t 95% interval of the mean paired difference."""
    wilcoxon_p: float | None
    """Wilcoxon's signed-rank test on the score differences (:func:`wilcoxon_signed_rank`)."""
    wilcoxon_method: str | None


@dataclass(frozen=True)
class PairedComparison:
    """What :func:`paired_compare` found: one :class:`PairedGroup` per shared setting."""

    agent_a: str
    agent_b: str
    groups: list[PairedGroup]
    only_a: int
    """Episodes of A with no episode of B on the same setting and seed."""
    only_b: int


def _pick(
    results: Mapping[str, Mapping[str, Any]], label: str | None, run: Path, flag: str
) -> tuple[str, list[Mapping[str, Any]]]:
    """The episodes of one agent of a run: ``label``, or the run's only agent."""
    agents = sorted({r["agent"] for r in results.values()})
    if label is None and len(agents) > 1:
        raise PairingError(f"{run} holds agents {', '.join(agents)}: pick one with {flag} LABEL")
    if label is not None and label not in agents:
        raise PairingError(f"{run} has no agent {label!r}; it holds {', '.join(agents) or 'none'}")
    label = label if label is not None else agents[0] if agents else ""
    return label, [r for r in results.values() if r["agent"] == label]


def _setting(record: Mapping[str, Any]) -> str:
    """What two agents' episodes must share, besides the seed, to be paired."""
    parts = [record["env_id"], *(f"{k}={v}" for k, v in sorted(record["kwargs"].items()))]
    parts += [f"teammate {k}={v}" for k, v in sorted((record.get("teammates") or {}).items())]
    return " ".join(parts)


def _seeds(records: Iterable[Mapping[str, Any]]) -> str:
    seeds = sorted({r["seed"] for r in records})
    return f"{seeds[0]}..{seeds[-1]} ({len(seeds)})" if seeds else "none"


def paired_compare(
    run_a: str | Path,
    run_b: str | Path,
    agent_a: str | None = None,
    agent_b: str | None = None,
) -> PairedComparison:
    """Pair agent A's episodes of ``run_a`` with agent B's of ``run_b`` by (env, arguments,
    teammates, seed), ignoring the agent, and test A against B per setting.

    A run holding several agents needs ``agent_a``/``agent_b`` to pick one; two agents of one
    run are compared by passing it as both runs. Raises :class:`PairingError` when the runs
    share no episode (saying whether the settings or the seeds differ), or pick the same one.
    """
    run_a, run_b = Path(run_a), Path(run_b)
    label_a, records_a = _pick(load_run(run_a), agent_a, run_a, "--agent-a")
    label_b, records_b = _pick(load_run(run_b), agent_b, run_b, "--agent-b")
    if run_a.resolve() == run_b.resolve() and label_a == label_b:
        raise PairingError(
            f"RUN_A and RUN_B pick the same episodes (agent {label_a!r} of {run_a}): "
            "pick two agents with --agent-a and --agent-b"
        )
    by_a = {(_setting(r), r["seed"]): r for r in records_a}
    by_b = {(_setting(r), r["seed"]): r for r in records_b}
    shared = sorted(set(by_a) & set(by_b), key=lambda k: (k[0], k[1]))
    if not shared:
        settings_a = {s for s, _ in by_a}
        settings_b = {s for s, _ in by_b}
        if not settings_a & settings_b:
            raise PairingError(
                "the runs share no episode: no (env, arguments, teammates) in common; "
                f"{run_a} ({label_a}) has {'; '.join(sorted(settings_a)[:3]) or 'none'}, "
                f"{run_b} ({label_b}) has {'; '.join(sorted(settings_b)[:3]) or 'none'}"
            )
        raise PairingError(
            "the runs share no episode: the same settings but no seed in common; "
            f"{run_a} ({label_a}) played seeds {_seeds(records_a)}, "
            f"{run_b} ({label_b}) seeds {_seeds(records_b)}"
        )
    grouped: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for key in shared:
        grouped.setdefault(key[0], []).append((by_a[key], by_b[key]))
    groups = [_paired_group(pairs) for pairs in grouped.values()]
    return PairedComparison(
        label_a, label_b, groups, len(set(by_a) - set(by_b)), len(set(by_b) - set(by_a))
    )


def _paired_group(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> PairedGroup:
    first = pairs[0][0]
    ok = [(a["metrics"], b["metrics"]) for a, b in pairs if a["status"] == b["status"] == "ok"]
    table = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for a, b in ok:
        table[bool(a["success"]), bool(b["success"])] += 1
    both, a_only, b_only, neither = table.values()
    n = len(ok)
    scored = [(a["score"], b["score"]) for a, b in ok if None not in (a["score"], b["score"])]
    diffs = [a - b for a, b in scored]
    diff = mean_ci(diffs)
    wilcoxon = wilcoxon_signed_rank(diffs) if diffs else (None, None)
    return PairedGroup(
        env_id=first["env_id"],
        kwargs=first["kwargs"],
        teammates=first.get("teammates") or {},
        pairs=n,
        errored=len(pairs) - n,
        success_a=(both + a_only) / n if n else None,
        success_b=(both + b_only) / n if n else None,
        both=both,
        a_only=a_only,
        b_only=b_only,
        neither=neither,
        success_diff=(a_only - b_only) / n if n else None,
        success_diff_ci=newcombe_paired(both, a_only, b_only, neither),
        mcnemar_p=mcnemar_exact(a_only, b_only),
        score_pairs=len(scored),
        score_a=statistics.fmean(a for a, _ in scored) if scored else None,
        score_b=statistics.fmean(b for _, b in scored) if scored else None,
        score_diff=diff["mean"],
        score_diff_ci=(diff["lo"], diff["hi"]),
        wilcoxon_p=wilcoxon[0],
        wilcoxon_method=wilcoxon[1],
    )
