"""The plots of a run's report, one question per figure (:data:`PANELS`): per setting, a
horizontal bar with its 95% interval, the settings grouped under their env.

Readable at 16 settings as at 2: the figure grows with its rows, long labels wrap, the legend
sits below the panels (outside the data), every agent has its own colour (:func:`colours`) and,
in cross-play, every partner its own hatch, so 16 pairings of 4 agents read as 4 colours times
4 hatches; bounded metrics keep their whole range on the axis (a Gini of 0 everywhere is drawn
on [0, 1], not on a few hundredths around 0); the caption above the panels (:func:`caption`)
says what the bars and the error bars are and over how many episodes. Zeros and undefined
values are labelled apart, since neither has a visible bar; the legend names only the agents
(and partners) a figure draws a bar of; the success panel writes on each env's row what
success means there (:func:`~teamgym.envs.describe.success_criteria`: Hanabi's is a
perfect 25, so its expert's 0% sits beside that note, not beside nothing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PANELS", "Panel", "caption", "colours", "figures", "write_plots"]


@dataclass(frozen=True)
class Panel:
    """One panel of a plot: a metric of the summary rows, one bar per row."""

    metric: str
    """The summary row's key (``success``, or a key of :data:`~teamgym.benchmarks.report.MEANS`)."""
    title: str
    """What the panel shows."""
    unit: str
    """The x axis label: what the numbers count."""


PANELS: dict[str, tuple[Panel, ...]] = {
    "success.png": (
        Panel("success", "success rate", "episodes that met the env's success criterion"),
    ),
    "collaboration.png": (
        Panel("collaboration_index", "collaboration index", "completed / attempted subtasks"),
        Panel("communication_frequency", "communication", "messages per agent-step"),
        Panel("contribution_gini", "contribution Gini", "Gini of subtask credit (0 = even)"),
    ),
}
"""The plots :func:`write_plots` writes: file name -> its panels, left to right."""

ZERO_LABEL, UNDEFINED_LABEL = "0", "n/a"
"""What a bar of zero and a metric with no value (no episode defined it) are labelled with,
so the two never look alike (both have no visible bar)."""

LABEL_WIDTH = 30
"""A row label's characters per line before it wraps (after ``+``, ``:``, ``/`` or a space)."""
ROW_INCHES, LINE_INCHES, PANEL_INCHES, CHAR_INCHES = 0.3, 0.16, 4.2, 0.075
"""A row of bars' height, what each wrapped label line beyond the first adds to it, a panel's
width, and a character's width at the labels' size (to size the label column and legend)."""
NOTE_SIZE, NOTE_CHAR_INCHES = "x-small", 0.055
"""The font size of the success panel's notes (what success means in each env) and a
character's width at that size (to size the panel)."""
HATCHES = ("//", "..", "xx", "\\\\", "oo", "++", "--", "**")
"""The partners' hatches, in order of first appearance (cycling past eight partners)."""


def figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The :data:`PANELS` as matplotlib figures (file name -> ``Figure``; ``{}`` without
    matplotlib or without a setting that has episodes): per setting, a bar with its 95%
    interval (already clipped to the metric's range by :func:`summarise`) under a bold row
    naming its env; coloured by the agent, hatched by its cross-play partner; one legend
    below the panels, naming the agents and partners the figure draws a bar of (none where
    every bar is 0 or undefined), :func:`caption` above them; a mean of 0 gets a marker and
    the label ``0``, an undefined one ``n/a``; the success panel notes on each env's row what
    success means there."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
        from matplotlib.ticker import PercentFormatter
    except ImportError:
        return {}
    from teamgym.benchmarks.intervals import RANGES

    shown = [r for r in rows if r["episodes"]]
    if not shown:
        return {}
    ys, ticks = _layout(shown)
    pairs = [_agent_and_partner(r) for r in shown]
    agents = list(dict.fromkeys(a for a, _ in pairs))
    partners = list(dict.fromkeys(p for _, p in pairs if p is not None))
    colour = dict(zip(agents, colours(len(agents)), strict=True))
    hatch = {p: HATCHES[i % len(HATCHES)] for i, p in enumerate(partners)}
    styles = [(colour[a], hatch[p] if p else "") for a, p in pairs]
    criteria = _criteria(shown, ys, ticks)
    lines = max(text.count("\n") + 1 for text, _ in ticks.values())
    longest = max(len(line) for text, _ in ticks.values() for line in text.split("\n"))
    out = {}
    for name, panels in PANELS.items():
        drawn = [pairs[i] for i in range(len(shown)) if _drawn(shown[i], panels)]
        seen = {a for a, _ in drawn}, {p for _, p in drawn}
        legend = [Patch(facecolor=colour[a], label=_wrap(a)) for a in agents if a in seen[0]]
        legend += [
            Patch(facecolor="white", edgecolor="0.2", hatch=hatch[p], label=_wrap(f"with {p}"))
            for p in partners
            if p in seen[1]
        ]
        shown_agents = sum(a in seen[0] for a in agents)
        with_partners = any(p in seen[1] for p in partners)
        title = "agent" if not with_partners else "colour: agent; hatch: its cross-play partner"
        panel_inches = [_panel_inches(p, criteria) for p in panels]
        width = 0.4 + CHAR_INCHES * longest + sum(panel_inches)
        handles, ncols, legend_lines = _legend_grid(legend, shown_agents, width)
        rows_inches = (ROW_INCHES + LINE_INCHES * (lines - 1)) * len(ticks)
        fig, axes = plt.subplots(
            1,
            len(panels),
            figsize=(width, rows_inches + 1.7 + 0.22 * legend_lines),
            sharey=True,
            squeeze=False,
            layout="constrained",
            width_ratios=panel_inches,
        )
        for ax, panel in zip(axes[0], panels, strict=True):
            stats = [r[panel.metric] for r in shown]
            _bars(ax, ys, stats, styles)
            _limits(ax, stats, *RANGES.get(panel.metric, (None, None)))
            if panel.metric == "success":
                ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
                _say_what_success_means(ax, criteria)
            ax.set_title(panel.title)
            ax.set_xlabel(panel.unit)
            ax.grid(axis="x", alpha=0.3)
            for y, (_, header) in ticks.items():
                if header and y:
                    ax.axhline(y - 0.5, color="0.75", linewidth=0.8)  # between two envs
        first = axes[0][0]
        first.set_yticks(list(ticks), [text for text, _ in ticks.values()])
        for label, (_, header) in zip(first.get_yticklabels(), ticks.values(), strict=True):
            label.set_fontweight("bold" if header else "normal")
        first.set_ylim(len(ticks) - 0.3, -0.7)  # top to bottom, as the table reads
        if handles:  # nothing coloured is drawn when every bar is 0 or undefined
            fig.legend(
                handles=handles,
                title=title,
                loc="outside lower center",
                ncols=ncols,
                frameon=False,
            )
        fig.suptitle(_fit(caption(shown, panels), int(width / CHAR_INCHES)), fontsize="medium")
        out[name] = fig
    return out


def caption(rows: Sequence[Mapping[str, Any]], panels: Sequence[Panel]) -> str:
    """What the bars and error bars of ``panels`` are, and over how many episodes: the
    intervals :func:`summarise` gave the rows (named by :func:`interval_name`)."""
    from teamgym.benchmarks.intervals import interval_name

    wilson = interval_name("success")
    parts = []
    for kind in dict.fromkeys(interval_name(p.metric) for p in panels):
        same = [p for p in panels if interval_name(p.metric) == kind]
        which = "" if len(same) == len(panels) else f" ({', '.join(p.title for p in same)})"
        bars = "share of episodes that succeeded" if kind == wilson else "mean over episodes"
        clipped = "" if kind == wilson else " (clipped to the metric's range)"
        counts = sorted({r[p.metric]["n"] for r in rows for p in same} - {0})
        if not counts:
            over = "no episode (undefined everywhere)"
        elif len(counts) == 1:
            over = f"n = {counts[0]} episode{'' if counts[0] == 1 else 's'} per bar"
        else:
            over = f"n = {counts[0]}-{counts[-1]} episodes per bar (where the metric is defined)"
        parts.append(f"bars{which}: {bars}; error bars: {kind}{clipped} over {over}")
    return "; ".join(parts)


def colours(n: int) -> list[Any]:
    """``n`` distinct colours: tab10's first (up to 10 agents look as they always did), then
    tab20's lighter ones; past 20, ``n`` hues spread over ``turbo``."""
    import matplotlib

    if n > 20:
        turbo = matplotlib.colormaps["turbo"]
        return [turbo(0.05 + 0.9 * i / (n - 1)) for i in range(n)]
    tab20 = matplotlib.colormaps["tab20"]
    order = [*range(0, 20, 2), *range(1, 20, 2)]  # tab20's even colours are tab10's
    return [tab20(order[i]) for i in range(n)]


def _legend_grid(legend: Sequence[Any], agents: int, width: float) -> tuple[list[Any], int, int]:
    """The legend's handles in their order, its columns and its lines of text, to fit
    ``width`` inches: as many columns as fit; with partners (the handles after the first
    ``agents``) and room for them, the agents on the first row and the partners below."""
    from matplotlib.patches import Patch

    if not legend:
        return [], 1, 0
    entry = max(len(line) for h in legend for line in h.get_label().split("\n"))
    ncols = max(1, min(len(legend), int(width // (0.6 + CHAR_INCHES * entry))))
    handles = list(legend)
    top, bottom = legend[:agents], legend[agents:]
    if bottom and max(len(top), len(bottom)) <= ncols:
        ncols = max(len(top), len(bottom))
        blank = Patch(visible=False, label="")
        top, bottom = ([*r, *[blank] * (ncols - len(r))] for r in (top, bottom))
        handles = [h for pair in zip(top, bottom, strict=True) for h in pair]  # column-major
    lines = max(h.get_label().count("\n") + 1 for h in legend)
    return handles, ncols, -(-len(handles) // ncols) * lines


def _drawn(row: Mapping[str, Any], panels: Sequence[Panel]) -> bool:
    """Whether a panel of ``panels`` draws a bar for ``row``: a mean neither 0 nor undefined
    (those get a black marker or a label, never the agent's colour or its partner's hatch)."""
    means = (row[p.metric]["mean"] for p in panels)
    return any(m is not None and not math.isnan(m) and m != 0 for m in means)


def _criteria(
    rows: Sequence[Mapping[str, Any]], ys: Sequence[int], ticks: Mapping[int, tuple[str, bool]]
) -> dict[int, str]:
    """The success panel's note on each env's row, y -> ``success: CRITERION``, the env's
    :func:`~teamgym.envs.describe.success_criteria` (an env stating none gets no note):
    a rate of 0 beside a fair score (Hanabi's expert: 0% success, 17 of 25 points) reads
    right only beside what success means there (a perfect 25)."""
    from teamgym.envs.describe import UNSTATED, success_criteria

    stated = success_criteria(r["env_id"] for r in rows)
    env_at = {y: r["env_id"] for r, y in zip(rows, ys, strict=True)}
    out, header = {}, None
    for y, (_, names_an_env) in ticks.items():
        if names_an_env:
            header = y
        elif header is not None and header not in out and stated[env_at[y]] != UNSTATED:
            out[header] = f"success: {stated[env_at[y]]}"
    return out


def _panel_inches(panel: Panel, criteria: Mapping[int, str]) -> float:
    """A panel's width: :data:`PANEL_INCHES`, or wider where the success panel's longest
    note (:func:`_criteria`) needs it."""
    if panel.metric != "success" or not criteria:
        return PANEL_INCHES
    longest = max(len(text) for text in criteria.values())
    return max(PANEL_INCHES, 0.5 + NOTE_CHAR_INCHES * longest)


def _say_what_success_means(ax: Any, criteria: Mapping[int, str]) -> None:
    """Write each env's note (:func:`_criteria`) on its row of the success panel, from the
    panel's left edge (an env's row has no bar)."""
    for y, text in criteria.items():
        ax.annotate(
            text,
            (0.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=NOTE_SIZE,
            color="0.3",
            fontstyle="italic",
            gid="criterion",
        )


def _agent_and_partner(row: Mapping[str, Any]) -> tuple[str, str | None]:
    """The agent under test and its cross-play partner (None without one): a cross-play row's
    label is ``AGENT+SEATS=PARTNER`` (:attr:`Setting.label`), its partner and seats are in the
    row; any other label is an agent of its own."""
    label, partner = row["agent"], row.get("partner")
    suffix = f"+{','.join(row.get('partner_seats', ()))}={partner}"
    if partner is None or not label.endswith(suffix):
        return label, None
    return label.removesuffix(suffix), partner


def _layout(rows: Sequence[Mapping[str, Any]]) -> tuple[list[int], dict[int, tuple[str, bool]]]:
    """Each row's y (top to bottom) and the tick labels, y -> (text, names an env): the
    settings of an env, each labelled by its agent, follow a bold row naming the env."""
    by_env: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        args = ",".join(f"{k}={v}" for k, v in sorted(r["kwargs"].items()))
        by_env.setdefault(f"{r['env_id']}[{args}]" if args else r["env_id"], []).append(i)
    ys = [0] * len(rows)
    ticks: dict[int, tuple[str, bool]] = {}
    for env, members in by_env.items():
        ticks[len(ticks)] = (_wrap(env), True)
        for i in members:
            ys[i] = len(ticks)
            ticks[ys[i]] = (_wrap(rows[i]["agent"]), False)
    return ys, ticks


def _wrap(text: str, width: int = LABEL_WIDTH, pieces: str = r"[^+ :/]+[+ :/]*|[+ :/]+") -> str:
    """``text`` on lines of at most ``width`` characters, broken between ``pieces`` (by
    default after a ``+``, ``:``, ``/`` or a space); a longer piece stays whole."""
    lines: list[str] = []
    for piece in re.findall(pieces, text):
        if lines and len(lines[-1]) + len(piece.rstrip()) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return "\n".join(line.rstrip() for line in lines)


def _fit(text: str, width: int) -> str:
    """``text`` on lines of at most ``width`` characters: broken after its clauses (``;``),
    and a clause longer than a line between its words."""
    lines = _wrap(text, width, r"[^;]+(?:; *)?").split("\n")
    return "\n".join(_wrap(line, width, r"[^ ]+ *") for line in lines)


def _limits(ax: Any, stats: Sequence[Mapping[str, Any]], least: Any, greatest: Any) -> None:
    """The x range: the metric's whole range where it is bounded, else from 0 (or below, for
    negative values) to the greatest mean or interval end; 0 to 1 when everything is 0."""
    values = [v for s in stats for v in (s["mean"], s["lo"], s["hi"]) if v is not None]
    low = least if least is not None else min([0.0, *values])
    high = greatest if greatest is not None else max([0.0, *values])
    if high <= low:
        high = low + 1.0
    pad = 0.02 * (high - low)
    ax.set_xlim(low - pad, high + pad)


def _bars(
    ax: Any, ys: Sequence[int], stats: Sequence[Mapping[str, Any]], styles: Sequence[Any]
) -> None:
    """One horizontal bar per stat, (colour, hatch) from ``styles``, with its interval; zeros
    and undefined means labelled."""
    means = [math.nan if s["mean"] is None else s["mean"] for s in stats]
    errs = [  # the interval's distance below and above the mean (none without an interval)
        [_gap(s["mean"], s["lo"]) for s in stats],
        [_gap(s["hi"], s["mean"]) for s in stats],
    ]
    bars = ax.barh(
        ys,
        means,
        xerr=errs,
        color=[c for c, _ in styles],
        edgecolor="0.2",  # the hatches' colour (matplotlib < 3.10 has no hatchcolor)
        linewidth=0,
        capsize=2,
        error_kw={"elinewidth": 1, "ecolor": "black"},
    )
    for bar, (_, hatch) in zip(bars, styles, strict=True):
        bar.set_hatch(hatch)
    zeros = [y for y, m in zip(ys, means, strict=True) if m == 0]
    if zeros:
        ax.plot([0.0] * len(zeros), zeros, "|", color="black", markersize=12, gid="zeros")
    for y, m in zip(ys, means, strict=True):
        if m == 0 or math.isnan(m):
            ax.annotate(  # a zero's label sits above its interval's line, not on it
                ZERO_LABEL if m == 0 else UNDEFINED_LABEL,
                (0.0, y),
                xytext=(4, 1 if m == 0 else 0),
                textcoords="offset points",
                va="bottom" if m == 0 else "center",
                fontsize="small",
                color="black" if m == 0 else "grey",
                fontstyle="normal" if m == 0 else "italic",
            )


def _gap(upper: float | None, lower: float | None) -> float:
    """``upper - lower``, never negative (rounding); 0 where either is missing."""
    return 0.0 if upper is None or lower is None else max(0.0, upper - lower)


def write_plots(run_dir: Path, rows: list[dict[str, Any]]) -> list[str]:
    """Write :func:`figures` into ``run_dir``, cropped to what they draw (the legend and the
    caption included); the names written."""
    made = figures(rows)
    if not made:
        return []
    import matplotlib.pyplot as plt

    written = []
    for name, fig in made.items():
        fig.savefig(run_dir / name, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(name)
    return written
