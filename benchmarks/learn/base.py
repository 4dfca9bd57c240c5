"""What every learning stage shares: the stage type, the models and trainer settings the stages
start from, building a stage's model, and the summary of a run against its target."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.cpu.resume import RunSettingsError, describe_changes, settings_diff

__all__ = [
    "BENCHMARK",
    "LEARNER",
    "LISTENER",
    "LISTENER_MODEL",
    "SIGNAL_NAMES",
    "Stage",
    "build_stage_model",
    "machine",
    "summarize",
    "two_proportion_z",
    "warm_start",
]


@dataclass(frozen=True)
class Stage:
    """One learning benchmark: a model size, the trainer's settings, a target."""

    description: str
    """What is learned, and the chance level."""
    settings: TrainArgs
    """The trainer's settings; ``model``, ``out``, ``seed`` and ``resume`` are set per run."""
    model: dict[str, Any] = field(default_factory=dict)
    """``LocalModelConfig`` fields."""
    target: float = 0.9
    """Held-out greedy success the stage aims at."""


# 4 layers, 128 wide, each attending to the last 64 tokens. The default 2-layer, 64-wide model
# can be taught the listener's rule supervised, but under GRPO its reply format is fragile:
# every update big enough to move the pick also breaks the `<action>pick` tokens it samples.
LEARNER = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "sliding_window": 64,
}

#: What every stage changes from ``TrainArgs``' defaults: bigger batches and evaluations, short
#: replies, a weak KL, and no KL guard (a learning curve, not a guarded production run).
BENCHMARK = TrainArgs(
    model="",
    out="",
    steps=60,
    episodes_per_step=16,
    kl_coef=0.001,
    kl_limit=10.0,
    max_reply_tokens=10,
    eval_episodes=128,
)

#: signal-v0 reduced to the listener's copy rule: one round, the message names the target.
SIGNAL_NAMES = {
    "num_rounds": 1,
    "speaker": "fixed",
    "num_candidates": 2,
    "num_attributes": 1,
    "pick_by": "name",
}
#: The listener learns, the speaker is scripted. The rule is a copy (pick the colour the
#: message names), and a small model trained from scratch has no copying until a sudden drop
#: in loss. One layer of 128 attending to the last 32 tokens (:data:`LISTENER_MODEL`) gets
#: there several times sooner than four layers, on every seed, and its GRPO steps are cheaper
#: (the runs are in the README's Learning benchmarks section); its 400-step format warm-up
#: (random valid picks) teaches it to pick one of the listed objects. Four mini-batches a step
#: give GRPO four optimiser steps per rollout batch, the rate ramped over the first eight; a KL
#: weight of 0.02 to the warm-up model keeps the colour prior from drifting (a much weaker one
#: lets the greedy pick freeze on one colour), and the guard is off: with 16 episodes a step,
#: training success swings with the batch's targets, and a rollback halves the rate of a run
#: that was about to climb.
LISTENER = replace(
    BENCHMARK,
    env_kwargs=SIGNAL_NAMES,
    teammates={"robot_0": "expert"},
    steps=50,
    eval_every=5,
    warmup_steps=400,
    lr=1e-3,
    lr_warmup_steps=8,
    mini_batches=4,
    kl_coef=0.02,
    guard_patience=0,
)
#: The model of the listener stage: one layer of 128, attending to the last 32 tokens.
LISTENER_MODEL = {**LEARNER, "num_hidden_layers": 1, "sliding_window": 32}


def two_proportion_z(p1: float, n1: int, p2: float, n2: int) -> float:
    """z statistic of p2 > p1 for two success rates (pooled); 0 when undefined."""
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    return (p2 - p1) / math.sqrt(var) if var > 0 else 0.0


def summarize(run_dir: str | Path, target: float, build_seconds: float = 0.0) -> dict[str, Any]:
    """The run's learning figures from ``metrics.jsonl`` and ``warmup.json``."""
    run = Path(run_dir)
    history = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    warmup = json.loads((run / "warmup.json").read_text()) if (run / "warmup.json").exists() else {}
    evals = [(h["step"], h["eval_success"]) for h in history if "eval_success" in h]
    elapsed = build_seconds + float(warmup.get("seconds", 0.0))
    reached = None
    for h in history:
        elapsed += h["seconds"]
        if h.get("eval_success", -1.0) >= target:
            reached = {"step": h["step"], "train_seconds": round(elapsed, 1)}
            break
    return {
        "target": target,
        "warmup_success": warmup.get("eval_success"),
        "evals": evals,
        "final_success": evals[-1][1] if evals else None,
        # the degenerate-policy guard: the share of held-out episodes whose trained agents only
        # idled (invalid replies or the env's idle actions), at the last evaluation
        "final_idle": next((h["eval_idle"] for h in reversed(history) if "eval_idle" in h), None),
        "best_success": max((s for _, s in evals), default=None),
        "reached_target": reached,
        "steps": len(history),
        "train_seconds": round(
            build_seconds + float(warmup.get("seconds", 0.0)) + sum(h["seconds"] for h in history),
            1,
        ),
        # CPU time of warm-up and updates over all threads (~ cores x wall on an idle machine):
        # wall seconds on a shared machine overstate the cost, CPU seconds much less so
        "cpu_seconds": round(
            float(warmup.get("cpu_seconds", 0.0)) + sum(h.get("cpu_seconds", 0.0) for h in history),
            1,
        ),
    }


def machine() -> dict[str, Any]:
    """CPU count and load averages (1, 5, 15 min) as a run ends: on a shared machine the
    seconds depend on them."""
    return {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def build_stage_model(run: Path, model: dict[str, Any], seed: int) -> tuple[Path, float]:
    """``run/model``, built once from ``LocalModelConfig(seed=seed, **model)``, and the seconds
    its build took (recorded with its settings in ``run/model_build.json``); a model built
    with other settings is refused, not reused."""
    from teamgym.adapters.agents.local_model import LocalModelConfig, build_local_model

    model_dir = run / "model"
    wanted = {"seed": seed, **model}
    record = run / "model_build.json"
    if not (model_dir / "config.json").exists():
        start = time.perf_counter()
        build_local_model(model_dir, LocalModelConfig(seed=seed, **model))
        seconds = time.perf_counter() - start
        record.write_text(json.dumps({"seconds": seconds, "config": wanted}) + "\n")
        return model_dir, seconds
    built = json.loads(record.read_text()) if record.exists() else {}
    changed = settings_diff(built.get("config", wanted), wanted)
    if changed:
        raise RunSettingsError(
            f"{model_dir} was built with other settings than this stage's "
            f"({describe_changes(changed)}): "
            f"choose another --out (or remove {run} to start over)"
        )
    return model_dir, float(built.get("seconds", 0.0))


def warm_start(
    seed_dir: Path, settings: TrainArgs, model: dict[str, Any], seed: int, steps: int
) -> tuple[TrainArgs, str]:
    """Conditions compared from one start: the seed's model built under ``seed_dir`` and
    format-warmed once (both reused when run again with the same settings); returns the
    settings every condition trains with (``steps`` GRPO steps) and the warmed model."""
    from teamgym.adapters.cpu.run_state import RunDir
    from teamgym.adapters.cpu.warmup import warm_up

    model_dir, _ = build_stage_model(seed_dir, model, seed)
    base = replace(
        settings, model=str(model_dir), out=str(seed_dir / "warmup"), seed=seed, steps=steps
    )
    RunDir(base.out).start(base)
    return base, warm_up(base.warmup, base.evaluation, seed_dir / "warmup")
