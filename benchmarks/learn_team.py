"""Both agents learn, one shared model: ``signal-v0`` with 3 candidates (chance 1/3), a
curriculum of three GRPO phases on the shared reward, each starting from the last one's policy.

1. ``listener``: the scripted expert speaks (it names the target), the model learns to pick
   what is named (the listener stage with 3 candidates);
2. ``speaker``: phase 1's policy, frozen, listens (a ``checkpoint:`` teammate); the model, from
   phase 1's policy after a format warm-up on the ``babbler``'s replies (it names a random
   *listed* object, whatever the target), learns what to say from the shared reward alone: no
   expert reply is ever a training target of the speaker;
3. ``both``: the model plays both roles, from phase 2's policy.

The target (held-out greedy success >= 0.8) is measured in phase 3, where one model plays both
agents; ``summary.json`` has every phase's curve and evaluations, the training seconds over all
phases, and the words the final speaker uses for each target.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from teamgym.adapters.train_args import TrainArgs
from teamgym.benchmarks.learn import (
    LISTENER,
    LISTENER_MODEL,
    SIGNAL_NAMES,
    build_stage_model,
    machine,
    summarize,
)
from teamgym.names import EVAL_SEED_BASE

__all__ = ["DESCRIPTION", "PHASES", "phase_args", "plot_team", "run_team", "speaker_words"]

DESCRIPTION = (
    "signal-v0 with 3 candidates (chance 1/3), one shared model: the listener learns with the "
    "expert speaking, then the speaker learns against that listener frozen, then both"
)
TARGET = 0.8
SPEAKER, LISTENER_AGENT = "robot_0", "robot_1"
#: The listener stage's settings with 3 candidates and room for a speaker's reply.
TEAM = replace(LISTENER, env_kwargs={**SIGNAL_NAMES, "num_candidates": 3}, max_reply_tokens=16)
#: (name, what changes from :data:`TEAM`) of each phase, in order.
PHASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("listener", {"teammates": {SPEAKER: "expert"}, "steps": 40}),
    ("speaker", {"warmup_policy": "babbler", "steps": 40}),
    ("both", {"teammates": {}, "warmup_steps": 0, "steps": 20}),
)
#: Held-out episodes whose speaker messages ``summary.json`` reports.
WORD_EPISODES = 64
_SAY = re.compile(r"<say>(.*?)</say>", re.S)
_TARGET = re.compile(r"The target is: (.+)")


def phase_args(root: Path, seed: int, model_dir: Path) -> list[TrainArgs]:
    """Each phase's settings: phase 1 from ``model_dir``, the others from the previous phase's
    ``policy/``; phase 2's listener is phase 1's policy, frozen."""
    out: list[TrainArgs] = []
    start = model_dir
    for name, change in PHASES:
        if name == "speaker":
            change = {
                **change,
                "teammates": {LISTENER_AGENT: f"checkpoint:{root / 'listener' / 'policy'}"},
            }
        args = replace(TEAM, **change, model=str(start), out=str(root / name), seed=seed)
        out.append(args)
        start = root / name / "policy"
    return out


def speaker_words(policy: str | Path, args: TrainArgs, episodes: int = 64) -> dict[str, Any]:
    """The final model playing both agents greedily on held-out seeds: how often the speaker
    talks, and its messages for each target (the names the env uses, or words of its own?)."""
    from teamgym.adapters.checkpoint_policy import CheckpointPolicy
    from teamgym.envs import make

    env = make(args.env, **args.env_kwargs)
    player = CheckpointPolicy(policy, max_reply_tokens=args.max_reply_tokens)
    words: dict[str, Counter[str]] = {}
    talked = 0
    for k in range(episodes):
        obs, infos = env.reset(seed=EVAL_SEED_BASE + k)
        player.reset(k)
        target = _TARGET.search(obs[SPEAKER])
        replies = {a: player.act(a, obs[a], infos[a]) for a in env.agents}
        said = _SAY.search(replies[SPEAKER])
        talked += bool(said) and "<action>say</action>" in replies[SPEAKER]
        key = target.group(1).strip() if target else "?"
        words.setdefault(key, Counter())[said.group(1).strip() if said else "(pass)"] += 1
    env.close()
    return {
        "episodes": episodes,
        "communication_frequency": talked / episodes,
        "words": {t: dict(c.most_common()) for t, c in sorted(words.items())},
    }


def run_team(
    out: str | Path, seed: int = 0, progress: bool = True, steps: int | None = None
) -> dict[str, Any]:
    """Run (or resume) the three phases under ``out``; write and return ``summary.json``."""
    from teamgym.adapters.cpu_trainer import train

    root = Path(out)
    model_dir, build_seconds = build_stage_model(root, LISTENER_MODEL, seed)
    phases: list[dict[str, Any]] = []
    elapsed = build_seconds
    reached = None
    plan = phase_args(root, seed, model_dir)
    for (name, _), args in zip(PHASES, plan, strict=True):
        if steps is not None:
            args = replace(args, steps=steps)
        args = replace(args, resume=(Path(args.out) / "metrics.jsonl").exists())
        train(args, progress=progress)
        figures = summarize(args.out, TARGET)
        history = [
            json.loads(x) for x in (Path(args.out) / "metrics.jsonl").read_text().splitlines()
        ]
        if name == "both" and figures["reached_target"]:
            reached = {
                "step": figures["reached_target"]["step"],
                "train_seconds": round(elapsed + figures["reached_target"]["train_seconds"], 1),
            }
        elapsed += figures["train_seconds"]
        phases.append(
            {
                "phase": name,
                "settings": asdict(args),
                **figures,
                "communication_frequency": [h["communication_frequency"] for h in history],
            }
        )
    summary = {
        "stage": "team",
        "description": DESCRIPTION,
        "seed": seed,
        "target": TARGET,
        "phases": phases,
        "warmup_success": phases[0]["warmup_success"],
        "final_success": phases[-1]["final_success"],
        "steps": sum(p["steps"] for p in phases),
        "reached_target": reached,
        "train_seconds": round(elapsed, 1),
        "speaker": speaker_words(root / "both" / "policy", plan[-1], WORD_EPISODES),
        "machine": machine(),
    }
    (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_team(summary, root / "team.png")
    return summary


def plot_team(summary: dict[str, Any], path: str | Path) -> None:
    """Held-out success and training communication frequency over the phases' steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    offset = 0
    for phase in summary["phases"]:
        steps = [offset + s for s, _ in phase["evals"]]
        ax1.plot(steps, [v for _, v in phase["evals"]], "o-", label=phase["phase"])
        freq = phase["communication_frequency"]
        ax2.plot(range(offset + 1, offset + len(freq) + 1), freq, label=phase["phase"])
        offset += phase["steps"]
        for ax in (ax1, ax2):
            ax.axvline(offset + 0.5, color="gray", lw=0.5)
    ax1.axhline(summary["target"], color="gray", ls=":", label="target")
    ax1.axhline(1 / 3, color="black", ls="--", lw=0.8, label="chance")
    ax1.set(xlabel="GRPO step (phases in turn)", ylabel="held-out greedy success", ylim=(0, 1.02))
    ax2.set(xlabel="GRPO step (phases in turn)", ylabel="speaker talks (training rollouts)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    fig.suptitle(f"teamgym learn-bench team, seed {summary['seed']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
