"""Throughput of the VERL adapter on CPU: episodes -> DataProto rows per second, tokens per second,
and the concurrency ratio.

``teamgym verl-bench`` runs VERL's real ``AgentLoopWorker`` with our agent loop on a batch of
episodes, against (a) a rollout-server double that waits ``latency`` seconds per call, and (b)
the local model. With the double, an episode of T turns and N agents should take close to
T x latency (every agent of every episode in flight at once), not T x N x latency (one call at
a time): the ratio printed is measured wall time / (T x latency). Figures, not a timed test.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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


def _batch(cfg: Any, dataset_dir: Path, tokenizer: Any, n: int) -> Any:
    """The dataset's rows as VERL's RLHFDataset yields them, uid'd and repeated ``n`` times."""
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    ds = RLHFDataset(
        data_files=[str(dataset_dir / "train.parquet")], tokenizer=tokenizer, config=cfg.data
    )
    batch = DataProto.from_single_dict(collate_fn([ds[i] for i in range(len(ds))]))
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
    )
    return batch.repeat(repeat_times=n, interleave=True)


def measure_throughput(
    episodes: int = 16,
    num_agents: int = 4,
    num_rounds: int = 2,
    latency: float = 0.05,
    n: int = 1,
    model_dir: str | Path | None = None,
    servers: tuple[str, ...] = ("latency", "model"),
) -> list[ThroughputResult]:
    """Measure the adapter with each server kind; builds a local model when none is given."""
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from teamgym.adapters.local_model import build_local_model
    from teamgym.adapters.verl.server import LocalModelServer, ScriptedServer, policy_reply
    from teamgym.envs.baselines import RandomPolicy

    work = Path(tempfile.mkdtemp(prefix="teamgym-verl-bench-"))
    model_dir = Path(model_dir) if model_dir else build_local_model(work / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    cfg = _config(work, model_dir, episodes, num_agents, num_rounds)
    turns = 2 * num_rounds
    results = []
    for kind in servers:
        if kind == "latency":
            server = ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=0)), latency=latency)
        else:
            server = LocalModelServer(model_dir)
        batch = _batch(cfg, work / "data", tokenizer, n)
        worker = AgentLoopWorker(cfg, server)
        start = time.perf_counter()
        out = asyncio.run(worker.generate_sequences(batch))
        seconds = time.perf_counter() - start
        prompt_len = out.batch["prompts"].shape[1]
        tokens = int(out.batch["attention_mask"][:, prompt_len:].sum())
        results.append(
            ThroughputResult(
                server=kind,
                episodes=episodes * n,
                num_agents=num_agents,
                turns=turns,
                rows=len(out),
                seconds=seconds,
                rows_per_s=len(out) / seconds,
                episodes_per_s=episodes * n / seconds,
                tokens_per_s=tokens / seconds,
                latency=latency if kind == "latency" else 0.0,
                concurrency_ratio=seconds / (turns * latency) if kind == "latency" else None,
                max_in_flight=getattr(server, "max_in_flight", None),
            )
        )
    return results


def _config(work: Path, model_dir: Path, episodes: int, num_agents: int, num_rounds: int) -> Any:
    """The benchmark's signal-v0 dataset in ``work/data`` and VERL's composed config for it."""
    from teamgym.adapters.verl.config import write_agent_loop_yaml
    from teamgym.adapters.verl.dataset import build_dataset
    from teamgym.adapters.verl.train import compose_config

    build_dataset(
        "signal-v0",
        work / "data",
        episodes,
        1,
        {"num_agents": num_agents, "num_rounds": num_rounds},
    )
    loop_yaml = write_agent_loop_yaml(work / "agent_loop.yaml", max_reply_tokens=32)
    return compose_config(
        [
            f"teamgym.dataset_dir={work / 'data'}",
            f"actor_rollout_ref.model.path={model_dir}",
            "actor_rollout_ref.rollout.prompt_length=1024",
            "actor_rollout_ref.rollout.response_length=1024",
            "data.max_prompt_length=1024",
            "data.max_response_length=1024",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
        ]
    )
