"""``teamgym bench compare RUN_A RUN_B``: did two runs reproduce each other, episode by episode
(exit 1 when not)? With ``--paired``: is agent A better than agent B on the same seeds?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from teamgym.benchmarks.results import CorruptRunError
from teamgym.cli.common import CommandError, bad_input

__all__ = ["add_parser"]


def add_parser(inner: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``bench compare``."""
    c = inner.add_parser(
        "compare",
        help="did two runs reproduce each other? (--paired: is agent A better than B?)",
        description="Match two runs' episodes by key: did they reproduce each other? With "
        "--paired, match agent A's episodes of RUN_A with agent B's of RUN_B by env, arguments "
        "and seed, and test A against B per setting (McNemar's exact test on success, "
        "Wilcoxon's signed-rank test on score, 95% intervals of both differences). "
        "To compare two agents of one run, pass it as both RUN_A and RUN_B.",
        epilog="exit status: without --paired, 0 when reproduced, 1 when not; with --paired, "
        "0 when the comparison was printed; 2 for bad input (no shared episode, an agent to pick)",
    )
    c.add_argument("run_a", metavar="RUN_A")
    c.add_argument("run_b", metavar="RUN_B")
    c.add_argument("--show", type=int, default=10, help="differing episodes to list")
    c.add_argument(
        "--paired", action="store_true", help="test agent A against agent B on the same seeds"
    )
    c.add_argument("--agent-a", metavar="LABEL", help="with --paired: RUN_A's agent, if several")
    c.add_argument("--agent-b", metavar="LABEL", help="with --paired: RUN_B's agent, if several")
    c.add_argument("--json", metavar="FILE", help="with --paired: also write the results here")
    c.set_defaults(run=_compare)
    return c


def _compare(args: argparse.Namespace, console: Console) -> int:
    from teamgym.benchmarks.report import episodes
    from teamgym.benchmarks.reproduce import compare_runs

    if args.paired:
        return _compare_paired(args, console)
    given = [f for f in ("agent_a", "agent_b", "json") if getattr(args, f) is not None]
    if given:
        flags = ", ".join("--" + f.replace("_", "-") for f in given)
        raise CommandError(f"{flags} need --paired")
    with bad_input(FileNotFoundError, CorruptRunError):
        cmp = compare_runs(args.run_a, args.run_b)
    console.print(
        f"{episodes(len(cmp.same))} identical, {len(cmp.different)} differ, "
        f"{len(cmp.only_a)} only in {args.run_a}, {len(cmp.only_b)} only in {args.run_b}",
        markup=False,
    )
    if cmp.versions[0] != cmp.versions[1]:
        console.print(
            f"package versions differ: {sorted(cmp.versions[0])} vs {sorted(cmp.versions[1])}",
            markup=False,
        )
    for key, what in cmp.different[: args.show]:
        console.print(f"  differs: {key} ({what})", markup=False)
    for name, keys in ((args.run_a, cmp.only_a), (args.run_b, cmp.only_b)):
        for key in keys[: args.show]:
            console.print(f"  only in {name}: {key}", markup=False)
    if not (cmp.same or cmp.different):
        raise CommandError(
            "the runs share no episode: are they runs of the same suite? "
            "(to compare two agents on the same seeds: --paired)"
        )
    verdict = "[green]reproduced[/green]" if cmp.reproduced else "[red]not reproduced[/red]"
    console.print(verdict)
    return 0 if cmp.reproduced else 1


def _compare_paired(args: argparse.Namespace, console: Console) -> int:
    """``compare --paired``: agent A against agent B on the seeds both played, per setting."""
    import dataclasses
    import json

    from teamgym.benchmarks.paired import PairingError, paired_compare
    from teamgym.benchmarks.report import episodes

    with bad_input(FileNotFoundError, CorruptRunError, PairingError):
        cmp = paired_compare(args.run_a, args.run_b, args.agent_a, args.agent_b)
    pairs = sum(g.pairs for g in cmp.groups)
    errored = sum(g.errored for g in cmp.groups)
    console.print(
        f"A = {cmp.agent_a} ({args.run_a}), B = {cmp.agent_b} ({args.run_b}): {pairs} pairs"
        f" on the same env, arguments and seed; {errored} left out (an episode errored); "
        f"{episodes(cmp.only_a)} only in A, {cmp.only_b} only in B",
        markup=False,
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    columns = ["env", "args", "pairs", "success A", "success B", "A-B (95% CI)", "McNemar p"]
    columns += ["score A", "score B", "A-B (95% CI)", "Wilcoxon p"]
    for col in columns:
        table.add_column(escape(col), justify="left" if col in ("env", "args") else "right")
    for row in _paired_rows(cmp.groups):
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    console.print(
        "success: McNemar's exact test on the pairs only one agent won, Newcombe's interval; "
        "score: Wilcoxon's signed-rank test, Student-t interval of the mean difference",
        markup=False,
    )
    if args.json:
        out = {
            "run_a": str(args.run_a),
            "run_b": str(args.run_b),
            **dataclasses.asdict(cmp),
        }
        with bad_input(OSError):
            Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return 0


def _paired_rows(groups: list[Any]) -> list[list[str]]:
    """The cells of ``compare --paired``'s table, one row per setting."""

    def num(x: float | None, fmt: str = ".3f") -> str:
        return "-" if x is None else format(x, fmt)

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    rows = []
    for g in groups:
        args = ",".join(f"{k}={v}" for k, v in sorted({**g.kwargs, **g.teammates}.items()))
        lo, hi = g.success_diff_ci
        success_diff = "-"
        if g.success_diff is not None:
            success_diff = f"{100 * g.success_diff:+.0f} pts ({100 * lo:+.0f} to {100 * hi:+.0f})"
        slo, shi = g.score_diff_ci
        score_diff = num(g.score_diff, "+.3f")
        if slo is not None and shi is not None:
            score_diff += f" ({slo:+.3f} to {shi:+.3f})"
        pairs = str(g.pairs) + (f" (+{g.errored} errored)" if g.errored else "")
        rows.append(
            [
                g.env_id,
                args,
                pairs,
                pct(g.success_a),
                pct(g.success_b),
                success_diff,
                num(g.mcnemar_p, ".3g"),
                num(g.score_a),
                num(g.score_b),
                score_diff,
                num(g.wilcoxon_p, ".3g"),
            ]
        )
    return rows
