"""``teamgym verl-kl-watch FILE``: warn when a VERL run's KL to the reference passes its target."""

from __future__ import annotations

import argparse

from rich.console import Console

NAME = "verl-kl-watch"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(NAME, help="warn when a VERL run's KL to the reference passes its target")
    p.add_argument("file", help="VERL file-logger JSONL (VERL_FILE_LOGGER_PATH)")
    p.add_argument("--target", type=float, metavar="KL", default=0.02, help="KL target")
    p.add_argument("--follow", action="store_true", help="keep reading as the run writes")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Print one warning per step above the target, then the count."""
    from teamgym.adapters.verl.monitor import kl_alerts

    alerts = 0
    for message in kl_alerts(args.file, args.target, follow=args.follow):
        alerts += 1
        console.print(f"[yellow]KL warning:[/yellow] {message}")
    console.print(f"{alerts} step(s) above the KL target {args.target}")
    return 0
