"""``teamgym verl-kl-watch FILE``: warn when a VERL run's KL to the reference passes its target,
and report each validation's self-play/cross-play gap (printed; served to Prometheus with
``--metrics-port``)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

NAME = "verl-kl-watch"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(
        NAME,
        help="warn when a VERL run's KL to the reference passes its target; report cross-play",
    )
    p.add_argument("file", help="VERL file-logger JSONL (VERL_FILE_LOGGER_PATH)")
    p.add_argument("--target", type=float, metavar="KL", default=0.02, help="KL target")
    p.add_argument("--follow", action="store_true", help="keep reading as the run writes")
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve each validation's success per partner and the self-play/cross-play gap as "
        "Prometheus gauges on 127.0.0.1:PORT",
    )
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Print one warning per step above the target and a line per validation with partners,
    then the count."""
    from teamgym.adapters.verl.monitor import crossplay_figures, kl_messages, log_records

    export = _exporter(args.metrics_port)
    alerts = 0
    for record in log_records(args.file, follow=args.follow):
        for message in kl_messages(record, args.target):
            alerts += 1
            console.print(f"[yellow]KL warning:[/yellow] {message}")
        for env, figures in crossplay_figures(record.get("data", {})).items():
            shown = ", ".join(f"{p} {v:.2f}" for p, v in figures["partners"].items())
            gap = (
                ""
                if figures["gap"] is None
                else f"; self-play minus cross-play {figures['gap']:+.2f}"
            )
            console.print(f"step {record.get('step')} validation, {env} success: {shown}{gap}")
            export(env, figures)
    console.print(f"{alerts} step(s) above the KL target {args.target}")
    return 0


def _exporter(port: int | None) -> Any:
    """A function setting the cross-play gauges (labelled by env and partner), or a no-op."""
    if port is None:
        return lambda env, figures: None
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    registry = CollectorRegistry()
    success = Gauge(
        "teamgym_crossplay_success",
        "Validation success with each partner (self: self-play)",
        ["env", "partner"],
        registry=registry,
    )
    gap = Gauge(
        "teamgym_crossplay_gap",
        "Validation success in self-play minus the mean over held-out partners",
        ["env"],
        registry=registry,
    )
    start_http_server(port, addr="127.0.0.1", registry=registry)

    def export(env: str, figures: dict[str, Any]) -> None:
        for partner, value in figures["partners"].items():
            success.labels(env=env, partner=partner).set(value)
        if figures["gap"] is not None:
            gap.labels(env=env).set(figures["gap"])

    return export
