"""CPU GRPO trainer: shared-reward GRPO on a laptop with VERL's own data path and algorithms.

Rollouts go through VERL's real ``AgentLoopWorker`` and our ``teamgym_agent`` loop (the same
episode hub as on GPUs), served by :class:`~teamgym.adapters.verl.server.LocalModelServer` in
place of vLLM (:mod:`.rollout`); the update uses VERL's ``core_algos`` with AdamW in place
of the FSDP actor (:mod:`.grpo`), after a supervised format warm-up (:mod:`.warmup`).
Every step is checkpointed and guarded (:mod:`.run_state`); ``resume=True`` continues a
killed run. Reads top to bottom: one :class:`TrainArgs`, one :func:`train`.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.cpu.grpo import grpo_update, load_learner
from teamgym.adapters.cpu.rollout import (
    build_batch,
    check_prompt_length,
    compose_config,
    evaluate,
    evaluate_metrics,
    rollout_metrics,
)
from teamgym.adapters.cpu.run_state import RunDir, guard
from teamgym.adapters.cpu.warmup import format_warmup, warm_up, warmup_examples
from teamgym.adapters.prometheus import record_exporter
from teamgym.envs.seeds import HELD_OUT_SET, train_seeds, update_seed

__all__ = ["TrainArgs", "evaluate", "format_warmup", "grpo_update", "train", "warmup_examples"]


def train(args: TrainArgs, progress: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) GRPO; returns the metrics of every step. One function on purpose: the
    main loop reads top to bottom, CleanRL style."""
    from rich.progress import Progress
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.verl.server import LocalModelServer

    run = RunDir(args.out)
    run.start(args)
    check_prompt_length(args, AutoTokenizer.from_pretrained(args.model))

    # 0. format warm-up (once): the model GRPO starts from
    start_model = warm_up(args, run.path)

    # 1. VERL's composed config; the policy, a frozen reference, the optimiser; a resumed state
    cfg = compose_config(args, run.path)
    tokenizer = AutoTokenizer.from_pretrained(start_model)
    learner = load_learner(start_model, args, omega_conf_to_dataclass(cfg.actor_rollout_ref.actor))
    state, history = run.resume(args, learner)
    run.start_stable(learner, state)
    rng = np.random.default_rng(args.seed)
    if state.rng is not None:
        rng.bit_generator.state = state.rng

    # 2. VERL's agent-loop worker on a local server of the policy; the Prometheus exporter
    worker = AgentLoopWorker(cfg, LocalModelServer(learner.policy, tokenizer, seed=args.seed))
    export = record_exporter(args.metrics_port)

    with Progress(disable=not progress) as bar:
        task = bar.add_task("GRPO", total=args.steps, completed=state.step)
        while state.step < args.steps:
            start, cpu_start = time.perf_counter(), time.process_time()
            step = state.step + 1
            # 3. rollouts through VERL's agent loop, one GRPO group per (seed, agent)
            batch = build_batch(
                args, train_seeds(rng, args.episodes_per_step), "train", args.group_size
            )
            learner.policy.eval()
            out = asyncio.run(worker.generate_sequences(batch))

            # 4. VERL's algorithms: GRPO advantage, clipped policy loss, KL, entropy
            losses = grpo_update(
                learner, out, args, seed=update_seed(args.seed, step), lr=state.lr, step=step
            )

            # 5. metrics, monitors, checkpoints
            record = step_record(args, step, out, losses, state.lr, time.perf_counter() - start)
            record["cpu_seconds"] = time.process_time() - cpu_start  # all threads: ~ cores x wall
            if args.eval_every and (step % args.eval_every == 0 or step == args.steps):
                record |= _held_out(learner, tokenizer, args)
            if event := guard(args, state, record, learner, run):
                record["guard"] = event
            run.finish_step(record, learner, state, rng)
            history.append(record)
            export(record)
            description = f"GRPO success {record['success']:.2f} KL {record['kl']:.3f}"
            bar.update(task, advance=1, description=description)

    _finish(history, run.path, args, learner, tokenizer)
    return history


def _held_out(learner: Any, tokenizer: Any, args: TrainArgs) -> dict[str, Any]:
    """The greedy policy's metrics on the held-out evaluation set, as ``eval_*`` record keys."""
    metrics = evaluate_metrics(
        learner.policy, tokenizer, args, args.eval_episodes, seed=HELD_OUT_SET
    )
    return {f"eval_{key}": value for key, value in metrics.items()}


def _finish(
    history: list[dict[str, Any]], path: Path, args: TrainArgs, learner: Any, tokenizer: Any
) -> None:
    """The curve, and the final policy where ``checkpoint:DIR`` finds it (``path/policy``)."""
    plot_curve(history, path / "curve.png", args)
    learner.policy.save_pretrained(path / "policy", safe_serialization=True)
    tokenizer.save_pretrained(path / "policy")


def step_record(
    args: TrainArgs, step: int, out: Any, losses: dict[str, float], lr: float, seconds: float
) -> dict[str, Any]:
    """A step's line of ``metrics.jsonl`` (before evaluation and guard), with a warning when KL
    passes ``args.kl_target``."""
    record = {"step": step, **rollout_metrics(out), **losses, "lr": lr}
    record["episodes_per_s"] = args.episodes_per_step * args.group_size / seconds
    record["seconds"] = seconds
    if record["kl"] > args.kl_target:
        record["warning"] = f"KL {record['kl']:.4f} above target {args.kl_target}"
    return record


def plot_curve(history: list[dict[str, Any]], path: Path, args: TrainArgs | None = None) -> None:
    """Learning curve: training success (and held-out success) and KL per step; the guard's
    rollbacks as vertical lines, KL's warning level and limit (``args``) and a changing
    learning rate on the KL panel."""
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
    kls = [h["kl"] for h in history]
    ax2.plot(steps, kls, color="tab:red", label="KL to reference")
    if args is not None:
        top = max(kls)
        ax2.axhline(args.kl_target, color="tab:orange", ls=":", label="KL warning (--kl-target)")
        if args.kl_limit <= 2 * top:
            ax2.axhline(args.kl_limit, color="black", ls=":", label="guard limit (--kl-limit)")
    for i, h in enumerate(h for h in history if "guard" in h):
        for ax in (ax1, ax2):
            ax.axvline(
                h["step"], color="gray", ls="--", label="rollback, lr halved" if i == 0 else None
            )
    lrs = [h["lr"] for h in history]
    if len(set(lrs)) > 1:
        twin = ax2.twinx()
        twin.step(steps, lrs, where="post", color="tab:green", label="learning rate")
        twin.set_yscale("log")
        twin.set_ylabel("learning rate")
        twin.legend(loc="upper right", fontsize=8)
    ax1.legend(fontsize=8)
    ax2.set_xlabel("step")
    ax2.set_ylabel("KL")
    ax2.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
