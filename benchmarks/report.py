"""Summaries, reports, plots and comparisons of benchmark runs.

:func:`summarise` groups a run's episodes by setting (env, arguments, agent) and gives each
group its means with 95% confidence intervals (Wilson for success, Student t for the rest;
each clipped to the values its metric can take, :data:`RANGES`), its
errored count, and two fingerprints: ``fingerprint``, the SHA-256 of the episodes' metrics in
seed order (the same number ``teamgym baselines`` prints for the same seeds), and
``trajectories``, a hash of the episodes' trajectory hashes. :func:`write_report` writes
``summary.json``, ``report.md`` and the plots (:func:`figures`: bars coloured by agent with a
legend, ``0`` and ``n/a`` labelled apart); :func:`compare_runs` says, episode by episode,
whether two runs reproduced each other; :func:`paired_compare` tests whether agent A beats
agent B on the same seeds (McNemar's exact test on success, Wilcoxon's signed-rank test on
score, paired 95% intervals of both differences).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamgym.benchmarks.results import JsonLines, latest_by_key

__all__ = [
    "Comparison",
    "PairedComparison",
    "PairedGroup",
    "PairingError",
    "Report",
    "compare_runs",
    "figures",
    "load_run",
    "mcnemar_exact",
    "mean_ci",
    "newcombe_paired",
    "paired_compare",
    "summarise",
    "wilcoxon_signed_rank",
    "wilson",
    "write_report",
]

Z95 = 1.959963984540054
#: Student's t 97.5% quantiles for 1..30 degrees of freedom (beyond: the normal's)
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
#: metric key in the episode record -> (summary name, column title)
MEANS = {
    "score": "score",
    "team_return": "team return",
    "episode_length": "steps",
    "collaboration_index": "collab. index",
    "communication_frequency": "comm. freq",
    "invalid_action_rate": "invalid",
    "contribution_gini": "gini",
}
#: metric -> (least, greatest) value it can take (None: unbounded); intervals are clipped to it
RANGES: dict[str, tuple[float | None, float | None]] = {
    "success": (0.0, 1.0),
    "episode_length": (0.0, None),
    "collaboration_index": (0.0, 1.0),
    "communication_frequency": (0.0, None),
    "invalid_action_rate": (0.0, 1.0),
    "contribution_gini": (0.0, 1.0),
}


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


def load_run(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The latest result of every episode of a run directory, by key."""
    path = Path(run_dir) / "results.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} has no results.jsonl: pass a directory written by `teamgym bench run`"
        )
    return latest_by_key(JsonLines(path).load(repair=False))


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def summarise(
    results: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """One summary row per setting, in ``order`` (config hashes: the suite's order) and then
    in first-seen order (see the module docstring)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in results.values():
        groups.setdefault(record["config_hash"], []).append(record)
    rank = {h: i for i, h in enumerate(order)}
    rows = []
    for config_hash, records in sorted(
        groups.items(), key=lambda item: rank.get(item[0], len(rank))
    ):
        records = sorted(records, key=lambda r: r["seed"])
        ok = [r for r in records if r["status"] == "ok"]
        metrics = [r["metrics"] for r in ok]
        wins = sum(bool(m["success"]) for m in metrics)
        lo, hi = wilson(wins, len(metrics))
        first = records[0]
        rows.append(
            {
                "group": first["group"],
                "env_id": first["env_id"],
                "kwargs": first["kwargs"],
                "agent": first["agent"],
                "config_hash": config_hash,
                "episodes": len(ok),
                "errored": len(records) - len(ok),
                "errors": sorted({r["error"] for r in records if r["status"] != "ok"})[:5],
                "seeds": [records[0]["seed"], records[-1]["seed"]],
                "success": {
                    "mean": wins / len(metrics) if metrics else None,
                    "lo": lo,
                    "hi": hi,
                    "n": len(metrics),
                },
                **{
                    key: mean_ci((m[key] for m in metrics), RANGES.get(key, (None, None)))
                    for key in MEANS
                },
                "fingerprint": _hash(metrics)[:16] if metrics else None,
                "trajectories": _hash([(r["seed"], r["trajectory_hash"]) for r in ok]),
            }
        )
    return rows


def _fmt(stat: Mapping[str, Any], pct: bool = False) -> str:
    mean = stat["mean"]
    if mean is None:
        return "-"
    if pct and "lo" in stat and stat.get("ci", True):
        return f"{100 * mean:.0f}% ({100 * stat['lo']:.0f}-{100 * stat['hi']:.0f})"
    return f"{100 * mean:.1f}%" if pct else f"{mean:.3f}"


SUMMARY_COLUMNS = (
    "env",
    "args",
    "agent",
    "episodes",
    "success (95% CI)",
    "score",
    "steps",
    "team return",
    "collab.",
    "comm.",
    "invalid",
    "gini",
    "fingerprint",
)
"""Columns of the terminal and Markdown tables: collab. = collaboration index, comm. =
messages per agent-step, invalid = invalid replies per agent-step, gini = contribution Gini."""


def columns_and_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """:data:`SUMMARY_COLUMNS` and :func:`table_rows`, without ``args`` when no setting has any."""
    cells = table_rows(rows)
    columns = list(SUMMARY_COLUMNS)
    if not any(row[1] for row in cells):
        columns.pop(1)
        cells = [row[:1] + row[2:] for row in cells]
    return columns, cells


def table_rows(rows: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """Summary rows as the strings of :data:`SUMMARY_COLUMNS` (terminal table and Markdown)."""
    out = []
    for r in rows:
        args = ",".join(f"{k}={v}" for k, v in sorted(r["kwargs"].items()))
        episodes = str(r["episodes"]) + (f" (+{r['errored']} errored)" if r["errored"] else "")
        steps = r["episode_length"]["mean"]
        out.append(
            [
                r["env_id"],
                args,
                r["agent"],
                episodes,
                _fmt(r["success"], pct=True),
                _fmt(r["score"]),
                "-" if steps is None else f"{steps:.1f}",
                _fmt(r["team_return"]),
                _fmt(r["collaboration_index"]),
                _fmt(r["communication_frequency"]),
                _fmt({**r["invalid_action_rate"], "ci": False}, pct=True),
                _fmt(r["contribution_gini"]),
                r["fingerprint"] or "-",
            ]
        )
    return out


def _markdown(run_dir: Path, rows: list[dict[str, Any]], plots: list[str], meta: Mapping) -> str:
    lines = [
        f"# Benchmark run: {meta.get('suite_name', run_dir.name)}",
        "",
        f"teamgym {meta.get('package_version', '?')}, suite hash `{meta.get('suite_hash', '?')}`, "
        f"{sum(r['episodes'] for r in rows)} episodes ok, "
        f"{sum(r['errored'] for r in rows)} errored.",
        "Success with a 95% Wilson interval; other columns are means over the ok episodes "
        "(collab. = collaboration index, comm. = messages per agent-step, invalid = invalid "
        "replies per agent-step, gini = contribution Gini). `fingerprint` hashes the episodes' "
        "metrics in seed order: a rerun prints the same.",
        "",
    ]
    columns, cells = columns_and_rows(rows)
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    errored = [r for r in rows if r["errored"]]
    if errored:
        lines += ["", "## Errored episodes", ""]
        lines += [f"- {r['group']}: {r['errored']}: {'; '.join(r['errors'])}" for r in errored]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


PANELS: dict[str, tuple[tuple[str, str], ...]] = {
    "success.png": (("success", "success rate"),),
    "collaboration.png": (
        ("collaboration_index", "collaboration index"),
        ("communication_frequency", "messages per agent-step"),
        ("contribution_gini", "contribution Gini"),
    ),
}
"""The plots :func:`write_report` writes: file name -> (metric, panel title) per panel."""

ZERO_LABEL, UNDEFINED_LABEL = "0", "n/a"
"""What a bar of zero and a metric with no value (no episode defined it) are labelled with,
so the two never look alike (both have no visible bar)."""


def figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The :data:`PANELS` as matplotlib figures (file name -> ``Figure``; ``{}`` without
    matplotlib or without a setting that has episodes): per setting, a bar with its 95%
    interval (already clipped to the metric's range by :func:`summarise`), coloured by agent
    with a legend; a mean of 0 gets a marker and the label ``0``, an undefined one ``n/a``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return {}
    shown = [r for r in rows if r["episodes"]]
    if not shown:
        return {}
    labels = [r["group"] for r in shown]
    agents = list(dict.fromkeys(r["agent"] for r in shown))  # one colour per agent, every env
    palette = plt.get_cmap("tab10")
    colour = {agent: palette(i % 10) for i, agent in enumerate(agents)}
    legend = [Patch(color=colour[a], alpha=0.85, label=a) for a in agents]
    out = {}
    for name, metrics in PANELS.items():
        fig, axes = plt.subplots(
            1, len(metrics), figsize=(5 * len(metrics), 0.35 * len(labels) + 1.5), squeeze=False
        )
        for ax, (key, title) in zip(axes[0], metrics, strict=True):
            _bars(ax, [r[key] for r in shown], [colour[r["agent"]] for r in shown])
            ax.set_yticks(range(len(labels)), labels if ax is axes[0][0] else [""] * len(labels))
            ax.invert_yaxis()
            ax.set_title(title)
            ax.grid(axis="x", alpha=0.3)
        axes[0][-1].legend(handles=legend, title="agent", fontsize="small", loc="best")
        fig.tight_layout()
        out[name] = fig
    return out


def _bars(ax: Any, stats: Sequence[Mapping[str, Any]], colours: Sequence[Any]) -> None:
    """One horizontal bar per stat with its interval; zeros and undefined means labelled."""
    means = [math.nan if s["mean"] is None else s["mean"] for s in stats]
    errs = [  # the interval's distance below and above the mean (none without an interval)
        [_gap(s["mean"], s["lo"]) for s in stats],
        [_gap(s["hi"], s["mean"]) for s in stats],
    ]
    ax.barh(range(len(stats)), means, xerr=errs, color=colours, alpha=0.85, capsize=2)
    zeros = [i for i, m in enumerate(means) if m == 0]
    if zeros:
        ax.plot([0.0] * len(zeros), zeros, "|", color="black", markersize=12, gid="zeros")
    for i, m in enumerate(means):
        if m == 0 or math.isnan(m):
            text = ZERO_LABEL if m == 0 else UNDEFINED_LABEL
            ax.annotate(
                text,
                (0.0, i),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize="small",
                color="black" if m == 0 else "grey",
                fontstyle="normal" if m == 0 else "italic",
            )


def _gap(upper: float | None, lower: float | None) -> float:
    """``upper - lower``, never negative (rounding); 0 where either is missing."""
    return 0.0 if upper is None or lower is None else max(0.0, upper - lower)


def _plot(run_dir: Path, rows: list[dict[str, Any]]) -> list[str]:
    """Write :func:`figures` into ``run_dir``; the names written."""
    made = figures(rows)
    if not made:
        return []
    import matplotlib.pyplot as plt

    written = []
    for name, fig in made.items():
        fig.savefig(run_dir / name, dpi=100)
        plt.close(fig)
        written.append(name)
    return written


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote: the summary's rows and the plots' file names."""

    rows: list[dict[str, Any]]
    plots: list[str]


def write_report(run_dir: str | Path) -> Report:
    """Write ``summary.json``, ``report.md`` and plots for a run directory."""
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    rows = summarise(load_run(run_dir), meta.get("settings", ()))
    summary = {
        "suite_name": meta.get("suite_name"),
        "suite_hash": meta.get("suite_hash"),
        "package_version": meta.get("package_version"),
        "episodes": sum(r["episodes"] for r in rows),
        "errored": sum(r["errored"] for r in rows),
        "expected": meta.get("episodes"),
        "rows": rows,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    plots = _plot(run_dir, rows)
    (run_dir / "report.md").write_text(_markdown(run_dir, rows, plots, meta))
    return Report(rows, plots)


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
