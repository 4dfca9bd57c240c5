"""``teamgym train``: shared-reward GRPO on CPU with a local model (VERL's algorithms).

The flags are :class:`~teamgym.adapters.cpu.args.TrainArgs`' fields, generated with their
docstrings as help; ``--env-arg``, ``--teammate`` and ``--warmup-teacher`` fill ``env_kwargs``,
``teammates`` and ``warmup_teachers``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from teamgym.adapters.cpu.args import RunSettingsError, TrainArgs
from teamgym.benchmarks.commands.common import (
    add_env_arg,
    add_teammate_arg,
    add_warmup_teacher_arg,
    bad_input,
    check_baselines,
    check_env,
    check_teammates,
    check_warmup_teachers,
    env_kwargs,
    teammates,
    warmup_teachers,
)
from teamgym.benchmarks.commands.dataclass_args import (
    Custom,
    add_dataclass_args,
    dataclass_from_args,
)
from teamgym.names import CHECKPOINT_PREFIX

NAME = "train"
CUSTOM = {
    "env_kwargs": Custom(add_env_arg, env_kwargs),
    "teammates": Custom(add_teammate_arg, teammates),
    "warmup_teachers": Custom(add_warmup_teacher_arg, warmup_teachers),
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
    check_env(settings.env, settings.env_kwargs)
    check_teammates(settings.env, settings.env_kwargs, settings.teammates)
    teachers = [settings.warmup_policy, *settings.warmup_teachers.values()]
    teachers = teachers if settings.warmup_steps > 0 else []
    check_warmup_teachers(settings)  # before the baselines: a checkpoint loads a model
    check_baselines(settings.env, [*settings.teammates.values(), *teachers])
    from teamgym.adapters.cpu.trainer import train  # torch: only once the input is known good
    from teamgym.adapters.verl.dataset import PromptTooLongError

    with bad_input(PromptTooLongError, RunSettingsError, FileExistsError):
        history = train(settings, progress=not args.quiet)
    _report(settings.out, history, console)
    return 0


def _report(out: str, history: list[dict], console: Console) -> None:
    """Where the warm-up model, the curve and the policy are, and how they did."""
    warmup = Path(out) / "warmup.json"
    if warmup.exists():
        info = json.loads(warmup.read_text())
        console.print(
            f"warm-up ({info.get('teacher', 'random')} teacher): held-out success "
            f"{info['eval_success']:.2f}; model at {out}/warmup_model"
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
    console.print(f"policy at {out}/policy (a teammate: {CHECKPOINT_PREFIX}{out}/policy)")
