"""Start-up checks of a VERL configuration for teamgym, and where our config files live.

VERL's trainer splits a batch across agent-loop workers by plain chunking, sends the whole
validation set as one batch, and (with ``filter_overlong_prompts``) drops single rows; any of
these can separate the agents of one episode. :func:`validate_config` refuses such a run up
front with the fix in the message, after checking the dataset against its ``manifest.json``;
:func:`verl_validate` then runs VERL's own validator, the one ``main_ppo`` runs at start-up.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from teamgym.names import AGENT_LOOP_NAME

__all__ = [
    "AGENT_LOOP_CONFIG",
    "CONFIG_DIR",
    "TeamConfigError",
    "agent_loop_settings",
    "validate_config",
    "verl_validate",
    "write_agent_loop_yaml",
]

CONFIG_DIR = Path(__file__).resolve().parent / "config"
#: The agent-loop registry file to pass as ``actor_rollout_ref.rollout.agent.agent_loop_config_path``.
AGENT_LOOP_CONFIG = CONFIG_DIR / "agent_loop.yaml"
SUPPORTED_ESTIMATORS = ("grpo", "team_grpo")

# ``${teamgym.tokens:P,R,K}`` = K * (P + R): token budgets derived from the sequence lengths.
OmegaConf.register_new_resolver(
    "teamgym.tokens", lambda p, r, k=1: int(k) * (int(p) + int(r)), replace=True
)


class TeamConfigError(ValueError):
    """A VERL configuration that would mis-pair or lose the agents of an episode, or that VERL
    itself rejects."""


def write_agent_loop_yaml(path: str | Path, **settings: Any) -> Path:
    """Write an agent-loop registry file: our shipped entry with ``settings`` changed (the one
    way a run, a benchmark or a test makes one); returns ``path``."""
    entries: Any = OmegaConf.to_container(OmegaConf.load(AGENT_LOOP_CONFIG))
    entry = dict(entries[0])
    unknown = set(settings) - set(entry) - {"mask_stop"}
    if unknown:
        raise TypeError(f"unknown agent-loop settings {sorted(unknown)}; known: {sorted(entry)}")
    entry.update(settings)
    path = Path(path)
    path.write_text(OmegaConf.to_yaml(OmegaConf.create([entry])))
    return path


def agent_loop_settings(cfg: DictConfig) -> dict[str, Any]:
    """The ``teamgym_agent`` entry of the configured agent-loop YAML (empty if absent)."""
    path = cfg.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if not path:
        return {}
    entries: Any = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    for entry in entries or []:
        if entry.get("name") == AGENT_LOOP_NAME:
            return dict(entry)
    return {}


def _keeps_episodes(rows: int, parts: int, unit: int) -> bool:
    """Whether ``rows`` cut into ``parts`` chunks the way ``TensorDict.chunk`` cuts them
    (``ceil(rows / parts)`` each) leaves every chunk a whole number of ``unit``-row episodes."""
    return rows % unit == 0 and -(-rows // parts) % unit == 0


def _check_batches(cfg: DictConfig, loop: dict[str, Any], unit: int, val_rows: int) -> None:
    """Train and validation batches, and their cut across agent-loop workers, hold whole episodes."""
    rollout = cfg.actor_rollout_ref.rollout
    workers = int(rollout.agent.get("num_workers", 1) or 1)
    local_hub = loop.get("hub", "local") == "local"
    v1 = bool(cfg.trainer.get("use_v1", True))
    batch = int(cfg.data.train_batch_size)
    if batch % unit:
        raise TeamConfigError(
            f"data.train_batch_size={batch} is not a multiple of the {unit} agents per "
            f"episode; use a multiple of {unit} (e.g. {unit * max(1, batch // unit)})"
        )
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


def _check_storage(cfg: DictConfig) -> list[str]:
    """TransferQueue's storage actors (one CPU each, in a placement group) fit in Ray's CPUs."""
    queue = cfg.get("transfer_queue", {}).get("backend", {})
    if queue.get("storage_backend", "SimpleStorage") != "SimpleStorage":
        return []
    units = int(queue.SimpleStorage.num_data_storage_units)
    cpus = cfg.ray_kwargs.get("ray_init", {}).get("num_cpus")
    fix = (
        "lower transfer_queue.backend.SimpleStorage.num_data_storage_units or give Ray more "
        "(logical) CPUs with ray_kwargs.ray_init.num_cpus"
    )
    if cpus is not None and units >= int(cpus):
        raise TeamConfigError(
            f"TransferQueue's {units} storage units reserve {units} of Ray's {cpus} CPUs and the "
            f"trainer needs more: its placement group would wait forever; {fix}"
        )
    if cpus is None and int(cfg.trainer.nnodes) == 1 and units >= (os.cpu_count() or 1):
        return [
            f"TransferQueue's {units} storage units need {units} CPUs, this node has {os.cpu_count()}: {fix}"
        ]
    return []


def validate_config(cfg: DictConfig, dataset_dir: str | Path | None = None) -> list[str]:
    """Check a composed VERL config (and the dataset in ``dataset_dir``) for a teamgym run;
    raises :class:`TeamConfigError` with the fix, and returns warnings (also emitted) for
    choices that run but are probably wrong."""
    loop = _check_settings(cfg)
    notes: list[str] = []
    rollout = cfg.actor_rollout_ref.rollout
    if dataset_dir is not None:
        from teamgym.adapters.verl.dataset import check_dataset

        manifest = check_dataset(dataset_dir)
        _check_batches(cfg, loop, manifest.rows_per_episode, manifest.val_rows)
        notes += _check_prompts(cfg, manifest)
    notes += _check_storage(cfg)
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


def _check_settings(cfg: DictConfig) -> dict[str, Any]:
    """Settings that lose or split episodes whatever the dataset; returns the loop's entry."""
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
    if cfg.data.get("filter_overlong_prompts", True):
        raise TeamConfigError(
            "data.filter_overlong_prompts=True makes VERL drop single rows, which splits their "
            "episodes; set it to false and measure prompts when building the dataset "
            "(`teamgym verl-data --tokenizer MODEL --max-prompt-length N`)"
        )
    if loop.get("stop") and str(rollout.name) == "sglang":
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
