"""``teamgym model init``: a small local model and tokenizer, built with no download."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands.common import positive_int

NAME = "model"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``model`` and its one subcommand, ``init``."""
    p = sub.add_parser(NAME, help="local models")
    msub = p.add_subparsers(dest="model_command", required=True)
    m = msub.add_parser("init", help="build a small local model and tokenizer (no download)")
    m.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output directory (a Hugging Face model directory)",
    )
    m.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the corpus and the weights"
    )
    m.add_argument("--layers", type=positive_int, metavar="N", default=2, help="transformer blocks")
    m.add_argument(
        "--sliding-window",
        type=positive_int,
        default=None,
        metavar="TOKENS",
        help="attention window in tokens (Qwen2 sliding-window attention); full attention if omitted",
    )
    m.add_argument("--hidden-size", type=positive_int, metavar="N", default=64, help="model width")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Build the model directory and print its hash."""
    from teamgym.adapters.agents.local_model import (
        LocalModelConfig,
        build_local_model,
        directory_hash,
    )

    out = build_local_model(
        args.out,
        LocalModelConfig(
            seed=args.seed,
            num_hidden_layers=args.layers,
            hidden_size=args.hidden_size,
            intermediate_size=2 * args.hidden_size,
            sliding_window=args.sliding_window,
        ),
    )
    console.print(f"local model written to {out} (sha256 {directory_hash(out)[:16]})")
    return 0
