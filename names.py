"""Names and constants shared by every layer (envs, adapters, benchmarks), in one torch-free
module so each is written once: change it here and everything follows."""

from __future__ import annotations

__all__ = [
    "AGENT_LOOP_NAME",
    "CHECKPOINT_PREFIX",
    "DEFAULT_SHARING_WEIGHT",
    "EPISODE_LOOP_NAME",
    "EVAL_SEED_BASE",
]

#: Name of teamgym's VERL agent loop (the dataset rows' ``agent_name``, the registry entry).
AGENT_LOOP_NAME = "teamgym_agent"
#: Name of teamgym's VERL episode loop (one row per episode; verl's v1 trainer only).
EPISODE_LOOP_NAME = "teamgym_episode"
#: Default ``RewardSharing`` weight: ``r_i' = (1 - w) * r_i + w * team``.
DEFAULT_SHARING_WEIGHT = 0.7
#: Evaluation and validation seeds start here; training seeds are drawn below it.
EVAL_SEED_BASE = 1_000_000
#: A baseline name of the form ``checkpoint:DIR`` is a frozen model directory.
CHECKPOINT_PREFIX = "checkpoint:"
