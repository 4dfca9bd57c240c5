"""Peak memory and seconds per GRPO step of ``teamgym train`` on SmolLM2's listener stage, at
the batch docs/results/pretrained.md documents (4 episode seeds x 4 copies a step).

    python scripts/bench_train_memory.py MODEL_DIR [--steps N] [--label TEXT] [-- TRAIN ARGS...]

Runs ``python -m teamgym train`` (the interpreter running this script, so a ``PYTHONPATH``
naming another checkout measures that checkout) under ``scripts/peak_memory.py`` with the
documented flags plus ``TRAIN ARGS`` (``--micro-batch 16``, say), then prints one line: peak
PSS and summed RSS of the process tree, the median seconds of steps 2..N (step 1 also pays
for first-call warm-ups), and the mean CPU seconds a step. The figures in docs/speed.md come
from it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The listener stage as docs/results/pretrained.md trains it (evaluations off: steps only).
STAGE = [
    "--env", "signal-v0", "--env-arg", "num_rounds=1", "--env-arg", "speaker=fixed",
    "--env-arg", "num_candidates=2", "--env-arg", "num_attributes=1", "--env-arg", "pick_by=name",
    "--teammate", "robot_0=expert", "--episodes-per-step", "4", "--group-size", "4",
    "--warmup-steps", "0", "--lr", "1e-5", "--guard-patience", "0", "--eval-every", "0",
    "--max-reply-tokens", "16", "--seed", "0",
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the training run's exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the SmolLM2 directory (teamgym model import smollm2)")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps (default 4)")
    parser.add_argument("--label", default="", help="a name for the printed line")
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_args(argv[:cut]), argv[cut + 1 :]  # more train flags, after --
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        out = Path(tmp) / "run"
        train = [sys.executable, "-m", "teamgym", "train", "--model", args.model, "--out", str(out)]
        train += [*STAGE, "--steps", str(args.steps), *extra]
        proc = subprocess.run(
            [sys.executable, str(HERE / "peak_memory.py"), "--", *train],
            stderr=subprocess.PIPE,
            text=True,
        )
        sys.stderr.write(proc.stderr[-3000:] if proc.returncode else "")
        found = re.search(r"peak PSS ([\d.]+) GiB, peak RSS \(summed\) ([\d.]+) GiB", proc.stderr)
        metrics = (out / "metrics.jsonl").read_text().splitlines() if out.exists() else []
    if proc.returncode or not found or not metrics:
        print(f"bench_train_memory: the run failed (exit {proc.returncode})", file=sys.stderr)
        return proc.returncode or 1
    steps = [json.loads(line) for line in metrics]
    seconds = statistics.median(s["seconds"] for s in steps[1:] or steps)
    cpu = statistics.mean(s["cpu_seconds"] for s in steps)
    print(
        f"{args.label or ' '.join(extra) or 'defaults'}: peak PSS {found[1]} GiB, peak RSS "
        f"{found[2]} GiB, {seconds:.1f} s/step (median of steps 2-{len(steps)}), "
        f"{cpu:.1f} CPU s/step"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
