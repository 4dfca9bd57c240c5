"""What VERL does to rows, checked against the dataset layout: the start-up checks of the
batches, the row-changing features (DAPO, refills, async trainers, custom samplers and
classes) and the padding VERL adds. With per-agent rows anything that drops, refills or splits
single rows can separate teammates; with episode rows (a row is a whole episode) most of it is
harmless. Called by :func:`teamgym.adapters.verl.config.validate_config`.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig

from teamgym.adapters.verl.errors import TeamConfigError
from teamgym.adapters.verl.settings import AgentLoopSettings

__all__ = [
    "SAMPLER_NAME",
    "SAMPLER_PATH",
    "TEAM_MANAGERS",
    "check_batches",
    "check_padding",
    "check_row_changes",
    "is_custom_sampler",
    "is_team_sampler",
    "manager_class",
    "poll_intervals",
]

#: teamgym's agent-loop managers (:mod:`teamgym.adapters.verl.workers`: verl's own, with the
#: loop built by a call) for the v1 trainer and the legacy one; the start-up checks accept the
#: one of the trainer that runs in ``agent_loop_manager_class``.
TEAM_MANAGERS = {
    True: "teamgym.adapters.verl.workers.TeamAgentLoopManagerTQ",
    False: "teamgym.adapters.verl.workers.TeamAgentLoopManager",
}


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


def manager_class(cfg: DictConfig) -> str:
    """teamgym's agent-loop manager (import path) for a config's trainer: the v1 one unless
    ``trainer.use_v1`` is false."""
    return TEAM_MANAGERS[bool(cfg.trainer.get("use_v1", True))]


def _keeps_episodes(rows: int, parts: int, unit: int) -> bool:
    """Whether ``rows`` cut into ``parts`` chunks the way ``TensorDict.chunk`` cuts them
    (``ceil(rows / parts)`` each) leaves every chunk a whole number of ``unit``-row episodes."""
    return rows % unit == 0 and -(-rows // parts) % unit == 0


def check_batches(
    cfg: DictConfig, loop: AgentLoopSettings, unit: int, val_rows: int, layout: str = "row"
) -> None:
    """Train and validation batches, and their cut across agent-loop workers, hold whole episodes
    (always so in the episode layout: a row is an episode, and no hub is involved)."""
    rollout = cfg.actor_rollout_ref.rollout
    workers = int(rollout.agent.get("num_workers", 1) or 1)
    local_hub = loop.hub == "local" and layout == "row"
    v1 = bool(cfg.trainer.get("use_v1", True))
    batch = int(cfg.data.train_batch_size)
    if batch % unit:
        raise TeamConfigError(
            f"data.train_batch_size={batch} is not a multiple of the {unit} agents per "
            f"episode; use a multiple of {unit} (e.g. {unit * max(1, batch // unit)})"
        )
    for key in ("train_max_samples", "val_max_samples"):
        cap = int(cfg.data.get(key, -1) or -1)
        if cap > 0 and cap % unit:
            raise TeamConfigError(
                f"data.{key}={cap} keeps the first {cap} rows, which cuts an episode of {unit} "
                f"agents; use a multiple of {unit} (e.g. {unit * max(1, cap // unit)}), or -1"
            )
    cap = int(cfg.data.get("val_max_samples", -1) or -1)
    val_rows = min(val_rows, cap) if cap > 0 else val_rows
    gen = cfg.data.get("gen_batch_size")
    if gen and (int(gen) % unit or (v1 and batch % int(gen))):
        raise TeamConfigError(
            f"data.gen_batch_size={gen}: VERL's dataloader fetches rows {gen} at a time, which "
            f"cuts episodes of {unit} agents; use a multiple of {unit}"
            + (f" that divides data.train_batch_size={batch}" if v1 else "")
            + ", or null"
        )
    if gen and not v1:
        batch = int(gen)  # the legacy trainer rolls out gen_batch_size rows per step
    if local_hub and (batch % workers or (batch // workers) % unit):
        raise TeamConfigError(
            f"with hub: local, each of the {workers} agent-loop workers must receive whole episodes: "
            f"data.train_batch_size={batch} / num_workers={workers} must be a multiple of "
            f"{unit}; change the sizes or set hub: ray in the agent-loop YAML"
        )
    if not val_rows:
        return
    # v1 sends the validation set as one batch (or val_batch_size rows) and chunks it across
    # workers, sessions in-worker; the legacy trainer first repeats each row val_kwargs.n times.
    val_batch = int(cfg.data.get("val_batch_size") or val_rows)
    repeat = 1 if v1 else int(rollout.val_kwargs.get("n", 1) or 1)
    last = val_rows % val_batch
    for size in {val_batch, last} - {0}:
        if size % unit:
            raise TeamConfigError(
                f"validation batches of {size} rows split episodes of {unit} agents: set "
                f"data.val_batch_size to a multiple of {unit} that divides {val_rows}, or null"
            )
        if local_hub and not _keeps_episodes(size * repeat, workers, unit * repeat):
            raise TeamConfigError(
                f"with hub: local, a validation batch of {size} rows cut across {workers} agent-loop "
                f"workers (ceil({size}/{workers}) rows each) splits episodes of {unit} agents: "
                f"build the dataset with a number of validation episodes whose rows split evenly "
                f"(e.g. a multiple of {workers}), set data.val_batch_size, or set hub: ray"
            )


def check_row_changes(cfg: DictConfig, layout: str = "row") -> None:
    """VERL features that evict and refill single rows (each row is one agent of an episode, so
    a refill brings an agent without its teammates), refused with the setting and the fix; the
    episode layout needs the v1 trainer."""
    v1 = cfg.trainer.get("v1", {})
    if layout == "episode" and not cfg.trainer.get("use_v1", True):
        raise TeamConfigError(
            "trainer.use_v1=false with an episode-layout dataset (one row per episode): the "
            "legacy trainer takes one trajectory per row; use trainer.use_v1=true, or rebuild "
            "the dataset with `teamgym verl-data --layout row`"
        )
    mode = str(v1.get("trainer_mode", "sync"))
    if cfg.trainer.get("use_v1", True) and mode != "sync" and layout == "row":
        raise TeamConfigError(
            f"trainer.v1.trainer_mode={mode}: VERL's async modes fetch prompts one row at a time "
            "(gen_batch_size forced to 1) and evict stale groups (partial rollouts past "
            "trainer.v1.sampler.max_off_policy_threshold) to refill them row by row, which splits "
            "the agents of an episode; use trainer.v1.trainer_mode=sync, or an episode-layout "
            "dataset (`teamgym verl-data --layout episode`) with colocate_async"
        )
    if cfg.trainer.get("use_v1", True) and mode == "separate_async":
        raise TeamConfigError(
            "trainer.v1.trainer_mode=separate_async: teamgym has not trained through it (it puts "
            "the trainer and the rollout replicas on separate GPU pools, which the CPU tests "
            "cannot lay out); use colocate_async (episode rows) or sync"
        )
    filter_groups = cfg.algorithm.get("filter_groups") or {}
    if filter_groups.get("enable") and layout == "row":
        raise TeamConfigError(
            "algorithm.filter_groups.enable=true (DAPO): VERL evicts each group whose rewards are "
            "all equal and refills it with single dataset rows, i.e. one agent without its "
            "teammates; set algorithm.filter_groups.enable=false, or use an episode-layout "
            "dataset (`teamgym verl-data --layout episode`), where a group is a whole episode"
        )
    if filter_groups.get("enable"):
        _check_filter_metric(
            str(filter_groups.get("metric") or ""), str(cfg.algorithm.adv_estimator)
        )
    sampler = v1.get("sampler", {})
    if sampler.get("sync_refill_failed_groups") and layout == "row":
        raise TeamConfigError(
            "trainer.v1.sampler.sync_refill_failed_groups=true: VERL refills a failed group with a "
            "single dataset row, i.e. one agent without its teammates; set it to false (teamgym "
            "leaves an aborted episode out of the update instead), or use an episode-layout "
            "dataset (`teamgym verl-data --layout episode`), where a row is a whole episode"
        )
    custom = sampler.get("custom_sampler", {}) or {}
    v1_sampler = cfg.trainer.get("use_v1", True) and is_custom_sampler(custom)
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
    if cfg.data.get("validation_shuffle", True) and layout == "row":
        raise TeamConfigError(
            "data.validation_shuffle=true lets VERL's validation loader separate the agents of "
            "one episode; set data.validation_shuffle=false"
        )
    dataset_cls = cfg.data.get("custom_cls") or {}
    manager = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class")
    if manager in TEAM_MANAGERS.values() and manager != manager_class(cfg):
        raise TeamConfigError(
            f"actor_rollout_ref.rollout.agent.agent_loop_manager_class={manager} is teamgym's "
            f"manager of the other trainer (trainer.use_v1={cfg.trainer.get('use_v1', True)}); "
            f"use {manager_class(cfg)}, or leave it unset: the train entry sets it"
        )
    if manager in TEAM_MANAGERS.values():
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
    from teamgym.adapters.verl.loop_base import LOGGED_METRICS

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
    A batch of B episode-layout rows holds B x ``agents`` (trained agents) trajectories per copy."""
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
    if not cfg.trainer.get("use_v1", True):
        return []  # the legacy trainer does not pad
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
