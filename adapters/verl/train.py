"""``python -m teamgym.adapters.verl.train [--check-only] [--cpu] [hydra overrides]``: validate,
register, run VERL's ``main_ppo`` (stock ``verl==0.9.1``; docs: Train with VERL).

Composes our overlay on VERL's ``ppo_trainer`` config and checks it with teamgym's checks
(:mod:`teamgym.adapters.verl.config`) and VERL's own validator, before any GPU is touched. The
job's ``runtime_env`` ships what every Ray worker on every node needs (the agent-loop settings as
JSON, so no node reads the driver's install path; ``VERL_FILE_LOGGER_PATH`` for the KL monitor),
and Ray's ``worker_process_setup_hook`` registers the estimators and the episode loop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict

from teamgym.adapters.verl.config import (
    AGENT_LOOP_CONFIG,
    CONFIG_DIR,
    TEAM_MANAGER,
    TeamConfigError,
    agent_loop_entry,
    check_engine,
    is_team_sampler,
    validate_config,
    verl_validate,
)
from teamgym.adapters.verl.resources import cluster_nodes
from teamgym.adapters.verl.settings import LOOP_TARGET, AgentLoopSettings

__all__ = ["AGENT_LOOP_ENV", "compose_config", "main", "setup_worker"]

#: Environment variable carrying the ``teamgym_episode`` registry entry to Ray workers
#: (:meth:`AgentLoopSettings.to_json`, read back with :meth:`AgentLoopSettings.from_json`).
AGENT_LOOP_ENV = "TEAMGYM_AGENT_LOOP"
#: verl's plugin switches, shipped to every Ray worker when set in the driver.
SHIPPED_ENV = ("VERL_USE_EXTERNAL_MODULES", "VERL_PLATFORM", "VERL_ENGINE_DEVICE")


def setup_worker() -> None:
    """Register our VERL extensions in this process (Ray runs it in every worker): the
    estimators and the episode loop, with the settings the driver shipped."""
    # each import registers (the estimators, teamgym_episode); one binding, so ruff sees the
    # first as used by the last
    import teamgym.adapters.verl.episode_loop
    import teamgym.adapters.verl.estimators  # noqa: F401

    shipped = os.environ.get(AGENT_LOOP_ENV)
    if shipped:
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

        settings, target = AgentLoopSettings.from_json(shipped)
        entry: Any = OmegaConf.create(settings.entry(target))
        _agent_loop_registry[entry.name] = entry  # a node, as VERL's own YAML loading stores


def compose_config(overrides: Sequence[str] = (), cpu: bool = False) -> DictConfig:
    """Our overlay on VERL's ``ppo_trainer`` (``cpu``: with ``host/cpu.yaml``, what a machine
    without a GPU needs), with ``overrides`` (Hydra syntax) applied."""
    from hydra import compose, initialize_config_dir

    ours = [f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}"]
    ours += ["+host=cpu"] if cpu else []
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="teamgym_grpo", overrides=ours + list(overrides))
    if cpu and cfg.ray_kwargs.ray_init.get("num_cpus") is None:
        from teamgym.adapters.verl.resources import local_ray_cpus

        cfg.ray_kwargs.ray_init.num_cpus = local_ray_cpus(cfg)  # host/cpu.yaml leaves it to us
    env = cfg.ray_kwargs.ray_init.runtime_env.get("env_vars")
    if cpu and env is not None and env.get("TQ_NUM_THREADS") is None:
        import psutil

        # TransferQueue's 8 threads, capped at the physical cores (it warns on every put above)
        with open_dict(env):
            env.TQ_NUM_THREADS = str(min(8, psutil.cpu_count(logical=False) or 1))
    return cfg


def use_cpu_host() -> None:
    """Load :mod:`teamgym.adapters.verl.cpu_host` here and, by the environment Ray's workers
    inherit, in every process (added to ``VERL_USE_EXTERNAL_MODULES``, ``VERL_PLATFORM=cpu``)."""
    import importlib

    from teamgym.adapters.verl.cpu_host import PLUGIN_ENV

    plugin = PLUGIN_ENV["VERL_USE_EXTERNAL_MODULES"]
    named = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    os.environ["VERL_USE_EXTERNAL_MODULES"] = ",".join(
        [*named, *([plugin] * (plugin not in named))]
    )
    os.environ["VERL_PLATFORM"] = PLUGIN_ENV["VERL_PLATFORM"]
    os.environ.setdefault("VERL_ENGINE_DEVICE", PLUGIN_ENV["VERL_ENGINE_DEVICE"])
    for module in os.environ["VERL_USE_EXTERNAL_MODULES"].split(","):
        importlib.import_module(module)


def runtime_config(cfg: DictConfig) -> DictConfig:
    """The config ``main_ppo`` gets: resolved, without our section, the agent-loop entry and the
    file-logger path in the job's ``runtime_env``, teamgym's agent-loop manager unless one is
    set, and verl's DAPO and refill settings for teamgym's sampler."""
    loop = agent_loop_entry(cfg)
    cfg = cast(DictConfig, OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)))
    OmegaConf.set_struct(cfg, False)
    cfg.pop("teamgym")
    runtime_env = cfg.ray_kwargs.ray_init.runtime_env
    if runtime_env.get("env_vars") is None:
        runtime_env.env_vars = {}
    if loop is not None:  # checked, with the loop class the user's YAML names
        target = str(loop.get("_target_", LOOP_TARGET))
        runtime_env.env_vars[AGENT_LOOP_ENV] = AgentLoopSettings.from_entry(loop).to_json(target)
    for key in SHIPPED_ENV:  # verl's plugin hook, as --cpu (or the user) set it here
        if os.environ.get(key) and key not in runtime_env.env_vars:
            runtime_env.env_vars[key] = os.environ[key]
    if os.environ.get("VERL_FILE_LOGGER_PATH"):
        path = os.path.abspath(os.environ["VERL_FILE_LOGGER_PATH"])
        runtime_env.env_vars["VERL_FILE_LOGGER_PATH"] = path
    cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path = None
    sampler = cfg.trainer.v1.sampler
    if is_team_sampler(sampler.get("custom_sampler") or {}):
        from teamgym.adapters.verl.sampler import sampler_settings

        # verl gives a custom sampler none of its DAPO and refill settings: ours reads them here
        sampler.sampler_kwargs = {**(sampler.get("sampler_kwargs") or {}), **sampler_settings(cfg)}
    if not cfg.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class"):
        # verl's v1 manager, whose workers build our loop by a call, not Hydra
        cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class = TEAM_MANAGER
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns a process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    check_only, cpu = "--check-only" in args, "--cpu" in args
    args = [a for a in args if a not in ("--check-only", "--cpu")]
    if cpu:
        use_cpu_host()
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from teamgym.adapters.verl.dataset import DatasetMismatchError

    try:
        cfg = compose_config(args, cpu=cpu)
        validate_config(cfg, check_data=True, nodes=cluster_nodes(cfg))
        check_engine(cfg)
        verl_validate(cfg)
    except (
        TeamConfigError,
        DatasetMismatchError,
        HydraException,
        OmegaConfBaseException,
        FileNotFoundError,
        ConnectionError,  # a Ray address that does not answer
    ) as exc:
        print(f"teamgym: invalid configuration: {exc}", file=sys.stderr)
        return 2
    print(
        f"teamgym: configuration valid ({cfg.data.train_files}, {cfg.algorithm.adv_estimator}, n={cfg.actor_rollout_ref.rollout.n})"
    )
    if check_only:
        return 0
    setup_worker()
    from verl.trainer import main_ppo

    if not cpu:
        main_ppo.main(runtime_config(cfg))
        return 0
    from teamgym.adapters.verl.cpu_host.shm import remove_shm_leftovers, shm_entries

    before = shm_entries()
    try:
        main_ppo.main(runtime_config(cfg))
    finally:
        import ray

        ray.shutdown()  # vLLM's processes end here, so what they leave can go
        remove_shm_leftovers(before, wait=30.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
