"""``teamgym bench perf`` (alias ``teamgym perf``): env speed next to lbforaging and MPE, the
share spent building observations, tokens per observation, optionally the VERL adapter's
overhead; tables on the terminal, everything in a JSON file. How each figure is measured:
:mod:`teamgym.benchmarks.perf`. ``--compare OLD.json`` then prints each figure's ratio new/old
to a saved report; with ``--against NEW.json`` it compares two saved reports and measures nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from teamgym.benchmarks.perf import FLAT, PerfArgs, PerfReport, VerlOverhead
from teamgym.benchmarks.perf.compare import compare_reports, load_report, setting_differences
from teamgym.cli.common import CommandError, check_env
from teamgym.cli.dataclass_args import (
    Custom,
    add_dataclass_args,
    dataclass_from_args,
)
from teamgym.cli.tables import perf_comparison_tables

NAME = "perf"


def _add_agents(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agents", type=int, nargs="+", default=[2, 4, 8], help="team sizes an env is timed at"
    )


CUSTOM = {"agents": Custom(_add_agents, lambda args: tuple(args.agents))}


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command: one flag per ``PerfArgs`` field."""
    p = sub.add_parser(
        NAME,
        help="env speed next to lbforaging and MPE, observation cost and tokens",
        description="Env speed next to lbforaging and MPE, observation cost and tokens. "
        "Compare runs: 'perf --compare OLD.json' measures, then prints each figure's ratio "
        "new/old to the saved report; 'perf --compare OLD.json --against NEW.json' compares "
        "two saved reports without measuring anything.",
    )
    add_dataclass_args(p, PerfArgs, CUSTOM)
    p.add_argument(
        "--compare",
        metavar="OLD.json",
        help="after the run, print each figure's ratio new/old to this saved report (an earlier "
        "--out; read before the run, so it may be the --out file), matched by env, team size "
        "and observation mode; figures in one report only are listed as new or gone",
    )
    p.add_argument(
        "--against",
        metavar="NEW.json",
        help="with --compare: compare this saved report with OLD.json instead of running "
        "(nothing is measured or written)",
    )
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Check the inputs (env ids, the reports to compare), measure, print the tables, write the
    JSON, then the comparison; with ``--against``, only compare two saved reports."""
    from teamgym.benchmarks.perf import run as measure_all

    settings: PerfArgs = dataclass_from_args(PerfArgs, args, CUSTOM)
    old = _load(args.compare, "--compare") if args.compare else None
    if args.against:
        return _compare_saved(args, settings, old, console)
    for env_id in settings.env:  # unknown ids fail here; team sizes an env cannot take are skipped
        check_env(env_id, {})
    with console.status("measuring") as status:
        report = measure_all(settings, lambda what: status.update(f"measuring {what}"))
    for table in tables(report):
        console.print(table)
    out = Path(settings.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(
            f"cannot create {out.parent} ({exc.strerror}); pass another --out"
        ) from None
    out.write_text(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    console.print(f"wrote {out.resolve()}")
    if old is not None:
        print_comparison(old, dataclasses.asdict(report), args.compare, "this run", console)
    return 0


# ------------------------------------------------------------------ comparison
def _load(path: str, flag: str) -> dict[str, Any]:
    """The saved report ``flag`` names; bad input (one ``error:`` line) when it is not one."""
    try:
        return load_report(path)
    except ValueError as exc:
        raise CommandError(f"{flag}: {exc}") from None


def _compare_saved(
    args: argparse.Namespace, settings: PerfArgs, old: dict[str, Any] | None, console: Console
) -> int:
    """``--compare OLD --against NEW``: refuse measurement flags (nothing is measured), compare."""
    if old is None:
        raise CommandError("--against NEW.json needs --compare OLD.json")
    default = PerfArgs()
    flags = [
        "--" + f.name.replace("_", "-")
        for f in dataclasses.fields(PerfArgs)
        if getattr(settings, f.name) != getattr(default, f.name)
    ]
    if flags:
        raise CommandError(
            f"--against compares two saved reports and measures nothing: drop {', '.join(flags)}"
        )
    new = _load(args.against, "--against")
    print_comparison(old, new, args.compare, args.against, console)
    return 0


def print_comparison(
    old: dict[str, Any], new: dict[str, Any], old_name: str, new_name: str, console: Console
) -> None:
    """The comparison tables, the settings that differ, and a count of what matched."""
    changes = compare_reports(old, new)
    for table in perf_comparison_tables(changes, old_name, new_name):
        console.print(table)
    differences = setting_differences(old, new)
    if differences:
        console.print(f"note: measured with other settings: {'; '.join(differences)}", markup=False)
    both = sum(c.old is not None and c.new is not None for c in changes)
    only_new = sum(c.old is None for c in changes)
    console.print(
        f"{both} figures in both reports, {only_new} new, {len(changes) - both - only_new} gone",
        markup=False,
    )


# ------------------------------------------------------------------ tables
def tables(report: PerfReport) -> list[Table]:
    """The report's tables: speed, then references, ratios, tokens, VERL and skipped (when any)."""
    out = [_speed(report)]
    out += [_references(report)] if report.references else []
    out += [_ratios(report)] if report.ratios else []
    out += [_tokens(report)] if report.tokens else []
    out += [_verl(report.verl)] if report.verl else []
    out += [_skipped(report)] if report.skipped else []
    return out


def _table(title: str, columns: Iterable[str], left: int = 1) -> Table:
    """A table whose first ``left`` columns are left-aligned, the others right-aligned."""
    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i < left else "right")
    return table


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _speed(report: PerfReport) -> Table:
    """One row per env and team size, text and vector side by side."""
    s = report.settings
    table = _table(
        f"Speed: best of {_count(s['repeats'], 'run')} of {s['agent_steps']} agent-steps "
        "(obs: share of step and reset time building observations)",
        (
            "env",
            "agents",
            "text us/step",
            "vector us/step",
            "text us/reset",
            "vector us/reset",
            "text obs",
            "vector obs",
        ),
    )
    rows = {(r.env_id, r.num_agents, r.obs_mode): r for r in report.speed}
    for env_id, n in dict.fromkeys((r.env_id, r.num_agents) for r in report.speed):
        modes = [rows.get((env_id, n, mode)) for mode in ("text", "vector")]
        table.add_row(
            env_id,
            str(n),
            *(_num(r.us_per_agent_step if r else None) for r in modes),
            *(_num(r.us_per_reset if r else None, "{:.0f}") for r in modes),
            *(_num(r.obs_share if r else None, "{:.0%}") for r in modes),
        )
    return table


def _references(report: PerfReport) -> Table:
    table = _table(
        "References, same run, random actions",
        ("package", "agents", "us/step", "us/reset"),
    )
    for r in report.references:
        table.add_row(
            r.env_id, str(r.num_agents), _num(r.us_per_agent_step), _num(r.us_per_reset, "{:.0f}")
        )
    return table


def _ratios(report: PerfReport) -> Table:
    table = _table(
        "Side by side: our us per agent-step over the reference's (below 1: faster)",
        ("env", "reference", "agents", "reference us", "text", "vector"),
        left=2,
    )
    for r in report.ratios:
        table.add_row(
            r.env_id,
            r.reference,
            str(r.num_agents),
            _num(r.reference_us),
            _num(r.text, "{:.2f}x"),
            _num(r.vector, "{:.2f}x"),
        )
    return table


def _tokens(report: PerfReport) -> Table:
    table = _table(
        f"Tokens per text observation ({report.tokenizer}; "
        f"{_count(report.settings['token_episodes'], 'episode')} each; "
        f"growth: fitted trend over an episode; flat: growth <= {FLAT:.0%})",
        ("env", "agents", "mean", "max", "first step", "last step", "growth", "flat", "prompt"),
    )
    for t in report.tokens:
        table.add_row(
            t.env_id,
            str(t.num_agents),
            _num(t.mean, "{:.0f}"),
            str(t.max),
            _num(t.first, "{:.0f}"),
            _num(t.last, "{:.0f}"),
            _num(t.growth, "{:+.0%}"),
            "yes" if t.flat else "no",
            _num(t.instructions, "{:.0f}"),
        )
    return table


def _verl(v: VerlOverhead) -> Table:
    table = _table(
        "VERL adapter over a scripted server's latency (signal-v0, CPU)",
        ("episodes", "agents", "turns", "latency ms", "wall s", "overhead ms / turn", "ratio"),
        left=0,
    )
    table.add_row(
        str(v.episodes),
        str(v.num_agents),
        str(v.turns),
        _num(v.latency_s * 1e3, "{:.0f}"),
        _num(v.seconds, "{:.2f}"),
        _num(v.overhead_per_turn_ms, "{:.0f}"),
        _num(v.ratio, "{:.2f}"),
    )
    return table


def _skipped(report: PerfReport) -> Table:
    table = _table("Skipped", ("measurement", "why"), left=2)
    for item in report.skipped:
        table.add_row(item.what, item.reason)
    return table
