"""The single-run stages (``listener``, ``guard``): one model, one GRPO run, one target."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from teamgym.benchmarks.learn.base import (
    BENCHMARK,
    LEARNER,
    LISTENER,
    LISTENER_MODEL,
    SIGNAL_NAMES,
    Stage,
    build_stage_model,
    machine,
    summarize,
)

__all__ = ["STAGES", "run_stage"]

STAGES: dict[str, Stage] = {
    "listener": Stage(
        description="signal-v0, the speaker played by the scripted expert, the listener learns "
        "to pick the object the message names (2 candidates, chance 0.5)",
        settings=LISTENER,
        model=LISTENER_MODEL,
        target=0.9,
    ),
    "guard": Stage(
        description="the previous listener settings (window-64 model, 100 warm-up steps) at a "
        "learning rate that blows up (1e-3): KL passes its limit, the guard restores the last "
        "stable checkpoint and halves the rate, the run recovers",
        settings=replace(
            BENCHMARK,
            env_kwargs=SIGNAL_NAMES,
            teammates={"robot_0": "expert"},
            lr=1e-3,
            kl_limit=0.2,
            guard_patience=2,
            steps=20,
            warmup_steps=100,
        ),
        model=LEARNER,
        target=0.9,
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
    from teamgym.adapters.cpu.trainer import train

    if name not in STAGES:
        raise ValueError(f"unknown learning stage {name!r}; choose one of {', '.join(STAGES)}")
    stage = STAGES[name]
    run = Path(out)
    model_dir, build_seconds = build_stage_model(run, stage.model, seed)
    run_dir = run / "run"
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
        "machine": machine(),
    }
    (run / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
