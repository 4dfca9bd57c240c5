"""SmolLM2's listener stage through verl's ``main_ppo`` with vLLM, every seed, beside the CPU
trainer's documented runs: held-out success against GRPO steps.

    python scripts/plot_main_ppo_listener.py docs/images/smollm2-listener-main-ppo.png \\
        runs/mp-listener-s0 runs/mp-listener-s1 runs/mp-listener-s2

Each directory holds a ``metrics.jsonl`` written by verl's file logger (``VERL_FILE_LOGGER_PATH``);
its validation rows (``val-aux/<env>/success/mean@1``: greedy, through vLLM) are the curve. The
CPU trainer's curves are its table in ``docs/results/pretrained.md`` (held-out success at steps
0, 6, 12, 18 and 24, one row a seed), drawn dashed: the runs themselves are not in the repository.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from plot_main_ppo_runs import main_ppo_curve  # scripts/ is sys.path[0] when run

REPO = Path(__file__).resolve().parents[1]
#: The CPU trainer's table: "| seed | held-out success: start, steps 6, 12, 18, 24 | ...".
TABLE = REPO / "docs" / "results" / "pretrained.md"
CPU_STEPS = [0, 6, 12, 18, 24]


def cpu_trainer_curves() -> dict[int, list[float]]:
    """Seed -> held-out success at :data:`CPU_STEPS`, from the CPU trainer's documented table."""
    text = TABLE.read_text()
    section = text[text.index("## GRPO on the listener") :]
    section = section[: section.index("\n## ", 1)]
    curves = {}
    for seed, values in re.findall(r"^\| (\d) \| ([0-9., *]+) \|", section, re.M):
        curves[int(seed)] = [float(v.strip(" *")) for v in values.split(",")]
    return curves


def main(argv: list[str]) -> int:
    """Draw the figure; returns an exit code."""
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, runs = Path(argv[0]), [Path(a) for a in argv[1:]]
    fig, ax = plt.subplots(figsize=(7, 4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, run in enumerate(runs):
        steps, success = main_ppo_curve(run)
        seed = re.search(r"(\d+)$", run.name)
        name = f"seed {seed[1]}" if seed else run.name
        ax.plot(steps, success, "o-", color=colours[k % 10], label=f"main_ppo + vLLM, {name}")
    for seed, values in sorted(cpu_trainer_curves().items()):
        ax.plot(
            CPU_STEPS, values, "s--", color=colours[seed % 10], alpha=0.5,
            label=f"teamgym train (CPU trainer), seed {seed}",
        )  # fmt: skip
    ax.axhline(0.9, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("GRPO step (16 episodes a step)")
    ax.set_ylabel("held-out success (greedy, 64 episodes)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("SmolLM2-135M-Instruct, listener stage")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
