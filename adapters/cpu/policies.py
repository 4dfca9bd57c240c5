"""The policies of a CPU run: one model shared by every trained seat, or one per seat or group
of seats (``TrainArgs.policy``: ``teamgym train --policy NAME=SEAT[,SEAT...]``), each a full
model or a LoRA adapter over the shared base (:mod:`~teamgym.adapters.cpu.lora`).

The one owner of who trains which seat. :class:`Policies` loads each policy's learner (its
model, frozen reference and AdamW), seats each agent's requests on its policy's model (a
:class:`~teamgym.adapters.cpu.server.SeatRouter`), updates each policy on its own seats' rows
only (:func:`policy_rows`; GRPO's groups are one agent's already, and the advantage is the whole
batch's, so a ``team_`` group still spans the team), and lays out the checkpoints. A run without
``policy`` is one policy with no name: its checkpoints, ``metrics.jsonl`` lines and final
``policy/`` are those of a shared-model run, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from teamgym.adapters.cpu.args import TrainArgs, UpdateArgs
from teamgym.adapters.cpu.grpo import Learner, grpo_update, load_learner
from teamgym.adapters.cpu.lora import AdaptersOff, load_lora_policies
from teamgym.adapters.cpu.seats import PolicyError, check_policies, lora_rank

__all__ = [
    "SHARED",
    "Policies",
    "Policy",
    "check_tokenizers",
    "policy_rows",
    "policy_starts",
]

SHARED = ""
"""The name of a run's one policy when it has no ``--policy``: every trained seat's."""

#: What a shared-model run's step line holds of its update (a policy's line adds grad_norm).
_SHARED_KEYS = ("kl", "entropy", "loss")


@dataclass
class Policy:
    """One trained model and the seats it plays."""

    name: str
    """``--policy NAME`` (:data:`SHARED` for a run without ``--policy``)."""
    seats: tuple[str, ...]
    """The agents it plays."""
    learner: Learner
    """Its model, frozen reference, optimiser."""


def policy_rows(out: Any, seats: tuple[str, ...] | list[str]) -> np.ndarray:
    """The indices of a rollout batch's rows (trajectories) that ``seats`` played, in order:
    what a policy's update trains on (the rows' ``teamgym_agent``, the episode loop's)."""
    agents = np.asarray(out.non_tensor_batch["teamgym_agent"], dtype=object)
    return np.flatnonzero(np.isin(agents, list(seats)))


def policy_starts(args: TrainArgs) -> dict[str, str]:
    """Each policy's start, before any warm-up: its ``policy_model`` (a directory, or
    ``lora:RANK``), else ``model``."""
    return {name: args.policy_model.get(name, args.model) for name in args.policy}


def check_tokenizers(args: TrainArgs) -> None:
    """Refuse a ``policy_model`` directory whose tokenizer is not ``model``'s (the agent loop
    renders every seat's prompts and reads every reply with ``model``'s tokenizer)."""
    from transformers import AutoTokenizer

    dirs = {n: s for n, s in args.policy_model.items() if lora_rank(s) is None}
    if not dirs:
        return
    base = AutoTokenizer.from_pretrained(args.model)
    for name, path in dirs.items():
        tok = AutoTokenizer.from_pretrained(path)
        same_template = getattr(tok, "chat_template", None) == base.chat_template
        if tok.get_vocab() != base.get_vocab() or not same_template:
            raise PolicyError(
                f"--policy-model {name}={path}: its tokenizer (vocabulary or chat template) is "
                f"not --model's ({args.model}); every policy reads and writes with one tokenizer"
            )


class Policies:
    """A run's policies (see the module docstring); ``shared``: the one unnamed policy."""

    def __init__(self, policies: list[Policy]) -> None:
        self.policies = policies

    @property
    def shared(self) -> bool:
        """Whether this is one model for every trained seat (a run without ``--policy``)."""
        return len(self.policies) == 1 and self.policies[0].name == SHARED

    @classmethod
    def load(
        cls, args: TrainArgs, starts: str | dict[str, str], agents: list[str], actor_cfg: Any
    ) -> Policies:
        """The run's policies on the env's ``agents``: the shared model from ``starts`` (a
        directory), or each policy of ``args.policy`` from ``starts[name]``: a directory (a
        full model, its reference a frozen copy), or ``lora:RANK`` (an adapter over
        ``args.model``, :mod:`~teamgym.adapters.cpu.lora`); torch seeded with ``args.seed``
        before each model is loaded."""
        seats = check_policies(args, agents)
        if not seats:
            assert isinstance(starts, str), starts
            learner = load_learner(starts, args.update, actor_cfg, args.seed)
            seated = set(args.teammates) | set(args.partner_seats)
            trained = tuple(a for a in agents if a not in seated)
            return cls([Policy(SHARED, trained, learner)])
        assert isinstance(starts, dict), starts
        check_tokenizers(args)
        ranks = {n: r for n, s in starts.items() if (r := lora_rank(s)) is not None}
        adapters = load_lora_policies(args.model, ranks, args.seed) if ranks else {}
        policies = []
        for name in seats:
            if name in adapters:  # an adapter over the shared base, which is its reference
                view = adapters[name]
                optim = torch.optim.AdamW(view.parameters(), lr=args.lr)
                learner = Learner(view, AdaptersOff(view), optim, actor_cfg)
            else:
                learner = load_learner(starts[name], args.update, actor_cfg, args.seed)
            policies.append(Policy(name, seats[name], learner))
        return cls(policies)

    def models(self) -> Any:
        """What plays the seats: the shared model, or ``{agent: its policy's model}``
        (:func:`~teamgym.adapters.cpu.rollout.local_server` takes either)."""
        if self.shared:
            return self.policies[0].learner.policy
        return {seat: p.learner.policy for p in self.policies for seat in p.seats}

    def eval(self) -> None:
        """Every model in evaluation mode (rollouts sample from them)."""
        for p in self.policies:
            p.learner.policy.eval()

    def update(
        self, out: Any, update: UpdateArgs, seed: int, lr: float, step: int
    ) -> dict[str, float]:
        """Each policy's GRPO update on its own seats' rows of ``out``
        (:func:`~teamgym.adapters.cpu.grpo.grpo_update`), as a step line's keys: the shared
        policy's ``kl``, ``entropy``, ``loss``; with policies, each one's under its name
        (``speaker/kl``, ``speaker/grad_norm``, ``speaker/reward``, ``speaker/trajectories``),
        and ``kl`` the largest (what the KL warning and the guard watch), ``loss`` and
        ``entropy`` the policies' means."""
        if self.shared:
            losses = grpo_update(self.policies[0].learner, out, update, seed=seed, lr=lr, step=step)
            return {key: losses[key] for key in _SHARED_KEYS}
        each: dict[str, dict[str, float]] = {}
        scores = out.batch["rm_scores"].sum(-1)
        for p in self.policies:
            rows = policy_rows(out, p.seats)
            losses = grpo_update(p.learner, out, update, seed=seed, lr=lr, step=step, rows=rows)
            reward = float(scores[rows].mean()) if len(rows) else 0.0
            each[p.name] = {**losses, "reward": reward, "trajectories": float(len(rows))}
        record = {
            "kl": max(e["kl"] for e in each.values()),
            "entropy": float(np.mean([e["entropy"] for e in each.values()])),
            "loss": float(np.mean([e["loss"] for e in each.values()])),
        }
        for name, values in each.items():
            record |= {f"{name}/{key}": value for key, value in values.items()}
        return record

    def set_lr(self, lr: float) -> None:
        """Every optimiser at learning rate ``lr`` (the guard's halving)."""
        for p in self.policies:
            for group in p.learner.optim.param_groups:
                group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        """The weights and optimiser states a checkpoint holds: ``model`` and ``optim`` for the
        shared policy (a shared-model run's layout), else ``policies: {name: {model, optim}}``
        (one file for all, written at once: a kill never leaves two policies at two steps)."""
        parts = {
            p.name: {"model": p.learner.policy.state_dict(), "optim": p.learner.optim.state_dict()}
            for p in self.policies
        }
        return parts[SHARED] if self.shared else {"policies": parts}

    def load_state_dict(self, ckpt: dict[str, Any], optimisers: bool = True) -> None:
        """Restore the weights (and, with ``optimisers``, the optimiser states) of a
        checkpoint of :meth:`state_dict`."""
        for p in self.policies:
            part = ckpt if self.shared else ckpt["policies"][p.name]
            p.learner.policy.load_state_dict(part["model"])
            if optimisers:
                p.learner.optim.load_state_dict(part["optim"])

    def save(self, run: Path, tokenizer: Any) -> list[Path]:
        """The final models as model directories (``checkpoint:DIR`` teammates, ``--model``s):
        ``run/policy``, or ``run/policies/NAME`` for each policy; returns them."""
        saved = []
        for p in self.policies:
            path = run / "policy" if self.shared else run / "policies" / p.name
            p.learner.policy.save_pretrained(path, safe_serialization=True)
            tokenizer.save_pretrained(path)
            saved.append(path)
        return saved
