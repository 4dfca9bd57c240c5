"""A model per seat against one shared model, after the team stage: cross-play across seeds.

Reads the runs ``teamgym learn-bench team --seed N --out DIR`` (one shared model in phase 2)
and ``... --per-seat`` (a speaker's and a listener's model) left under each DIR, and plays every
seed's speaker with every seed's listener on the stage's held-out episodes, greedily (the
team stage's ``speaker_words``): the diagonal is each run's own team, the rest pairs a speaker
and a listener that never trained together. Prints one matrix per variant and the mean of
each part; writes ``OUT.json``.

    .venv/bin/python scripts/team_crossplay.py runs/team61/crossplay runs/team61/s0 \
        runs/team61/s1 runs/team61/s2

With ``--train``, each RUN is a ``teamgym train`` run directory of a signal game instead (its
``policy/``, or with ``--policy speaker=robot_0 --policy listener=robot_1`` its
``policies/speaker`` and ``policies/listener``) or a model directory (in both seats, e.g. the
warm-up model they started from), played with the first run's settings (env, reply limits,
stop strings): one matrix, every run's speaker with every run's listener.

    .venv/bin/python scripts/team_crossplay.py runs/sm61/crossplay --train runs/sm61/warm/warmup_model \
        runs/sm61/shared runs/sm61/per-seat
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import fields
from pathlib import Path

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.benchmarks.learn.team import (
    LISTENER_AGENT,
    SPEAKER,
    WORD_EPISODES,
    final_models,
    phase_args,
    speaker_words,
)

VARIANTS = {"shared": "both", "per-seat": "both-per-seat"}


def pairings(models: list[dict[str, Path]], args: TrainArgs, episodes: int) -> list[list[float]]:
    """``[i][j]``: held-out success of ``models[i]``'s speaker with ``models[j]``'s listener."""
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


def matrix(runs: list[Path], folder: str, episodes: int) -> list[list[float]]:
    """``[i][j]``: held-out success of run i's speaker with run j's listener."""
    args = phase_args(runs[0], 0, runs[0] / "model")[-1]
    return pairings([final_models(run / folder) for run in runs], args, episodes)


def train_models(run: Path) -> dict[str, Path]:
    """``{agent: model}`` of a ``teamgym train`` run (shared or a policy per seat), or a model
    directory in both seats."""
    if (run / "config.json").exists():
        return {SPEAKER: run, LISTENER_AGENT: run}
    return final_models(run)


def train_args(run: Path) -> TrainArgs:
    """The settings a ``teamgym train`` run saved in ``args.json``."""
    saved = json.loads((run / "args.json").read_text())
    return TrainArgs(**{f.name: saved[f.name] for f in fields(TrainArgs) if f.name in saved})


def train_matrix(runs: list[Path], episodes: int) -> list[list[float]]:
    """``[i][j]``: held-out success of run i's speaker with run j's listener, with the settings
    of the first ``teamgym train`` run among ``runs``."""
    args = train_args(next(r for r in runs if (r / "args.json").exists()))
    return pairings([train_models(run) for run in runs], args, episodes)


def _print(name: str, runs: list[Path], m: list[list[float]]) -> dict[str, list]:
    n = len(m)
    own = [m[i][i] for i in range(n)]
    cross = [m[i][j] for i in range(n) for j in range(n) if i != j]
    print(f"{name}: rows the speaker of each run, columns the listener")
    for i, row in enumerate(m):
        print(f"  {runs[i].name}: " + "  ".join(f"{v:.2f}" for v in row))
    shown = statistics.fmean(cross) if cross else float("nan")
    print(f"  own team {statistics.fmean(own):.3f}, never trained together {shown:.3f}")
    return {"matrix": m, "self": own, "cross": cross}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", help="where to write OUT.json")
    parser.add_argument("runs", nargs="+", type=Path, help="each seed's learn-bench team --out")
    parser.add_argument("--episodes", type=int, default=WORD_EPISODES)
    parser.add_argument(
        "--train", action="store_true", help="RUNS are teamgym train runs or model directories"
    )
    args = parser.parse_args()
    result = {"runs": [str(r) for r in args.runs], "episodes": args.episodes}
    if args.train:
        result["train"] = _print("train", args.runs, train_matrix(args.runs, args.episodes))
    for variant, folder in ({} if args.train else VARIANTS).items():
        m = matrix(args.runs, folder, args.episodes)
        result[variant] = _print(variant, args.runs, m)
    Path(f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
