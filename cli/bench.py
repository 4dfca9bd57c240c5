"""``teamgym bench run|report|compare|crossplay|perf``: reproducible, resumable benchmark runs.

``bench run SUITE`` plays a suite (shipped name or YAML path) into ``--out RUN_DIR`` and
prints the results table; the same command after a kill resumes. ``bench report RUN_DIR``
rewrites ``summary.json``, ``report.md`` and the plots; ``bench compare A B`` says whether two
runs reproduced each other, episode by episode (exit 1 when not), and with ``--paired`` whether
agent A beats agent B on the same seeds; ``bench crossplay`` plays every pairing of a set of
agents (:mod:`teamgym.benchmarks.crossplay`); ``bench perf`` times the envs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamgym.benchmarks.results import CorruptRunError
from teamgym.cli import bench_compare, bench_crossplay, perf
from teamgym.cli.common import (
    CommandError,
    bad_input,
    non_negative_int,
    positive_int,
)
from teamgym.cli.playing import (
    EXIT_ERRORED,
    RUN_EPILOG,
    add_play_options,
    play_suite,
    print_report,
)

__all__ = ["EXIT_ERRORED", "NAME", "add_parser", "run"]

NAME = "bench"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``bench`` and its subcommands."""
    p = sub.add_parser(NAME, help="benchmark runs: run a suite, report, compare, cross-play, perf")
    inner = p.add_subparsers(dest="bench_command", required=True, metavar="SUBCOMMAND")
    _add_run(inner).set_defaults(run=_run)
    r = inner.add_parser("report", help="rewrite summary.json, report.md and plots of a run")
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.set_defaults(run=_report)
    f = inner.add_parser(
        "repair",
        help="set aside the lines of a run's results that are not episode records",
        description="Move every line of RUN_DIR/results.jsonl that is not an episode record "
        "(an edit, another writer) into results.rejected.jsonl, nothing lost; the next "
        "`bench run` into RUN_DIR plays those episodes again.",
    )
    f.add_argument("run_dir", metavar="RUN_DIR")
    f.set_defaults(run=_repair)
    bench_compare.add_parser(inner)
    bench_crossplay.add_parser(inner)
    perf.add_parser(inner).set_defaults(run=perf.run)
    return p


def _add_run(inner: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from teamgym.benchmarks.suites import shipped_suites

    p = inner.add_parser(
        "run",
        help="play a suite; write results.jsonl, summary.json, report.md and plots",
        description="Play a suite into RUN_DIR and print the results table; the same command "
        "after a kill resumes.",
        epilog=RUN_EPILOG,
    )
    p.add_argument(
        "suite",
        metavar="SUITE",
        help=f"a shipped suite ({', '.join(sorted(shipped_suites()))}) or a YAML file",
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default: runs/SUITE)")
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="SPEC",
        help="replace the suite's agents (repeatable): random, expert, baselines, "
        "checkpoint:DIR, transformers:DIR, openai:MODEL@BASE_URL, or a YAML mapping such as "
        "'{kind: openai, model: M, base_url: URL, max_tokens: 64}'",
    )
    p.add_argument("--env", action="append", default=[], help="only these env ids of the suite")
    p.add_argument(
        "--episodes", type=positive_int, help="episodes per setting (replaces the suite's)"
    )
    p.add_argument(
        "--seed", type=non_negative_int, help="first episode seed (replaces the suite's)"
    )
    add_play_options(p)
    return p


def _run(args: argparse.Namespace, console: Console) -> int:
    """Load and check the suite and its agents, play what is missing, then report."""
    from teamgym.benchmarks.runner import check_agents
    from teamgym.benchmarks.suites import SuiteError, load_suite

    with bad_input(SuiteError, ValueError):
        suite = load_suite(
            args.suite,
            agents=args.agent or None,
            envs=args.env or None,
            episodes=args.episodes,
            seed=args.seed,
        )
        check_agents(suite)
    return play_suite(suite, args, console)


def _repair(args: argparse.Namespace, console: Console) -> int:
    """Set the bad lines of a run's results aside, holding the run's lock."""
    from teamgym.benchmarks.results import JsonLines
    from teamgym.benchmarks.runner import RESULTS, RunDirError, locked

    run_dir = Path(args.run_dir)
    if not (run_dir / RESULTS).is_file():
        raise CommandError(f"{run_dir} holds no {RESULTS}: not a run directory")
    results = JsonLines(run_dir / RESULTS)
    with bad_input(RunDirError), locked(run_dir):
        moved = results.set_aside()
    if moved:
        console.print(
            f"set {moved} line(s) aside in {results.rejected}; `teamgym bench run` into "
            f"{run_dir} plays those episodes again",
            markup=False,
        )
    else:
        console.print(f"{results.path}: every line is an episode record", markup=False)
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
    with bad_input(FileNotFoundError, CorruptRunError):
        print_report(Path(args.run_dir), console)
    return 0


def run(args: argparse.Namespace, console: Console) -> int:
    """Dispatched to the subcommand's ``run``."""
    return int(args.run(args, console))
