"""What VERL does to rows, checked at start-up: the row-changing features (DAPO, refills,
async trainers, custom samplers and classes) and the padding VERL adds. A row is a whole
episode, so dropping or refilling rows keeps teams whole; what teamgym has not trained
through, or cannot check, is refused with the setting and the fix. Called by
:func:`teamgym.adapters.verl.config.validate_config`.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig

from teamgym.adapters.verl.errors import TeamConfigError

__all__ = [
    "SAMPLER_NAME",
    "SAMPLER_PATH",
    "TEAM_MANAGER",
    "check_padding",
    "check_row_changes",
    "is_custom_sampler",
    "is_team_sampler",
    "poll_intervals",
]

#: teamgym's agent-loop manager (:mod:`teamgym.adapters.verl.workers`: verl's v1 one, with
#: the loop built by a call); the start-up checks accept it in ``agent_loop_manager_class``.
TEAM_MANAGER = "teamgym.adapters.verl.workers.TeamAgentLoopManagerTQ"


#: How ``trainer.v1.sampler.custom_sampler`` names teamgym's replay buffer
#: (:func:`teamgym.adapters.verl.sampler.team_replay_buffer`): verl loads a path without
#: ``pkg://`` as a file.
SAMPLER_PATH = "pkg://teamgym.adapters.verl.sampler"
SAMPLER_NAME = "team_replay_buffer"


def is_team_sampler(custom: Any) -> bool:
    """Whether a ``custom_sampler`` section names teamgym's replay buffer."""
    return custom.get("path") == SAMPLER_PATH and custom.get("name") == SAMPLER_NAME


def is_custom_sampler(custom: Any) -> bool:
    """Whether verl uses a ``custom_sampler`` section: with both its path and name set
    (``trainer_base._build_replay_buffer``), else it runs its own."""
    return bool(custom.get("path") and custom.get("name"))


def poll_intervals(kwargs: Any) -> tuple[float, float]:
    """(min, max) seconds between the replay buffer's polls, from ``sampler_kwargs``
    (defaults 0.05 and 0.5); a ValueError unless 0 < min <= max."""
    low = float(kwargs.get("min_poll_interval", 0.05))
    high = float(kwargs.get("max_poll_interval", 0.5))
    if not 0 < low <= high:
        raise ValueError(
            "trainer.v1.sampler.sampler_kwargs: need 0 < min_poll_interval <= "
            f"max_poll_interval, got {low} and {high}"
        )
    return low, high


def check_row_changes(cfg: DictConfig) -> None:
    """verl's legacy trainer, and the features teamgym has not trained through or cannot check,
    refused with the setting and the fix."""
    v1 = cfg.trainer.get("v1", {})
    if not cfg.trainer.get("use_v1", True):
        raise TeamConfigError(
            "trainer.use_v1=false: verl's legacy trainer takes one trajectory per row, and a "
            "teamgym row is a whole episode (a trajectory per trained agent); verl 0.9.1 marks "
            "that trainer deprecated. Set trainer.use_v1=true (verl's default)"
        )
    mode = str(v1.get("trainer_mode", "sync"))
    if mode == "separate_async":
        raise TeamConfigError(
            "trainer.v1.trainer_mode=separate_async: teamgym has not trained through it (it puts "
            "the trainer and the rollout replicas on separate GPU pools, which the CPU tests "
            "cannot lay out); use colocate_async (episode rows) or sync"
        )
    filter_groups = cfg.algorithm.get("filter_groups") or {}
    if filter_groups.get("enable"):
        _check_filter_metric(
            str(filter_groups.get("metric") or ""), str(cfg.algorithm.adv_estimator)
        )
    sampler = v1.get("sampler", {})
    custom = sampler.get("custom_sampler", {}) or {}
    v1_sampler = is_custom_sampler(custom)
    if v1_sampler and is_team_sampler(custom):
        try:
            poll_intervals(sampler.get("sampler_kwargs") or {})
        except ValueError as exc:
            raise TeamConfigError(str(exc)) from None
        if filter_groups.get("enable"):
            reward_model = cfg.reward.get("reward_model") or {}
            if reward_model.get("enable") and not reward_model.get("enable_resource_pool"):
                raise TeamConfigError(  # verl asserts this for its own sampler only
                    "algorithm.filter_groups needs the reward metric when the replay buffer "
                    "samples, which a colocated reward model computes only afterwards: set "
                    "reward.reward_model.enable_resource_pool=true, or disable filter_groups"
                )
    elif v1_sampler:
        raise TeamConfigError(
            f"trainer.v1.sampler.custom_sampler={custom.get('path')}:{custom.get('name')}: teamgym "
            "cannot check what a custom replay buffer does to the rows of an episode; set "
            f"path={SAMPLER_PATH} name={SAMPLER_NAME} (teamgym's, the default) or "
            "path=null name=null (verl's own)"
        )
    dataset_cls = cfg.data.get("custom_cls") or {}
    manager = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class")
    if manager == TEAM_MANAGER:
        manager = None  # ours: verl's managers, the loop built by a call (adapters/verl/workers.py)
    for key, value in (
        ("data.custom_cls", dataset_cls.get("path") or dataset_cls.get("name")),
        ("actor_rollout_ref.rollout.agent.agent_loop_manager_class", manager),
    ):
        if value:
            raise TeamConfigError(
                f"{key}={value}: teamgym cannot check how a custom class orders, drops or splits "
                "the rows of an episode; unset it"
            )


def _check_filter_metric(metric: str, estimator: str) -> None:
    """DAPO's ``algorithm.filter_groups.metric`` is an episode metric the episode loop writes
    (verl reads it from every trajectory's ``reward_extra_info`` and raises mid-run, after the
    first rollout, when a group lacks it), or ``reward`` under ``team_grpo``: verl's group is the
    whole episode (every agent, every copy), whose summed ``rm_scores`` differ between agents
    under reward sharing, while ``grpo``'s groups are one agent's copies."""
    from teamgym.adapters.verl.episode_loop import LOGGED_METRICS

    if metric == "reward" and estimator != "team_grpo":
        raise TeamConfigError(
            f"algorithm.filter_groups.metric=reward with adv_estimator={estimator}: VERL filters "
            "a whole episode (every agent's trajectories) at once, whose rewards differ between "
            "agents, so it would keep episodes where one agent's copies all scored the same; "
            f"use an episode metric ({', '.join(LOGGED_METRICS)}), or adv_estimator=team_grpo"
        )
    known = ("reward", *LOGGED_METRICS)
    if metric not in known:
        raise TeamConfigError(
            f"algorithm.filter_groups.metric={metric or 'null'}: the episode loop does not write it, "
            f"and VERL would stop at the first rollout; use one of {', '.join(known)} (an episode "
            "whose copies all score the same on it is evicted and refilled)"
        )


def check_padding(cfg: DictConfig, agents: int = 1) -> list[str]:
    """The v1 trainer pads every batch to a multiple of lcm(data-parallel size, mini-batch
    trajectories) with synthetic rows (zero advantage, see :mod:`.advantage`): refused when the
    mini-batch is larger than the batch (most of each step would be padding), noted otherwise.
    A batch of B rows holds B x ``agents`` (trained agents) trajectories per copy."""
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    rows, mini, n = int(cfg.data.train_batch_size), int(actor.ppo_mini_batch_size), int(rollout.n)
    batch = rows * agents  # trajectories per copy
    if agents > 1 and mini > rows and not actor.get("use_dynamic_bsz"):
        raise TeamConfigError(
            f"actor.ppo_mini_batch_size={mini} exceeds data.train_batch_size={rows} with "
            "use_dynamic_bsz=false, which VERL refuses (it counts rows there, not the "
            f"{agents} trajectories of each episode row); set ppo_mini_batch_size <= {rows}, or "
            "use_dynamic_bsz=true (the overlay's default, whose mini-batch is rows x agents)"
        )
    if mini > batch:
        per = f" ({rows} episodes x {agents} agents)" if agents > 1 else ""
        raise TeamConfigError(
            f"actor.ppo_mini_batch_size={mini} exceeds the {batch} trajectories per copy of "
            f"data.train_batch_size={rows}{per}: VERL would pad every step's {batch * n} "
            f"trajectories up to {mini * n} with synthetic rows that train nothing (VERL skips "
            f"this check under use_dynamic_bsz); set ppo_mini_batch_size <= {batch}"
        )
    world = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    sp = int((actor.get("fsdp_config") or {}).get("ulysses_sequence_parallel_size", 1) or 1)
    sp = max(sp, int(actor.get("ulysses_sequence_parallel_size", 1) or 1))
    multiple = math.lcm(max(1, world // sp), mini * n)  # FSDP's data-parallel size
    rows = batch * n
    if rows % multiple:
        pad = multiple - rows % multiple
        return [
            f"each step's {rows} rows are not a multiple of lcm(data-parallel size, "
            f"ppo_mini_batch_size x n) = {multiple}: VERL pads them with {pad} synthetic rows "
            "(zero advantage, compute spent for nothing) plus one per row an aborted episode loses"
        ]
    return []
