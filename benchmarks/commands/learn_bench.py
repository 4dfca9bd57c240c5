"""``teamgym learn-bench STAGE``: build a local model, warm up, GRPO to the stage's target."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands.common import positive_int
from teamgym.benchmarks.commands.tables import learn_table
from teamgym.benchmarks.learn import STAGES

NAME = "learn-bench"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command: a stage name and the run's directory, length and seed."""
    p = sub.add_parser(
        NAME, help="learning benchmark: build a local model, warm up, GRPO to a target"
    )
    p.add_argument("stage", choices=list(STAGES), help="which benchmark")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="run directory (default: runs/learn-STAGE)"
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        metavar="N",
        default=None,
        help="GRPO steps (default: the stage's)",
    )
    p.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the model, the draws, the run"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Run (or resume) the stage; print its held-out success and whether it reached the target."""
    from teamgym.benchmarks.learn import run_stage

    out = args.out or f"runs/learn-{args.stage}"
    summary = run_stage(args.stage, out, seed=args.seed, steps=args.steps, progress=not args.quiet)
    stage = STAGES[args.stage]
    console.print(f"learn-bench {args.stage}: {stage.description}")
    console.print(learn_table(summary))
    reached = summary["reached_target"]
    outcome = (
        f"reached at step {reached['step']} after {reached['train_seconds']:.0f} s of training"
        if reached
        else f"not reached in {summary['steps']} steps (best {summary['best_success']:.2f})"
    )
    console.print(
        f"target {stage.target:.2f}: {outcome}; total training {summary['train_seconds']:.0f} s. "
        f"Curve: {out}/run/curve.png, figures: {out}/summary.json"
    )
    return 0
