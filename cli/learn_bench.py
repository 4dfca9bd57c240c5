"""``teamgym learn-bench STAGE``: build a local model, warm up, GRPO to the stage's target;
``sharing`` trains one model per reward-sharing weight, ``all`` runs the stages in turn."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamgym.adapters.cpu.resume import RunSettingsError
from teamgym.benchmarks.learn import ALL_STAGES, STAGES
from teamgym.cli.common import CommandError, bad_input, positive_int, unit_float
from teamgym.cli.tables import learn_table

NAME = "learn-bench"
SHARING = "sharing"
TEAM = "team"
MARL = "marl"
ALL = "all"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command: a stage name and the run's directory, length and seed."""
    p = sub.add_parser(
        NAME, help="learning benchmark: build a local model, warm up, GRPO to a target"
    )
    p.add_argument(
        "stage",
        choices=[*STAGES, SHARING, TEAM, MARL, ALL],
        help=f"which benchmark ({ALL}: {', '.join(ALL_STAGES)} in turn; {MARL}: IPPO and MAPPO "
        "in vector mode on every env, no LLM)",
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="run directory (default: runs/learn-STAGE)"
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        metavar="N",
        default=None,
        help="GRPO steps (default: the stage's; not with all); marl: env steps per run "
        "(default 100000)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="ID",
        help="marl: only these envs (repeatable; default: every env)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the model, the draws, the run (sharing: the first of three)",
    )
    p.add_argument(
        "--sharing",
        type=unit_float,
        default=None,
        metavar="W",
        help="marl: weight of the team score in each learner's reward, 0 to 1 (default 0: its "
        "own reward)",
    )
    p.add_argument(
        "--per-seat",
        action="store_true",
        help="team: phase 2 with a model per seat (the speaker's and the listener's), beside "
        "the shared model's run in the same --out",
    )
    p.add_argument(
        "--model",
        default=None,
        metavar="DIR",
        help="sharing: start every seed from this pretrained model (teamgym model import "
        "smollm2 --out DIR) with the stage's settings for one, instead of building the local model",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Run (or resume) the stage; print its held-out figures and whether it reached the target.
    A directory holding a run with other settings is an ``error:``, not a mixed resume."""
    out = args.out or f"runs/learn-{args.stage}"
    if getattr(args, "sharing", None) is not None and args.stage != MARL:
        raise CommandError(
            f"--sharing applies to marl; the {args.stage} stage sets its own rewards"
        )
    if getattr(args, "model", None) is not None:
        if args.stage != SHARING:
            raise CommandError(
                f"--model applies to sharing; the {args.stage} stage builds its own model"
            )
        if not (Path(args.model) / "config.json").is_file():
            raise CommandError(
                f"--model {args.model}: no model there (no config.json); import one with "
                f"`teamgym model import smollm2 --out {args.model}`"
            )
    if getattr(args, "per_seat", False) and args.stage != TEAM:
        raise CommandError(f"--per-seat applies to team; the {args.stage} stage trains one model")
    runners = {ALL: _run_all, SHARING: _run_sharing, TEAM: _run_team, MARL: _run_marl}
    with bad_input(RunSettingsError):
        return runners.get(args.stage, _run_stage)(args, out, console)


def _run_stage(args: argparse.Namespace, out: str, console: Console) -> int:
    """A single-run stage (listener, guard)."""
    from teamgym.benchmarks.learn import run_stage

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
    idle = summary.get("final_idle")
    guard = "" if idle is None else f"; idle episodes at the last evaluation {idle:.0%}"
    console.print(
        f"target {stage.target:.2f}: {outcome}; total training {summary['train_seconds']:.0f} s"
        f"{guard}. Curve: {out}/run/curve.png, figures: {out}/summary.json"
    )
    return 0


def _run_sharing(args: argparse.Namespace, out: str, console: Console) -> int:
    """The sharing stage on seeds SEED, SEED+1, SEED+2; print its table."""
    from teamgym.benchmarks.learn.sharing import DESCRIPTION, run_sharing

    seeds = (args.seed, args.seed + 1, args.seed + 2)
    summary = run_sharing(
        out, seeds=seeds, steps=args.steps, progress=not args.quiet, model=args.model
    )
    console.print(f"learn-bench sharing: {DESCRIPTION}")
    for row in summary["table"]:
        per_seed = ", ".join(f"{c:.2f}" for c in row["p_contribute_per_seed"])
        console.print(
            f"{row['run']:>10}: P(contribute) {row['p_contribute']:.2f} (seeds: {per_seed}); "
            f"greedy held-out: contribution {row['contribution']:.2f}, "
            f"team return {row['team_return']:.2f}"
        )
    console.print(f"Plot: {out}/sharing.png, figures: {out}/summary.json")
    return 0


def _run_team(args: argparse.Namespace, out: str, console: Console) -> int:
    """The team curriculum (two phases); print each phase's held-out figures and the messages
    the final speaker sends for each target."""
    from teamgym.benchmarks.learn.team import DESCRIPTION, run_team

    summary = run_team(
        out,
        seed=args.seed,
        steps=args.steps,
        progress=not args.quiet,
        per_seat=getattr(args, "per_seat", False),
    )
    console.print(f"learn-bench team: {DESCRIPTION}")
    for phase in summary["phases"]:
        evals = ", ".join(f"{v:.2f}" for _, v in phase["evals"])
        start = phase["warmup_success"]
        warmup = "none" if start is None else f"{start:.2f}"
        console.print(f"{phase['phase']:>9}: warm-up {warmup}, held-out {evals}")
    reached = summary["reached_target"]
    outcome = (
        f"reached at step {reached['step']} of the last phase after {reached['train_seconds']:.0f} s"
        if reached
        else f"not reached (final {summary['final_success']:.2f})"
    )
    console.print(
        f"target {summary['target']:.2f}: {outcome}; total training "
        f"{summary['train_seconds']:.0f} s"
    )
    prior = summary.get("warmup_speaker")
    if prior:  # absent from runs of an earlier release
        console.print(
            f"the speaker names the target with probability {prior['before']['p_target']:.2f} "
            f"before its warm-up and {prior['after']['p_target']:.2f} after "
            f"(chance {prior['after']['chance']:.2f})"
        )
    speaker = summary["speaker"]
    console.print(
        f"the speaker's message reaches the listener in "
        f"{speaker['communication_frequency']:.0%} of held-out episodes; its messages:"
    )
    for target, said in speaker["words"].items():
        console.print(f"  {target}: " + ", ".join(f"{w!r} x{n}" for w, n in said.items()))
    console.print(f"Plot: {out}/team.png, figures: {out}/summary.json")
    return 0


def _run_marl(args: argparse.Namespace, out: str, console: Console) -> int:
    """IPPO and MAPPO on seeds SEED, SEED+1, SEED+2 for every setting; print the table."""
    import time

    from teamgym.benchmarks.marl.bench import run_marl
    from teamgym.envs.seeds import run_seeds

    start = time.monotonic()
    summary = run_marl(
        out,
        env_ids=args.env or None,
        seeds=run_seeds(args.seed),
        total_steps=args.steps or 100_000,
        log=(lambda line: None) if args.quiet else (lambda line: console.print(line, markup=False)),
        sharing=getattr(args, "sharing", None) or 0.0,
    )
    console.print((Path(out) / "results.md").read_text(), markup=False, soft_wrap=True)
    figures = ", ".join(summary["figures"])
    console.print(
        f"{time.monotonic() - start:.0f} s; figures: {figures} in {out}; every run in {out}/runs",
        markup=False,
    )
    return 0


def _run_all(args: argparse.Namespace, out: str, console: Console) -> int:
    """Every stage of ``ALL_STAGES`` under ``out``; print the summary table."""
    from teamgym.benchmarks.learn import run_all

    if args.steps is not None:
        console.print("learn-bench all: --steps applies to one stage; run the stage alone")
        return 2
    run_all(out, seed=args.seed, progress=not args.quiet)
    console.print((f"{out}/summary.md"), highlight=False)
    with open(f"{out}/summary.md") as f:
        console.print(f.read(), highlight=False, markup=False)
    return 0
