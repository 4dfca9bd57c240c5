"""``teamgym verl-alternate``: a model per seat on stock verl, the policies trained in turn by
``main_ppo`` (see :mod:`teamgym.adapters.verl.alternate`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamgym.cli.common import (
    CommandError,
    add_env_arg,
    bad_input,
    check_env,
    env_kwargs,
    non_negative_int,
    positive_int,
)

NAME = "verl-alternate"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(
        NAME,
        help="train a model per seat with verl: the policies take turns (main_ppo runs)",
        description="Each round, each --policy in turn is trained by verl's main_ppo for --steps "
        "steps while the other policies play their seats as frozen partners; verl saves its "
        "weights as a Hugging Face model, which the next runs seat. Each run's validation "
        "plays the partner policies as they were after every round so far (cross-play, in "
        "verl's val metrics per partner). Hydra overrides for every run go after `--`. The "
        "same command after a kill resumes from the last run whose weights were saved.",
    )
    p.add_argument("--env", required=True, help="env id, e.g. signal-v1")
    add_env_arg(p)
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="NAME=SEAT[,SEAT]",
        help="a policy and the seats it plays (repeatable, at least two; every seat of the "
        "env in one of them)",
    )
    p.add_argument("--model", metavar="DIR", help="the model every policy starts from")
    p.add_argument(
        "--policy-model",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="where one policy starts instead (repeatable)",
    )
    p.add_argument("--rounds", type=positive_int, default=2, metavar="K", help="rounds")
    p.add_argument(
        "--steps", type=positive_int, default=10, metavar="N", help="main_ppo steps per run"
    )
    p.add_argument(
        "--train-episodes", type=positive_int, default=64, metavar="N", help="episodes per run"
    )
    p.add_argument(
        "--val-episodes",
        type=non_negative_int,
        default=32,
        metavar="N",
        help="validation episodes per run",
    )
    p.add_argument("--seed", type=int, default=0, help="first episode seed")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--cpu", action="store_true", help="the laptop recipe (vLLM's CPU build, no GPU)"
    )
    p.add_argument(
        "--check-only",
        action="store_true",
        help="build the first run's data, check its main_ppo configuration (teamgym's checks "
        "and verl's) and stop",
    )
    p.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        metavar="-- OVERRIDES",
        help="Hydra overrides for every main_ppo run (after --)",
    )
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Check the policies, then make the runs in order and print each run's cross-play."""
    from teamgym.adapters.verl.alternate import (
        Alternation,
        crossplay_table,
        parse_policies,
        run_command,
    )
    from teamgym.cli.train import policy_models
    from teamgym.envs import make

    kwargs = env_kwargs(args)
    check_env(args.env, kwargs)
    with bad_input(ValueError):
        policies = parse_policies(args.policy)
        starts = policy_models(args)  # teamgym train's parser: NAME=DIR, each name once
        unknown = set(starts) - set(policies)
        if unknown:
            raise ValueError(f"--policy-model names no --policy: {', '.join(sorted(unknown))}")
        for name in policies:
            starts.setdefault(name, args.model)
        missing = sorted(n for n, d in starts.items() if not d)
        if missing:
            raise ValueError(f"no model for {', '.join(missing)}: give --model or --policy-model")
        agents = make(args.env, **kwargs).possible_agents
        seated = [s for seats in policies.values() for s in seats]
        if sorted(seated) != sorted(agents):
            raise ValueError(
                f"the policies must seat every agent of {args.env} once ({', '.join(agents)}); "
                f"they seat {', '.join(seated) or 'none'}"
            )
        alternation = Alternation(
            env_id=args.env,
            policies=policies,
            models={n: Path(d) for n, d in starts.items()},
            out=Path(args.out),
            rounds=args.rounds,
            steps=args.steps,
            train_episodes=args.train_episodes,
            val_episodes=args.val_episodes,
            seed=args.seed,
            env_kwargs=kwargs,
            overrides=[o for o in args.overrides if o != "--"],
        )

    def said(record: dict) -> None:
        done = "found" if record.get("resumed") else "trained"
        console.print(
            f"round {record['round']}: {record['policy']} {done}: {record['weights']}",
            markup=False,
        )

    if args.check_only:
        code, run_dir = alternation.check(run_command(args.cpu, check_only=True))
        log = (run_dir / "main_ppo.log").read_text(errors="replace").splitlines()
        said_last = next((x for x in reversed(log) if x.startswith("teamgym:")), "")
        if code != 0:
            raise CommandError(f"the first run's configuration: {said_last or log[-1:]}")
        console.print(f"{said_last} (round 1, {run_dir.name}; {run_dir})", markup=False)
        return 0
    try:
        alternation.run(run_command(args.cpu), on_run=said)
    except RuntimeError as exc:
        raise CommandError(str(exc)) from exc
    for run_name, partner, figures in crossplay_table(alternation.out, args.env):
        shown = ", ".join(f"{k} {v:.3f}" for k, v in sorted(figures.items()))
        console.print(f"{run_name} with {partner}: {shown}", markup=False)
    console.print(f"runs recorded in {alternation.out / 'alternation.json'}", markup=False)
    return 0
