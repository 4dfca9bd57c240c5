"""``teamgym perf``: microseconds per agent-step of every env, team size and observation mode."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands.common import check_env
from teamgym.benchmarks.commands.tables import perf_table

NAME = "perf"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(NAME, help="microseconds per agent-step of every env")
    p.add_argument(
        "--env", action="append", help="env id (repeatable); default: every registered env"
    )
    p.add_argument("--agents", type=int, nargs="+", default=[2, 4, 8], help="team sizes")
    p.add_argument("--agent-steps", type=int, default=50_000, help="agent-steps per timing")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Time every combination, then print the table."""
    from teamgym.benchmarks.perf import run as measure_all
    from teamgym.envs import registry

    env_ids = args.env or list(registry())
    for env_id in env_ids:  # unknown ids fail here; team sizes an env cannot take are skipped
        check_env(env_id, {})
    console.print(perf_table(measure_all(env_ids, args.agents, args.agent_steps), args.agent_steps))
    return 0
