"""Start-up checks of a VERL configuration for teamgym, and where our config files live.

VERL's trainer shuffles rows, repeats each row ``rollout.n`` times and splits a batch across
agent-loop workers by plain chunking; any of these can separate the agents of one episode. The
hub never deadlocks on that (it starts without missing agents after ``join_timeout``), but a
run configured that way would train on half-empty episodes, so :func:`validate_config` refuses
it up front with the fix in the message.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "AGENT_LOOP_CONFIG",
    "CONFIG_DIR",
    "TeamConfigError",
    "agent_loop_settings",
    "validate_config",
]

CONFIG_DIR = Path(__file__).resolve().parent / "config"
#: The agent-loop registry file to pass as ``actor_rollout_ref.rollout.agent.agent_loop_config_path``.
AGENT_LOOP_CONFIG = CONFIG_DIR / "agent_loop.yaml"
SUPPORTED_ESTIMATORS = ("grpo", "team_grpo")


class TeamConfigError(ValueError):
    """A VERL configuration that would mis-pair or lose the agents of an episode."""


def agent_loop_settings(cfg: DictConfig) -> dict[str, Any]:
    """The ``teamgym_agent`` entry of the configured agent-loop YAML (empty if absent)."""
    path = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if not path:
        return {}
    entries = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    for entry in entries or []:
        if entry.get("name") == "teamgym_agent":
            return dict(entry)
    return {}


def validate_config(cfg: DictConfig, dataset_dir: str | Path | None = None) -> list[str]:
    """Check a composed VERL config for a teamgym run; raises :class:`TeamConfigError` with the
    fix, and returns warnings (also emitted) for choices that run but are probably wrong."""
    notes: list[str] = []
    rollout = cfg.actor_rollout_ref.rollout
    loop = agent_loop_settings(cfg)
    if not loop:
        raise TeamConfigError(
            "actor_rollout_ref.rollout.agent.agent_loop_config_path must point at a YAML with a "
            f"'teamgym_agent' entry, e.g. {AGENT_LOOP_CONFIG}"
        )
    if cfg.data.get("shuffle", True):
        raise TeamConfigError(
            "data.shuffle=True lets VERL's sampler separate the agents of one episode across "
            "batches; set data.shuffle=False (teamgym datasets are already shuffled by episode)"
        )
    num_agents = None
    if dataset_dir is not None:
        manifest = json.loads((Path(dataset_dir) / "manifest.json").read_text())
        num_agents = int(manifest.get("rows_per_episode", manifest["num_agents"]))
    if num_agents is not None:
        batch = int(cfg.data.train_batch_size)
        if batch % num_agents:
            raise TeamConfigError(
                f"data.train_batch_size={batch} is not a multiple of the {num_agents} agents per "
                f"episode; use a multiple of {num_agents} (e.g. {num_agents * max(1, batch // num_agents)})"
            )
        val = cfg.data.get("val_batch_size")
        if val is not None and int(val) % num_agents:
            raise TeamConfigError(
                f"data.val_batch_size={val} is not a multiple of {num_agents} agents"
            )
        workers = int(rollout.agent.get("num_workers", 1) or 1)
        if loop.get("hub", "local") == "local" and (
            batch % workers or (batch // workers) % num_agents
        ):
            raise TeamConfigError(
                f"with hub: local, each of the {workers} agent-loop workers must receive whole episodes: "
                f"data.train_batch_size={batch} / num_workers={workers} must be a multiple of "
                f"{num_agents}; change the sizes or set hub: ray in {cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path}"
            )
    estimator = str(cfg.algorithm.adv_estimator)
    if estimator not in SUPPORTED_ESTIMATORS:
        notes.append(
            f"algorithm.adv_estimator={estimator}: teamgym is tested with {', '.join(SUPPORTED_ESTIMATORS)}"
        )
    if estimator in SUPPORTED_ESTIMATORS and int(rollout.n) < 2:
        notes.append(
            f"rollout.n={rollout.n}: GRPO needs n >= 2 trajectories per group to learn anything"
        )
    max_reply = int(loop.get("max_reply_tokens", 256))
    if max_reply > int(rollout.response_length):
        notes.append(
            f"max_reply_tokens={max_reply} exceeds rollout.response_length={rollout.response_length}: "
            "a single reply can use the whole trajectory budget"
        )
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return notes
