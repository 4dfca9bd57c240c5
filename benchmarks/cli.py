"""The ``teamgym`` command line.

``teamgym envs``       list the registered environments;
``teamgym baselines``  run every env with its baselines and print a results table (main job);
``teamgym perf``       microseconds per agent-step of every env;
``teamgym verl-data``  parquet datasets for VERL (one row per episode seed and agent);
``teamgym verl-bench`` throughput and concurrency of the VERL adapter;
``teamgym verl-kl-watch FILE``  warn when a VERL run's KL passes its target;
``teamgym train``     shared-reward GRPO on CPU (VERL's algorithms, a local model);
``teamgym model init`` a small local model (tokenizer trained on the envs' text), no download.
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


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise SystemExit(f"error: {flag} expects KEY=VALUE, got {text!r}")
    return key, value


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
        "steps",
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
            f"{r.mean_length:.1f}",
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


def _cmd_verl_data(args: argparse.Namespace, console: Console) -> int:
    from teamgym.adapters.verl.dataset import build_dataset

    teammates = _teammates(args)
    manifest = build_dataset(
        args.env,
        args.out,
        args.train_episodes,
        args.val_episodes,
        _env_kwargs(args.env_arg),
        args.seed,
        teammates,
        tokenizer=args.tokenizer,
        max_prompt_length=args.max_prompt_length,
    )
    if manifest.max_prompt_tokens is not None:
        console.print(
            f"longest first prompt: {manifest.max_prompt_tokens} tokens of {manifest.tokenizer} "
            f"(limit {args.max_prompt_length})"
        )
    console.print(
        f"wrote {manifest.train_rows} train rows ({manifest.train_episodes} episodes) and "
        f"{manifest.val_rows} validation rows to {args.out} ({manifest.num_agents} agents per episode)"
    )
    return 0


def _cmd_kl_watch(args: argparse.Namespace, console: Console) -> int:
    from teamgym.adapters.verl.monitor import kl_alerts

    alerts = 0
    for message in kl_alerts(args.file, args.target, follow=args.follow):
        alerts += 1
        console.print(f"[yellow]KL warning:[/yellow] {message}")
    console.print(f"{alerts} step(s) above the KL target {args.target}")
    return 0


def _cmd_verl_bench(args: argparse.Namespace, console: Console) -> int:
    from teamgym.benchmarks.verl_throughput import measure_throughput

    results = measure_throughput(
        args.episodes, args.agents, args.rounds, args.latency, args.n, args.model
    )
    table = Table(title="VERL adapter throughput (real AgentLoopWorker, CPU)")
    for col in (
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
        "max in flight",
    ):
        table.add_column(col, justify="left" if col == "server" else "right")
    for r in results:
        ratio = (
            f"{r.concurrency_ratio:.2f} (serial: {r.num_agents * r.episodes})"
            if r.concurrency_ratio
            else "-"
        )
        table.add_row(
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
            str(r.max_in_flight or "-"),
        )
    console.print(table)
    return 0


def _cmd_train(args: argparse.Namespace, console: Console) -> int:
    from teamgym.adapters.cpu_trainer import TrainArgs, train

    targs = TrainArgs(
        model=args.model,
        out=args.out,
        env=args.env,
        env_kwargs=_env_kwargs(args.env_arg),
        teammates=_teammates(args),
        steps=args.steps,
        episodes_per_step=args.episodes_per_step,
        group_size=args.group_size,
        lr=args.lr,
        sharing_weight=args.sharing_weight,
        kl_coef=args.kl_coef,
        kl_target=args.kl_target,
        kl_limit=args.kl_limit,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        seed=args.seed,
        resume=args.resume,
        metrics_port=args.metrics_port,
        warmup_steps=args.warmup_steps,
        max_reply_tokens=args.max_reply_tokens,
        ppo_epochs=args.ppo_epochs,
        warmup_policy=args.warmup_policy,
        mini_batches=args.mini_batches,
        forced_moves=args.forced_moves,
        stop=["</action>"] if args.stop is None else [s for s in args.stop if s],
    )
    history = train(targs, progress=not args.quiet)
    warmup = Path(args.out) / "warmup.json"
    if warmup.exists():
        info = json.loads(warmup.read_text())
        console.print(
            f"warm-up ({info.get('teacher', 'random')} teacher): held-out success "
            f"{info['eval_success']:.2f}; model at {args.out}/warmup_model"
        )
    if history:
        last = history[-1]
        console.print(
            f"trained {len(history)} steps into {args.out}: last success {last['success']:.2f}, "
            f"held-out {last.get('eval_success', float('nan')):.2f}; curve at {args.out}/curve.png"
        )
    console.print(f"policy at {args.out}/policy (a teammate: checkpoint:{args.out}/policy)")
    return 0


def _cmd_learn_bench(args: argparse.Namespace, console: Console) -> int:
    from teamgym.benchmarks.learn import STAGES, run_stage

    out = args.out or f"runs/learn-{args.stage}"
    summary = run_stage(args.stage, out, seed=args.seed, steps=args.steps, progress=not args.quiet)
    stage = STAGES[args.stage]
    console.print(f"learn-bench {args.stage}: {stage.description}")
    table = Table()
    for col in ("step", "held-out success"):
        table.add_column(col, justify="right")
    table.add_row("warm-up", f"{summary['warmup_success']:.2f}")
    for step, success in summary["evals"]:
        table.add_row(str(step), f"{success:.2f}")
    console.print(table)
    reached = summary["reached_target"]
    console.print(
        f"target {stage.target:.2f}: "
        + (
            f"reached at step {reached['step']} after {reached['train_seconds']:.0f} s of training"
            if reached
            else f"not reached in {summary['steps']} steps (best {summary['best_success']:.2f})"
        )
        + f"; total training {summary['train_seconds']:.0f} s. Curve: {out}/run/curve.png, "
        f"figures: {out}/summary.json"
    )
    return 0


def _cmd_model(args: argparse.Namespace, console: Console) -> int:
    from teamgym.adapters.local_model import LocalModelConfig, build_local_model, directory_hash

    out = build_local_model(
        args.out,
        LocalModelConfig(
            seed=args.seed,
            num_hidden_layers=args.layers,
            hidden_size=args.hidden_size,
            intermediate_size=2 * args.hidden_size,
            sliding_window=args.sliding_window,
        ),
    )
    console.print(f"local model written to {out} (sha256 {directory_hash(out)[:16]})")
    return 0


def _add_env_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor argument, e.g. num_agents=3 (repeatable)",
    )


def _add_teammate_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--teammate",
        action="append",
        default=[],
        metavar="AGENT=BASELINE",
        help="an agent played by a baseline, not trained (repeatable): robot_0=expert, "
        "robot_0=random, or robot_0=checkpoint:DIR for a frozen model directory",
    )


def _teammates(args: argparse.Namespace) -> dict[str, str]:
    """``--teammate`` pairs; checkpoint paths made absolute (rows may be read elsewhere)."""
    out = {}
    for agent, name in (_pair(p, "--teammate") for p in args.teammate):
        if name.startswith("checkpoint:"):
            name = "checkpoint:" + str(Path(name.removeprefix("checkpoint:")).resolve())
        out[agent] = name
    return out


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
    _add_env_args(p)
    p.add_argument("--out", help="also write the results as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("perf", help="microseconds per agent-step of every env")
    p.add_argument(
        "--env", action="append", help="env id (repeatable); default: every registered env"
    )
    p.add_argument("--agents", type=int, nargs="+", default=[2, 4, 8], help="team sizes")
    p.add_argument("--agent-steps", type=int, default=50_000, help="agent-steps per timing")

    p = sub.add_parser(
        "verl-data", help="write VERL parquet datasets (one row per episode seed and agent)"
    )
    p.add_argument("--env", required=True, help="env id, e.g. signal-v0")
    _add_env_args(p)
    p.add_argument("--train-episodes", type=int, required=True, help="training episodes")
    p.add_argument(
        "--val-episodes", type=int, default=64, help="validation episodes (disjoint seeds)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the episode-seed draw and of the shuffle"
    )
    _add_teammate_arg(p)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--tokenizer",
        default=None,
        help="the model's tokenizer (path or name): measure every prompt and refuse the dataset "
        "if one exceeds --max-prompt-length (VERL would drop it and split its episode)",
    )
    p.add_argument(
        "--max-prompt-length", type=int, default=2048, help="data.max_prompt_length of the run"
    )

    p = sub.add_parser("verl-bench", help="throughput and concurrency of the VERL adapter on CPU")
    p.add_argument("--episodes", type=int, default=16, help="episodes in the batch")
    p.add_argument("--agents", type=int, default=4, help="agents per episode")
    p.add_argument("--rounds", type=int, default=2, help="signal-v0 rounds (2 turns each)")
    p.add_argument(
        "--latency", type=float, default=0.05, help="seconds per call of the server double"
    )
    p.add_argument("--n", type=int, default=1, help="rollout.n copies of each row")
    p.add_argument("--model", default=None, help="local model directory (built when omitted)")

    p = sub.add_parser(
        "verl-kl-watch", help="warn when a VERL run's KL to the reference passes its target"
    )
    p.add_argument("file", help="VERL file-logger JSONL (VERL_FILE_LOGGER_PATH)")
    p.add_argument("--target", type=float, default=0.02, help="KL target")
    p.add_argument("--follow", action="store_true", help="keep reading as the run writes")

    p = sub.add_parser(
        "train", help="shared-reward GRPO on CPU with a local model (VERL's algorithms)"
    )
    p.add_argument("--env", default="signal-v0", help="env id")
    _add_env_args(p)
    p.add_argument("--model", required=True, help="local model directory (teamgym model init)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--steps", type=int, default=50, help="GRPO updates")
    _add_teammate_arg(p)
    p.add_argument("--episodes-per-step", type=int, default=8, help="episode seeds per update")
    p.add_argument(
        "--group-size", type=int, default=8, help="rollouts per (seed, agent): the GRPO group"
    )
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate")
    p.add_argument("--sharing-weight", type=float, default=0.7, help="RewardSharing weight")
    p.add_argument("--kl-coef", type=float, default=0.01, help="KL loss weight")
    p.add_argument("--kl-target", type=float, default=0.02, help="warn when KL exceeds it")
    p.add_argument(
        "--kl-limit",
        type=float,
        default=0.2,
        help="the guard rolls back when KL stays above it for a few steps",
    )
    p.add_argument("--max-reply-tokens", type=int, default=16, help="tokens per reply")
    p.add_argument("--ppo-epochs", type=int, default=1, help="passes over each rollout batch")
    p.add_argument(
        "--mini-batches", type=int, default=1, help="optimiser steps per pass (shuffled split)"
    )
    p.add_argument(
        "--forced-moves",
        choices=["auto", "model"],
        default="auto",
        help="auto: turns with one valid action are played without the model",
    )
    p.add_argument(
        "--stop",
        action="append",
        default=None,
        help="stop string ending a reply (repeatable; default </action>; --stop '' for none)",
    )
    p.add_argument("--eval-every", type=int, default=10, help="held-out evaluation every N steps")
    p.add_argument("--eval-episodes", type=int, default=64, help="held-out episodes per evaluation")
    p.add_argument(
        "--warmup-steps", type=int, default=300, help="format warm-up steps (0 skips it)"
    )
    p.add_argument(
        "--warmup-policy",
        default="random",
        help="warm-up teacher: random (format only) or a baseline such as expert (behaviour cloning)",
    )
    p.add_argument("--seed", type=int, default=0, help="run seed")
    p.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint"
    )
    p.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on 127.0.0.1:PORT"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser(
        "learn-bench", help="learning benchmark: build a local model, warm up, GRPO to a target"
    )
    from teamgym.benchmarks.learn import STAGES  # stdlib only: cheap at parser build

    p.add_argument("stage", choices=list(STAGES), help="which benchmark")
    p.add_argument("--out", default=None, help="run directory (default runs/learn-STAGE)")
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the stage's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the model, the draws, the run")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("model", help="local models")
    msub = p.add_subparsers(dest="model_command", required=True)
    m = msub.add_parser("init", help="build a small local model and tokenizer (no download)")
    m.add_argument("--out", required=True, help="output directory (a Hugging Face model directory)")
    m.add_argument("--seed", type=int, default=0, help="seed of the corpus and the weights")
    m.add_argument("--layers", type=int, default=2, help="transformer blocks")
    m.add_argument(
        "--sliding-window",
        type=int,
        default=None,
        help="attention window in tokens (Qwen2 sliding-window attention); full attention if omitted",
    )
    m.add_argument("--hidden-size", type=int, default=64, help="model width")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``teamgym`` command."""
    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 150)
    handlers = {
        "envs": _cmd_envs,
        "baselines": _cmd_baselines,
        "perf": _cmd_perf,
        "verl-data": _cmd_verl_data,
        "verl-kl-watch": _cmd_kl_watch,
        "verl-bench": _cmd_verl_bench,
        "train": _cmd_train,
        "model": _cmd_model,
        "learn-bench": _cmd_learn_bench,
    }
    try:
        return handlers[args.command](args, console)
    except ImportError as exc:
        console.print(
            f"[red]error:[/red] {exc}. Install the extra: pip install -e '.[verl]' (torch==2.13.0 first on CPU)"
        )
        return 2
    except (KeyError, ValueError, TypeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        console.print(f"[red]error:[/red] {message}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
