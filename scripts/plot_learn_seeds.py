"""One figure of a learning stage over seeds: held-out success against training seconds, and KL.

    python scripts/plot_learn_seeds.py docs/learn-listener-fast.png \\
        runs/learn-listener-s0 runs/learn-listener-s1 runs/learn-listener-s2

    python scripts/plot_learn_seeds.py docs/learn-team.png \\
        runs/learn-all/team runs/learn-team-s1 runs/learn-team-s2

    python scripts/plot_learn_seeds.py docs/images/smollm2-listener.png \
        runs/smollm2-listener-s0 runs/smollm2-listener-s1 runs/smollm2-listener-s2

Each directory is a ``teamgym learn-bench STAGE --out DIR`` run or a ``teamgym train --out
DIR`` run (its ``start.json`` or ``warmup.json`` is the curve's start); a ``team`` run's phases
(those its ``summary.json`` names: ``listener/``, then ``both/``) are drawn one after the
other, a thin line in the seed's colour where each later one starts. The x axis counts what
``summary.json`` counts as training time (model build, warm-up, update steps; evaluations
excluded), so a time budget reads off directly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

#: Stages drawn against the listener stage's 5-minute budget.
STAGES_WITH_BUDGET = ("listener", "guard", "sharing")


def phase_dirs(run: Path) -> list[Path]:
    """The run's GRPO directories in order: ``run/`` of a single-run stage, or the team
    stage's phases (named in its ``summary.json``)."""
    if (run / "metrics.jsonl").exists():  # teamgym train
        return [run]
    if (run / "run").is_dir():
        return [run / "run"]
    return [run / p["phase"] for p in json.loads((run / "summary.json").read_text())["phases"]]


def curve(run: Path) -> tuple[list[float], list[float], list[int], list[float], list[float]]:
    """Training seconds and held-out success at each evaluation (each phase's warm-up first),
    KL per GRPO step (steps counted over the phases), and the seconds each later phase starts."""
    build = run / "model_build.json"
    t = json.loads(build.read_text())["seconds"] if build.exists() else 0.0
    xs: list[float] = []
    ys: list[float] = []
    steps: list[int] = []
    kl: list[float] = []
    starts: list[float] = []
    for k, phase in enumerate(phase_dirs(run)):
        if k:
            starts.append(t)
        start = phase / "warmup.json"
        warmup = json.loads((start if start.exists() else phase / "start.json").read_text())
        t += warmup.get("seconds", 0.0)  # no warm-up: the start model's evaluation
        xs.append(t)
        ys.append(warmup["eval_success"])
        history = [json.loads(x) for x in (phase / "metrics.jsonl").read_text().splitlines()]
        offset = len(steps)
        for h in history:
            t += h["seconds"]
            if "eval_success" in h:
                xs.append(t)
                ys.append(h["eval_success"])
            steps.append(offset + h["step"])
            kl.append(h["kl"])
    return xs, ys, steps, kl, starts


def run_summary(run: Path) -> dict:
    """A learn-bench run's ``summary.json``; for a ``teamgym train`` run, its seed, env and
    whether its seats had a policy each (``--policy``) or one shared model."""
    if (run / "summary.json").exists():
        return json.loads((run / "summary.json").read_text())
    args = json.loads((run / "args.json").read_text())
    variant = (
        f"a policy per seat ({', '.join(args['policy'])})" if args.get("policy") else "one model"
    )
    return {
        "seed": args["seed"],
        "stage": f"train --env {args['env']}",
        "target": None,
        "variant": variant,
    }


def main(out: str, runs: list[str]) -> None:
    """Plot ``runs`` (learn-bench or ``teamgym train`` run directories) into ``out``."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    summary: dict = {}
    for d in runs:
        summary = run_summary(Path(d))
        xs, ys, steps, kl, starts = curve(Path(d))
        label = f"seed {summary['seed']}" + (
            f", {summary['variant']}" if "variant" in summary else ""
        )
        (line,) = ax1.plot(xs, ys, "o-", label=label)
        ax2.plot(steps, kl, color=line.get_color(), label=label)
        for x in starts:
            ax1.axvline(x, color=line.get_color(), lw=0.6, alpha=0.6)
    if summary.get("target", 0.9) is not None:
        ax1.axhline(summary.get("target", 0.9), color="gray", ls=":", label="target")
    if summary.get("stage") in STAGES_WITH_BUDGET:  # the listener stage's 5-minute budget
        ax1.axvline(300, color="black", ls="--", label="5 minutes")
    ax1.set_xlabel("training seconds (build + warm-up + GRPO steps; evaluations excluded)")
    ax1.set_ylabel("held-out greedy success")
    ax1.set_ylim(0, 1.02)
    ax1.legend(fontsize=8)
    ax2.set_xlabel("GRPO step")
    ax2.set_ylabel("KL to the reference")
    ax2.legend(fontsize=8)
    prefix = "teamgym " if summary.get("stage", "").startswith("train") else "teamgym learn-bench "
    fig.suptitle(f"{prefix}{summary.get('stage', '')}: every seed run")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: plot_learn_seeds.py OUT.png RUN_DIR [RUN_DIR ...]")
    main(sys.argv[1], sys.argv[2:])
