"""Both agents learn, one shared model: ``signal-v0`` with 3 candidates (chance 1/3), a
curriculum of two GRPO phases on the shared reward, the second from the first one's policy.

1. ``listener``: the listener stage itself (2 candidates, the scripted expert speaks and names
   the target): the model learns to pick what is named;
2. ``both``: 3 candidates, the model plays both agents. A format warm-up first: the speaker's
   turns are the ``palette-babbler``'s replies (it names an object drawn from the whole
   palette, so its examples carry nothing of the target), the listener's turns phase 1's own greedy replies (so the shared model keeps what
   that role learned; a phase that trains one role only breaks the other's reply format).
   Then GRPO on both roles' turns: what the speaker says is learned from the shared reward
   alone; no expert reply is ever a training target of the speaker.

The target (held-out greedy success >= 0.8) is measured in phase 2, where one model plays both
agents; ``summary.json`` has both phases' curves and evaluations, the training seconds over
the phases, the speaker's probability of naming the target before and after the warm-up
(:func:`speaker_prior`, against chance) and the messages the final speaker sends for each target.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.benchmarks.learn.base import (
    LISTENER,
    LISTENER_MODEL,
    SIGNAL_NAMES,
    build_stage_model,
    machine,
    summarize,
)
from teamgym.envs.lineup import Lineup
from teamgym.envs.metrics import EpisodeTracker
from teamgym.envs.seeds import eval_seeds
from teamgym.names import CHECKPOINT_PREFIX

__all__ = [
    "DESCRIPTION",
    "FIRST",
    "PER_SEAT",
    "TEAM",
    "final_models",
    "phase_args",
    "plot_team",
    "prior_figures",
    "run_team",
    "speaker_prior",
    "speaker_words",
]

DESCRIPTION = (
    "signal-v0 with 3 candidates (chance 1/3), one shared model playing both agents: the "
    "listener stage first (the expert speaks), then both roles learn from the shared reward"
)
TARGET = 0.8
#: Phase 1 is summarised against the listener stage's own target.
FIRST_TARGET = 0.9
SPEAKER, LISTENER_AGENT = "robot_0", "robot_1"
#: Phase 1: the listener stage's settings (2 candidates, the expert speaks).
FIRST = LISTENER
#: Phase 2: 3 candidates, no teammate, room for a speaker's reply; a gentler rate than phase
#: 1's (at phase 1's 1e-3 held-out success stalls far below the target). 150 warm-up steps
#: and 40 GRPO steps reach the target on most seeds, and a longer warm-up does not help (the
#: runs are in docs/results/learning.md, team stage). The speaker's warm-up teacher names
#: objects from the whole palette: the ``babbler`` named a *listed* one, and the target is
#: always listed, so its examples leaned a little towards the answer.
TEAM = replace(
    LISTENER,
    env_kwargs={**SIGNAL_NAMES, "num_candidates": 3},
    teammates={},
    max_reply_tokens=16,
    warmup_policy="palette-babbler",
    warmup_steps=150,
    warmup_lr=3e-4,
    lr=3e-4,
    steps=40,
)
#: Phase 2's policies with a model per seat (``learn-bench team --per-seat``, issue 61): the
#: speaker's and the listener's, each its own model, optimiser and update.
PER_SEAT = {"speaker": (SPEAKER,), "listener": (LISTENER_AGENT,)}
#: Held-out episodes whose speaker messages ``summary.json`` reports.
WORD_EPISODES = 64
#: Held-out first turns on which the speaker's prior on the target is measured.
PRIOR_EPISODES = 128


def phase_args(root: Path, seed: int, model_dir: Path, per_seat: bool = False) -> list[TrainArgs]:
    """Both phases' settings: phase 1 from ``model_dir`` into ``root/listener``, phase 2 from
    phase 1's policy into ``root/both``, its warm-up replaying phase 1's listener; ``per_seat``:
    phase 2 into ``root/both-per-seat`` with a policy per seat (:data:`PER_SEAT`), both starting
    from phase 1's policy."""
    first = replace(FIRST, model=str(model_dir), out=str(root / "listener"), seed=seed)
    policy = root / "listener" / "policy"
    both = replace(
        TEAM,
        model=str(policy),
        out=str(root / ("both-per-seat" if per_seat else "both")),
        seed=seed,
        warmup_teachers={LISTENER_AGENT: f"{CHECKPOINT_PREFIX}{policy}"},
        policy={name: list(seats) for name, seats in PER_SEAT.items()} if per_seat else {},
    )
    return [first, both]


def final_models(run: str | Path) -> dict[str, Path]:
    """``{agent: its final model}`` of a phase-2 run: the shared ``policy``, or each seat's
    ``policies/NAME``."""
    run = Path(run)
    if (run / "policy" / "config.json").exists():
        return {SPEAKER: run / "policy", LISTENER_AGENT: run / "policy"}
    return {seat: run / "policies" / name for name, (seat,) in PER_SEAT.items()}


def speaker_words(
    models: str | Path | dict[str, Path], args: TrainArgs, episodes: int = 64
) -> dict[str, Any]:
    """The final model (or ``{agent: model}``) playing both agents greedily on held-out seeds,
    replies cut at the stop strings as in training: how often a message reaches the listener,
    how often the speaker's action is a legal one, the messages delivered for each target (the
    names the env uses, or a code of the team's own?) and the held-out success."""
    from teamgym.envs import make

    env = make(args.env, **args.env_kwargs)
    by_seat = models if isinstance(models, dict) else dict.fromkeys(env.possible_agents, models)
    # the policies in their seats; each resets with the episode's number (the training rule:
    # first_stream=None), though greedy replies do not depend on it
    players = Lineup.build(
        args.env,
        {agent: f"{CHECKPOINT_PREFIX}{by_seat[agent]}" for agent in env.possible_agents},
        share=True,
        first_stream=None,
        max_reply_tokens=args.max_reply_tokens,
        stop=args.stop,
        forced_moves=args.forced_moves,
    ).bind(env)
    words: dict[str, Counter[str]] = {}
    talked = legal = won = 0
    for k, episode_seed in enumerate(eval_seeds(0, episodes)):
        obs, infos = env.reset(seed=episode_seed)
        players.reset(k)
        target = _line_after(obs[SPEAKER], "The target is: ") or "?"
        tracker = EpisodeTracker(env.possible_agents)
        replies = {a: players.act(a, obs[a], infos[a]) for a in env.agents}
        obs, rewards, _, _, infos = env.step(replies)
        tracker.step(rewards, infos)
        first = (obs, infos)
        while env.agents:  # the rest of the episode: the listener's pick
            later = {a: players.act(a, obs[a], infos[a]) for a in env.agents}
            obs, rewards, _, _, later_infos = env.step(later)
            tracker.step(rewards, later_infos)
            infos = {**infos, **later_infos}
        won += tracker.metrics().success
        obs, infos = first
        events = infos[LISTENER_AGENT]["events"]
        sent = any(e["type"] == "message" and e["sender"] == SPEAKER for e in events)
        talked += sent
        legal += not any(e["type"] == "invalid_action" and e["agent"] == SPEAKER for e in events)
        heard = _line_after(obs[LISTENER_AGENT], f"- {SPEAKER}: ") if sent else None
        words.setdefault(target, Counter())[heard or "(no message)"] += 1
    env.close()
    return {
        "episodes": episodes,
        "communication_frequency": talked / episodes,
        "legal_speaker_actions": legal / episodes,
        "success": won / episodes,
        "words": {t: dict(c.most_common()) for t, c in sorted(words.items())},
    }


def speaker_prior(model_dir: str | Path, args: TrainArgs, episodes: int = 128) -> dict[str, Any]:
    """How much of the answer a model's speaker holds before any reward: on ``episodes``
    held-out first turns, the probability of each palette object's message
    (:meth:`SignalPaletteBabbler.message`, the reply the warm-up teaches; its prompt built
    as the warm-up builds its examples) renormalised over the palette; see
    :func:`prior_figures`. ``mass`` is the part of the whole reply distribution those
    messages hold."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from teamgym.adapters.cpu.grpo import receptive_field
    from teamgym.adapters.cpu.warmup import _example
    from teamgym.envs import make
    from teamgym.envs.signal.baselines import SignalPaletteBabbler

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    context = min(args.prompt_length, receptive_field(model.config) or args.prompt_length)
    env = make(args.env, **args.env_kwargs)
    babbler = SignalPaletteBabbler()
    babbler.bind(env)
    palette = babbler.palette
    probs, targets, mass = [], [], []
    for episode_seed in eval_seeds(0, episodes):
        obs, infos = env.reset(seed=episode_seed)
        chat = [
            {"role": "system", "content": infos[SPEAKER]["instructions"]},
            {"role": "user", "content": obs[SPEAKER]},
        ]
        logp = []
        for name in palette:
            seq, n_reply = _example(tokenizer, chat, babbler.message(name), context)
            ids = torch.tensor([seq[:-1]])  # the reply without EOS: rollouts stop at </action>
            start = len(seq) - n_reply
            with torch.no_grad():
                logits = model(input_ids=ids, use_cache=False).logits[0, start - 1 : -1]
            picked = torch.log_softmax(logits.float(), -1).gather(1, ids[0, start:, None])
            logp.append(float(picked.sum()))
        p = np.exp(np.array(logp) - max(logp))
        probs.append(p / p.sum())
        targets.append(palette.index(_line_after(obs[SPEAKER], "The target is: ") or ""))
        mass.append(float(np.exp(logp).sum()))
    env.close()
    return {
        "episodes": episodes,
        **prior_figures(np.array(probs), targets),
        "mass": round(float(np.mean(mass)), 4),
    }


def prior_figures(probs: np.ndarray, targets: list[int]) -> dict[str, Any]:
    """From each episode's probabilities over the palette (rows) and its target's index:
    ``p_target``, the mean probability on the target; ``p_if_ignoring_target``, what a speaker
    whose probabilities do not depend on the target would score on these same targets (each
    object's mean probability times how often it is the target: the episodes' targets are not
    spread evenly, so this, not ``chance``, is the baseline); ``lift``, averaged over the
    objects, the mean probability of naming an object when it is the target minus when it is
    not (0: no tie to the answer; 1: always names the target)."""
    targets_arr = np.asarray(targets)
    on_target = probs[np.arange(len(targets_arr)), targets_arr]
    share = np.bincount(targets_arr, minlength=probs.shape[1]) / len(targets_arr)
    lifts = [
        probs[targets_arr == c, c].mean() - probs[targets_arr != c, c].mean()
        for c in range(probs.shape[1])
        if 0 < (targets_arr == c).sum() < len(targets_arr)
    ]
    return {
        "palette": int(probs.shape[1]),
        "chance": 1 / probs.shape[1],
        "p_target": round(float(on_target.mean()), 4),
        "p_if_ignoring_target": round(float(probs.mean(0) @ share), 4),
        "lift": round(float(np.mean(lifts)), 4),
    }


def _warmed(run: Path) -> Path:
    """The phase's warm-up model (the speaker's, with a model per seat), or the model it
    started from when it had no warm-up."""
    model = run / "warmup_model"
    if not (model / "config.json").exists():
        model = run / "warmup_models" / "speaker"
    return (
        model
        if (model / "config.json").exists()
        else Path(json.loads((run / "args.json").read_text())["model"])
    )


def _line_after(text: str, prefix: str) -> str | None:
    """The rest of ``text``'s first line that starts with ``prefix``, stripped."""
    return next((x[len(prefix) :].strip() for x in text.splitlines() if x.startswith(prefix)), None)


def run_team(
    out: str | Path,
    seed: int = 0,
    progress: bool = True,
    steps: int | None = None,
    per_seat: bool = False,
) -> dict[str, Any]:
    """Run (or resume) the two phases under ``out``; write and return ``summary.json``
    (``per_seat``: phase 2 with a model per seat, ``summary-per-seat.json``; phase 1 is the
    same run, so both variants under one ``out`` share it)."""
    from teamgym.adapters.cpu.trainer import train

    root = Path(out)
    model_dir, build_seconds = build_stage_model(root, LISTENER_MODEL, seed)
    phases: list[dict[str, Any]] = []
    elapsed = build_seconds
    reached = None
    plan = phase_args(root, seed, model_dir, per_seat)
    for name, args in zip(("listener", "both"), plan, strict=True):
        if steps is not None:
            args = replace(args, steps=steps)
        args = replace(args, resume=(Path(args.out) / "metrics.jsonl").exists())
        train(args, progress=progress)
        figures = summarize(args.out, FIRST_TARGET if name == "listener" else TARGET)
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
        "warmup_success": phases[-1]["warmup_success"],
        "final_success": phases[-1]["final_success"],
        "steps": sum(p["steps"] for p in phases),
        "reached_target": reached,
        "train_seconds": round(elapsed, 1),
        "warmup_speaker": {
            "before": speaker_prior(root / "listener" / "policy", plan[-1], PRIOR_EPISODES),
            "after": speaker_prior(_warmed(Path(plan[-1].out)), plan[-1], PRIOR_EPISODES),
        },
        "speaker": speaker_words(final_models(plan[-1].out), plan[-1], WORD_EPISODES),
        "per_seat": per_seat,
        "machine": machine(),
    }
    suffix = "-per-seat" if per_seat else ""
    (root / f"summary{suffix}.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_team(summary, root / f"team{suffix}.png")
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
    ax1.axhline(1 / 3, color="black", ls="--", lw=0.8, label="chance in phase 2 (3 candidates)")
    ax1.set(xlabel="GRPO step (phases in turn)", ylabel="held-out greedy success", ylim=(0, 1.02))
    ax2.set(
        xlabel="GRPO step (phases in turn)",
        ylabel="messages per agent-step (0.25: every episode)",
        ylim=(0, 0.3),
    )
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    fig.suptitle(f"teamgym learn-bench team, seed {summary['seed']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
