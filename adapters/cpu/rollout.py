"""Rollouts of the CPU GRPO trainer: VERL's config and input batches, batch metrics, evaluation.

Rows are built as VERL's ``RLHFDataset`` yields them, one per episode, and played by the
episode loop (``teamgym_episode``, the loop ``main_ppo`` runs) in VERL's real
``AgentLoopWorker``, in-process (:class:`~teamgym.adapters.verl.workers.TeamAgentLoopWorker`:
the loop built by a call, each agent's trajectory stored under the uid verl's v1 worker gives
it), so the trainer sees what a GPU run's actor sees.
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from teamgym.adapters.cpu.args import EvalArgs, RolloutArgs, UpdateArgs
from teamgym.adapters.cpu.quiet import quiet_verl, silent_stdout
from teamgym.envs.seeds import eval_seeds

if TYPE_CHECKING:
    from verl.workers.rollout.llm_server import LLMServerClient

__all__ = [
    "batch_mean",
    "build_batch",
    "check_prompt_length",
    "compose_config",
    "episode_uid",
    "evaluate",
    "evaluate_metrics",
    "groups_with_signal",
    "held_out_figures",
    "local_server",
    "rollout_metrics",
]


def compose_config(rollout: RolloutArgs, run: Path, update: UpdateArgs | None = None) -> Any:
    """VERL's composed config for ``rollout``, with the agent-loop YAML written into ``run``;
    with ``update``, its actor config carries the update's clip range (the trainer's; an
    evaluation updates nothing)."""
    from teamgym.adapters.verl.settings import AgentLoopSettings, write_agent_loop_yaml
    from teamgym.adapters.verl.train import compose_config as compose_verl
    from teamgym.envs.sharing import RewardSharing

    settings = AgentLoopSettings(
        sharing=RewardSharing(weight=rollout.sharing_weight, mode=rollout.sharing_mode),
        max_reply_tokens=rollout.max_reply_tokens,
        turn_timeout=300,
        forced_moves=rollout.forced_moves,
        stop=rollout.stop,
    )
    loop_yaml = write_agent_loop_yaml(run / "agent_loop.yaml", settings)
    actor = [] if update is None else [f"actor_rollout_ref.actor.clip_ratio={update.clip_ratio}"]
    return compose_verl(
        [
            f"teamgym.dataset_dir={run}",
            f"actor_rollout_ref.model.path={rollout.model}",
            f"actor_rollout_ref.rollout.prompt_length={rollout.prompt_length}",
            f"actor_rollout_ref.rollout.response_length={rollout.response_length}",
            f"data.max_prompt_length={rollout.prompt_length}",
            f"data.max_response_length={rollout.response_length}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
            f"actor_rollout_ref.rollout.temperature={rollout.temperature}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            *actor,
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",  # required by VERL's actor config
        ]
    )


def build_batch(rollout: RolloutArgs, seeds: list[int], split: str, repeat: int) -> Any:
    """Episode-layout rows as VERL's RLHFDataset yields them (one per seed, played whole by the
    episode loop), each repeated ``repeat`` times as copies ``session_id`` 0, 1, ...: the
    batch the v1 worker's ``rollout.n`` sessions play. A row's uid is a UUID named by its
    episode (the same in every run), so each agent's copies form one ``grpo`` group
    (``U_k``) and the episode's agents one ``team_grpo`` group (``U``)."""
    from verl.protocol import DataProto

    from teamgym.adapters.verl.dataset import episode_rows

    rows = episode_rows(
        rollout.env,
        rollout.env_kwargs,
        seeds,
        split,
        teammates=rollout.teammates,
        partners=rollout.pool,
    )
    non_tensor = {
        "raw_prompt": _objects([r["prompt"] for r in rows]),
        "extra_info": _objects([r["extra_info"] for r in rows]),
        "agent_name": _objects([r["agent_name"] for r in rows]),
        "data_source": _objects([r["data_source"] for r in rows]),
        "index": _objects([r["extra_info"]["index"] for r in rows]),
        "uid": _objects([episode_uid(r["extra_info"]["episode"]) for r in rows]),
    }
    batch = DataProto.from_dict(
        tensors={"dummy": torch.zeros(len(rows), 1)}, non_tensors=non_tensor
    )
    batch = batch.repeat(repeat_times=repeat, interleave=True)
    batch.non_tensor_batch["session_id"] = np.tile(np.arange(repeat), len(rows))
    return batch


#: The namespace of the CPU trainer's row uids (:func:`episode_uid`).
_UID_NAMESPACE = uuid.UUID("5f0c2a5e-7d1b-4c3e-9a57-2f3b6d1e8c40")


def episode_uid(episode: str) -> str:
    """A row uid for ``episode``: a UUID as verl makes its rows', but named by the episode, so
    a rerun's batch (and its request ids, its sampling) is the same."""
    return str(uuid.uuid5(_UID_NAMESPACE, episode))


def check_prompt_length(rollout: RolloutArgs, tokenizer: Any) -> None:
    """Refuse a ``prompt_length`` shorter than the env's first turn (VERL would silently cut
    the instructions off the left of every prompt)."""
    from teamgym.adapters.verl.dataset import PromptTooLongError, episode_rows

    env, kwargs, teammates = rollout.env, rollout.env_kwargs, rollout.teammates
    rows = episode_rows(env, kwargs, [0, 1, 2], "check", teammates=teammates, partners=rollout.pool)
    prompts = [ms for r in rows for ms in json.loads(r["extra_info"]["prompts"]).values()]

    def tokens(messages: list[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(tokenizer.encode(text, add_special_tokens=False))

    longest = max(tokens(messages) for messages in prompts)
    if longest > rollout.prompt_length:
        raise PromptTooLongError(
            f"prompt_length={rollout.prompt_length} is shorter than the first turn of {env} "
            f"({longest} tokens with this tokenizer); raise it to at least {longest + 32}"
        )


def _objects(items: list[Any]) -> np.ndarray:
    """A 1-D object array (np.array would turn a list of message lists into a 2-D one)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def batch_mean(out: Any, key: str) -> float:
    """Mean of an episode metric over the batch's rows (NaN-free; 0 when never defined)."""
    values = [
        float(i[key])
        for i in out.non_tensor_batch["reward_extra_info"]
        if not math.isnan(float(i[key]))
    ]
    return float(np.mean(values)) if values else 0.0


def groups_with_signal(out: Any) -> float:
    """Fraction of GRPO groups (same ``uid``) whose returns differ: the others get a zero
    advantage and teach nothing (a collapsed policy, or a task too hard to ever score)."""
    returns: dict[str, set[float]] = {}
    for uid, score in zip(
        out.non_tensor_batch["uid"], out.batch["rm_scores"].sum(-1).tolist(), strict=True
    ):
        returns.setdefault(str(uid), set()).add(round(float(score), 6))
    return float(np.mean([len(r) > 1 for r in returns.values()])) if returns else 0.0


def rollout_metrics(out: Any) -> dict[str, float]:
    """The episode figures of a rollout batch, as a step's line of ``metrics.jsonl`` names them."""
    return {
        "success": batch_mean(out, "success"),
        "score": batch_mean(out, "score"),
        "reward": float(out.batch["rm_scores"].sum(-1).mean()),
        "team_return": batch_mean(out, "team_return"),
        "collaboration_index": batch_mean(out, "collaboration_index"),
        "communication_frequency": batch_mean(out, "communication_frequency"),
        "invalid_action_rate": batch_mean(out, "invalid_action_rate"),
        "idle": batch_mean(out, "idle"),
        "groups_with_signal": groups_with_signal(out),
    }


def evaluate(model_dir_or_model: Any, tokenizer: Any, evaluation: EvalArgs, seed: int = 0) -> float:
    """Greedy success rate on held-out (evaluation-range) seeds."""
    return evaluate_metrics(model_dir_or_model, tokenizer, evaluation, seed)["success"]


def evaluate_metrics(
    model_dir_or_model: Any,
    tokenizer: Any,
    evaluation: EvalArgs,
    seed: int = 0,
    temperature: float = 0.0,
) -> dict[str, float]:
    """Held-out figures on ``evaluation.episodes`` episodes of evaluation set ``seed``, greedy
    unless ``temperature`` > 0 (then sampled with the server's ``seed``): success, score, team
    return (raw, before sharing), invalid-action rate and ``idle`` (the share of episodes whose
    trained agents only idled: :class:`~teamgym.envs.metrics.IdleCount`), each the mean over
    the trained agents' rows. ``model_dir_or_model`` may seat one model a seat
    (``{agent: model or directory}``, a run's policies: :func:`local_server`)."""
    quiet_verl()  # before verl's first import
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    run = Path(evaluation.out)
    run.mkdir(parents=True, exist_ok=True)
    cfg = compose_config(evaluation.rollout, run)
    cfg.actor_rollout_ref.rollout.temperature = temperature
    cfg.actor_rollout_ref.rollout.val_kwargs.temperature = temperature  # before the worker reads it
    with silent_stdout():
        worker = TeamAgentLoopWorker(cfg, local_server(model_dir_or_model, tokenizer, seed))
    seeds = eval_seeds(seed, evaluation.episodes)
    batch = build_batch(evaluation.rollout, seeds, "eval", 1)
    batch.meta_info["validate"] = True
    out = asyncio.run(worker.generate_sequences(batch))
    keys = ("success", "score", "team_return", "invalid_action_rate", "idle")
    figures = {key: batch_mean(out, key) for key in keys}
    if evaluation.rollout.pool is not None and len(evaluation.rollout.pool.specs) > 1:
        figures |= success_per_partner(out)
    return figures


def held_out_figures(
    model_dir_or_model: Any,
    tokenizer: Any,
    evaluation: EvalArgs,
    eval_partners: tuple[str, ...] = (),
) -> dict[str, float]:
    """:func:`evaluate_metrics` on the held-out set; with ``eval_partners``, the same episodes
    with those partners in the partner seats too (``crossplay_*``) and the gap in success
    (``crossplay_gap``: with the training partners minus with the held-out ones)."""
    from dataclasses import replace

    from teamgym.envs.seeds import HELD_OUT_SET

    figures = evaluate_metrics(model_dir_or_model, tokenizer, evaluation, seed=HELD_OUT_SET)
    if eval_partners:
        held_out = replace(evaluation, rollout=evaluation.rollout.with_partners(eval_partners))
        cross = evaluate_metrics(model_dir_or_model, tokenizer, held_out, seed=HELD_OUT_SET)
        figures |= {f"crossplay_{key}": value for key, value in cross.items()}
        figures["crossplay_gap"] = figures["success"] - cross["success"]
    return figures


def success_per_partner(out: Any) -> dict[str, float]:
    """Held-out success with each partner of the pool (``success/<spec>``), from the rows'
    ``partner``."""
    by_partner: dict[str, list[float]] = {}
    for info, extra in zip(
        out.non_tensor_batch["extra_info"], out.non_tensor_batch["reward_extra_info"], strict=True
    ):
        by_partner.setdefault(str(info.get("partner", "")), []).append(float(extra["success"]))
    return {f"success/{p}": float(np.mean(v)) for p, v in sorted(by_partner.items()) if p}


def local_server(model_dir_or_model: Any, tokenizer: Any, seed: int) -> LLMServerClient:
    """A :class:`~teamgym.adapters.cpu.server.LocalModelServer` of the model, as the
    ``LLMServerClient`` VERL's ``AgentLoopWorker`` takes: it answers ``generate`` as that class
    does without subclassing it (whose constructor wants VERL's whole config and a Ray load
    balancer), so the type is a cast. A mapping ``{agent: model or directory}`` (a run's
    policies, one a seat or group of seats) gives a
    :class:`~teamgym.adapters.cpu.server.SeatRouter` with one server per model."""
    from teamgym.adapters.cpu.server import LocalModelServer, SeatRouter

    if isinstance(model_dir_or_model, Mapping):

        def key(model: Any) -> Any:  # a directory by its path, a loaded model by itself
            return str(model) if isinstance(model, (str, Path)) else id(model)

        servers: dict[Any, Any] = {}  # one per model: a policy's seats share its batches
        for model in model_dir_or_model.values():
            if key(model) not in servers:
                servers[key(model)] = LocalModelServer(model, tokenizer=tokenizer, seed=seed)
        router = SeatRouter({a: servers[key(m)] for a, m in model_dir_or_model.items()})
        return cast("LLMServerClient", router)
    server = LocalModelServer(model_dir_or_model, tokenizer=tokenizer, seed=seed)
    return cast("LLMServerClient", server)
