"""Smoke test of the adapter throughput benchmark (figures are printed by `teamgym verl-bench`)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

from teamgym.benchmarks.verl_throughput import measure_throughput


def test_benchmark_runs_and_overlaps_every_agent(model_dir) -> None:
    (r,) = measure_throughput(
        episodes=2,
        num_agents=3,
        num_rounds=1,
        latency=0.01,
        model_dir=model_dir,
        servers=("latency",),
    )
    assert r.rows == 6 and r.turns == 2
    assert r.max_in_flight == 6, "every agent of every episode is in flight at once"
    assert r.rows_per_s > 0 and r.tokens_per_s > 0 and r.concurrency_ratio is not None
