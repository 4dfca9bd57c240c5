"""``teamgym baselines``: every env with its baselines, one results row per (env, baseline)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from teamgym.cli.common import (
    add_env_arg,
    check_envs,
    env_kwargs,
    non_negative_int,
    positive_int,
)
from teamgym.cli.tables import print_summary
from teamgym.names import EVAL_SEED_BASE

NAME = "baselines"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(NAME, help="run every env with its baselines; print a results table")
    p.add_argument(
        "--env", action="append", help="env id (repeatable); default: every registered env"
    )
    p.add_argument(
        "--episodes",
        type=positive_int,
        default=100,
        metavar="N",
        help="episodes per (env, baseline)",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=EVAL_SEED_BASE,
        metavar="N",
        help="first evaluation seed",
    )
    add_env_arg(p)
    p.add_argument("--out", metavar="FILE", help="also write the results as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _in_smoke_order(env_ids: list[str]) -> list[str]:
    """``env_ids`` in the order of the smoke suite (the README's table), then the others (a
    user's registered envs) as given."""
    from teamgym.benchmarks.suites import load_suite

    smoke = list(dict.fromkeys(e.env_id for e in load_suite("smoke").settings))
    rank = {e: i for i, e in enumerate(smoke)}
    return sorted(env_ids, key=lambda e: rank.get(e, len(rank)))


def run(args: argparse.Namespace, console: Console) -> int:
    """Run the episodes (with a progress bar), print the table, optionally write JSON."""
    from teamgym.benchmarks.baselines import run_baselines
    from teamgym.benchmarks.report import episodes
    from teamgym.envs import registry, spec
    from teamgym.envs.registration import latest_versions

    env_ids = _in_smoke_order(args.env or latest_versions(registry()))
    kwargs = env_kwargs(args)
    check_envs(env_ids, kwargs, chosen=bool(args.env))
    total = sum(len(spec(e).baselines) + 1 for e in env_ids) * args.episodes
    progress = Progress(
        TextColumn("[bold]baselines"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=args.quiet,
    )
    with progress:
        task = progress.add_task("episodes", total=total)
        results = run_baselines(
            env_ids, args.episodes, args.seed, kwargs, on_episode=lambda: progress.advance(task)
        )
    last = args.seed + args.episodes - 1
    title = f"baselines: {episodes(args.episodes)} each, seeds {args.seed}..{last}"
    print_summary(console, [r.summary for r in results], title)
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([r.row() for r in results], indent=2) + "\n")
        console.print(f"results written to {path}")
    return 0
