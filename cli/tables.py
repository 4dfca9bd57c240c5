"""Every table the commands print (rich), and the console they print to."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = [
    "console",
    "env_args_table",
    "envs_table",
    "learn_table",
    "perf_comparison_tables",
    "print_summary",
    "success_table",
    "throughput_table",
]


def console(stderr: bool = False) -> Console:
    """A console on stdout (``stderr``: on stderr) at the terminal's width on a terminal; 150
    columns in a pipe or file, so logs keep rows whole."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 150, emoji=False)


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def _table(title: str | None, columns: Iterable[str], left: Iterable[str]) -> Table:
    """A table whose ``columns`` are right-aligned except those in ``left``."""
    table = Table(title=title)
    left = set(left)
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right")
    return table


def envs_table(registry: Mapping[str, str]) -> Table:
    """Registered env ids, their descriptions and their scripted baselines."""
    from teamgym.envs import spec

    table = Table(title="teamgym environments (`teamgym envs ID` lists an env's arguments)")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("description")
    table.add_column("baselines")
    for env_id, description in registry.items():
        table.add_row(env_id, description, ", ".join(["random", *spec(env_id).baselines]))
    return table


def env_args_table(env_id: str) -> Table:
    """The constructor arguments of one env (:func:`teamgym.envs.describe.env_arguments`): name,
    effective default, type, meaning, and the value each difficulty preset gives."""
    from teamgym.envs.describe import env_arguments

    arguments = env_arguments(env_id)
    difficulties = list(dict.fromkeys(d for a in arguments for d in a.presets))
    columns = ("argument", "default", "type", "meaning", *difficulties)
    table = _table(f"{env_id} arguments", columns, left=columns)
    for a in arguments:
        presets = [escape(a.presets.get(d, "")) for d in difficulties]
        table.add_row(a.name, escape(a.default), escape(a.type), escape(a.meaning), *presets)
    return table


def success_table(criteria: Mapping[str, str]) -> Table:
    """What success means in each env of a run (env id -> its one-line criterion, from
    :func:`teamgym.benchmarks.report.success_criteria`), printed under the results table."""
    table = Table(
        title="success: the env's criterion below; score: its graded result in [0, 1]",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("env", no_wrap=True)
    table.add_column("success means")
    for env_id, text in criteria.items():
        table.add_row(escape(env_id), escape(text))
    return table


def print_summary(console: Console, rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """Summary rows (``teamgym.benchmarks.report.summarise``'s) as ``bench run`` prints them,
    with what success means in each env under them; ``teamgym baselines`` prints the same."""
    from teamgym.benchmarks.report import ACTIONS_NOTE, columns_and_rows
    from teamgym.envs.describe import success_criteria

    table = Table(title=escape(title), box=box.SIMPLE_HEAD, pad_edge=False)
    columns, cells = columns_and_rows(rows)
    if "actions" in columns:
        table.caption = escape(ACTIONS_NOTE)
        table.caption_justify = "left"
    for col in columns:
        left = col in ("env", "args", "agent", "fingerprint")
        table.add_column(col, justify="left" if left else "right", no_wrap=col != "args")
    for row in cells:
        table.add_row(*map(escape, row))
    if not console.is_terminal:  # a log or a pipe: whole rows, however wide
        wide = console.options.update(max_width=1000)
        console.width = max(console.width, console.measure(table, options=wide).maximum)
    console.print(table)
    console.print(success_table(success_criteria(r["env_id"] for r in rows)))


THROUGHPUT_COLUMNS = (
    "worker",
    "server",
    "episodes",
    "agents",
    "turns",
    "rows",
    "seconds",
    "rows/s",
    "episodes/s",
    "tokens/s",
    "wall / (turns x latency)",
    "CPU ms / agent-turn",
)


def throughput_table(results: Iterable[Any]) -> Table:
    """One row per VERL-adapter ``ThroughputResult``."""
    title = "VERL adapter throughput (real AgentLoopWorker, CPU)"
    table = _table(title, THROUGHPUT_COLUMNS, left=("server",))
    for r in results:
        ratio = (
            f"{r.concurrency_ratio:.2f} (serial: {r.num_agents * r.episodes})"
            if r.concurrency_ratio
            else "-"
        )
        table.add_row(
            ("verl's" if getattr(r, "stock", False) else "teamgym's")
            + (f" x{r.workers}" if getattr(r, "workers", 1) > 1 else ""),
            r.server,
            str(r.episodes),
            str(r.num_agents),
            str(r.turns),
            str(r.rows),
            f"{r.seconds:.2f}",
            f"{r.rows_per_s:.1f}",
            f"{r.episodes_per_s:.2f}",
            f"{r.tokens_per_s:.0f}",
            ratio,
            f"{r.cpu_ms_per_agent_turn:.2f}",
        )
    return table


def learn_table(summary: Mapping[str, Any]) -> Table:
    """Held-out success after the warm-up and at every evaluation of a learning stage."""
    table = _table(None, ("step", "held-out success"), left=())
    table.add_row("warm-up", f"{summary['warmup_success']:.2f}")
    for step, success in summary["evals"]:
        table.add_row(str(step), f"{success:.2f}")
    return table


#: ``bench perf --compare``, per report section: its title, the labels of its key fields and
#: what a ratio new/old above 1 means.
PERF_SECTIONS = {
    "speed": ("Speed", ("env", "agents", "mode"), "slower"),
    "references": ("References", ("package", "agents"), "slower"),
    "ratios": ("Our us/step over the reference's", ("env", "reference", "agents"), "slower"),
    "tokens": ("Tokens per text observation", ("env", "agents"), "more tokens"),
    "verl": ("VERL adapter", ("episodes", "agents", "latency s"), "slower"),
}
#: Each compared figure's label and the format of its values.
PERF_FIGURES = {
    "us_per_agent_step": ("us/step", "{:.1f}"),
    "us_per_reset": ("us/reset", "{:.0f}"),
    "obs_share": ("obs share", "{:.0%}"),
    "text": ("text", "{:.2f}x"),
    "vector": ("vector", "{:.2f}x"),
    "mean": ("mean", "{:.0f}"),
    "max": ("max", "{:.0f}"),
    "first": ("first step", "{:.0f}"),
    "last": ("last step", "{:.0f}"),
    "instructions": ("prompt", "{:.0f}"),
    "seconds": ("wall s", "{:.2f}"),
    "overhead_per_turn_ms": ("overhead ms / turn", "{:.0f}"),
    "ratio": ("wall / latency", "{:.2f}"),
}


def perf_comparison_tables(changes: Iterable[Any], old_name: str, new_name: str) -> list[Table]:
    """``bench perf --compare``: a table per report section of ``FigureChange``s, a row per
    figure with its old and new values and new/old ("new" or "gone" when one report lacks it)."""
    sections: dict[str, list[Any]] = {}
    for change in changes:
        sections.setdefault(change.section, []).append(change)
    return [
        _perf_comparison(section, rows, f"{new_name} vs {old_name}")
        for section, rows in sections.items()
    ]


def _perf_comparison(section: str, changes: Iterable[Any], versus: str) -> Table:
    title, keys, above_one = PERF_SECTIONS[section]
    columns = (*keys, "figure", "old", "new", f"new/old (>1 {above_one})")
    left = ("env", "mode", "package", "reference", "figure")  # words; the rest are numbers
    table = _table(f"{title}: {escape(versus)}", columns, left)
    if section == "speed":
        table.caption = "obs share: above 1, a larger share of the time builds observations"
    for c in changes:
        label, fmt = PERF_FIGURES[c.figure]
        shown = "new" if c.old is None else "gone" if c.new is None else _fmt_ratio(c.ratio)
        old, new = (_fmt_as(v, fmt) for v in (c.old, c.new))
        table.add_row(*(escape(str(k)) for k in c.key), label, old, new, shown)
    return table


def _fmt_as(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"
