"""``teamgym envs [ID]``: the registered environments, or one env's constructor arguments."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.cli.common import bad_input
from teamgym.cli.tables import env_args_table, envs_table

NAME = "envs"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command."""
    p = sub.add_parser(NAME, help="list the registered environments, or one env's arguments")
    p.add_argument("env_id", nargs="?", metavar="ID", help="show this env's arguments")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Print the registry, or the arguments of ``ID`` (what ``--env-arg`` and suites accept)."""
    from teamgym.envs import registry

    if args.env_id is None:
        console.print(envs_table(registry()))
        return 0
    with bad_input(KeyError):
        table = env_args_table(args.env_id)
    console.print(table)
    console.print(
        f"Pass them as --env-arg KEY=VALUE, or under kwargs/sweep in a suite file; "
        f"`teamgym play {args.env_id}` to try the env yourself."
    )
    return 0
