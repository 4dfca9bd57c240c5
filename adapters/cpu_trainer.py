"""CPU GRPO trainer: shared-reward GRPO on a laptop with VERL's own data path and algorithms.

Rollouts go through VERL's real ``AgentLoopWorker`` and our ``teamgym_agent`` loop (the same
episode hub as on GPUs), served by :class:`~teamgym.adapters.verl.server.LocalModelServer` in
place of vLLM; the update uses VERL's ``core_algos`` (GRPO advantage grouped by ``uid`` = one
seed and agent, the clipped policy loss, the KL penalty to a frozen reference) with AdamW in
place of the FSDP actor. Reads top to bottom: one :class:`TrainArgs`, one :func:`train`.

Monitors: KL to the reference and policy entropy every step; a warning when KL passes
``kl_target``; a guard that restores the last stable checkpoint (and halves the learning
rate) when KL stays above ``kl_limit`` or success stays well below the best seen. A run killed
at any point resumes with ``resume=True`` from its last checkpoint (written every step) and
keeps every finished step's line in ``metrics.jsonl``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["TrainArgs", "evaluate", "format_warmup", "grpo_update", "train", "warmup_examples"]


@dataclass(frozen=True)
class TrainArgs:
    """Everything a run needs; saved as ``args.json`` in the run directory."""

    model: str
    """Local model directory (``teamgym model init``)."""
    out: str
    """Run directory: metrics.jsonl, checkpoints, curve.png."""
    env: str = "signal-v0"
    """Environment id."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Environment arguments."""
    teammates: dict[str, str] = field(default_factory=dict)
    """Agents played by a baseline (``{"robot_0": "expert"}``), not trained."""
    steps: int = 50
    """Policy updates."""
    episodes_per_step: int = 8
    """Distinct episode seeds per update."""
    group_size: int = 8
    """Rollouts per (seed, agent): the GRPO group (VERL's rollout.n)."""
    lr: float = 3e-4
    """AdamW learning rate."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts (evaluation is greedy)."""
    sharing_weight: float = 0.7
    """RewardSharing weight (mixed mode)."""
    kl_coef: float = 0.01
    """Weight of the KL-to-reference loss (VERL's low_var_kl)."""
    kl_target: float = 0.02
    """A warning is logged when the step's KL exceeds it."""
    kl_limit: float = 0.2
    """The guard rolls back when KL stays above it for ``guard_patience`` steps."""
    entropy_coef: float = 0.0
    """Entropy bonus."""
    ppo_epochs: int = 1
    """Passes over each rollout batch (VERL's ppo_epochs)."""
    mini_batches: int = 1
    """Optimiser steps per pass: the batch is split into this many shuffled mini-batches."""
    clip_ratio: float = 0.2
    """PPO clip range."""
    max_reply_tokens: int = 16
    """Tokens per reply."""
    forced_moves: str = "auto"
    """``auto``: turns with a single valid action are played without the model (no gradient)."""
    stop: list[str] = field(default_factory=lambda: ["</action>"])
    """Stop strings: a reply ends with its command, so the model never learns to run on after it
    (at a high learning rate the end-of-reply token was seen to fade, and the tail of junk that
    followed swamped the update)."""
    prompt_length: int = 512
    """VERL rollout.prompt_length."""
    response_length: int = 256
    """VERL rollout.response_length (all of one agent's later turns)."""
    eval_every: int = 10
    """Held-out evaluation every N steps (and at the end)."""
    eval_episodes: int = 64
    """Held-out episodes per evaluation."""
    guard_patience: int = 3
    """Consecutive bad steps before the guard restores the stable checkpoint."""
    seed: int = 0
    """Seeds sampling, episode draws and initialisation."""
    resume: bool = False
    """Continue the run in ``out`` from its last checkpoint."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on 127.0.0.1:PORT."""
    warmup_steps: int = 300
    """Format warm-up (supervised, on valid-but-random replies) before GRPO; 0 skips it."""
    warmup_policy: str = "random"
    """Teacher of the warm-up: ``random`` (format only) or a baseline such as ``expert``
    (behaviour cloning: the supervised upper bound for this model)."""


# ---------------------------------------------------------------------------- pieces
def _compose(args: TrainArgs, run: Path) -> Any:
    from teamgym.adapters.verl.config import write_agent_loop_yaml
    from teamgym.adapters.verl.train import compose_config

    loop_yaml = write_agent_loop_yaml(
        run / "agent_loop.yaml",
        sharing={"weight": args.sharing_weight},
        max_reply_tokens=args.max_reply_tokens,
        join_timeout=30,
        turn_timeout=300,
        forced_moves=args.forced_moves,
        stop=list(args.stop),
    )
    return compose_config(
        [
            f"teamgym.dataset_dir={run}",
            f"actor_rollout_ref.model.path={args.model}",
            f"actor_rollout_ref.rollout.prompt_length={args.prompt_length}",
            f"actor_rollout_ref.rollout.response_length={args.response_length}",
            f"data.max_prompt_length={args.prompt_length}",
            f"data.max_response_length={args.response_length}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
            f"actor_rollout_ref.rollout.temperature={args.temperature}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            f"actor_rollout_ref.actor.clip_ratio={args.clip_ratio}",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",  # required by VERL's actor config
        ]
    )


def _batch(args: TrainArgs, seeds: list[int], split: str, repeat: int) -> Any:
    """Rows as VERL's RLHFDataset yields them, uid'd and repeated interleaved like the trainer."""
    from verl.protocol import DataProto

    from teamgym.adapters.verl.dataset import episode_rows

    rows = episode_rows(args.env, args.env_kwargs, seeds, split, teammates=args.teammates)
    n = len(rows)
    non_tensor = {
        "raw_prompt": _objects([r["prompt"] for r in rows]),
        "extra_info": _objects([r["extra_info"] for r in rows]),
        "agent_name": _objects([r["agent_name"] for r in rows]),
        "data_source": _objects([r["data_source"] for r in rows]),
        "index": _objects([r["extra_info"]["index"] for r in rows]),
        # one GRPO group per (seed, agent), as VERL's per-row uid gives
        "uid": _objects([f"{r['extra_info']['episode']}/{r['extra_info']['agent']}" for r in rows]),
    }
    batch = DataProto.from_dict(tensors={"dummy": torch.zeros(n, 1)}, non_tensors=non_tensor)
    return batch.repeat(repeat_times=repeat, interleave=True)


def _check_prompt_length(args: TrainArgs, tokenizer: Any) -> None:
    """Refuse a ``prompt_length`` shorter than the env's first turn (VERL would silently cut
    the instructions off the left of every prompt)."""
    from teamgym.adapters.verl.dataset import episode_rows

    rows = episode_rows(args.env, args.env_kwargs, [0, 1, 2], "check", teammates=args.teammates)

    def tokens(messages: list[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(tokenizer.encode(text, add_special_tokens=False))

    longest = max(tokens(r["prompt"]) for r in rows)
    if longest > args.prompt_length:
        raise ValueError(
            f"prompt_length={args.prompt_length} is shorter than the first turn of {args.env} "
            f"({longest} tokens with this tokenizer); raise it to at least {longest + 32}"
        )


def _objects(items: list[Any]) -> np.ndarray:
    """A 1-D object array (np.array would turn a list of message lists into a 2-D one)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def _response_logprobs(
    model: Any, out: Any, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the response tokens (and their entropy) under ``model``.

    VERL pads prompts on the left to ``prompt_length`` and responses on the right to
    ``response_length``; columns that are padding in every row are cut before the forward pass
    (a large saving on CPU) and the results are padded back to VERL's shapes."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    input_ids, attention = out.batch["input_ids"], out.batch["attention_mask"]
    position_ids, responses = out.batch["position_ids"], out.batch["responses"]
    resp_len = responses.shape[1]
    prompt_len = input_ids.shape[1] - resp_len
    used = attention.sum(0) > 0
    first = int(used[:prompt_len].float().argmax()) if used[:prompt_len].any() else prompt_len - 1
    last = int(used[prompt_len:].nonzero().max()) + 1 if used[prompt_len:].any() else 1
    cols = slice(first, prompt_len + last)
    logits = model(
        input_ids=input_ids[:, cols],
        attention_mask=attention[:, cols],
        position_ids=position_ids[:, cols],
    ).logits
    logits = logits[:, -last - 1 : -1, :].float()
    kept = logprobs_from_logits(logits, responses[:, :last], inplace_backward=False)
    logprobs = torch.zeros(responses.shape, dtype=kept.dtype)
    logprobs[:, :last] = kept
    entropy = None
    if with_entropy:
        entropy = torch.zeros(responses.shape, dtype=kept.dtype)
        entropy[:, :last] = entropy_from_logits(logits)
    return logprobs, entropy


def _success(out: Any) -> float:
    return _episode_mean(out, "success")


def _episode_mean(out: Any, key: str) -> float:
    """Mean of an episode metric over the batch's rows (NaN-free; 0 when never defined)."""
    values = [
        float(i[key])
        for i in out.non_tensor_batch["reward_extra_info"]
        if not math.isnan(float(i[key]))
    ]
    return float(np.mean(values)) if values else 0.0


def _groups_with_signal(out: Any) -> float:
    """Fraction of GRPO groups (same ``uid``) whose returns differ: the others get a zero
    advantage and teach nothing (a collapsed policy, or a task too hard to ever score)."""
    returns: dict[str, set[float]] = {}
    for uid, score in zip(
        out.non_tensor_batch["uid"], out.batch["rm_scores"].sum(-1).tolist(), strict=True
    ):
        returns.setdefault(str(uid), set()).add(round(float(score), 6))
    return float(np.mean([len(r) > 1 for r in returns.values()])) if returns else 0.0


def _seeds(rng: np.random.Generator, count: int) -> list[int]:
    from teamgym.names import EVAL_SEED_BASE

    return [int(s) for s in rng.integers(0, EVAL_SEED_BASE, size=count)]


# ---------------------------------------------------------------------------- evaluation
def evaluate(
    model_dir_or_model: Any, tokenizer: Any, args: TrainArgs, episodes: int, seed: int = 0
) -> float:
    """Greedy success rate on held-out (evaluation-range) seeds."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from teamgym.adapters.verl.server import LocalModelServer
    from teamgym.names import EVAL_SEED_BASE

    run = Path(args.out)
    run.mkdir(parents=True, exist_ok=True)
    cfg = _compose(args, run)
    cfg.actor_rollout_ref.rollout.temperature = 0.0
    server = LocalModelServer(model_dir_or_model, tokenizer=tokenizer, seed=seed)
    worker = AgentLoopWorker(cfg, server)
    seeds = [EVAL_SEED_BASE + seed * 100_000 + k for k in range(episodes)]
    batch = _batch(args, seeds, "eval", 1)
    batch.meta_info["validate"] = True
    cfg.actor_rollout_ref.rollout.val_kwargs.temperature = 0.0
    out = asyncio.run(worker.generate_sequences(batch))
    return _success(out)


# ---------------------------------------------------------------------------- warm-up
def warmup_examples(
    args: TrainArgs, tokenizer: Any, episodes: int, teacher: str = "random"
) -> list[tuple[list[int], int]]:
    """Supervised examples for the warm-up: every turn of the trained agents in ``episodes``
    episodes played by the ``teacher`` baseline (teammates by theirs), as (prompt + reply
    token ids, reply length). The prompt is the agent's chat so far, as the agent loop renders it."""
    from teamgym.envs import make
    from teamgym.envs.baselines import make_baseline

    env = make(args.env, **args.env_kwargs)
    policy = make_baseline(args.env, teacher, seed=args.seed)
    if hasattr(policy, "bind"):
        policy.bind(env)
    mates = {a: make_baseline(args.env, n, seed=args.seed) for a, n in args.teammates.items()}
    for mate in mates.values():
        if hasattr(mate, "bind"):
            mate.bind(env)
    examples: list[tuple[list[int], int]] = []
    for k in range(episodes):
        obs, infos = env.reset(seed=k)
        policy.reset(k)
        for mate in mates.values():
            mate.reset(k)
        history = {a: [{"role": "system", "content": infos[a]["instructions"]}] for a in env.agents}
        while env.agents:
            replies = {}
            for a in env.agents:
                if a in mates:
                    replies[a] = mates[a].act(a, obs[a], infos[a])
                    continue
                reply = policy.act(a, obs[a], infos[a])
                history[a].append({"role": "user", "content": obs[a]})
                prompt = tokenizer.apply_chat_template(
                    history[a], add_generation_prompt=True, tokenize=False
                )
                prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
                reply_ids = [
                    *tokenizer.encode(reply, add_special_tokens=False),
                    tokenizer.eos_token_id,
                ]
                examples.append((prompt_ids[-args.prompt_length :] + reply_ids, len(reply_ids)))
                history[a].append({"role": "assistant", "content": reply})
                replies[a] = reply
            obs, _, _, _, new = env.step(replies)
            infos.update(new)
    return examples


def format_warmup(
    args: TrainArgs,
    out_dir: str | Path,
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 1e-3,
    teacher: str = "random",
) -> dict[str, float]:
    """Supervised pass on the ``teacher``'s replies: ``random`` (the default) gives valid but
    random replies, so the model learns the format, not the strategy; a strategic teacher
    (``expert``) makes it behaviour cloning, the supervised upper bound of what RL can reach
    with this model. ``args.model`` in, ``out_dir`` out."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    examples = warmup_examples(args, tokenizer, max(64, steps * batch_size // 8), teacher)
    optim = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = np.random.default_rng(args.seed)
    model.train()
    losses = []
    for _ in range(steps):
        pick = [examples[int(i)] for i in rng.integers(len(examples), size=batch_size)]
        width = max(len(ids) for ids, _ in pick)
        ids = torch.full((batch_size, width), tokenizer.pad_token_id)
        labels = torch.full((batch_size, width), -100)
        attn = torch.zeros((batch_size, width), dtype=torch.long)
        for b, (seq, n_reply) in enumerate(pick):
            ids[b, : len(seq)] = torch.tensor(seq)
            attn[b, : len(seq)] = 1
            labels[b, len(seq) - n_reply : len(seq)] = torch.tensor(seq[-n_reply:])
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(float(loss.detach()))
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return {
        "first_loss": losses[0],
        "last_loss": float(np.mean(losses[-10:])),
        "examples": len(examples),
    }


# ---------------------------------------------------------------------------- training
def grpo_update(
    policy: Any,
    reference: Any,
    optim: Any,
    out: Any,
    actor_cfg: Any,
    kl_coef: float,
    entropy_coef: float,
    epochs: int = 1,
    mini_batches: int = 1,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Optimiser steps on a rollout batch with VERL's ``core_algos``: GRPO advantage grouped
    by ``uid`` (over the whole batch), then ``epochs`` passes of ``mini_batches`` shuffled
    mini-batches (VERL's ppo_epochs / ppo_mini_batch_size) of the clipped (vanilla) policy loss,
    low-variance KL to ``reference`` and entropy. Returns the mean (loss, kl, entropy)."""
    from verl.trainer.ppo import core_algos

    adv, _ = core_algos.compute_grpo_outcome_advantage(
        out.batch["rm_scores"], out.batch["response_mask"], out.non_tensor_batch["uid"]
    )
    with torch.no_grad():
        old_logp, _ = _response_logprobs(policy, out)
        ref_logp, _ = _response_logprobs(reference, out)
    n = len(out)
    chunks = max(1, min(mini_batches, n))
    order_rng = torch.Generator().manual_seed(seed)
    losses, kls, ents = [], [], []
    policy.train()
    for _ in range(max(1, epochs)):
        order = torch.randperm(n, generator=order_rng) if chunks > 1 else torch.arange(n)
        for idx in torch.tensor_split(order, chunks):
            part = out.select_idxs(idx.numpy()) if chunks > 1 else out
            mask = part.batch["response_mask"].float()
            logp, entropy = _response_logprobs(policy, part, with_entropy=True)
            pg_loss, _ = core_algos.get_policy_loss_fn("vanilla")(
                old_log_prob=old_logp[idx],
                log_prob=logp,
                advantages=adv[idx],
                response_mask=mask,
                loss_agg_mode="token-mean",
                config=actor_cfg,
            )
            kl = core_algos.agg_loss(
                core_algos.kl_penalty(logp, ref_logp[idx], "low_var_kl"), mask, "token-mean"
            )
            ent = core_algos.agg_loss(entropy, mask, "token-mean")
            loss = pg_loss + kl_coef * kl - entropy_coef * ent
            optim.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            optim.step()
            losses.append(loss.detach())
            kls.append(kl.detach())
            ents.append(ent.detach())
    policy.eval()
    return torch.stack(losses).mean(), torch.stack(kls).mean(), torch.stack(ents).mean()


def train(args: TrainArgs, progress: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) GRPO; returns the metrics of every step."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.verl.server import LocalModelServer

    run = Path(args.out)
    (run / "checkpoints").mkdir(parents=True, exist_ok=True)
    metrics_path = run / "metrics.jsonl"
    latest, stable = run / "checkpoints" / "latest.pt", run / "checkpoints" / "stable.pt"
    if not args.resume and metrics_path.exists():
        raise FileExistsError(
            f"{run} already holds a run; pass --resume to continue it or choose another --out"
        )
    (run / "args.json").write_text(json.dumps(asdict(args), indent=2, sort_keys=True) + "\n")

    _check_prompt_length(args, AutoTokenizer.from_pretrained(args.model))

    # 0. format warm-up: learn the reply format on random valid replies; record that it stays at chance
    start_model = args.model
    if args.warmup_steps > 0:
        start_model = str(run / "warmup_model")
        if not (run / "warmup_model" / "config.json").exists():
            began = time.perf_counter()
            info = format_warmup(
                args, start_model, steps=args.warmup_steps, teacher=args.warmup_policy
            )
            info["teacher"] = args.warmup_policy
            info["seconds"] = time.perf_counter() - began
            tok = AutoTokenizer.from_pretrained(start_model)
            info["eval_success"] = evaluate(start_model, tok, args, args.eval_episodes, seed=1)
            (run / "warmup.json").write_text(json.dumps(info, indent=2) + "\n")

    # 1. models: the policy, a frozen reference, the optimiser
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(start_model)
    policy = AutoModelForCausalLM.from_pretrained(start_model)
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    optim = torch.optim.AdamW(policy.parameters(), lr=args.lr)
    state = {"step": 0, "best_success": -1.0, "bad_steps": 0, "lr": args.lr, "rng": None}
    history: list[dict[str, Any]] = []
    if args.resume and latest.exists():
        ckpt = torch.load(latest, weights_only=False)
        policy.load_state_dict(ckpt["model"])
        optim.load_state_dict(ckpt["optim"])
        state = ckpt["state"]
    if (
        metrics_path.exists()
    ):  # keep the steps the checkpoint covers; a later, unsaved one is redone
        history = [json.loads(x) for x in metrics_path.read_text().splitlines() if x.strip()]
        history = [h for h in history if h.get("step", 0) <= state["step"]]
        tmp = metrics_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(h) + "\n" for h in history))
        tmp.replace(metrics_path)
    rng = np.random.default_rng(args.seed)
    if state["rng"] is not None:
        rng.bit_generator.state = state["rng"]

    # 2. VERL pieces: the composed config, the agent-loop worker, VERL's actor config
    cfg = _compose(args, run)
    actor_cfg = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    server = LocalModelServer(policy, tokenizer=tokenizer, seed=args.seed)
    worker = AgentLoopWorker(cfg, server)
    exporter = _exporter(args.metrics_port)

    def save(path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        torch.save({"model": policy.state_dict(), "optim": optim.state_dict(), "state": state}, tmp)
        tmp.replace(path)

    from rich.progress import Progress

    with Progress(disable=not progress) as bar:
        task = bar.add_task("GRPO", total=args.steps, completed=state["step"])
        while state["step"] < args.steps:
            start = time.perf_counter()
            step = state["step"] + 1
            # 3. rollouts through VERL's agent loop, one GRPO group per (seed, agent)
            batch = _batch(args, _seeds(rng, args.episodes_per_step), "train", args.group_size)
            policy.eval()
            out = asyncio.run(worker.generate_sequences(batch))
            # 4. VERL's algorithms: GRPO advantage, clipped policy loss, KL, entropy
            scores = out.batch["rm_scores"]
            loss, kl, ent = grpo_update(
                policy,
                reference,
                optim,
                out,
                actor_cfg,
                args.kl_coef,
                args.entropy_coef,
                epochs=args.ppo_epochs,
                mini_batches=args.mini_batches,
                seed=args.seed * 100_003 + step,
            )

            # 5. metrics, monitors, checkpoints
            seconds = time.perf_counter() - start
            record = {
                "step": step,
                "success": _success(out),
                "reward": float(scores.sum(-1).mean()),
                "team_return": _episode_mean(out, "team_return"),
                "collaboration_index": _episode_mean(out, "collaboration_index"),
                "communication_frequency": _episode_mean(out, "communication_frequency"),
                "invalid_action_rate": _episode_mean(out, "invalid_action_rate"),
                "groups_with_signal": _groups_with_signal(out),
                "kl": float(kl.detach()),
                "entropy": float(ent.detach()),
                "loss": float(loss.detach()),
                "lr": state["lr"],
                "episodes_per_s": args.episodes_per_step * args.group_size / seconds,
                "seconds": seconds,
            }
            if record["kl"] > args.kl_target:
                record["warning"] = f"KL {record['kl']:.4f} above target {args.kl_target}"
            if args.eval_every and (step % args.eval_every == 0 or step == args.steps):
                record["eval_success"] = evaluate(
                    policy, tokenizer, args, args.eval_episodes, seed=1
                )
            event = _guard(args, state, record, save, stable, latest, policy, optim)
            if event:
                record["guard"] = event
            with metrics_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            state["step"] = step
            state["rng"] = rng.bit_generator.state
            save(latest)  # the step is finished once this lands (resume trims any later line)
            history.append(record)
            exporter(record)
            bar.update(
                task,
                advance=1,
                description=f"GRPO success {record['success']:.2f} KL {record['kl']:.3f}",
            )
    _plot(history, run / "curve.png")
    policy.save_pretrained(run / "policy", safe_serialization=True)  # a teammate: checkpoint:DIR
    tokenizer.save_pretrained(run / "policy")
    return history


def _guard(
    args: TrainArgs,
    state: dict,
    record: dict,
    save: Any,
    stable: Path,
    latest: Path,
    policy: Any,
    optim: Any,
) -> str | None:
    """Keep the last stable checkpoint; restore it (and halve the lr) after a run of bad steps."""
    kl_bad = record["kl"] > args.kl_limit
    success_bad = state["best_success"] >= 0 and record["success"] < state["best_success"] - 0.3
    if not kl_bad and record["success"] >= state["best_success"]:
        state["best_success"] = record["success"]
        save(stable)
    state["bad_steps"] = state["bad_steps"] + 1 if (kl_bad or success_bad) else 0
    if state["bad_steps"] < args.guard_patience or not stable.exists():
        return None
    ckpt = torch.load(stable, weights_only=False)
    policy.load_state_dict(ckpt["model"])
    state["lr"] = state["lr"] / 2
    for group in optim.param_groups:
        group["lr"] = state["lr"]
    state["bad_steps"] = 0
    why = "KL above its limit" if kl_bad else "success far below the best"
    return f"rolled back to the stable checkpoint ({why} for {args.guard_patience} steps); lr -> {state['lr']:.2e}"


def _exporter(port: int | None) -> Any:
    """Prometheus gauges on 127.0.0.1:port (a no-op without a port)."""
    if port is None:
        return lambda record: None
    from teamgym.benchmarks.prometheus import MetricsExporter

    exporter = MetricsExporter(port)
    return exporter.update


def _plot(history: list[dict[str, Any]], path: Path) -> None:
    """Learning curve: training success (and held-out success) and KL per step."""
    if not history:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [h["step"] for h in history]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    ax1.plot(steps, [h["success"] for h in history], label="training success")
    evals = [(h["step"], h["eval_success"]) for h in history if "eval_success" in h]
    warmup = path.parent / "warmup.json"
    if warmup.exists():  # the warm-up model's held-out success is the curve's start
        evals.insert(0, (0, json.loads(warmup.read_text())["eval_success"]))
    if evals:
        ax1.plot(*zip(*evals, strict=True), "o-", label="held-out success (greedy)")
    ax1.set_ylabel("success")
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend()
    ax2.plot(steps, [h["kl"] for h in history], color="tab:red", label="KL to reference")
    ax2.set_xlabel("step")
    ax2.set_ylabel("KL")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
