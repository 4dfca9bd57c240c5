"""The supervised warm-up before GRPO: the model learns the reply format from a teacher baseline.

With the ``random`` teacher (valid but random replies) the model learns the format, not the
strategy, and its held-out success stays at chance; a strategic teacher (``expert``) makes it
behaviour cloning, the supervised upper bound of what RL can reach with the model.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from teamgym.adapters.agents.chat import cut_at_stop, forced_reply
from teamgym.adapters.cpu.args import EvalArgs, WarmupArgs
from teamgym.adapters.cpu.grpo import receptive_field
from teamgym.adapters.cpu.rollout import held_out_figures
from teamgym.envs.lineup import Lineup
from teamgym.envs.seeds import warmup_seeds

__all__ = [
    "START_FILE",
    "format_warmup",
    "record_start",
    "warm_up",
    "warm_up_policies",
    "warmup_examples",
]

START_FILE = "start.json"
"""Without a warm-up: the start model's held-out figures (the curve's step 0)."""

#: One supervised example: prompt + reply token ids, and the reply's length.
Example = tuple[list[int], int]


def warm_up(
    warmup: WarmupArgs,
    evaluation: EvalArgs,
    run: Path,
    eval_partners: tuple[str, ...] = (),
    progress: bool = False,
) -> str:
    """The model GRPO starts from: ``warmup.rollout.model``, or the warm-up model in ``run``
    (trained once; ``warmup.json`` records its loss, time and held-out figures under
    ``evaluation``)."""
    from transformers import AutoTokenizer

    if warmup.steps <= 0:
        record_start(warmup.rollout.model, evaluation, run, eval_partners)
        return warmup.rollout.model
    model_dir = run / "warmup_model"
    if not (model_dir / "config.json").exists():
        began, cpu_began = time.perf_counter(), time.process_time()
        info: dict[str, Any] = format_warmup(warmup, model_dir, progress=progress)
        info["teacher"] = warmup.teacher
        if warmup.teachers:
            info["agent_teachers"] = dict(warmup.teachers)
        info["seconds"] = time.perf_counter() - began
        info["cpu_seconds"] = time.process_time() - cpu_began
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        held_out = held_out_figures(str(model_dir), tokenizer, evaluation, eval_partners)
        info["eval_success"], info["eval"] = held_out["success"], held_out
        (run / "warmup.json").write_text(json.dumps(info, indent=2) + "\n")
    return str(model_dir)


def warm_up_policies(
    warmup: WarmupArgs,
    starts: dict[str, str],
    seats: dict[str, tuple[str, ...]],
    evaluation: EvalArgs,
    run: Path,
    eval_partners: tuple[str, ...] = (),
    progress: bool = False,
) -> dict[str, str]:
    """:func:`warm_up` for a run's policies: each policy (``starts``: name -> its model
    directory, or ``lora:RANK``) learns from its own ``seats``' turns only (the teachers play
    every trained seat, as for one model) into ``run/warmup_models/NAME`` (trained once, its
    loss and time in ``NAME.json`` beside it); ``warmup.json`` records each policy's and the
    held-out figures of all of them seated together. Returns each policy's start for GRPO
    (without a warm-up, ``starts``, whose held-out figures go to ``start.json``; a ``lora:``
    policy plays as ``warmup.rollout.model``)."""
    from teamgym.adapters.cpu.seats import lora_rank

    base = warmup.rollout.model
    if warmup.steps <= 0:
        plays = {n: base if lora_rank(s) is not None else s for n, s in starts.items()}
        by_seat = {seat: plays[name] for name in starts for seat in seats[name]}
        record_start(by_seat, evaluation, run, eval_partners)
        return dict(starts)
    folder = run / "warmup_models"
    dirs = {name: str(folder / name) for name in starts}
    for name, start in starts.items():
        if (folder / name / "config.json").exists():
            continue  # warmed up before the run was stopped
        began, cpu_began = time.perf_counter(), time.process_time()
        own = replace(warmup, rollout=replace(warmup.rollout, model=start), seats=seats[name])
        info: dict[str, Any] = format_warmup(own, folder / name, progress=progress, label=name)
        info["seconds"] = time.perf_counter() - began
        info["cpu_seconds"] = time.process_time() - cpu_began
        (folder / f"{name}.json").write_text(json.dumps(info, indent=2) + "\n")
    if not (run / "warmup.json").exists():
        from transformers import AutoTokenizer

        summary: dict[str, Any] = {"teacher": warmup.teacher}
        if warmup.teachers:
            summary["agent_teachers"] = dict(warmup.teachers)
        summary["policies"] = {
            name: json.loads((folder / f"{name}.json").read_text()) for name in starts
        }
        by_seat = {seat: dirs[name] for name in starts for seat in seats[name]}
        tokenizer = AutoTokenizer.from_pretrained(base)
        held_out = held_out_figures(by_seat, tokenizer, evaluation, eval_partners)
        summary["eval_success"], summary["eval"] = held_out["success"], held_out
        (run / "warmup.json").write_text(json.dumps(summary, indent=2) + "\n")
    return dirs


def record_start(
    model_dir: str | dict[str, str],
    evaluation: EvalArgs,
    run: Path,
    eval_partners: tuple[str, ...] = (),
) -> None:
    """Without a warm-up, the held-out figures of the model GRPO starts from (a pretrained
    model as prompted; with policies, ``{agent: its policy's start}``), once, in
    ``start.json``: the curve's step 0."""
    from transformers import AutoTokenizer

    path = run / START_FILE
    if not evaluation.every or path.exists():
        return
    tokenizer = AutoTokenizer.from_pretrained(
        model_dir if isinstance(model_dir, str) else evaluation.rollout.model
    )
    held_out = held_out_figures(model_dir, tokenizer, evaluation, eval_partners)
    info = {"model": model_dir, "eval_success": held_out["success"], "eval": held_out}
    path.write_text(json.dumps(info, indent=2) + "\n")


def warmup_examples(
    warmup: WarmupArgs, tokenizer: Any, episodes: int, field: int | None = None
) -> list[Example]:
    """Every turn of the trained agents in ``episodes`` episodes played by the
    ``warmup.teacher`` baseline (an agent in ``warmup.teachers`` by its own teacher, teammates
    by theirs), as examples whose prompt is the agent's chat so far, rendered as the agent loop
    renders it and cut on the left to ``rollout.prompt_length`` (``rollout`` is
    ``warmup.rollout``), or to the model's receptive ``field`` when shorter (the same logits,
    fewer tokens).

    The trained agents' replies end as the trainer's rollouts end: cut after the first of
    ``rollout.stop``, and under ``forced_moves="auto"`` a turn with a single valid action is
    the forced move (the trainer plays it without the model) and no example; with
    ``warmup.seats`` (one policy's), only those agents' turns are examples. A ``checkpoint:``
    teacher answers greedily (its held-out replies) within ``rollout.max_reply_tokens`` and
    ``rollout.prompt_length`` under the same rules."""
    from teamgym.envs import make

    rollout = warmup.rollout
    env = make(rollout.env, **rollout.env_kwargs)
    warmup.check_teachers(list(env.possible_agents))
    teachers, mates = _lineups(warmup, env)
    partners = _partner_lineups(warmup, env)
    forced = rollout.forced_moves == "auto"  # turns the trainer plays without the model
    context = rollout.prompt_length
    if field is not None:
        context = min(context, field)
    examples: list[Example] = []
    for k in warmup_seeds(episodes):
        obs, infos = env.reset(seed=k)
        teachers.reset(k)
        mates.reset(k)
        partner = partners[rollout.pool.pick(k)] if rollout.pool is not None else None
        if partner is not None:
            partner.reset(k)
        chats = {a: [{"role": "system", "content": infos[a]["instructions"]}] for a in env.agents}
        while env.agents:
            replies = {}
            for a in env.agents:
                if a in mates:
                    replies[a] = mates.act(a, obs[a], infos[a])
                    continue
                if partner is not None and a in partner:  # the episode's partner, as in training
                    replies[a] = partner.act(a, obs[a], infos[a])
                    continue
                reply = teachers.act(a, obs[a], infos[a])  # a stateful teacher sees every turn
                move = forced_reply(infos[a].get("valid_actions", ())) if forced else None
                replies[a] = move if move is not None else cut_at_stop(reply, rollout.stop)
                chats[a].append({"role": "user", "content": obs[a]})
                if move is None and (not warmup.seats or a in warmup.seats):
                    examples.append(_example(tokenizer, chats[a], replies[a], context))
                chats[a].append({"role": "assistant", "content": replies[a]})
            obs, _, _, _, new = env.step(replies)
            infos.update(new)
    return examples


def _lineups(warmup: WarmupArgs, env: Any) -> tuple[Lineup, Lineup]:
    """The warm-up's (teachers, teammates), bound to ``env``, both under the training seed rule
    (every policy resets with the episode seed). A trained agent is taught by its own teacher
    in ``warmup.teachers``, else by ``warmup.teacher``; agents with the same teacher share it.
    A ``checkpoint:`` teacher's greedy replies end as the trainer's rollouts end (the
    rollout's ``max_reply_tokens``, ``stop``, ``forced_moves``; its chat cut to
    ``prompt_length``); teammates play as the trainer's episode loop plays them."""
    rollout = warmup.rollout
    seated = set(rollout.teammates) | set(rollout.partner_seats)
    trained = [a for a in env.possible_agents if a not in seated]
    seats = {a: warmup.teachers.get(a, warmup.teacher) for a in trained}
    teachers = Lineup.build(
        rollout.env,
        seats,
        seed=warmup.seed,
        share=True,
        first_stream=None,
        max_reply_tokens=rollout.max_reply_tokens,
        max_prompt_tokens=rollout.prompt_length,
        stop=rollout.stop,
        forced_moves=rollout.forced_moves,
    )
    mates = Lineup.build(rollout.env, dict(rollout.teammates), seed=warmup.seed, first_stream=None)
    return teachers.bind(env), mates.bind(env)


def _example(tokenizer: Any, chat: list[dict[str, str]], reply: str, prompt_length: int) -> Example:
    """The chat's prompt (cut on the left to ``prompt_length``, like VERL) then reply and EOS."""
    prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    reply_ids = [*tokenizer.encode(reply, add_special_tokens=False), tokenizer.eos_token_id]
    return prompt_ids[-prompt_length:] + reply_ids, len(reply_ids)


def format_warmup(
    warmup: WarmupArgs,
    out_dir: str | Path,
    batch_size: int = 16,
    progress: bool = False,
    label: str = "",
) -> dict[str, float]:
    """``warmup.steps`` supervised steps of ``batch_size`` examples at ``warmup.lr`` on the
    teachers' replies (see the module docstring) from ``warmup.episodes`` episodes (0:
    ``max(64, steps * batch_size / 8)``), with the prompts scored too when
    ``warmup.prompts``: ``warmup.rollout.model`` in, ``out_dir`` out; returns the first and
    last loss and the number of examples. ``progress`` draws a bar with the loss (a pretrained
    model's warm-up takes many minutes on CPU)."""
    from rich.progress import Progress
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(warmup.seed)
    tokenizer = AutoTokenizer.from_pretrained(warmup.rollout.model)
    model = AutoModelForCausalLM.from_pretrained(warmup.rollout.model)
    field = receptive_field(model.config)
    episodes = warmup.episodes or max(64, warmup.steps * batch_size // 8)
    examples = warmup_examples(warmup, tokenizer, episodes, field)
    optim = torch.optim.AdamW(model.parameters(), lr=warmup.lr)
    rng = np.random.default_rng(warmup.seed)
    model.train()
    losses = []
    name = f"warm-up {label}".strip()
    with Progress(disable=not progress) as bar:
        task = bar.add_task(name, total=warmup.steps)
        for _ in range(warmup.steps):
            pick = [examples[int(i)] for i in rng.integers(len(examples), size=batch_size)]
            batch = _padded_batch(pick, tokenizer.pad_token_id, warmup.prompts)
            loss = model(**batch, use_cache=False).loss
            optim.zero_grad()
            loss.backward()
            optim.step()
            losses.append(float(loss.detach()))
            bar.update(task, advance=1, description=f"{name} loss {losses[-1]:.3f}")
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return {
        "first_loss": losses[0],
        "last_loss": float(np.mean(losses[-10:])),
        "examples": len(examples),
    }


def _padded_batch(
    pick: list[Example], pad_token_id: int, prompts: bool = False
) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask and labels that score the replies only (``prompts``:
    every token, as language-model pretraining would)."""
    width = max(len(ids) for ids, _ in pick)
    ids = torch.full((len(pick), width), pad_token_id)
    labels = torch.full((len(pick), width), -100)
    attn = torch.zeros((len(pick), width), dtype=torch.long)
    for b, (seq, n_reply) in enumerate(pick):
        ids[b, : len(seq)] = torch.tensor(seq)
        attn[b, : len(seq)] = 1
        start = 0 if prompts else len(seq) - n_reply
        labels[b, start : len(seq)] = torch.tensor(seq[start:])
    return {"input_ids": ids, "attention_mask": attn, "labels": labels}


def _partner_lineups(warmup: WarmupArgs, env: Any) -> dict[str, Lineup]:
    """Each partner of the pool in the partner seats, bound to ``env`` (built once; the
    episode's pick is reset with its seed, the training rule)."""
    rollout = warmup.rollout
    pool = rollout.pool
    if pool is None:
        return {}
    return {
        spec: Lineup.build(
            rollout.env,
            dict.fromkeys(pool.seats, spec),
            seed=warmup.seed,
            first_stream=None,  # one policy a seat, as the episode loop seats them
        ).bind(env)
        for spec in pool.specs
    }
