"""Difference rewards against mixed sharing on the sharing stage of ``teamgym learn-bench``
(publicgoods-v0, two agents, one coin each, multiplier 1.5; free-riding pays below weight 1/3).

Per seed the stage's model is built and warmed up once; then weight 0 (selfish), weight 1
(fully shared) and difference rewards (``r_i = T - T_without_i``: the team score minus the team
score had agent ``i`` kept its coin, ``--sharing-mode difference``) train from it with the same
settings, seeds and budget. Writes ``OUT/summary.json`` and ``OUT/sharing.png``; a killed run
resumes where it stopped.

    .venv/bin/python scripts/compare_sharing.py runs/sharing-difference --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json

from teamgym.benchmarks.learn.base import machine
from teamgym.benchmarks.learn.sharing import Run, run_sharing

RUNS: tuple[Run, ...] = (
    ("w0", 0.0, "grpo"),
    ("w1", 1.0, "grpo"),
    ("difference", 0.0, "grpo", "difference"),
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the stage's)")
    a = p.parse_args()
    summary = run_sharing(a.out, seeds=tuple(a.seeds), steps=a.steps, runs=RUNS)
    print(json.dumps({"machine": machine(), "table": summary["table"]}, indent=1))


if __name__ == "__main__":
    main()
