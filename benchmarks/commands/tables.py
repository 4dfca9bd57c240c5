"""Every table the commands print (rich), and the console they print to."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = [
    "baselines_table",
    "console",
    "env_args_table",
    "envs_table",
    "learn_table",
    "throughput_table",
]


def console() -> Console:
    """The terminal's width on a terminal; 150 columns in a pipe or file, so logs keep rows whole."""
    return Console(width=None if sys.stdout.isatty() else 150)


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def _table(title: str | None, columns: Iterable[str], left: Iterable[str]) -> Table:
    """A table whose ``columns`` are right-aligned except those in ``left``."""
    table = Table(title=title)
    left = set(left)
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right")
    return table


def envs_table(registry: Mapping[str, str]) -> Table:
    """Registered env ids, their descriptions and their scripted baselines."""
    from teamgym.envs import spec

    table = Table(title="teamgym environments (`teamgym envs ID` lists an env's arguments)")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("description")
    table.add_column("baselines")
    for env_id, description in registry.items():
        table.add_row(env_id, description, ", ".join(["random", *spec(env_id).baselines]))
    return table


def env_args_table(env_id: str) -> Table:
    """The constructor arguments of one env: name, default, type, and the class declaring it
    (the env's own first, then the options every text env shares)."""
    import inspect

    from teamgym.envs import spec

    env_spec = spec(env_id)
    factory = env_spec.load()
    chain = (
        [c for c in inspect.getmro(factory) if c is not object and "__init__" in vars(c)]
        if inspect.isclass(factory)
        else [factory]
    )
    table = _table(
        f"{env_id} arguments",
        ("argument", "default", "type", "from"),
        left=("argument", "default", "type", "from"),
    )
    seen = set()
    for owner in chain:
        fn = vars(owner)["__init__"] if inspect.isclass(owner) else owner
        for p in inspect.signature(fn).parameters.values():
            if p.name in seen or p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            seen.add(p.name)
            default = env_spec.kwargs.get(p.name, p.default)
            shown = "(required)" if default is inspect.Parameter.empty else repr(default)
            annotation = "" if p.annotation is inspect.Parameter.empty else str(p.annotation)
            table.add_row(p.name, escape(shown), escape(annotation), owner.__name__)
    return table


BASELINE_COLUMNS = (
    "env",
    "baseline",
    "success",
    "score",
    "steps",
    "team return",
    "collab. index",
    "comm. freq",
    "invalid",
    "gini",
    "fingerprint",
)


def baselines_table(results: Iterable[Any], episodes: int, seed: int) -> Table:
    """One row per (env, baseline) ``BaselineResult``."""
    title = f"Baselines: {episodes} episodes each, seeds {seed}..{seed + episodes - 1}"
    table = _table(title, BASELINE_COLUMNS, left=("env", "baseline", "fingerprint"))
    for r in results:
        table.add_row(
            r.env_id,
            r.baseline,
            _fmt(r.success_rate, True),
            _fmt(r.mean_score),
            f"{r.mean_length:.1f}",
            _fmt(r.mean_team_return),
            _fmt(r.collaboration_index),
            _fmt(r.communication_frequency),
            _fmt(r.invalid_action_rate, True),
            _fmt(r.contribution_gini),
            r.fingerprint,
        )
    return table


THROUGHPUT_COLUMNS = (
    "worker",
    "server",
    "episodes",
    "agents",
    "turns",
    "rows",
    "seconds",
    "rows/s",
    "episodes/s",
    "tokens/s",
    "wall / (turns x latency)",
    "CPU ms / agent-turn",
)


def throughput_table(results: Iterable[Any]) -> Table:
    """One row per VERL-adapter ``ThroughputResult``."""
    title = "VERL adapter throughput (real AgentLoopWorker, CPU)"
    table = _table(title, THROUGHPUT_COLUMNS, left=("server",))
    for r in results:
        ratio = (
            f"{r.concurrency_ratio:.2f} (serial: {r.num_agents * r.episodes})"
            if r.concurrency_ratio
            else "-"
        )
        table.add_row(
            r.trainer,
            r.server,
            str(r.episodes),
            str(r.num_agents),
            str(r.turns),
            str(r.rows),
            f"{r.seconds:.2f}",
            f"{r.rows_per_s:.1f}",
            f"{r.episodes_per_s:.2f}",
            f"{r.tokens_per_s:.0f}",
            ratio,
            f"{r.cpu_ms_per_agent_turn:.2f}",
        )
    return table


def learn_table(summary: Mapping[str, Any]) -> Table:
    """Held-out success after the warm-up and at every evaluation of a learning stage."""
    table = _table(None, ("step", "held-out success"), left=())
    table.add_row("warm-up", f"{summary['warmup_success']:.2f}")
    for step, success in summary["evals"]:
        table.add_row(str(step), f"{success:.2f}")
    return table
