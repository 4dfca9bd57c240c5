"""``teamgym envs``: list the registered environments."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands.tables import envs_table

NAME = "envs"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command (it takes no flags)."""
    return sub.add_parser(NAME, help="list the registered environments")


def run(args: argparse.Namespace, console: Console) -> int:
    """Print the registry as a table."""
    from teamgym.envs import registry

    console.print(envs_table(registry()))
    return 0
