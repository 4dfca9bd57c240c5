"""The plots of a run's report: per setting, a bar with its 95% interval for each metric of
:data:`PANELS`, a legend of the agents' colours, zeros and undefined values labelled apart."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PANELS", "figures", "write_plots"]


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


def write_plots(run_dir: Path, rows: list[dict[str, Any]]) -> list[str]:
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
