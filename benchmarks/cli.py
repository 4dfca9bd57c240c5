"""The ``teamgym`` command line.

``teamgym envs``       list the registered environments;
``teamgym baselines``  run every env with its baselines and print a results table (main job);
``teamgym perf``       microseconds per agent-step of every env.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

__all__ = ["main"]


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def _env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs, values read as YAML scalars (``3``, ``true``, ``text``)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --env-arg expects key=value, got {pair!r}")
        out[key] = yaml.safe_load(value)
    return out


def _cmd_envs(args: argparse.Namespace, console: Console) -> int:
    from teamgym.envs import registry

    table = Table(title="teamgym environments")
    table.add_column("id", style="bold")
    table.add_column("description")
    for env_id, description in registry().items():
        table.add_row(env_id, description)
    console.print(table)
    return 0


def _cmd_baselines(args: argparse.Namespace, console: Console) -> int:
    from teamgym.benchmarks.baselines import run_baselines
    from teamgym.envs import registry, spec

    env_ids = args.env or list(registry())
    kwargs = _env_kwargs(args.env_arg)
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
    table = Table(
        title=f"Baselines: {args.episodes} episodes each, seeds {args.seed}..{args.seed + args.episodes - 1}"
    )
    for col in (
        "env",
        "baseline",
        "success",
        "score",
        "team return",
        "collab. index",
        "comm. freq",
        "invalid",
        "gini",
        "fingerprint",
    ):
        table.add_column(
            col, justify="left" if col in ("env", "baseline", "fingerprint") else "right"
        )
    for r in results:
        table.add_row(
            r.env_id,
            r.baseline,
            _fmt(r.success_rate, True),
            _fmt(r.mean_score),
            _fmt(r.mean_team_return),
            _fmt(r.collaboration_index),
            _fmt(r.communication_frequency),
            _fmt(r.invalid_action_rate, True),
            _fmt(r.contribution_gini),
            r.fingerprint,
        )
    console.print(table)
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([r.row() for r in results], indent=2) + "\n")
        console.print(f"results written to {path}")
    return 0


def _cmd_perf(args: argparse.Namespace, console: Console) -> int:
    from teamgym.benchmarks.perf import measure
    from teamgym.envs import registry

    env_ids = args.env or list(registry())
    table = Table(
        title=f"Speed: best of 3 runs of {args.agent_steps} agent-steps (observations included)"
    )
    for col in ("env", "agents", "mode", "us / agent-step"):
        table.add_column(col, justify="right" if col != "env" else "left")
    for env_id in env_ids:
        for n in args.agents:
            for mode in ("text", "vector"):
                r = measure(env_id, n, mode, args.agent_steps)
                table.add_row(env_id, str(n), mode, f"{r.us_per_agent_step:.1f}")
    console.print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="teamgym", description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("envs", help="list the registered environments")

    p = sub.add_parser("baselines", help="run every env with its baselines; print a results table")
    p.add_argument(
        "--env", action="append", help="env id (repeatable); default: every registered env"
    )
    p.add_argument("--episodes", type=int, default=100, help="episodes per (env, baseline)")
    p.add_argument("--seed", type=int, default=1_000_000, help="first evaluation seed")
    p.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor argument, e.g. num_agents=3 (repeatable)",
    )
    p.add_argument("--out", help="also write the results as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("perf", help="microseconds per agent-step of every env")
    p.add_argument(
        "--env", action="append", help="env id (repeatable); default: every registered env"
    )
    p.add_argument("--agents", type=int, nargs="+", default=[2, 4, 8], help="team sizes")
    p.add_argument("--agent-steps", type=int, default=50_000, help="agent-steps per timing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``teamgym`` command."""
    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 150)
    handlers = {"envs": _cmd_envs, "baselines": _cmd_baselines, "perf": _cmd_perf}
    try:
        return handlers[args.command](args, console)
    except (KeyError, ValueError, TypeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        console.print(f"[red]error:[/red] {message}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
