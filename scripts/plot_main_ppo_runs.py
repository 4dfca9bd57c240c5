"""Held-out success against GRPO steps for ``main_ppo`` runs, one curve a run, every run given.

    python scripts/plot_main_ppo_runs.py docs/images/smollm2-signal-both-seats.png \\
        --title "SmolLM2, both seats of signal-v0" "runs/sig-s0=babbler warm-up, seed 0" ...

Each run directory holds a ``metrics.jsonl`` written by verl's file logger
(``VERL_FILE_LOGGER_PATH``); its validation rows (``val-aux/<env>/success/mean@1``: greedy,
through vLLM) are the curve. ``RUN=LABEL`` names a curve (default: the directory's name); runs
whose labels share the text before the first comma share a colour.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main_ppo_curve(run: Path) -> tuple[list[int], list[float]]:
    """(step, held-out success) at each validation of a ``main_ppo`` run."""
    steps, success = [], []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        value = next(
            (v for k, v in row["data"].items() if re.fullmatch(r"val-aux/.+/success/mean@1", k)),
            None,
        )
        if value is not None:
            steps.append(int(row["step"]))
            success.append(float(value))
    return steps, success


def main(argv: list[str]) -> int:
    """Draw the figure; returns an exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("runs", nargs="+", metavar="RUN[=LABEL]")
    parser.add_argument("--title", default="main_ppo runs")
    parser.add_argument("--target", type=float, default=0.9, help="a dotted line (default 0.9)")
    args = parser.parse_args(argv)
    fig, ax = plt.subplots(figsize=(7, 4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    groups: dict[str, str] = {}
    for spec in args.runs:
        path, _, label = spec.partition("=")
        label = label or Path(path).name
        colour = groups.setdefault(label.split(",")[0], colours[len(groups) % 10])
        steps, success = main_ppo_curve(Path(path))
        ax.plot(steps, success, "o-", color=colour, label=label, alpha=0.8)
    ax.axhline(args.target, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("held-out success (greedy)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(args.title)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
