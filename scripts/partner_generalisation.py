"""Frozen partners on a laptop: does a listener follow speakers it never met?

The listener stage (``teamgym learn-bench listener``: signal-v0, one attribute, two
candidates, the toy model of one layer) with the speaker seat played by frozen partners that
mean the same thing with different words (``convention:STYLE``: ``red``, ``the red``, ``red
one``, ``it is red``). Per seed the model is built and format-warmed once (with the bare
speaker, as the stage does); then each condition trains from it with the same settings:

``--experiment framing``: ``one`` trains with the bare speaker alone (``expert``), held out
``the``, ``one``, ``itis``; ``pool`` with three (``expert``, ``the``, ``one``, equal weights),
held out ``itis``. ``--experiment negation``: the held-out speakers are ``itis`` and ``isnot``
(``is not blue``: it names the other object); ``one`` trains with the bare speaker, ``pool``
with it and ``not`` (``not blue``).

Every evaluation plays the held-out episodes with the training partners and with the held-out
ones (the CPU trainer's ``--eval-partner``). Writes ``OUT/summary.json`` (every run's curves)
and ``OUT/partners.png``; a killed run resumes where it stopped.

    .venv/bin/python scripts/partner_generalisation.py runs/partners --seeds 0 1 2
    .venv/bin/python scripts/partner_generalisation.py runs/partners-negation \
        --experiment negation --seeds 0 1 2
    .venv/bin/python scripts/partner_generalisation.py runs/partners-negation-150 \
        --experiment negation --only pool --steps 150 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from teamgym.adapters.cpu.trainer import train
from teamgym.benchmarks.learn.base import LISTENER, LISTENER_MODEL, machine, warm_start

#: experiment -> condition -> (training partners, held-out partners)
EXPERIMENTS = {
    "framing": {
        "one": (["expert"], ["convention:the", "convention:one", "convention:itis"]),
        "pool": (["expert", "convention:the", "convention:one"], ["convention:itis"]),
    },
    "negation": {
        "one": (["expert"], ["convention:itis", "convention:isnot"]),
        "pool": (["expert", "convention:not"], ["convention:itis", "convention:isnot"]),
    },
}
SETTINGS = replace(
    LISTENER, teammates={}, partner_seats=["robot_0"], partners=["expert"], eval_episodes=64
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--experiment", choices=list(EXPERIMENTS), default="framing")
    p.add_argument("--only", help="one condition of the experiment (default: each)")
    p.add_argument("--steps", type=int, default=SETTINGS.steps)
    args = p.parse_args()
    root = Path(args.out)
    conditions = EXPERIMENTS[args.experiment]
    if args.only:
        conditions = {args.only: conditions[args.only]}
    runs = []
    for seed in args.seeds:
        seed_dir = root / f"seed{seed}"
        base, start_model = warm_start(seed_dir, SETTINGS, LISTENER_MODEL, seed, args.steps)
        for condition, (partners, held_out) in conditions.items():
            run_dir = seed_dir / condition
            run = replace(
                base,
                model=start_model,
                out=str(run_dir),
                warmup_steps=0,
                partners=partners,
                eval_partners=held_out,
                resume=(run_dir / "metrics.jsonl").exists(),
            )
            history = train(run, progress=True)
            start = json.loads((run_dir / "start.json").read_text())["eval"]
            first = {"step": 0, "eval_success": start["success"]}
            first |= {f"eval_{k}": v for k, v in start.items() if k.startswith("crossplay_")}
            evals = [first, *(h for h in history if "eval_success" in h)]
            runs.append(
                {
                    "seed": seed,
                    "condition": condition,
                    "partners": partners,
                    "held_out": held_out,
                    "curve": [
                        {
                            "step": h["step"],
                            "train_partners": h["eval_success"],
                            "held_out": h["eval_crossplay_success"],
                            **{
                                p: h.get(f"eval_crossplay_success/{p}", h["eval_crossplay_success"])
                                for p in held_out
                            },
                        }
                        for h in evals
                    ],
                    "train_seconds": round(sum(h["seconds"] for h in history), 1),
                }
            )
            last = runs[-1]["curve"][-1]
            print(f"seed {seed} {condition}: final {last}")
    summary = {
        "settings": json.loads(json.dumps(SETTINGS.__dict__, default=str)),
        "experiment": args.experiment,
        "conditions": conditions,
        "steps": args.steps,
        "runs": runs,
        "machine": machine(),
    }
    (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(runs, conditions, root / "partners.png")


def plot(runs: list[dict], conditions: dict, path: Path) -> None:
    """Held-out success per step, one panel per condition: with the training partners (solid)
    and with each held-out partner (dashed, dotted), a colour per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(conditions), figsize=(5 * len(conditions), 3.4), sharey=True)
    axes = [axes] if len(conditions) == 1 else list(axes)
    styles = ["--", ":", "-."]
    for ax, (name, (partners, held_out)) in zip(axes, conditions.items(), strict=True):
        for i, r in enumerate(r for r in runs if r["condition"] == name):
            steps = [c["step"] for c in r["curve"]]
            colour = f"C{i}"
            ax.plot(
                steps,
                [c["train_partners"] for c in r["curve"]],
                color=colour,
                marker="o",
                markersize=3,
                label=f"seed {r['seed']}: training partners",
            )
            for style, p in zip(styles, held_out, strict=False):
                ax.plot(
                    steps,
                    [c[p] for c in r["curve"]],
                    color=colour,
                    linestyle=style,
                    label=f"seed {r['seed']}: {p.removeprefix('convention:')} (held out)",
                )
        ax.set_title(f"{name}: trained with {', '.join(partners)}", fontsize=8)
        ax.set_xlabel("GRPO step")
        ax.set_ylim(-0.02, 1.05)
        ax.legend(loc="lower right", fontsize=5, ncol=2)
    axes[0].set_ylabel("held-out success (greedy)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
