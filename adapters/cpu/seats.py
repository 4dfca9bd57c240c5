"""Which trained seat each policy of a CPU run plays: ``TrainArgs.policy`` and
``policy_model`` checked against the env's agents before anything loads, torch-free so the
command line refuses a bad ``--policy`` at once (:class:`PolicyError` says the fix)."""

from __future__ import annotations

import re
from pathlib import Path

from teamgym.adapters.cpu.args import TrainArgs

__all__ = ["LORA_PREFIX", "PolicyError", "check_policies", "env_agents", "lora_rank"]


class PolicyError(ValueError):
    """``--policy`` / ``--policy-model`` that cannot be trained: a seat named twice or not at
    all, a seat that is not trained, a name that cannot be a folder, a model it cannot load."""


#: A policy's name: a folder of the run (``policies/NAME``) and its metrics' prefix (``NAME/kl``).
_POLICY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: ``policy_model``'s spec of a LoRA adapter over ``model``: ``lora:RANK``.
LORA_PREFIX = "lora:"


def lora_rank(spec: str) -> int | None:
    """The rank of a ``lora:RANK`` start (``policy_model``), None for a model directory; a rank
    that is not a whole number of at least 1 is a :class:`PolicyError`."""
    if not spec.startswith(LORA_PREFIX):
        return None
    rank = spec.removeprefix(LORA_PREFIX)
    if not rank.isdigit() or int(rank) < 1:
        raise PolicyError(f"{spec!r}: a LoRA policy is lora:RANK, RANK a whole number >= 1")
    return int(rank)


def env_agents(args: TrainArgs) -> list[str]:
    """The agents of ``args.env`` (``possible_agents``): every seat a policy may play."""
    from teamgym.envs import make

    env = make(args.env, **args.env_kwargs)
    try:
        return list(env.possible_agents)
    finally:
        env.close()


def check_policies(args: TrainArgs, agents: list[str]) -> dict[str, tuple[str, ...]]:
    """``args.policy`` checked against the env's ``agents`` (:class:`PolicyError` otherwise), as
    ``{name: seats}`` ({} for one shared model): every policy has a name that can be a folder,
    at least one seat, each seat an agent of the env that is trained (no ``teammates`` or
    ``partner_seats`` seat) and in one policy only, and every trained seat has a policy;
    ``policy_model`` names policies, each a model directory or ``lora:RANK``."""
    rollout = args.rollout
    if not args.policy:
        if args.policy_model:
            raise PolicyError("--policy-model needs --policy NAME=SEAT[,SEAT...]")
        return {}
    owner: dict[str, str] = {}
    for name, seats in args.policy.items():
        if not _POLICY_NAME.fullmatch(name):
            raise PolicyError(
                f"--policy {name!r}: a policy's name is a folder and a metrics prefix: letters, "
                "digits, '_', '-' and '.', starting with a letter or digit"
            )
        if not seats:
            raise PolicyError(f"--policy {name}: no seats; name them, e.g. {name}={agents[0]}")
        for seat in seats:
            if seat not in agents:
                raise PolicyError(
                    f"--policy {name}: {seat!r} is not an agent of {args.env}: {agents}"
                )
            if seat in rollout.teammates:
                raise PolicyError(
                    f"--policy {name}: {seat} is played by the teammate "
                    f"{rollout.teammates[seat]!r}, so it is not trained; drop one of the two"
                )
            if seat in rollout.partner_seats:
                raise PolicyError(
                    f"--policy {name}: {seat} is a partner seat (--partner-seat), so it is not "
                    "trained; drop one of the two"
                )
            if seat in owner:
                which = "twice" if owner[seat] == name else f"by {owner[seat]} and {name}"
                raise PolicyError(f"--policy: {seat} is named {which}; a seat has one policy")
            owner[seat] = name
    seated = set(rollout.teammates) | set(rollout.partner_seats)
    if missing := [a for a in agents if a not in seated and a not in owner]:
        raise PolicyError(
            f"--policy: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} trained "
            "but in no policy; add each to a --policy (or seat it with --teammate)"
        )
    for name, spec in args.policy_model.items():
        if name not in args.policy:
            raise PolicyError(
                f"--policy-model {name}: no --policy {name}; the policies are {list(args.policy)}"
            )
        if lora_rank(spec) is None and not (Path(spec) / "config.json").is_file():
            raise PolicyError(
                f"--policy-model {name}={spec}: not a model directory (no config.json) nor "
                f"{LORA_PREFIX}RANK"
            )
    lora = [n for n, spec in args.policy_model.items() if lora_rank(spec) is not None]
    if lora and args.warmup_steps > 0:
        raise PolicyError(
            f"--policy-model {lora[0]}={args.policy_model[lora[0]]}: a LoRA policy starts from "
            "--model itself, which no warm-up changes: pass --warmup-steps 0 (to warm the base "
            "up, run it first with --steps 0 and pass its warmup_model as --model)"
        )
    return {name: tuple(seats) for name, seats in args.policy.items()}
