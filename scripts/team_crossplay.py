"""A model per seat against one shared model, after the team stage: cross-play across seeds.

Reads the runs ``teamgym learn-bench team --seed N --out DIR`` (one shared model in phase 2)
and ``... --per-seat`` (a speaker's and a listener's model) left under each DIR, and plays every
seed's speaker with every seed's listener on the stage's held-out episodes, greedily (the
team stage's ``speaker_words``): the diagonal is each run's own team, the rest pairs a speaker
and a listener that never trained together. Prints one matrix per variant and the mean of
each part; writes ``OUT.json``.

    .venv/bin/python scripts/team_crossplay.py runs/team61/crossplay runs/team61/s0 \
        runs/team61/s1 runs/team61/s2
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from teamgym.benchmarks.learn.team import (
    LISTENER_AGENT,
    SPEAKER,
    WORD_EPISODES,
    final_models,
    phase_args,
    speaker_words,
)

VARIANTS = {"shared": "both", "per-seat": "both-per-seat"}


def matrix(runs: list[Path], folder: str, episodes: int) -> list[list[float]]:
    """``[i][j]``: held-out success of run i's speaker with run j's listener."""
    args = phase_args(runs[0], 0, runs[0] / "model")[-1]
    models = [final_models(run / folder) for run in runs]
    return [
        [
            speaker_words(
                {SPEAKER: speaker[SPEAKER], LISTENER_AGENT: listener[LISTENER_AGENT]},
                args,
                episodes,
            )["success"]
            for listener in models
        ]
        for speaker in models
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", help="where to write OUT.json")
    parser.add_argument("runs", nargs="+", type=Path, help="each seed's learn-bench team --out")
    parser.add_argument("--episodes", type=int, default=WORD_EPISODES)
    args = parser.parse_args()
    result = {"runs": [str(r) for r in args.runs], "episodes": args.episodes}
    for variant, folder in VARIANTS.items():
        m = matrix(args.runs, folder, args.episodes)
        n = len(m)
        own = [m[i][i] for i in range(n)]
        cross = [m[i][j] for i in range(n) for j in range(n) if i != j]
        result[variant] = {"matrix": m, "self": own, "cross": cross}
        print(f"{variant}: rows speaker of seed run, columns listener of seed run")
        for i, row in enumerate(m):
            print(f"  {args.runs[i].name}: " + "  ".join(f"{v:.2f}" for v in row))
        shown = statistics.fmean(cross) if cross else float("nan")
        print(f"  own team {statistics.fmean(own):.3f}, never trained together {shown:.3f}")
    Path(f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
