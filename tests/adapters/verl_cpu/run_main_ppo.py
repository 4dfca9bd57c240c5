"""Run verl 0.9.1's real ``main_ppo`` entry (v1 trainer) on the CPU with teamgym's agent loop.

``python run_main_ppo.py MODEL_DIR DATASET_DIR OUT_DIR [--ranks=N] [--engine=vllm]
[--loop=JSON] [hydra overrides...]`` (``--loop``: agent-loop settings, e.g. '{"stop": ["</action>"]}')

Test-only driver: it sets the environment that loads :mod:`teamgym_verl_cpu` (this folder) in
every process and calls ``teamgym.adapters.verl.train.main(["--cpu", ...])`` with test-sized
overrides, as ``python -m teamgym.adapters.verl.train --cpu`` runs. verl's file logger writes the
per-step metrics to ``OUT_DIR/metrics.jsonl``; the plugin writes ``OUT_DIR/vllm_requests.jsonl``
and ``OUT_DIR/train_batch.jsonl``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGIN = "teamgym_verl_cpu"
#: The test switches of ``teamgym_verl_cpu`` (its docstring), passed on when set.
SWITCHES = ("TEAMGYM_CPU_ROLLOUT_CRASH_STEP", "TEAMGYM_VLLM_SKIP_SYNC")


def plugin_env(out_dir: Path) -> dict[str, str]:
    """Environment for the driver and every Ray worker."""
    path = os.pathsep.join(p for p in [str(HERE), os.environ.get("PYTHONPATH", "")] if p)
    # cpu_host.PLUGIN_ENV's values, written out: importing cpu_host here would import verl
    # before VERL_USE_EXTERNAL_MODULES is set, and verl would then load no plugin in this process
    return {
        "VERL_USE_EXTERNAL_MODULES": PLUGIN,  # which imports cpu_host
        "VERL_PLATFORM": "cpu",
        "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engines for cuda/npu only
        "PYTHONPATH": path,
        "VERL_FILE_LOGGER_PATH": str(out_dir / "metrics.jsonl"),
        "TEAMGYM_VLLM_LOG": str(out_dir / "vllm_requests.jsonl"),
        "TEAMGYM_BATCH_LOG": str(out_dir / "train_batch.jsonl"),
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "RAY_DEDUP_LOGS": "0",
        # the plugin's failure and control switches
        **{k: os.environ[k] for k in SWITCHES if os.environ.get(k)},
    }


def cpu_overrides(
    model_dir: str,
    dataset_dir: str,
    loop_yaml: str,
    env: dict[str, str],
    ranks: int = 1,
    engine: str = "vllm",
) -> list[str]:
    """Test sizes on top of the CPU overlay (``--cpu``): ``ranks`` FSDP2 ranks on gloo, each a
    logical Ray GPU with its own rollout replica of ``engine`` (vLLM's CPU build by default)."""
    return [
        f"teamgym.dataset_dir={dataset_dir}",
        f"actor_rollout_ref.model.path={model_dir}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
        # sizes
        "data.train_batch_size=4",
        "data.max_prompt_length=512",
        "data.max_response_length=256",
        "data.dataloader_num_workers=0",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.actor.entropy_coeff=0.01",  # a gradient even when every GRPO advantage is 0
        f"actor_rollout_ref.rollout.name={engine}",
        # trainer
        f"trainer.n_gpus_per_node={ranks}",
        "trainer.total_training_steps=2",
        "trainer.total_epochs=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.logger=[console,file]",
        f"trainer.default_local_dir={env['VERL_FILE_LOGGER_PATH']}.ckpt",
        f"trainer.rollout_data_dir={Path(env['TEAMGYM_BATCH_LOG']).parent / 'rollout_data'}",
        # the plugin and the switches reach every Ray worker
        *(f"++ray_kwargs.ray_init.runtime_env.env_vars.{k}='{v}'" for k, v in env.items()),
    ]


def _flag(argv: list[str], name: str, default: str) -> str:
    return next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")), default)


def main(argv: list[str]) -> int:
    ranks = int(_flag(argv, "ranks", "1"))
    engine = _flag(argv, "engine", "vllm")
    loop = json.loads(_flag(argv, "loop", "{}"))  # agent-loop settings over the test's own
    positional = [a for a in argv if not a.startswith(("--ranks=", "--engine=", "--loop="))]
    model_dir, dataset_dir, out_dir, *extra = positional
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = plugin_env(out)
    os.environ.update(env)
    sys.path.insert(0, str(HERE))

    import verl  # noqa: F401  (imports the plugin: VERL_USE_EXTERNAL_MODULES)

    from teamgym.adapters.verl import train

    assert PLUGIN in sys.modules, "verl did not load the CPU plugin"
    from teamgym.adapters.verl.cpu_host import PLUGIN_ENV

    drift = {
        k: (v, env[k])
        for k, v in PLUGIN_ENV.items()
        if k in env and k != "VERL_USE_EXTERNAL_MODULES" and env[k] != v
    }
    assert not drift, f"plugin_env disagrees with cpu_host.PLUGIN_ENV: {drift}"

    from teamgym.adapters.verl.config import write_agent_loop_yaml

    loop_yaml = write_agent_loop_yaml(
        out / "agent_loop.yaml",
        **{"max_reply_tokens": 24, "turn_timeout": 300, **loop},
    )
    # teamgym's own entry point (`python -m teamgym.adapters.verl.train ...`): compose, validate
    # (teamgym's checks and verl's), ship the agent-loop entry to the workers, main_ppo.main
    overrides = cpu_overrides(model_dir, dataset_dir, str(loop_yaml), env, ranks, engine)
    return train.main(["--cpu", *overrides, *extra])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
