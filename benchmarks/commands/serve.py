"""``teamgym serve``: placeholder while it is written (owned by a helper this session)."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands.common import CommandError

NAME = "serve"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command."""
    return sub.add_parser(NAME, help="(not written yet)")


def run(args: argparse.Namespace, console: Console) -> int:
    """Not written yet."""
    raise CommandError("not written yet")
