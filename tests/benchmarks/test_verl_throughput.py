"""Smoke test of the adapter throughput benchmark (figures are printed by `teamgym verl-bench`)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

from teamgym.benchmarks.verl_throughput import measure_throughput

SMALL = {"episodes": 2, "num_agents": 3, "num_rounds": 1, "latency": 0.01, "servers": ("latency",)}


@pytest.mark.parametrize("stock", [False, True])
def test_v1_worker_is_measured_with_its_processes_cpu(model_dir, stock) -> None:
    """teamgym's ``TeamAgentLoopWorkerTQ`` (the loop built by a call) and, with ``stock``,
    verl's own ``AgentLoopWorkerTQ`` (a Ray actor) with TransferQueue, n=2 sessions per row;
    the CPU counted includes the actor's process (that every agent of an episode is in flight
    at once: test_verl_agent_loop)."""
    (r,) = measure_throughput(**SMALL, model_dir=model_dir, n=2, stock=stock)
    assert r.stock is stock and r.rows == 12 and r.episodes == 4 and r.turns == 2
    assert r.tokens_per_s > 0 and r.concurrency_ratio is not None
    assert r.cpu_seconds > 0 and r.cpu_ms_per_agent_turn == pytest.approx(
        r.cpu_seconds / (r.rows * r.turns) * 1e3
    )
    # by process: the worker actor found by its pid, TransferQueue's processes beside it
    assert r.cpu_ms_by_process["worker"] > 0
    assert any(role.startswith("ray::TransferQueue") for role in r.cpu_ms_by_process)
    assert sum(r.cpu_ms_by_process.values()) == pytest.approx(r.cpu_ms_per_agent_turn, rel=0.01)
    assert r.idle_cpu_ms_per_agent_turn >= 0


def test_v1_batch_cut_across_two_workers_counts_both(model_dir) -> None:
    """``--workers 2``: the batch is cut across two worker actors as verl's manager cuts it;
    both actors' CPU is counted as the workers' (neither shows under its process title), and
    the phases end at the last episode's end and at the batch in the trainer's hands."""
    (r,) = measure_throughput(**SMALL, model_dir=model_dir, workers=2)
    assert r.workers == 2
    assert r.rows == 6 and r.episodes == 2  # 2 episode rows, one per worker, 3 agents each
    assert r.cpu_ms_by_process["worker"] > 0
    assert not any("AgentLoopWorker" in role for role in r.cpu_ms_by_process), r.cpu_ms_by_process
    assert set(r.phases) == {"submit", "to_last_episode_end", "after_last"}
    assert r.phases["to_last_episode_end"] >= r.turns * SMALL["latency"]
    # the phases are timed inside the measured call (a wall clock, not its monotonic one)
    assert sum(r.phases.values()) <= r.seconds + 0.01


def test_verl_bench_as_typed_measures_both_servers(tmp_path) -> None:
    """``teamgym verl-bench`` with no ``--server`` (default ``both``: the latency double and the
    local model, whose server is pickled into the v1 worker's Ray actor) prints both rows."""
    import json
    import subprocess
    import sys

    out = tmp_path / "figures.json"
    args = ["--episodes", "2", "--agents", "2", "--rounds", "1", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "verl-bench", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())["results"]
    assert [f["server"] for f in figures] == ["latency", "model"]
    # a row per episode, one trajectory per agent
    assert all(f["rows"] == 4 and not f["stock"] for f in figures)
    assert "teamgym's" in proc.stdout
