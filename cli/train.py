"""``teamgym train``: shared-reward GRPO on CPU with a local model (VERL's algorithms).

The flags are :class:`~teamgym.adapters.cpu.args.TrainArgs`' fields, generated with their
docstrings as help; ``--env-arg``, ``--teammate``, ``--warmup-teacher``, ``--policy`` and
``--policy-model`` fill ``env_kwargs``, ``teammates``, ``warmup_teachers``, ``policy`` and
``policy_model``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.cpu.resume import RunSettingsError
from teamgym.adapters.cpu.seats import PolicyError, check_policies, env_agents
from teamgym.cli.common import (
    CommandError,
    add_env_arg,
    add_partner_arg,
    add_teammate_arg,
    add_warmup_teacher_arg,
    bad_input,
    check_baselines,
    check_env,
    check_teammates,
    check_warmup_teachers,
    env_kwargs,
    parse_pairs,
    partners_of,
    teammates,
    warmup_teachers,
)
from teamgym.cli.dataclass_args import (
    Custom,
    add_dataclass_args,
    dataclass_from_args,
)
from teamgym.names import CHECKPOINT_PREFIX

NAME = "train"


def add_partner_seat_arg(parser: argparse.ArgumentParser) -> None:
    """``--partner-seat AGENT`` (repeatable)."""
    parser.add_argument(
        "--partner-seat",
        action="append",
        default=[],
        metavar="AGENT",
        help="an agent the partners play, not trained (repeatable)",
    )


def add_policy_args(parser: argparse.ArgumentParser) -> None:
    """``--policy NAME=SEAT[,SEAT...]`` (repeatable)."""
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="NAME=SEAT[,SEAT...]",
        help="a policy of its own for these seats (repeatable: e.g. --policy speaker=robot_0 "
        "--policy listener=robot_1): its own model, optimiser and update on its seats' "
        "trajectories; every trained seat in one; none: one model shared by every seat",
    )


def policies(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--policy`` values as ``{name: seats}``; a name given twice is bad input."""
    out: dict[str, list[str]] = {}
    for item in args.policy:
        pairs = parse_pairs([item], "--policy", "NAME=SEAT[,SEAT...]", allow_empty=True)
        name, seats = next(iter(pairs.items()))
        if name in out:
            raise CommandError(f"--policy {name} is given twice; list its seats in one flag")
        out[name] = [seat.strip() for seat in seats.split(",") if seat.strip()]
    return out


def add_policy_model_arg(parser: argparse.ArgumentParser) -> None:
    """``--policy-model NAME=DIR|lora:RANK`` (repeatable)."""
    parser.add_argument(
        "--policy-model",
        action="append",
        default=[],
        metavar="NAME=DIR|lora:RANK",
        help="where a --policy starts (repeatable): a model directory (a full model of its own, "
        "with --model's tokenizer), or lora:RANK, a LoRA adapter over --model (frozen, shared); "
        "default: a full copy of --model",
    )


def policy_models(args: argparse.Namespace) -> dict[str, str]:
    """``--policy-model`` pairs; a name given twice is bad input."""
    names = [item.partition("=")[0] for item in args.policy_model]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise CommandError(f"--policy-model {twice[0]} is given twice")
    return parse_pairs(args.policy_model, "--policy-model", "NAME=DIR|lora:RANK")


def _discount(text: str) -> float:
    """``type=`` of ``--gamma``: a discount in (0, 1], else a usage error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _add_gamma(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gamma",
        type=_discount,
        default=1.0,
        metavar="G",
        help="discount of the turn-level estimators' returns to go, in (0, 1] (VERL's "
        "algorithm.gamma) (default: 1.0)",
    )


CUSTOM = {
    "gamma": Custom(_add_gamma, lambda args: args.gamma),
    "env_kwargs": Custom(add_env_arg, env_kwargs),
    "teammates": Custom(add_teammate_arg, teammates),
    "warmup_teachers": Custom(add_warmup_teacher_arg, warmup_teachers),
    "partners": Custom(
        add_partner_arg(
            "--partner",
            "a frozen partner of the --partner-seat agents (repeatable: a pool, one partner an "
            "episode, drawn from its seed with the weights): a baseline or checkpoint:DIR",
        ),
        partners_of("--partner"),
    ),
    "partner_seats": Custom(add_partner_seat_arg, lambda args: list(args.partner_seat)),
    "policy": Custom(add_policy_args, policies),
    "policy_model": Custom(add_policy_model_arg, policy_models),
    "eval_partners": Custom(
        add_partner_arg(
            "--eval-partner",
            "a partner held out of training (repeatable): every evaluation also plays with "
            "these in the partner seats (cross-play: eval_crossplay_success, eval_crossplay_gap)",
        ),
        partners_of("--eval-partner"),
    ),
}


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command: one flag per ``TrainArgs`` field, and ``--quiet``."""
    p = sub.add_parser(
        NAME, help="shared-reward GRPO on CPU with a local model (VERL's algorithms)"
    )
    add_dataclass_args(p, TrainArgs, CUSTOM)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Check the env and the baselines it names, train, and say where the results are."""
    settings: TrainArgs = dataclass_from_args(TrainArgs, args, CUSTOM)
    with bad_input(ValueError):
        settings.update  # noqa: B018  (its checks: --ppo-epochs, --mini-batches, --micro-batch >= 1)
    check_env(settings.env, settings.env_kwargs)
    check_teammates(settings.env, settings.env_kwargs, settings.teammates)
    teachers = [settings.warmup_policy, *settings.warmup_teachers.values()]
    teachers = teachers if settings.warmup_steps > 0 else []
    check_warmup_teachers(settings)  # before the baselines: a checkpoint loads a model
    partner_specs = check_partners(settings)
    with bad_input(PolicyError):
        check_policies(settings, env_agents(settings))
    check_baselines(settings.env, [*settings.teammates.values(), *teachers, *partner_specs])
    from teamgym.adapters.cpu.trainer import train  # torch: only once the input is known good
    from teamgym.adapters.verl.dataset import PromptTooLongError

    with bad_input(PromptTooLongError, RunSettingsError, FileExistsError, PolicyError):
        history = train(settings, progress=not args.quiet)
    _report(settings.out, history, console)
    return 0


def check_partners(settings: TrainArgs) -> list[str]:
    """Refuse a partner pool that cannot be seated (no seats, seats the env lacks or a teammate
    plays, no agent left to train); returns
    every partner spec, training and held-out, to be built once."""
    from teamgym.adapters.verl.dataset import episode_rows
    from teamgym.adapters.verl.llm_partners import check_partner_pools
    from teamgym.envs.partners import SELF

    rollout = settings.rollout
    if settings.eval_partners and not settings.partner_seats:
        raise CommandError("--eval-partner needs --partner-seat AGENT (and --partner)")
    with bad_input(ValueError):
        pool = rollout.pool
        if pool is None:
            return []
        held_out = None
        if settings.eval_partners:
            held_out = rollout.with_partners(tuple(settings.eval_partners)).pool
        check_partner_pools(pool, held_out)
        episode_rows(
            rollout.env,
            rollout.env_kwargs,
            [0],
            "check",
            teammates=rollout.teammates,
            partners=pool,
        )
    specs = [*pool.specs, *(held_out.specs if held_out is not None else ())]
    return [s for s in specs if s != SELF]  # self: the trained model, nothing to build


def _report(out: str, history: list[dict], console: Console) -> None:
    """Where the warm-up model, the curve and the policy are, and how they did."""
    warmup = Path(out) / "warmup.json"
    if warmup.exists():
        info = json.loads(warmup.read_text())
        if "policies" in info:  # one warm-up model a policy
            folder = Path(out) / "warmup_models"
            names = (
                sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
            )
            models = ", ".join(f"{out}/warmup_models/{name}" for name in names)
        else:
            models = f"{out}/warmup_model"
        console.print(
            f"warm-up ({info.get('teacher', 'random')} teacher): held-out success "
            f"{info['eval_success']:.2f}; model at {models}"
        )
    elif (start := Path(out) / "start.json").exists():
        info = json.loads(start.read_text())
        console.print(f"no warm-up: the start model's held-out success {info['eval_success']:.2f}")
    if history:
        last = history[-1]
        console.print(
            f"trained {len(history)} steps into {out}: last success {last['success']:.2f}, "
            f"held-out {last.get('eval_success', float('nan')):.2f}; curve at {out}/curve.png"
        )
    if (Path(out) / "policies").is_dir():
        for path in sorted((Path(out) / "policies").iterdir()):
            console.print(f"policy {path.name} at {path} (a teammate: {CHECKPOINT_PREFIX}{path})")
    else:
        console.print(f"policy at {out}/policy (a teammate: {CHECKPOINT_PREFIX}{out}/policy)")
