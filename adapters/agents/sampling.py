"""Token sampling for local causal LMs, with torch alone (no VERL, no server).

:func:`sample_batch` samples several replies in one batched pass with a KV cache; each request
has its own ``torch.Generator``, so a reply does not depend on the batch it lands in. The VERL
CPU trainer's server (:mod:`teamgym.adapters.cpu.server`), the checkpoint teammate, the ``transformers``
agent and ``teamgym serve`` all sample through it, so they give the same replies.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["request_seed", "sample_batch", "sample_tokens"]


def request_seed(seed: int, request_id: str, prompt_ids: list[int], step: int = 0) -> int:
    """One request's sampling seed (63 bits), from the run's ``seed``, the request's id, its
    prompt (length and tail: the turn) and the training ``step`` (an episode met again in a
    later epoch draws new noise): the same in every run, distinct across the agents, copies
    and turns of a step, whatever batch the engine serves it in."""
    salt = f"/{step}" if step else ""
    key = f"{seed}/{request_id}/{len(prompt_ids)}/{prompt_ids[-8:]}{salt}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") & (2**63 - 1)


@dataclass
class _Request:
    """One pending ``generate()`` call."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    generator: torch.Generator
    future: asyncio.Future | None = field(repr=False)
    stop: tuple[str, ...] = ()
    """Stop strings (vLLM's ``stop``): the reply ends once its text contains one, which it keeps
    (``include_stop_str_in_output``)."""


def _pick(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator
) -> int:
    """Greedy at temperature 0, else a (nucleus) sample with the request's own generator."""
    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def sample_tokens(
    model: Any,
    prompt_ids: list[int],
    max_tokens: int,
    temperature: float,
    stop_ids: set[int],
    generator: torch.Generator,
    top_p: float = 1.0,
) -> tuple[list[int], list[float]]:
    """Sample up to ``max_tokens`` tokens after ``prompt_ids``; returns (tokens, log-probs)."""
    request = _Request(list(prompt_ids), max_tokens, temperature, top_p, generator, None)
    return sample_batch(model, [request], stop_ids, pad_id=0)[0]


def keep_logits(model: Any, last: int) -> dict[str, int]:
    """``{"logits_to_keep": last}`` when the model's forward takes it (transformers' causal
    LMs do): the vocabulary projection of the last ``last`` positions only; else nothing."""
    forward = getattr(model, "forward", None)
    try:
        accepts = forward is not None and "logits_to_keep" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        accepts = False
    return {"logits_to_keep": last} if accepts else {}


@torch.no_grad()
def sample_batch(
    model: Any,
    requests: list[_Request],
    stop_ids: set[int],
    pad_id: int,
    decode: Callable[[list[int]], str] | None = None,
) -> list[tuple[list[int], list[float]]]:
    """Sample the replies of several requests in one batched pass (left-padded prompts, one KV
    cache); each row stops at a stop token, at one of its stop strings (read with ``decode``)
    or at its own ``max_tokens``. Returns (tokens, log-probs) per request, in order.

    The model may sit on any device; logits come back to the CPU, where the requests'
    generators draw, so a seeded sample does not depend on the device's random streams."""
    device = getattr(model, "device", torch.device("cpu"))
    n = len(requests)
    width = max(len(r.prompt_ids) for r in requests)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    for i, r in enumerate(requests):
        input_ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
        attention[i, width - len(r.prompt_ids) :] = 1
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    results: list[tuple[list[int], list[float]]] = [([], []) for _ in requests]
    active = [r.max_tokens > 0 for r in requests]
    # a GRPO group's copies ask with the same prompt: the prefill runs each distinct one once
    seen: dict[tuple[int, ...], int] = {}
    firsts: list[int] = []  # the first request of each distinct prompt
    for i, r in enumerate(requests):
        if seen.setdefault(tuple(r.prompt_ids), len(firsts)) == len(firsts):
            firsts.append(i)
    owner = torch.tensor([seen[tuple(r.prompt_ids)] for r in requests])
    rows = torch.tensor(firsts, dtype=torch.long)
    past = None
    for _ in range(max((r.max_tokens for r in requests), default=0)):
        if not any(active):
            break
        prefill = past is None and len(rows) < n
        pick = rows if prefill else slice(None)
        out = model(
            input_ids=input_ids[pick].to(device),
            attention_mask=attention[pick].to(device),
            position_ids=position_ids[pick].to(device),
            past_key_values=past,
            use_cache=True,
            **keep_logits(model, 1),  # not the prefill's at every position: GBs for SmolLM2
        )
        past = out.past_key_values
        logits = out.logits[:, -1].float().cpu()
        if prefill:  # every request gets its prompt's keys, values and next-token logits
            past.reorder_cache(owner.to(device))
            logits = logits[owner]
        log_probs = torch.log_softmax(logits, dim=-1)
        step = torch.full((n, 1), pad_id, dtype=torch.long)
        for i, r in enumerate(requests):
            if not active[i]:
                continue
            token = _pick(logits[i], r.temperature, r.top_p, r.generator)
            tokens, logprobs = results[i]
            tokens.append(token)
            logprobs.append(float(log_probs[i, token]))
            step[i, 0] = token
            active[i] = token not in stop_ids and len(tokens) < r.max_tokens
            if active[i] and r.stop and decode is not None:
                # a stop string of n characters spans at most n + 1 of the last tokens
                text = decode(tokens[-max(len(s) for s in r.stop) - 1 :])
                active[i] = not any(s in text for s in r.stop)
        # finished rows keep feeding a masked pad token so the batch stays rectangular
        attention = torch.cat([attention, torch.tensor([[int(a)] for a in active])], dim=-1)
        position_ids = position_ids[:, -1:] + 1
        input_ids = step
    return results
