"""Names and constants shared by every layer (envs, adapters, benchmarks), in one torch-free
module so each is written once: change it here and everything follows."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CHECKPOINT_PREFIX",
    "DEFAULT_FORCED_MOVES",
    "DEFAULT_SHARING_WEIGHT",
    "DEFAULT_STOP",
    "EPISODE_LOOP_NAME",
    "EVAL_SEED_BASE",
]

#: Name of teamgym's VERL agent loop, the episode loop (the dataset rows' ``agent_name``, the
#: registry entry): one row is one episode.
EPISODE_LOOP_NAME = "teamgym_episode"
#: Default ``RewardSharing`` weight: ``r_i' = (1 - w) * r_i + w * team``.
DEFAULT_SHARING_WEIGHT = 0.7
#: Who plays a turn whose only valid action is one command (a listener's ``wait``): ``auto``,
#: the loop, with no gradient. Both trainers' default: under ``model`` a real chat model must
#: write the lone command itself, and one off-format reply there derails the turns after it
#: (SmolLM2 at temperature 1 made every listener reply through ``main_ppo`` invalid).
DEFAULT_FORCED_MOVES: Literal["auto"] = "auto"
#: Stop strings ending a reply after its command, so a model never has to learn where to stop:
#: the CPU trainer's default. (The verl loop's is none: SGLang's server cannot keep a stop
#: string in its output; set ``stop`` in the agent-loop YAML with vLLM.)
DEFAULT_STOP: tuple[str, ...] = ("</action>",)
#: Evaluation and validation seeds start here; training seeds are drawn below it.
EVAL_SEED_BASE = 1_000_000
#: A baseline name of the form ``checkpoint:DIR`` is a frozen model directory.
CHECKPOINT_PREFIX = "checkpoint:"
