"""One figure of a learning stage over seeds: held-out success against training seconds, and KL.

    python scripts/plot_learn_seeds.py docs/learn-listener-fast.png \\
        runs/learn-listener-s0 runs/learn-listener-s1 runs/learn-listener-s2

Each directory is a ``teamgym learn-bench STAGE --out DIR`` run. The x axis counts what
``summary.json`` counts as training time (model build, warm-up, update steps; evaluations
excluded), so the 5-minute line reads off directly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def curve(run: Path) -> tuple[list[float], list[float], list[int], list[float]]:
    """Training seconds and held-out success at each evaluation (the warm-up's first), and KL
    per GRPO step."""
    warmup = json.loads((run / "run" / "warmup.json").read_text())
    build = run / "model_build.json"
    t = (json.loads(build.read_text())["seconds"] if build.exists() else 0.0) + warmup["seconds"]
    xs, ys = [t], [warmup["eval_success"]]
    history = [json.loads(x) for x in (run / "run" / "metrics.jsonl").read_text().splitlines()]
    for h in history:
        t += h["seconds"]
        if "eval_success" in h:
            xs.append(t)
            ys.append(h["eval_success"])
    return xs, ys, [h["step"] for h in history], [h["kl"] for h in history]


def main(out: str, runs: list[str]) -> None:
    """Plot ``runs`` (learn-bench run directories) into ``out``."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    summary: dict = {}
    for d in runs:
        summary = json.loads((Path(d) / "summary.json").read_text())
        xs, ys, steps, kl = curve(Path(d))
        (line,) = ax1.plot(xs, ys, "o-", label=f"seed {summary['seed']}")
        ax2.plot(steps, kl, color=line.get_color(), label=f"seed {summary['seed']}")
    ax1.axhline(summary.get("target", 0.9), color="gray", ls=":", label="target")
    ax1.axvline(300, color="black", ls="--", label="5 minutes")
    ax1.set_xlabel("training seconds (build + warm-up + GRPO; evaluations excluded)")
    ax1.set_ylabel("held-out greedy success")
    ax1.set_ylim(0, 1.02)
    ax1.legend(fontsize=8)
    ax2.set_xlabel("GRPO step")
    ax2.set_ylabel("KL to the reference")
    ax2.legend(fontsize=8)
    fig.suptitle(f"teamgym learn-bench {summary.get('stage', '')}: every seed run")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: plot_learn_seeds.py OUT.png RUN_DIR [RUN_DIR ...]")
    main(sys.argv[1], sys.argv[2:])
