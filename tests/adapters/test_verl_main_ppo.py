"""verl 0.9.1's real ``main_ppo`` (default v1 trainer: ``TaskRunnerV1``, ``AgentLoopManagerTQ``,
TransferQueue, FSDP2) trains 2 steps on the CPU with teamgym's agent loop and a local model, with
``grpo`` and with ``team_grpo``, through what verl does to rows at scale: a rollout server dying
mid-episode (the episode seed is left out whole) and batches verl pads with synthetic rows.

Stock verl: the CPU pieces are a test-only plugin (``tests/adapters/verl_cpu/``) that verl loads
through its own ``VERL_USE_EXTERNAL_MODULES`` hook: a CPU platform (gloo), and a rollout backend
``teamgym_cpu`` registered in verl's rollout registries whose server answers ``generate()`` with
teamgym's ``LocalModelServer`` and receives the actor's weights after every step. Its switches:
``TEAMGYM_CPU_ROLLOUT_CRASH_STEP`` (die once mid-episode in that step) and
``TEAMGYM_CPU_ROLLOUT_SCRIPT=listener-picks`` (the listener's pick turns answered with a random
valid pick, so returns differ and GRPO has a signal the untrained model cannot give).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")
pytest.importorskip("ray")

RUNNER = Path(__file__).resolve().parent / "verl_cpu" / "run_main_ppo.py"


def _run_main_ppo(
    model_dir: Path,
    dataset_dir: Path,
    out: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: float = 900,
):
    """Run the driver in its own session (Ray's processes share its fate); returns (rc, log)."""
    log_path = out / "main_ppo.log"
    out.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(RUNNER), str(model_dir), str(dataset_dir), str(out), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, log_path.read_text(errors="replace")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _padding(log: str) -> list[tuple[int, int]]:
    """verl's own record of each step's batch padding: (rows, rows after padding)."""
    return [(int(a), int(b)) for a, b in re.findall(r"Upsampled batch from (\d+) to (\d+)", log)]


CRASH = {"TEAMGYM_CPU_ROLLOUT_CRASH_STEP": "1"}


@pytest.mark.slow
def test_main_ppo_v1_trains_two_steps_on_cpu(model_dir, dataset_dir, tmp_path) -> None:
    """``teamgym.adapters.verl.train.main`` -> verl ``main_ppo.main``: 2 FSDP2 ranks on gloo
    (two logical Ray GPUs), each with a ``teamgym_cpu`` rollout replica; 4 rows x n=2 a step,
    ``grpo``; in step 1 a rollout server dies mid-episode."""
    start = time.monotonic()
    rc, log = _run_main_ppo(model_dir, dataset_dir, tmp_path / "run", "--ranks=2", env=CRASH)
    elapsed = time.monotonic() - start
    assert rc == 0, f"main_ppo exited with {rc} after {elapsed:.0f}s:\n{log[-6000:]}"
    # step 1: the crashed instance (2 rows) and, as groups of one, the other copy of its rows
    # (2 more) are left out; verl pads the 4 left to 8 with rows of zero advantage
    assert _padding(log) == [(4, 8)], _padding(log)

    # the trainer's own per-step metrics (verl's file logger)
    steps = {row["step"]: row["data"] for row in _jsonl(tmp_path / "run" / "metrics.jsonl")}
    assert sorted(steps) == [1, 2]
    for step, m in steps.items():
        assert m["training/global_step"] == step
        for key in ("critic/score/mean", "critic/rewards/mean", "actor/loss", "actor/entropy"):
            assert math.isfinite(m[key]), (step, key, m[key])
        assert m["actor/grad_norm"] > 0, step  # the update had a gradient (entropy bonus at least)
        assert m["response_length/mean"] > 0
        assert m["num_turns/mean"] >= 3  # multi-turn: at least two replies per agent
        # every trajectory of step k came from the weights synced after step k - 1
        assert m["training/off_policy/trajectory_staleness/max"] == 0, step
        assert m["training/off_policy/trajectory_spans/max"] == 1, step

    # the CPU rollout servers (one per rank): served generate() and got the actor's weights
    events = _jsonl(tmp_path / "run" / "rollout_server.jsonl")
    assert [e["global_steps"] for e in events if e["event"] == "crash"] == [0]  # in step 1
    syncs = [e for e in events if e["event"] == "update_weights"]
    assert len(syncs) == 6, syncs
    by_replica = {r: [e for e in syncs if e["replica_rank"] == r] for r in (0, 1)}
    for replica, rows in by_replica.items():
        assert [e["global_steps"] for e in rows] == [0, 1, 2], replica  # init, after each step
        assert [e["weight_version"] for e in rows] == [1, 2, 3], replica
        assert len({e["checksum"] for e in rows}) == 3, rows  # the weights changed, and arrived
        calls = [e["generate_calls"] for e in rows]
        assert calls[0] == 0 and calls[1] > 0 and calls[2] > calls[1], (replica, calls)
    for v in range(3):  # both replicas got the same (gathered, unsharded) parameters
        assert by_replica[0][v]["checksum"] == pytest.approx(by_replica[1][v]["checksum"])
    step_times = [round(steps[s]["timing_s/step"], 1) for s in (1, 2)]
    print(f"main_ppo: 2 steps in {elapsed:.0f}s (step times {step_times}s)")


@pytest.mark.slow
def test_main_ppo_team_grpo_survives_a_crash_and_padding_and_learns(
    model_dir, dataset_dir, tmp_path
) -> None:
    """``team_grpo`` through ``TaskRunnerV1``: 6 rows x n=2 a step, mini-batches of 5 rows x n
    on 2 ranks, so verl pads every step (to a multiple of 10); in step 1 a rollout server dies
    mid-episode. The listener's picks are scripted so returns differ: advantages are non-zero
    and, with no entropy bonus and no KL loss, the gradient is the policy gradient's alone."""
    rc, log = _run_main_ppo(
        model_dir,
        dataset_dir,
        tmp_path / "run",
        "--ranks=2",
        "algorithm.adv_estimator=team_grpo",
        "data.train_batch_size=6",
        "actor_rollout_ref.actor.ppo_mini_batch_size=5",
        "actor_rollout_ref.actor.entropy_coeff=0",
        env={**CRASH, "TEAMGYM_CPU_ROLLOUT_SCRIPT": "listener-picks"},
    )
    assert rc == 0, f"main_ppo exited with {rc}:\n{log[-6000:]}"
    assert "TeamRecordMissingError" not in log
    # step 1: 12 rows less the aborted episode seed (4) padded to 10; step 2: 12 padded to 20
    assert _padding(log) == [(8, 10), (12, 20)], _padding(log)
    events = _jsonl(tmp_path / "run" / "rollout_server.jsonl")
    assert [e["global_steps"] for e in events if e["event"] == "crash"] == [0]
    steps = {row["step"]: row["data"] for row in _jsonl(tmp_path / "run" / "metrics.jsonl")}
    assert sorted(steps) == [1, 2]
    for step, m in steps.items():
        assert m["critic/score/max"] > m["critic/score/min"], (step, "returns should differ")
        assert m["critic/advantages/max"] > 0 > m["critic/advantages/min"], step
        assert abs(m["actor/pg_loss"]) > 1e-4, (step, m["actor/pg_loss"])
        assert m["actor/grad_norm"] > 1e-2, (step, m["actor/grad_norm"])  # entropy alone: ~1e-4
    syncs = [e for e in events if e["event"] == "update_weights" and e["replica_rank"] == 0]
    assert len({e["checksum"] for e in syncs}) == 3  # the policy gradient moved the weights


def test_team_agent_loop_reports_the_weight_version_of_its_trajectory(
    make_cfg, make_batch, tokenizer
) -> None:
    """What verl's v1 trainer reads from every trajectory (``agent_loop_tq.py:216``): the weight
    versions (``global_steps``) of the server that generated it, as verl's own loops copy them
    from ``TokenOutput.extra_fields`` (``tool_agent_loop.py:261-267``)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from teamgym.adapters.verl.server import ScriptedServer

    class VersionedServer(ScriptedServer):
        async def generate(self, request_id, **kwargs):
            out = await super().generate(request_id, **kwargs)
            # what verl's LLMServerClient hands the loop for a server at weight version 3
            out.extra_fields.update(global_steps=3, min_global_steps=3, max_global_steps=3)
            return out

    cfg = make_cfg(response_length=128, prompt_length=1024)
    batch = make_batch(cfg, rows=[0, 1])
    worker = AgentLoopWorker(cfg, VersionedServer(tokenizer))
    out = asyncio.run(asyncio.wait_for(worker.generate_sequences(batch), timeout=120))
    assert list(out.non_tensor_batch["min_global_steps"]) == [3] * len(out)
    assert list(out.non_tensor_batch["max_global_steps"]) == [3] * len(out)
