"""The VERL benchmark's set-up (:mod:`teamgym.benchmarks.verl_throughput`): its signal-v0
dataset and composed config, VERL's part of it for the v1 worker, a local Ray started as
``main_ppo``'s, and verl's client of a standalone vLLM replica."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["bench_config", "start_ray", "v1_config", "vllm_client"]


def bench_config(
    work: Path,
    model_dir: Path,
    episodes: int,
    num_agents: int,
    num_rounds: int,
    n: int = 1,
    cpu: bool = False,
) -> Any:
    """The benchmark's signal-v0 dataset in ``work/data`` and VERL's composed config for it
    (``cpu``: with the CPU host's overlay, which vLLM's CPU build needs)."""
    from teamgym.adapters.verl.config import write_agent_loop_yaml
    from teamgym.adapters.verl.dataset import build_dataset
    from teamgym.adapters.verl.train import compose_config

    data = work / "data"
    if not (data / "manifest.json").is_file():
        build_dataset(
            "signal-v0",
            data,
            episodes,
            1,
            {"num_agents": num_agents, "num_rounds": num_rounds},
        )
    # every agent-turn reaches the server (no forced move written by the loop), so the figures
    # per agent-turn stay comparable with those measured before forced moves were the default
    loop_yaml = write_agent_loop_yaml(
        work / "agent_loop.yaml", max_reply_tokens=32, forced_moves="model"
    )
    return compose_config(
        [
            f"teamgym.dataset_dir={data}",
            f"actor_rollout_ref.model.path={model_dir}",
            "actor_rollout_ref.rollout.prompt_length=1024",
            "actor_rollout_ref.rollout.response_length=1024",
            "data.max_prompt_length=1024",
            "data.max_response_length=1024",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
            f"actor_rollout_ref.rollout.n={n}",
        ],
        cpu=cpu,
    )


def v1_config(cfg: Any) -> Any:
    """VERL's part of ``cfg``, resolved, with TransferQueue on (one storage unit)."""
    from omegaconf import OmegaConf

    plain: Any = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    plain.pop("teamgym")
    plain.transfer_queue.enable = True
    plain.transfer_queue.backend.SimpleStorage.num_data_storage_units = 1
    return plain


def start_ray(gpus: int = 0, env_vars: Any = None) -> None:
    """A local Ray whose workers set up as ``main_ppo``'s do, one thread each; ``gpus`` logical
    GPUs for verl's rollout replicas on a CPU host (with the plugin env :func:`use_cpu_host` set),
    and the config's own ``env_vars`` (the CPU overlay's vLLM cache size)."""
    import ray

    from teamgym.adapters.verl.train import SHIPPED_ENV

    env = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **dict(env_vars or {})}
    env.update({k: os.environ[k] for k in SHIPPED_ENV if os.environ.get(k)})
    ray.init(
        num_cpus=8,
        num_gpus=gpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={
            "worker_process_setup_hook": "teamgym.adapters.verl.train.setup_worker",
            "env_vars": env,
        },
    )


def vllm_client(plain: Any) -> Any:
    """verl's client of one standalone vLLM replica (``LLMServerManager``, as its trainers
    start servers) serving the config's model with the weights on disk."""
    from omegaconf import OmegaConf
    from verl.workers.rollout.llm_server import LLMServerManager

    cfg: Any = OmegaConf.create(OmegaConf.to_container(plain, resolve=True))
    rollout = cfg.actor_rollout_ref.rollout
    rollout.name, rollout.load_format = "vllm", "auto"  # no trainer syncs weights into it
    rollout.nnodes, rollout.n_gpus_per_node = 1, 1
    return LLMServerManager.create(cfg).get_client()
