"""``teamgym bench run|report|compare|perf``: reproducible benchmark runs (being written)."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands import perf

NAME = "bench"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``bench`` and its subcommands."""
    p = sub.add_parser(NAME, help="benchmark runs: run a suite, report, compare, perf")
    inner = p.add_subparsers(dest="bench_command", required=True)
    perf.add_parser(inner).set_defaults(run=perf.run)
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Dispatched to the subcommand's ``run``."""
    return int(args.run(args, console))
