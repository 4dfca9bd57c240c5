"""``teamgym serve MODEL_DIR``: a local model directory as an OpenAI-compatible chat server.

Benchmark agents of kind ``openai`` (``openai:MODEL_DIR@http://127.0.0.1:8000/v1``) then play
it exactly as a ``transformers`` agent on the same directory would; see
:mod:`teamgym.adapters.agents.serve`. Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamgym.cli.common import CommandError, port

NAME = "serve"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command."""
    p = sub.add_parser(
        NAME, help="serve a local model directory as an OpenAI-compatible chat server"
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a Hugging Face model directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=port, default=8000, help="port to listen on (0: a free one)")
    p.add_argument(
        "--served-model-name",
        metavar="NAME",
        help="the model name clients send; default: MODEL_DIR as given",
    )
    p.add_argument(
        "--device", default="auto", choices=("auto", "cpu", "cuda"), help="where the model runs"
    )
    p.add_argument("--max-tokens", type=int, default=256, help="reply cap when a request sets none")
    p.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=2048,
        help="chats are cut on the left beyond this many tokens",
    )
    p.add_argument("--quiet", action="store_true", help="no access log")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Load the model, print the base URL, serve until Ctrl-C."""
    if not (Path(args.model_dir) / "config.json").is_file():
        raise CommandError(
            f"{args.model_dir} is not a model directory (no config.json); build a small local "
            f"one with `teamgym model init --out {args.model_dir}`, or pass a Hugging Face "
            "model directory"
        )
    from teamgym.adapters.agents.chat import load_chat_model
    from teamgym.adapters.agents.serve import make_server

    try:  # loaded once here (make_server finds it cached), so each failure says its own cause
        load_chat_model(args.model_dir, args.device)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot load the model in {args.model_dir}: {exc}") from exc
    try:
        server = make_server(
            args.model_dir,
            args.host,
            args.port,
            served_name=args.served_model_name,
            device=args.device,
            max_tokens=args.max_tokens,
            max_prompt_tokens=args.max_prompt_tokens,
            quiet=args.quiet,
        )
    except OSError as exc:  # the port is taken, the address is not ours
        raise CommandError(
            f"cannot listen on {args.host}:{args.port} ({exc}); pick another --port"
        ) from exc
    console.print(
        f"serving {args.model_dir} at [bold]{server.url}[/bold] as model "
        f"{server.served!r} (Ctrl-C stops)",
        soft_wrap=True,
    )
    console.file.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        server.server_close()
    return 0
