"""CPU GRPO trainer: shared-reward GRPO on a laptop with VERL's own data path and algorithms.

Rollouts go through VERL's real ``AgentLoopWorker`` (teamgym's subclass, which builds the loop
by a call instead of Hydra) playing the ``teamgym_episode`` loop (the same loop as on GPUs),
served by :class:`~teamgym.adapters.cpu.server.LocalModelServer` in
place of vLLM (:mod:`.rollout`); the update uses VERL's ``core_algos`` with AdamW in place
of the FSDP actor (:mod:`.grpo`), after a supervised format warm-up (:mod:`.warmup`). One
model plays every trained seat, or each policy of ``args.policy`` its own seats
(:mod:`.policies`: a model, optimiser and update each, the reward still shared).
Every step is checkpointed and guarded (:mod:`.run_state`); ``resume=True`` continues a
killed run. Reads top to bottom: one :class:`TrainArgs`, one :func:`train`, which hands each
part the slice of the settings it uses (``args.rollout``, ``args.update``, ...).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from teamgym.adapters.cpu.args import (
    EvalArgs,
    GuardArgs,
    TrainArgs,
)
from teamgym.adapters.cpu.grpo import grpo_update
from teamgym.adapters.cpu.policies import Policies, policy_starts
from teamgym.adapters.cpu.quiet import quiet_verl, silent_stdout
from teamgym.adapters.cpu.rollout import (
    build_batch,
    check_prompt_length,
    compose_config,
    evaluate,
    held_out_figures,
    local_server,
    rollout_metrics,
)
from teamgym.adapters.cpu.run_state import RunDir, guard
from teamgym.adapters.cpu.seats import check_policies, env_agents
from teamgym.adapters.cpu.warmup import (
    START_FILE,
    format_warmup,
    warm_up,
    warm_up_policies,
    warmup_examples,
)
from teamgym.adapters.prometheus import record_exporter
from teamgym.envs.seeds import train_seeds, update_seed

__all__ = ["TrainArgs", "evaluate", "format_warmup", "grpo_update", "train", "warmup_examples"]


def train(args: TrainArgs, progress: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) GRPO; returns the metrics of every step. One function on purpose: the
    main loop reads top to bottom, CleanRL style."""
    from rich.progress import Progress
    from transformers import AutoTokenizer

    quiet_verl()  # before verl's first import
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    agents = env_agents(args)
    seats = check_policies(args, agents)  # before anything is written
    run = RunDir(args.out)
    run.start(args)
    rollout, update = args.rollout, args.update
    check_prompt_length(rollout, AutoTokenizer.from_pretrained(args.model))

    # 0. format warm-up (once): the model GRPO starts from (or each policy's start)
    eval_partners = tuple(args.eval_partners)
    starts: str | dict[str, str]
    if seats:  # each policy warmed up on its own seats' turns
        starts = warm_up_policies(
            args.warmup,
            policy_starts(args),
            seats,
            args.evaluation,
            run.path,
            eval_partners,
            progress,
        )
    else:
        starts = warm_up(args.warmup, args.evaluation, run.path, eval_partners, progress)

    # 1. VERL's composed config; each policy, its frozen reference and optimiser; a resumed state
    cfg = compose_config(rollout, run.path, update)
    tokenizer = AutoTokenizer.from_pretrained(starts if isinstance(starts, str) else args.model)
    actor_cfg = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    policies = Policies.load(args, starts, agents, actor_cfg)
    state, history, rng = _resumed(run, args, policies)

    # 2. VERL's agent-loop worker on local servers of the policies; the Prometheus exporter
    with silent_stdout():
        worker = TeamAgentLoopWorker(cfg, local_server(policies.models(), tokenizer, args.seed))
    export = record_exporter(args.metrics_port)
    rollouts = args.episodes_per_step * args.group_size  # episodes a step plays

    with Progress(disable=not progress) as bar:
        task = bar.add_task("GRPO", total=args.steps, completed=state.step)
        while state.step < args.steps:
            start, cpu_start = time.perf_counter(), time.process_time()
            step = state.step + 1
            # 3. rollouts through VERL's agent loop, one GRPO group per (seed, agent)
            batch = build_batch(
                rollout, train_seeds(rng, args.episodes_per_step), "train", args.group_size
            )
            policies.eval()
            out = asyncio.run(worker.generate_sequences(batch))

            # 4. VERL's algorithms: GRPO advantage, clipped policy loss, KL, entropy; each
            # policy on its own seats' trajectories
            losses = policies.update(out, update, update_seed(args.seed, step), state.lr, step)

            # 5. metrics, monitors, checkpoints
            seconds = time.perf_counter() - start
            record = step_record(step, out, losses, state.lr, seconds, rollouts, args.kl_target)
            record["cpu_seconds"] = time.process_time() - cpu_start  # all threads: ~ cores x wall
            if args.evaluation.due(step, args.steps):
                record |= _held_out(policies, tokenizer, args.evaluation, eval_partners)
            if event := guard(args.guard, state, record, policies, run):
                record["guard"] = event
            run.finish_step(record, policies, state, rng)
            history.append(record)
            export(record)
            description = f"GRPO success {record['success']:.2f} KL {record['kl']:.3f}"
            bar.update(task, advance=1, description=description)

    _finish(history, run.path, args.guard, policies, tokenizer)
    return history


def _resumed(
    run: RunDir, args: TrainArgs, policies: Policies
) -> tuple[Any, list[dict[str, Any]], Any]:
    """(state, the steps' records so far, the seed draws' generator) of a fresh or resumed
    run, the policies restored and their stable checkpoint set."""
    state, history = run.resume(args, policies)
    run.start_stable(policies, state)
    rng = np.random.default_rng(args.seed)
    if state.rng is not None:
        rng.bit_generator.state = state.rng
    return state, history, rng


def _held_out(
    policies: Policies, tokenizer: Any, evaluation: EvalArgs, eval_partners: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The greedy policies' held-out figures (:func:`held_out_figures`, every policy in its
    seats) as ``eval_*`` keys."""
    figures = held_out_figures(policies.models(), tokenizer, evaluation, eval_partners)
    return {f"eval_{key}": value for key, value in figures.items()}


def _finish(
    history: list[dict[str, Any]],
    path: Path,
    watch: GuardArgs,
    policies: Policies,
    tokenizer: Any,
) -> None:
    """The curve, and the final policies where ``checkpoint:DIR`` finds them (``path/policy``,
    or ``path/policies/NAME``)."""
    plot_curve(history, path / "curve.png", watch)
    policies.save(path, tokenizer)


def step_record(
    step: int,
    out: Any,
    losses: dict[str, float],
    lr: float,
    seconds: float,
    rollouts: int,
    kl_target: float,
) -> dict[str, Any]:
    """A step's line of ``metrics.jsonl`` (before evaluation and guard) for a batch of
    ``rollouts`` episodes, with a warning when KL passes ``kl_target``."""
    record: dict[str, Any] = {"step": step, **rollout_metrics(out), **losses, "lr": lr}
    record["episodes_per_s"] = rollouts / seconds
    record["seconds"] = seconds
    if record["kl"] > kl_target:
        record["warning"] = f"KL {record['kl']:.4f} above target {kl_target}"
    return record


def plot_curve(history: list[dict[str, Any]], path: Path, watch: GuardArgs | None = None) -> None:
    """Learning curve: training success (and held-out success) and KL per step; the guard's
    rollbacks as vertical lines, KL's warning level and limit (``watch``) and a changing
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
    for name in ("warmup.json", START_FILE):  # the start model's held-out success: step 0
        if (start := path.parent / name).exists():
            evals.insert(0, (0, json.loads(start.read_text())["eval_success"]))
            break
    if evals:
        ax1.plot(*zip(*evals, strict=True), "o-", label="held-out success (greedy)")
    ax1.set_ylabel("success")
    ax1.set_ylim(-0.02, 1.02)
    kls = [h["kl"] for h in history]
    ax2.plot(steps, kls, color="tab:red", label="KL to reference")
    if watch is not None:
        top = max(kls)
        ax2.axhline(watch.kl_target, color="tab:orange", ls=":", label="KL warning (--kl-target)")
        if watch.kl_limit <= 2 * top:
            ax2.axhline(watch.kl_limit, color="black", ls=":", label="guard limit (--kl-limit)")
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
