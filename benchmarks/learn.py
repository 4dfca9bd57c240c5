"""Learning benchmarks: the CPU GRPO trainer on fixed presets that must learn to collaborate.

A stage builds its local model (no download), runs the format warm-up and GRPO through
``teamgym.adapters.cpu_trainer.train``, and summarises the run against its target: held-out
success before and after, the first evaluation at or above the target and the training time it
took (model build, warm-up and update steps; evaluations excluded, they only measure). A stage
killed half-way continues from its checkpoint when run again with the same ``out``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from teamgym.adapters.train_args import TrainArgs

__all__ = ["STAGES", "Stage", "run_stage", "summarize", "two_proportion_z"]


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

STAGES: dict[str, Stage] = {
    "listener": Stage(
        description="signal-v0, the speaker played by the scripted expert, the listener learns "
        "to pick the object the message names (2 candidates, chance 0.5)",
        settings=replace(
            BENCHMARK,
            env_kwargs={
                "num_rounds": 1,
                "speaker": "fixed",
                "num_candidates": 2,
                "num_attributes": 1,
                "pick_by": "name",
            },
            teammates={"robot_0": "expert"},
            steps=100,
        ),
        model=LEARNER,
        target=0.9,
    ),
    "team": Stage(
        description="signal-v0, both agents learn with one shared model from the format warm-up: "
        "the speaker must describe the target, the listener pick it (3 candidates, chance 1/3)",
        settings=replace(
            BENCHMARK,
            env_kwargs={
                "num_rounds": 1,
                "speaker": "fixed",
                "num_candidates": 3,
                "num_attributes": 1,
                "pick_by": "name",
            },
            steps=100,
            kl_coef=0.05,
            max_reply_tokens=16,
            warmup_policy="babbler",
        ),
        model=LEARNER,
        target=0.8,
    ),
}


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
        "best_success": max((s for _, s in evals), default=None),
        "reached_target": reached,
        "steps": len(history),
        "train_seconds": round(
            build_seconds + float(warmup.get("seconds", 0.0)) + sum(h["seconds"] for h in history),
            1,
        ),
    }


def run_stage(
    name: str,
    out: str | Path,
    seed: int = 0,
    steps: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Build the stage's model (once), train, write ``summary.json`` in ``out``; returns it."""
    from teamgym.adapters.cpu_trainer import train
    from teamgym.adapters.local_model import LocalModelConfig, build_local_model

    if name not in STAGES:
        raise ValueError(f"unknown learning stage {name!r}; choose one of {', '.join(STAGES)}")
    stage = STAGES[name]
    run = Path(out)
    model_dir, run_dir = run / "model", run / "run"
    build_seconds = 0.0
    if not (model_dir / "config.json").exists():
        start = time.perf_counter()
        build_local_model(model_dir, LocalModelConfig(seed=seed, **stage.model))
        build_seconds = time.perf_counter() - start
        (run / "model_build.json").write_text(json.dumps({"seconds": build_seconds}) + "\n")
    elif (run / "model_build.json").exists():
        build_seconds = json.loads((run / "model_build.json").read_text())["seconds"]
    args = replace(
        stage.settings,
        model=str(model_dir),
        out=str(run_dir),
        steps=stage.settings.steps if steps is None else steps,
        seed=seed,
        resume=(run_dir / "metrics.jsonl").exists(),
    )
    train(args, progress=progress)
    summary = {
        "stage": name,
        "description": stage.description,
        "settings": asdict(replace(stage, settings=args)),
        "seed": seed,
        **summarize(run_dir, stage.target, build_seconds),
    }
    (run / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
