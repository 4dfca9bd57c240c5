"""Advantage estimators side by side on the CPU trainer, on a stage where agents take several
turns: ``listener2``, the listener stage with two rounds (two picks an episode, each
rewarded); ``foraging``, a small foraging-v0 (both agents trained, one shared model; each item
loaded pays at its turn, an invalid command costs at its turn); or ``keydoor``, keydoor-v0 easy
(the treasure is the only reward); or ``team``, phase 2 of ``teamgym learn-bench team`` (one
shared model plays both agents of signal-v0 with 3 candidates, one turn each: the speaker's
message, then the listener's pick), from the seed's own phase 1, run once; or, one turn per
agent, ``listener`` and ``sharing``, learn-bench's stages of those names.

Per seed the stage's model is built and warmed up once; then each estimator trains from that
model with the same settings, seeds and budget. Writes ``OUT/summary.json`` (every run's
held-out curves: success and team return) and ``OUT/estimators.png`` (the stage's metric); a
killed run resumes where it stopped.

    .venv/bin/python scripts/compare_estimators.py runs/estimators --seeds 0 1 2 \
        --estimators grpo at_grpo gigpo --steps 40
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.cpu.trainer import train
from teamgym.benchmarks.learn.base import (
    BENCHMARK,
    LEARNER,
    LISTENER,
    LISTENER_MODEL,
    build_stage_model,
    machine,
    warm_start,
)
from teamgym.benchmarks.learn.sharing import MODEL as SHARING_MODEL
from teamgym.benchmarks.learn.sharing import SETTINGS as SHARING
from teamgym.benchmarks.learn.team import TEAM, phase_args

#: foraging-v0 made small enough to learn on 2 cores: a 4 x 4 field, 2 items, 10 turns; each
#: item loaded pays its loaders at that turn (a uniformly random team earns 0.45 of 1 on average)
FORAGING = {"size": 4, "num_items": 2, "max_agent_level": 2, "max_steps": 10}


def _grid_stage(env: str, env_kwargs: dict, warmup_steps: int) -> tuple[TrainArgs, dict]:
    """A grid-world stage: both agents trained on the benchmark learner, 4 seeds x 8 copies a
    step, held-out figures on 64 seeds every 5 steps, ``gamma`` 1."""
    settings = replace(
        BENCHMARK,
        env=env,
        env_kwargs=env_kwargs,
        episodes_per_step=4,
        group_size=8,
        warmup_steps=warmup_steps,
        eval_every=5,
        eval_episodes=64,
        gamma=1.0,
    )
    return settings, {**LEARNER, "corpus_envs": (env,)}


#: stage -> (settings, model): what each estimator trains with
STAGES = {
    "listener2": (
        replace(
            LISTENER, env_kwargs={**LISTENER.env_kwargs, "num_rounds": 2}, gamma=1.0, eval_every=5
        ),
        LISTENER_MODEL,
    ),
    "foraging": _grid_stage("foraging-v0", FORAGING, warmup_steps=400),
    "keydoor": _grid_stage("keydoor-v0", {"difficulty": "easy"}, warmup_steps=300),
    "team": (TEAM, LISTENER_MODEL),
    # one turn per agent: learn-bench's listener stage (the expert speaks, one listener
    # trained) and sharing stage (public goods, weight 0.7), as those stages run them
    "listener": (LISTENER, LISTENER_MODEL),
    "sharing": (SHARING, SHARING_MODEL),
}


def team_start(seed_dir: Path, seed: int, steps: int) -> tuple[TrainArgs, str]:
    """The team stage's start, as ``learn-bench team`` makes it: phase 1 (the listener stage)
    trained once under ``seed_dir/listener``, then phase 2's format warm-up (the speaker's turns
    the palette babbler's, the listener's phase 1's greedy replies) once under
    ``seed_dir/warmup``; returns phase 2's settings with ``steps`` steps, and the warmed model."""
    from teamgym.adapters.cpu.run_state import RunDir
    from teamgym.adapters.cpu.warmup import warm_up

    model_dir, _ = build_stage_model(seed_dir, LISTENER_MODEL, seed)
    first, both = phase_args(seed_dir, seed, model_dir)
    train(replace(first, resume=(Path(first.out) / "metrics.jsonl").exists()), progress=True)
    base = replace(both, out=str(seed_dir / "warmup"), steps=steps)
    RunDir(base.out).start(base)
    return base, warm_up(base.warmup, base.evaluation, seed_dir / "warmup")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--stage", choices=sorted(STAGES), default="listener2")
    p.add_argument("--warmup-steps", type=int, help="the stage's format warm-up (steps)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument(
        "--estimators",
        nargs="+",
        default=["grpo", "at_grpo", "gigpo"],
        choices=["grpo", "team_grpo", "at_grpo", "team_at_grpo", "gigpo", "team_gigpo"],
    )
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    root = Path(args.out)
    settings, model = STAGES[args.stage]
    if args.warmup_steps is not None:
        settings = replace(settings, warmup_steps=args.warmup_steps)
    runs = []
    for seed in args.seeds:
        # 1. the seed's model, warmed up once (reused on resume under the same settings)
        seed_dir = root / f"seed{seed}"
        if args.stage == "team":
            base, start_model = team_start(seed_dir, seed, args.steps)
        else:
            base, start_model = warm_start(seed_dir, settings, model, seed, args.steps)
        # 2. each estimator from the warmed-up model
        for estimator in args.estimators:
            run_dir = seed_dir / estimator
            run = replace(
                base,
                model=start_model,
                out=str(run_dir),
                warmup_steps=0,
                adv_estimator=estimator,
                resume=(run_dir / "metrics.jsonl").exists(),
            )
            history = train(run, progress=True)
            curve = [(h["step"], h["eval_success"]) for h in history if "eval_success" in h]
            returns = [
                (h["step"], h["eval_team_return"]) for h in history if "eval_team_return" in h
            ]
            start_eval = json.loads((run_dir / "start.json").read_text())
            start = start_eval["eval_success"]
            runs.append(
                {
                    "seed": seed,
                    "estimator": estimator,
                    "curve": [(0, start), *curve],
                    "returns": [(0, start_eval["eval"]["team_return"]), *returns],
                    "train_seconds": round(sum(h["seconds"] for h in history), 1),
                    "idle": [h.get("idle") for h in history],
                }
            )
            print(f"seed {seed} {estimator}: held-out success {curve}, team return {returns}")
    summary = {
        "stage": args.stage,
        "settings": json.loads(json.dumps(settings.__dict__, default=str)),
        "steps": args.steps,
        "runs": runs,
        "machine": machine(),
    }
    (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(
        runs,
        root / "estimators.png",
        "returns" if args.stage in ("foraging", "sharing") else "curve",
    )


def plot(runs: list[dict], path: Path, key: str = "curve") -> None:
    """Held-out success (``curve``) or team return (``returns``) per step: one panel per
    estimator, a line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["estimator"] for r in runs))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3), sharey=True)
    for ax, name in zip([axes] if len(names) == 1 else axes, names, strict=True):
        for r in (r for r in runs if r["estimator"] == name):
            xs, ys = zip(*r[key], strict=True)
            ax.plot(xs, ys, marker="o", label=f"seed {r['seed']}")
        ax.set_title(name)
        ax.set_xlabel("GRPO step")
        if key == "curve":
            ax.set_ylim(0, 1.05)
    label = "held-out success" if key == "curve" else "held-out team return"
    (axes if len(names) == 1 else axes[0]).set_ylabel(f"{label} (greedy)")
    (axes if len(names) == 1 else axes[-1]).legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
