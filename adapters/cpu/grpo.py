"""The GRPO update of the CPU trainer, with VERL's ``core_algos`` and AdamW in place of the
FSDP actor: GRPO advantage grouped by ``uid`` (one seed and agent; or another of VERL's
registered estimators, teamgym's turn-level ones among them), the clipped policy loss,
the low-variance KL to a frozen reference, and an entropy bonus."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import torch

from teamgym.adapters.agents.sampling import keep_logits
from teamgym.adapters.cpu.args import UpdateArgs

__all__ = [
    "Learner",
    "by_prompt",
    "grpo_update",
    "load_learner",
    "logprobs_in_parts",
    "prompt_owners",
    "receptive_field",
    "response_logprobs",
    "shared_prompt_logits",
    "warmup_factor",
]


@dataclass
class Learner:
    """What an update changes and reads: the policy, its frozen reference, the optimiser, and
    VERL's actor config (the clip range)."""

    policy: Any
    reference: Any
    optim: torch.optim.Optimizer
    actor_cfg: Any


def load_learner(model_dir: str, update: UpdateArgs, actor_cfg: Any, seed: int) -> Learner:
    """The policy from ``model_dir`` (torch seeded with the run's ``seed``), a frozen copy,
    AdamW at ``update.lr``."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    policy = AutoModelForCausalLM.from_pretrained(model_dir)
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    optim = torch.optim.AdamW(policy.parameters(), lr=update.lr)
    return Learner(policy, reference, optim, actor_cfg)


def receptive_field(config: Any) -> int | None:
    """How many tokens back an output can see: layers x window when every layer uses
    sliding-window attention (RoPE is relative, so cutting older tokens changes nothing), else
    None (the whole sequence)."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None) or []
    if not getattr(config, "use_sliding_window", False) or not window:
        return None
    if any(t != "sliding_attention" for t in layer_types):
        return None
    return int(config.num_hidden_layers) * int(window)


def response_logprobs(
    model: Any, out: Any, with_entropy: bool = False, share_prompts: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the response tokens (and their entropy) under ``model``.

    VERL pads prompts on the left to ``prompt_length`` and responses on the right to
    ``response_length``; columns that are padding in every row are cut before the forward pass
    (a large saving on CPU), as are prompt tokens beyond the model's
    :func:`receptive_field`, and only the response positions go through the vocabulary
    projection (``logits_to_keep``: SmolLM2's 49 152-token head over the whole prompt cost as
    much as the rest of the backward pass); the results are padded back to VERL's shapes.
    With ``share_prompts``, rows with the same prompt (a GRPO group's copies) run it once
    (:func:`shared_prompt_logits`): the same numbers to float rounding."""
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    input_ids, attention = out.batch["input_ids"], out.batch["attention_mask"]
    position_ids, responses = out.batch["position_ids"], out.batch["responses"]
    resp_len = responses.shape[1]
    prompt_len = input_ids.shape[1] - resp_len
    used = attention.sum(0) > 0
    first = int(used[:prompt_len].float().argmax()) if used[:prompt_len].any() else prompt_len - 1
    if (field := receptive_field(model.config)) is not None:
        first = max(first, prompt_len - field)
    last = int(used[prompt_len:].nonzero().max()) + 1 if used[prompt_len:].any() else 1
    cols = slice(first, prompt_len + last)
    unique, owner = prompt_owners(out, first) if share_prompts and field is None else ([], None)
    if owner is not None and len(unique) < len(owner):
        logits = shared_prompt_logits(model, out, first, last, unique, owner)
    else:
        logits = model(
            input_ids=input_ids[:, cols],
            attention_mask=attention[:, cols],
            position_ids=position_ids[:, cols],
            use_cache=False,
            **keep_logits(model, last + 1),  # the vocabulary projection of the responses only
        ).logits
        # the positions before each response token (a model without logits_to_keep: all)
        logits = logits[:, -last - 1 : -1, :]
    logits = logits.float()
    kept = logprobs_from_logits(logits, responses[:, :last], inplace_backward=False)
    logprobs = torch.zeros(responses.shape, dtype=kept.dtype)
    logprobs[:, :last] = kept
    entropy = None
    if with_entropy:
        entropy = torch.zeros(responses.shape, dtype=kept.dtype)
        entropy[:, :last] = entropy_from_logits(logits)
    return logprobs, entropy


def prompt_owners(out: Any, first: int = 0) -> tuple[list[int], torch.Tensor]:
    """The rows of ``out`` that open each distinct prompt (its tokens, mask and positions from
    column ``first``), and for every row the index of its prompt among them."""
    prompt_len = out.batch["input_ids"].shape[1] - out.batch["responses"].shape[1]
    parts = [out.batch[k][:, first:prompt_len] for k in ("input_ids", "attention_mask")]
    parts.append(out.batch["position_ids"][..., first:prompt_len])
    seen: dict[bytes, int] = {}
    unique: list[int] = []
    owner = []
    for row in range(len(out)):
        key = b"|".join(p[row].numpy().tobytes() for p in parts)
        if key not in seen:
            seen[key] = len(unique)
            unique.append(row)
        owner.append(seen[key])
    return unique, torch.tensor(owner, dtype=torch.long)


def shared_prompt_logits(
    model: Any, out: Any, first: int, last: int, unique: list[int], owner: torch.Tensor
) -> torch.Tensor:
    """The logits before each of the first ``last`` response tokens, every distinct prompt run
    once: a forward over the prompts ``unique`` (from column ``first``) keeps their keys and
    values, each row gets its prompt's (``owner``; an index, so gradients flow back to the one
    prompt pass), and a second forward runs the responses on them. A GRPO group's copies share
    their first prompt, most of a one-turn task's tokens (SmolLM2 on publicgoods: 235 of 245)."""
    input_ids, attention = out.batch["input_ids"], out.batch["attention_mask"]
    position_ids = out.batch["position_ids"]
    prompt_len = input_ids.shape[1] - out.batch["responses"].shape[1]
    rows = torch.tensor(unique, dtype=torch.long)
    head = model(
        input_ids=input_ids[rows, first:prompt_len],
        attention_mask=attention[rows, first:prompt_len],
        position_ids=position_ids[rows, first:prompt_len],
        use_cache=True,
        **keep_logits(model, 1),
    )
    cache = head.past_key_values
    cache.reorder_cache(owner)  # index_select: each row's copy of its prompt's keys and values
    tail = model(
        input_ids=input_ids[:, prompt_len : prompt_len + last],
        attention_mask=attention[:, first : prompt_len + last],
        position_ids=position_ids[:, prompt_len : prompt_len + last],
        past_key_values=cache,
        use_cache=True,
        **keep_logits(model, last),
    )
    # the prompt's last position predicts the first response token, the responses the rest
    return torch.cat([head.logits[owner, -1:], tail.logits[:, -last:][:, : last - 1]], dim=1)


def by_prompt(out: Any) -> torch.Tensor:
    """The rows of ``out`` in an order that puts those with the same prompt side by side (by
    each prompt's first row, then row), so a micro-batch holds a group's copies together."""
    _, owner = prompt_owners(out)
    return torch.tensor(sorted(range(len(out)), key=lambda row: (int(owner[row]), row)))


def warmup_factor(optimizer_step: int, warmup_steps: int) -> float:
    """The learning rate's share at an optimiser step (0-based), as VERL's constant schedule
    with warm-up: ``step / warmup_steps`` during the warm-up (so the first step only fills
    Adam's moments), then 1."""
    return 1.0 if optimizer_step >= warmup_steps else optimizer_step / warmup_steps


def grpo_update(
    learner: Learner,
    out: Any,
    update: UpdateArgs,
    seed: int = 0,
    lr: float | None = None,
    step: int = 1,
    rows: np.ndarray | None = None,
) -> dict[str, float]:
    """Optimiser steps on a rollout batch: GRPO advantage grouped by ``uid`` (``team_grpo``:
    by episode seed) over the whole batch, then ``update.ppo_epochs`` passes of
    ``update.mini_batches`` shuffled mini-batches (VERL's ppo_epochs / ppo_mini_batch_size), at
    learning rate ``lr`` (default ``update.lr``) ramped by :func:`warmup_factor` over
    ``update.lr_warmup_steps`` optimiser steps counted from GRPO step 1 (``step`` is this one).
    With ``rows`` (indices into ``out``: one policy's seats, :func:`~teamgym.adapters.cpu.policies.policy_rows`), the passes
    are over those rows only, with the advantage of the whole batch (a ``team_`` group spans
    the policies). Returns the mean loss, kl, entropy and gradient norm (before clipping)."""
    from verl.trainer.ppo import core_algos

    import teamgym.adapters.verl.estimators  # noqa: F401  (registers team_grpo)
    from teamgym.adapters.verl.episode_loop import TURN_ANCHORS
    from teamgym.adapters.verl.estimators import TURN_ESTIMATORS, turn_level_inputs

    rewards, index = out.batch["rm_scores"], out.non_tensor_batch["uid"]
    if update.adv_estimator in TURN_ESTIMATORS:
        rewards, index = turn_level_inputs(
            update.adv_estimator,
            rewards,
            out.batch["response_mask"],
            index,
            out.non_tensor_batch["turn_scores"],
            out.non_tensor_batch[TURN_ANCHORS],
        )
    adv, _ = core_algos.get_adv_estimator_fn(update.adv_estimator)(
        token_level_rewards=rewards,
        response_mask=out.batch["response_mask"],
        index=index,
        config=SimpleNamespace(gamma=update.gamma, norm_adv_by_std_in_grpo=True),
    )
    if rows is not None:
        out, adv = out.select_idxs(rows), adv[torch.as_tensor(rows, dtype=torch.long)]
    n = len(out)
    chunks = max(1, min(update.mini_batches, n))
    on_policy = chunks == 1 and update.ppo_epochs <= 1  # one step: the old log-probs are its own
    size = max(1, update.micro_batch)
    old_logp = None if on_policy else logprobs_in_parts(learner.policy, out, size)
    ref_logp = logprobs_in_parts(learner.reference, out, size)
    order_rng = torch.Generator().manual_seed(seed)
    terms: list[tuple[torch.Tensor, ...]] = []
    learner.policy.train()
    epochs = max(1, update.ppo_epochs)
    optimizer_step = (step - 1) * epochs * chunks
    for _ in range(epochs):
        order = torch.randperm(n, generator=order_rng) if chunks > 1 else torch.arange(n)
        for idx in torch.tensor_split(order, chunks):
            for group in learner.optim.param_groups:
                group["lr"] = (update.lr if lr is None else lr) * warmup_factor(
                    optimizer_step, update.lr_warmup_steps
                )
            optimizer_step += 1
            part = out.select_idxs(idx.numpy()) if chunks > 1 else out
            old = None if old_logp is None else old_logp[idx]
            terms.append(_step(learner, part, adv[idx], old, ref_logp[idx], update, size))
    learner.policy.eval()
    loss, kl, entropy, norm = (torch.stack(values).mean() for values in zip(*terms, strict=True))
    return {
        "kl": float(kl),
        "entropy": float(entropy),
        "loss": float(loss),
        "grad_norm": float(norm),
    }


def logprobs_in_parts(model: Any, out: Any, size: int) -> torch.Tensor:
    """:func:`response_logprobs` of ``out`` under ``model`` without gradients, ``size``
    trajectories at a time: the same numbers, a fraction of the memory."""
    logp = torch.zeros(out.batch["responses"].shape)
    with torch.no_grad():
        for idx in torch.split(_micro_order(model, out), size):
            logp[idx] = response_logprobs(model, _rows(out, idx))[0]
    return logp


def _micro_order(model: Any, out: Any) -> torch.Tensor:
    """The order in which rows fill micro-batches: a group's copies side by side where
    :func:`response_logprobs` shares their prompt (a model that sees the whole sequence), else
    the rows' own."""
    return by_prompt(out) if receptive_field(model.config) is None else torch.arange(len(out))


def _rows(out: Any, idx: torch.Tensor) -> Any:
    """Rows ``idx`` of a batch (the batch itself when they are all of it, in order)."""
    if len(idx) == len(out) and bool((idx == torch.arange(len(out))).all()):
        return out
    return out.select_idxs(idx.numpy())


def _step(
    learner: Learner,
    part: Any,
    adv: torch.Tensor,
    old_logp: torch.Tensor | None,
    ref_logp: torch.Tensor,
    update: UpdateArgs,
    micro_batch: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One optimiser step on a mini-batch, its gradient accumulated over micro-batches of
    ``micro_batch`` trajectories; returns its detached (loss, kl, entropy, gradient norm before
    clipping). Each term is a token
    mean over the whole mini-batch: a micro-batch's token mean weighted by its share of the
    tokens. Without ``old_logp`` the step is on-policy: the old log-probs are this forward's,
    detached (the same numbers as a separate pass, one forward fewer)."""
    from verl.trainer.ppo import core_algos

    total = float(part.batch["response_mask"].sum())
    sums = torch.zeros(3)  # loss, kl, entropy: token-weighted, detached
    if not total:
        return sums[0], sums[1], sums[2], torch.zeros(())  # no trained token: no step
    learner.optim.zero_grad()
    for idx in torch.split(_micro_order(learner.policy, part), micro_batch):
        micro = _rows(part, idx)
        mask = micro.batch["response_mask"].float()
        share = float(mask.sum()) / total
        if share == 0.0:
            continue  # no trained token: nothing to add to the token mean
        logp, entropy = response_logprobs(learner.policy, micro, with_entropy=True)
        pg_loss, _ = core_algos.get_policy_loss_fn("vanilla")(
            old_log_prob=logp.detach() if old_logp is None else old_logp[idx],
            log_prob=logp,
            advantages=adv[idx],
            response_mask=mask,
            loss_agg_mode="token-mean",
            config=learner.actor_cfg,
        )
        # verl annotates its log-prob arguments as FloatTensor, the legacy type a float Tensor is
        kl_terms = core_algos.kl_penalty(
            cast(torch.FloatTensor, logp), cast(torch.FloatTensor, ref_logp[idx]), "low_var_kl"
        )
        kl = core_algos.agg_loss(kl_terms, mask, "token-mean")
        ent = core_algos.agg_loss(cast(torch.Tensor, entropy), mask, "token-mean")
        loss = pg_loss + update.kl_coef * kl - update.entropy_coef * ent
        (loss * share).backward()
        sums += share * torch.stack([loss.detach(), kl.detach(), ent.detach()])
    norm = torch.nn.utils.clip_grad_norm_(learner.policy.parameters(), 1.0)
    learner.optim.step()
    return sums[0], sums[1], sums[2], norm.detach().float()
