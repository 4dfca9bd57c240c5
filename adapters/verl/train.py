"""``python -m teamgym.adapters.verl.train [hydra overrides]``: validate, register, run VERL.

Composes our overlay (``config/teamgym_grpo.yaml``) on VERL's own ``ppo_trainer`` config,
checks it with :func:`teamgym.adapters.verl.config.validate_config` (clear errors before any
GPU is touched), registers the ``team_grpo`` estimator and the agent loop in this process and,
through Ray's ``worker_process_setup_hook``, in every worker, then calls VERL's ``main_ppo``.
Stock ``verl==0.9.1``: nothing is patched. ``--check-only`` stops after validation.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from teamgym.adapters.verl.config import (
    AGENT_LOOP_CONFIG,
    CONFIG_DIR,
    TeamConfigError,
    validate_config,
)

__all__ = ["compose_config", "main", "setup_worker"]


def setup_worker() -> None:
    """Import what registers our VERL extensions (run in every Ray worker process)."""
    import teamgym.adapters.verl.advantage
    import teamgym.adapters.verl.agent_loop  # noqa: F401  (registers teamgym_agent)


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Our overlay on VERL's ``ppo_trainer``, with ``overrides`` (Hydra syntax) applied."""
    from hydra import compose, initialize_config_dir

    ours = [f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="teamgym_grpo", overrides=ours + list(overrides))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns a process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check-only" in args
    args = [a for a in args if a != "--check-only"]
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg = compose_config(args)
        validate_config(cfg, dataset_dir=cfg.teamgym.dataset_dir)
    except (TeamConfigError, HydraException, OmegaConfBaseException, FileNotFoundError) as exc:
        print(f"teamgym: invalid configuration: {exc}", file=sys.stderr)
        return 2
    print(
        f"teamgym: configuration valid ({cfg.data.train_files}, {cfg.algorithm.adv_estimator}, n={cfg.actor_rollout_ref.rollout.n})"
    )
    if check_only:
        return 0
    setup_worker()
    from verl.trainer import main_ppo

    OmegaConf.resolve(cfg)
    OmegaConf.set_struct(cfg, False)
    cfg.pop("teamgym")
    main_ppo.main(cfg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
