"""Reward sharing changes what is learned: GRPO on a public-goods game at sharing weights 0,
0.7 and 1 (and ``team_grpo`` next to ``grpo``), every run from the same warmed-up model.

Two agents, one round, no talk; each holds one coin and replies ``contribute 1`` (put it in the
pot) or ``contribute 0`` (keep it); the pot is multiplied by 1.5 and split evenly. Keeping pays
its owner ``1 - 1.5/2 = 0.25`` more, contributing adds ``1.5 - 1 = 0.5`` to the team (team
return: 2 when both keep, 3 when both contribute). Under ``RewardSharing(weight=w)`` (mixed,
team = sum) contributing changes an agent's shared reward by ``-(1 - w) * 0.25 + w * 0.5``:
-0.25 at weight 0 (free-riding pays), +0.275 at 0.7, +0.5 at 1; the sign turns at ``w = 1/3``.
One shared model plays both agents. Per seed the local model is built and warmed up once
(random valid replies: about half contribute), then each run trains from that model;
``summary.json`` has every run's training curve and held-out (greedy) evaluation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.benchmarks.learn.base import BENCHMARK, LEARNER, build_stage_model

__all__ = ["PRETRAINED", "RUNS", "SETTINGS", "plot_sharing", "run_sharing", "sharing_table"]

#: Two agents, one round, one coin each, the multiplier fixed at 1.5, no talk phase.
ENV_KWARGS = {
    "num_agents": 2,
    "difficulty": "easy",
    "num_rounds": 1,
    "multiplier": 1.5,
    "multiplier_spread": 0.0,
    "endowment": 1,
    "communication": False,
    # a reply that is no command contributes nothing: at the default 0.01 it is a free-ride
    # GRPO finds within a few steps (every reply drifts to junk); at 0.5 it never pays
    "invalid_penalty": 0.5,
}
#: The listener's model, with publicgoods text in its tokenizer's corpus.
MODEL = {**LEARNER, "corpus_envs": ("signal-v0", "thor-assembly-v0", "publicgoods-v0")}
SETTINGS = replace(
    BENCHMARK,
    env="publicgoods-v0",
    env_kwargs=ENV_KWARGS,
    steps=15,
    episodes_per_step=8,
    lr=5e-4,
    warmup_steps=100,
    eval_every=15,
    eval_episodes=64,
)
#: The stage's settings for a pretrained model (``run_sharing(model=DIR)``, ``teamgym learn-bench
#: sharing --model DIR``), such as SmolLM2-135M-Instruct: an imported instruct model needs a
#: fine-tuning learning rate (1e-5, as the listener's GRPO with SmolLM2) and a short warm-up to
#: the two commands, not 100 steps at 5e-4. Every episode's text is the same here (one round, the
#: multiplier fixed), so 2 episode seeds of 8 copies a step sample as many choices as 16 seeds of 1,
#: and 32 held-out greedy episodes say no more than 4: 32 keeps 64 sampled choices per measure. One
#: micro-batch holds the whole step (32 trajectories, 2 distinct prompts: one per agent), so each
#: prompt runs once a pass: the memory is a few hundred tokens' activations. No guard: its
#: watch on success (everyone contributing) rolled weight 0's free-riding back to the start at
#: step 5 on SmolLM2, where that free-riding is the result being measured.
PRETRAINED = replace(
    SETTINGS,
    guard_patience=0,
    episodes_per_step=2,
    group_size=8,
    micro_batch=32,
    lr=1e-5,
    warmup_steps=10,
    warmup_lr=2e-5,
    eval_episodes=32,
    max_reply_tokens=16,
)
#: A run of the stage: (name, sharing weight, advantage estimator), and optionally the sharing
#: mode (``mixed`` when left out; ``difference`` ignores the weight).
Run = tuple[str, float, str] | tuple[str, float, str, str]
#: Each run, in the order they run.
RUNS: tuple[Run, ...] = (
    ("w0", 0.0, "grpo"),
    ("w0.7", 0.7, "grpo"),
    ("w1", 1.0, "grpo"),
    ("w0.7-team", 0.7, "team_grpo"),
)
DESCRIPTION = (
    "publicgoods-v0, 2 agents, 1 round, 1 coin each, multiplier 1.5, one shared model: GRPO at "
    "sharing weights 0, 0.7, 1 (and team_grpo at 0.7) from the same warm-up; free-riding pays "
    "below weight 1/3, contributing above"
)


def run_sharing(
    out: str | Path,
    seeds: tuple[int, ...] = (0, 1, 2),
    steps: int | None = None,
    runs: tuple[Run, ...] = RUNS,
    progress: bool = True,
    model: str | Path | None = None,
) -> dict[str, Any]:
    """Every run of ``runs`` for every seed (resuming finished parts); writes ``summary.json``
    and ``sharing.png`` in ``out`` and returns the summary. ``model``: a pretrained model
    directory every seed starts from, under :data:`PRETRAINED`, instead of the stage's local
    model built per seed under :data:`SETTINGS`."""
    from teamgym.adapters.cpu.trainer import train

    root = Path(out)
    settings = SETTINGS if model is None else PRETRAINED
    warmups: dict[int, dict[str, Any]] = {}
    records: list[dict[str, Any]] = []
    for seed in seeds:
        seed_dir = root / f"seed{seed}"
        base, start_model, warmups[seed] = _warmed_up(seed_dir, seed, steps, model)
        for name, weight, estimator, *mode in runs:
            run_dir = seed_dir / name
            args = replace(
                base,
                model=start_model,
                out=str(run_dir),
                warmup_steps=0,
                sharing_weight=weight,
                sharing_mode=cast(Any, mode[0] if mode else "mixed"),  # TrainArgs checks it
                adv_estimator=cast(Any, estimator),
                resume=(run_dir / "metrics.jsonl").exists(),
            )
            history = train(args, progress=progress)
            record = _run_record(name, seed, weight, estimator, history)
            record["sharing_mode"] = args.sharing_mode
            policy = run_dir / "policy"
            record["held_out"]["p_contribute"] = contribution_probability(policy, args)
            record["held_out"]["sampled_contribution"] = sampled_contribution(policy, args)
            records.append(record)
    summary = {
        "stage": "sharing",
        "description": DESCRIPTION,
        "settings": asdict(replace(settings, steps=settings.steps if steps is None else steps)),
        "model": MODEL if model is None else {"path": str(model)},
        "seeds": list(seeds),
        "warmup": warmups,
        "runs": records,
        "table": sharing_table(records, warmups),
    }
    (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_sharing(summary, root / "sharing.png")
    return summary


def _warmed_up(
    seed_dir: Path, seed: int, steps: int | None, model: str | Path | None = None
) -> tuple[TrainArgs, str, dict[str, Any]]:
    """One seed's model, built (or ``model``, pretrained) and warmed up once (reused on resume
    under the same settings): (the runs' base settings, the warm-up model, the warm-up's record
    with its contribution)."""
    from teamgym.adapters.cpu.run_state import RunDir
    from teamgym.adapters.cpu.warmup import warm_up

    if model is None:
        model_dir, build_seconds = build_stage_model(seed_dir, MODEL, seed)
    else:
        model_dir, build_seconds = Path(model), 0.0
    settings = SETTINGS if model is None else PRETRAINED
    base = replace(
        settings,
        model=str(model_dir),
        out=str(seed_dir / "warmup"),
        seed=seed,
        steps=settings.steps if steps is None else steps,
    )
    RunDir(base.out).start(base)  # its warm-up model is reused only under the same settings
    start_model = warm_up(base.warmup, base.evaluation, seed_dir / "warmup")
    warmup = json.loads((seed_dir / "warmup" / "warmup.json").read_text())
    warmup["eval"]["p_contribute"] = contribution_probability(start_model, base)
    warmup["eval"]["sampled_contribution"] = sampled_contribution(start_model, base)
    return base, start_model, {"build_seconds": round(build_seconds, 1), **warmup}


def sampled_contribution(model_dir: str | Path, args: TrainArgs) -> float:
    """Share of ``2 * args.eval_episodes`` contribution choices (both agents, held-out seeds)
    that contribute, replies sampled at temperature 1 with a fixed server seed: independent
    draws of the policy, so two such shares compare with a two-proportion z-test. An invalid
    reply contributes nothing."""
    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.rollout import evaluate_metrics
    from teamgym.envs.seeds import HELD_OUT_SET

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return evaluate_metrics(
        str(model_dir), tokenizer, args.evaluation, seed=HELD_OUT_SET, temperature=1.0
    )["score"]


def contribution_probability(model_dir: str | Path, args: TrainArgs) -> float:
    """The policy's probability of ``contribute 1`` against ``contribute 0`` (their normalised
    share; the rest of its mass is invalid replies), averaged over the two agents' prompts. The
    game's text does not depend on the seed here, so this is exactly the sampling policy that
    the greedy held-out evaluation rounds to 0 or 1."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from teamgym.adapters.verl.dataset import episode_rows
    from teamgym.envs.seeds import eval_seeds

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    shares = []
    rows = episode_rows(args.env, args.env_kwargs, eval_seeds(0, 1), "eval")
    for messages in json.loads(rows[0]["extra_info"]["prompts"]).values():
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt = tokenizer.encode(text, add_special_tokens=False)
        logp = []
        for k in (0, 1):
            reply = tokenizer.encode(f"<action>contribute {k}</action>", add_special_tokens=False)
            with torch.no_grad():
                logits = model(torch.tensor([prompt + reply]), use_cache=False).logits[0]
            steps = torch.log_softmax(logits[len(prompt) - 1 : -1].float(), -1)
            logp.append(float(steps.gather(1, torch.tensor(reply)[:, None]).sum()))
        shares.append(1.0 / (1.0 + float(np.exp(logp[0] - logp[1]))))
    return float(np.mean(shares))


def _run_record(
    name: str,
    seed: int,
    weight: float,
    estimator: str,
    history: list[dict[str, Any]],
) -> dict[str, Any]:
    """One run's line of the summary: its curve, last held-out evaluation and times."""
    last_eval = next(h for h in reversed(history) if "eval_success" in h)
    return {
        "run": name,
        "seed": seed,
        "sharing_weight": weight,
        "adv_estimator": estimator,
        "steps": len(history),
        "train_seconds": round(sum(h["seconds"] for h in history), 1),
        "cpu_seconds": round(sum(h.get("cpu_seconds", 0.0) for h in history), 1),
        "curve": {
            "contribution": [h["score"] for h in history],
            "team_return": [h["team_return"] for h in history],
        },
        "held_out": {
            "step": last_eval["step"],
            "contribution": last_eval["eval_score"],
            "team_return": last_eval["eval_team_return"],
            "invalid_action_rate": last_eval["eval_invalid_action_rate"],
        },
    }


def sharing_table(
    records: list[dict[str, Any]], warmups: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per run name: the final policy's probability of contributing (mean and per seed), the
    greedy held-out contribution and team return, with the warm-up's as the first row."""
    rows = []
    start = [w["eval"] for w in warmups.values() if "eval" in w]
    if start:
        rows.append(
            {
                "run": "warm-up",
                "contribution": float(np.mean([s["score"] for s in start])),
                "p_contribute": float(np.mean([s["p_contribute"] for s in start])),
                "p_contribute_per_seed": [s["p_contribute"] for s in start],
                "sampled_contribution": float(
                    np.mean([s.get("sampled_contribution", np.nan) for s in start])
                ),
                "team_return": float(np.mean([s["team_return"] for s in start])),
            }
        )
    for name in dict.fromkeys(r["run"] for r in records):
        mine = [r for r in records if r["run"] == name]
        rows.append(
            {
                "run": name,
                "sharing_weight": mine[0]["sharing_weight"],
                "adv_estimator": mine[0]["adv_estimator"],
                "contribution": float(np.mean([r["held_out"]["contribution"] for r in mine])),
                "p_contribute": float(np.mean([r["held_out"]["p_contribute"] for r in mine])),
                "p_contribute_per_seed": [r["held_out"]["p_contribute"] for r in mine],
                "sampled_contribution": float(
                    np.mean([r["held_out"]["sampled_contribution"] for r in mine])
                ),
                "team_return": float(np.mean([r["held_out"]["team_return"] for r in mine])),
                "train_seconds": float(np.mean([r["train_seconds"] for r in mine])),
            }
        )
    return rows


def plot_sharing(summary: dict[str, Any], path: Path) -> None:
    """Training mean contribution per step (one line per seed, mean bold) for each run name,
    and the held-out contribution and team return per run name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "w0": "tab:red",
        "w0.7": "tab:blue",
        "w1": "tab:green",
        "w0.7-team": "tab:purple",
        "difference": "tab:orange",
    }
    labels = {
        "difference": "difference rewards",
        "w0": "weight 0 (selfish)",
        "w0.7": "weight 0.7 (default)",
        "w1": "weight 1 (fully shared)",
        "w0.7-team": "weight 0.7, team_grpo",
    }
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = list(dict.fromkeys(r["run"] for r in summary["runs"]))
    for name in names:
        curves = [r["curve"]["contribution"] for r in summary["runs"] if r["run"] == name]
        width = min(len(c) for c in curves)
        color = colors.get(name, "tab:gray")
        style = "--" if name.endswith("-team") else "-"
        for c in curves:
            ax1.plot(range(1, len(c) + 1), c, style, color=color, alpha=0.25, lw=1)
        mean = np.mean([c[:width] for c in curves], axis=0)
        ax1.plot(
            range(1, width + 1), mean, style, color=color, lw=2.2, label=labels.get(name, name)
        )
    start = [w["eval"]["p_contribute"] for w in summary["warmup"].values() if "eval" in w]
    if start:
        ax1.axhline(float(np.mean(start)), color="gray", ls=":", label="warm-up P(contribute)")
    ax1.set_xlabel("GRPO step")
    ax1.set_ylabel("share of agents contributing (training rollouts)")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend(fontsize=8)
    ax1.set_title("what is learned, per sharing weight")

    rows = [r for r in summary["table"] if r["run"] != "warm-up"]
    x = np.arange(len(rows))
    ax2.bar(
        x, [r["p_contribute"] for r in rows], color=[colors.get(r["run"], "tab:gray") for r in rows]
    )
    for i, r in enumerate(rows):
        ax2.plot([i] * len(r["p_contribute_per_seed"]), r["p_contribute_per_seed"], "k.")
    ax2.set_xticks(x, [r["run"] for r in rows])
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("P(contribute 1) of the final policy (dots: seeds)")
    twin = ax2.twinx()
    twin.plot(x, [r["team_return"] for r in rows], "ko-", label="team return (greedy, held-out)")
    twin.set_ylabel("held-out team return (2: all free-ride, 3: all contribute)")
    twin.set_ylim(1.9, 3.1)
    twin.legend(loc="upper left", fontsize=8)
    ax2.set_title("after GRPO, held-out")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
