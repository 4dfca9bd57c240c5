"""A CPU GRPO run's directory and state: start, save, resume, and the rollback guard.

A checkpoint lands after every step (``checkpoints/latest.pt``: every policy's weights and
optimiser, :meth:`~teamgym.adapters.cpu.policies.Policies.state_dict`, and the state), so
a run killed at any point resumes from its last finished step and keeps every finished step's
line in ``metrics.jsonl``. The guard keeps ``checkpoints/stable.pt`` and restores it (halving
the learning rate) when KL stays above ``kl_limit`` or success stays well below the best seen.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from teamgym.adapters.cpu.args import GuardArgs, TrainArgs
from teamgym.adapters.cpu.policies import Policies
from teamgym.adapters.cpu.resume import (
    FREE_ON_RESUME,
    RunSettingsError,
    changed_settings,
    describe_changes,
)

__all__ = ["RunDir", "RunState", "guard"]


@dataclass
class RunState:
    """What a resumed run needs besides the weights; saved in every checkpoint."""

    step: int
    """Last finished step."""
    lr: float
    """Current learning rate (the guard halves it)."""
    best_success: float = -1.0
    """Best training success of a step the guard kept."""
    bad_steps: int = 0
    """Consecutive steps with KL above its limit or success far below the best."""
    rng: dict[str, Any] | None = None
    """State of the episode-seed generator after the last finished step."""


class RunDir:
    """``args.json``, ``metrics.jsonl`` and ``checkpoints/{latest,stable}.pt`` of one run."""

    def __init__(self, out: str | Path) -> None:
        self.path = Path(out)
        self.metrics = self.path / "metrics.jsonl"
        self.latest = self.path / "checkpoints" / "latest.pt"
        self.stable = self.path / "checkpoints" / "stable.pt"

    def start(self, args: TrainArgs) -> None:
        """Create the directory and write ``args.json``; refuse to overwrite another run, or to
        continue one (its checkpoints, its warm-up model) under other settings (only those in
        :data:`~teamgym.adapters.cpu.resume.FREE_ON_RESUME` may change)."""
        (self.path / "checkpoints").mkdir(parents=True, exist_ok=True)
        if not args.resume and self.metrics.exists():
            raise FileExistsError(
                f"{self.path} already holds a run; pass --resume to continue it or choose another --out"
            )
        saved = self.path / "args.json"
        state = [self.latest, self.stable, self.path / "warmup_model" / "config.json"]
        state += (self.path / "warmup_models").glob("*/config.json")  # the policies' warm-ups
        if saved.exists() and (args.resume or any(f.exists() for f in state)):
            # a run killed before its first step leaves a warm-up and checkpoints to reuse
            changed = changed_settings(json.loads(saved.read_text()), asdict(args))
            if changed:
                raise RunSettingsError(
                    f"{self.path} holds a run with other settings ({describe_changes(changed)}); "
                    f"resume it with the settings it started with (only "
                    f"{', '.join(FREE_ON_RESUME)} may change), or choose another --out"
                )
        saved.write_text(json.dumps(asdict(args), indent=2, sort_keys=True) + "\n")

    def resume(self, args: TrainArgs, policies: Policies) -> tuple[RunState, list[dict[str, Any]]]:
        """The state and finished steps' records to continue from (a fresh state without a
        checkpoint); a line later than the checkpoint is dropped, so its step is redone."""
        state = RunState(step=0, lr=args.lr)
        if args.resume and self.latest.exists():
            ckpt = torch.load(self.latest, weights_only=False)
            policies.load_state_dict(ckpt)
            state = RunState(**ckpt["state"])
        history: list[dict[str, Any]] = []
        if self.metrics.exists():
            lines = [json.loads(x) for x in self.metrics.read_text().splitlines() if x.strip()]
            history = [h for h in lines if h.get("step", 0) <= state.step]
            tmp = self.metrics.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(h) + "\n" for h in history))
            tmp.replace(self.metrics)
        return state, history

    def save(self, path: Path, policies: Policies, state: RunState) -> None:
        """Write a checkpoint atomically (a kill mid-write leaves the previous one)."""
        tmp = path.with_suffix(".tmp")
        ckpt = {**policies.state_dict(), "state": asdict(state)}
        torch.save(ckpt, tmp)
        tmp.replace(path)

    def start_stable(self, policies: Policies, state: RunState) -> None:
        """The weights GRPO starts from are the first stable checkpoint."""
        if not self.stable.exists():
            self.save(self.stable, policies, state)

    def finish_step(
        self,
        record: dict[str, Any],
        policies: Policies,
        state: RunState,
        rng: np.random.Generator,
    ) -> None:
        """Append the step's line, then checkpoint: the step is finished once this lands."""
        with self.metrics.open("a") as f:
            f.write(json.dumps(record) + "\n")
        state.step = record["step"]
        state.rng = dict(rng.bit_generator.state)
        self.save(self.latest, policies, state)


def guard(
    settings: GuardArgs,
    state: RunState,
    record: dict[str, Any],
    policies: Policies,
    run: RunDir,
) -> str | None:
    """Keep the last stable checkpoint; restore it (and halve the lr) after
    ``settings.patience`` bad steps in a row (0: never). Returns what it did, if anything.

    A step's KL and success measure the weights it started from (its rollouts and its
    update's first forward pass), so a good step makes the previous step's checkpoint (or the
    start, :meth:`RunDir.start_stable`) the stable one, never the weights it just produced."""
    if settings.patience <= 0:
        return None
    kl_bad = record["kl"] > settings.kl_limit
    success_bad = state.best_success >= 0 and record["success"] < state.best_success - 0.3
    if not kl_bad and record["success"] >= state.best_success:
        # the record measures the weights this step started from: the last step's checkpoint
        state.best_success = record["success"]
        if run.latest.exists():
            shutil.copyfile(run.latest, run.stable)
    state.bad_steps = state.bad_steps + 1 if (kl_bad or success_bad) else 0
    if state.bad_steps < settings.patience or not run.stable.exists():
        return None
    policies.load_state_dict(torch.load(run.stable, weights_only=False), optimisers=False)
    state.lr = state.lr / 2
    policies.set_lr(state.lr)
    state.bad_steps = 0
    why = "KL above its limit" if kl_bad else "success far below the best"
    return (
        f"rolled back to the stable checkpoint ({why} for {settings.patience} steps); "
        f"lr -> {state.lr:.2e}"
    )
