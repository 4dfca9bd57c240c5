"""In-process LLM servers with VERL's ``generate()`` interface, for CPU runs and tests.

VERL's agent loops call ``await server_manager.generate(request_id, prompt_ids=...,
sampling_params=...) -> TokenOutput``. On a GPU cluster that is VERL's vLLM/SGLang server;
here it is:

* :class:`LocalModelServer`: a Hugging Face causal LM on the CPU (token-by-token sampling with
  a KV cache, seeded per request, so runs are reproducible). Calls run in a thread pool, so the
  agents of an episode are in flight at once.
* :class:`ScriptedServer`: a double of a rollout server that waits ``latency`` seconds per call
  and answers a scripted reply (e.g. a baseline policy's); it measures the adapter's
  concurrency and checks rewards, it is not a model.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from verl.workers.rollout.replica import TokenOutput

__all__ = ["LocalModelServer", "ScriptedServer", "policy_reply", "sample_tokens"]


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
    input_ids = torch.tensor([prompt_ids], dtype=torch.long)
    past, tokens, logprobs = None, [], []
    for _ in range(max_tokens):
        out = model(input_ids=input_ids, past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
        log_probs = torch.log_softmax(logits, dim=-1)
        if temperature <= 0:
            token = int(torch.argmax(logits))
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            if top_p < 1.0:
                sorted_p, order = torch.sort(probs, descending=True)
                keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
                probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
            token = int(torch.multinomial(probs, 1, generator=generator))
        tokens.append(token)
        logprobs.append(float(log_probs[token]))
        if token in stop_ids:
            break
        input_ids = torch.tensor([[token]], dtype=torch.long)
    return tokens, logprobs


class LocalModelServer:
    """A local Hugging Face model answering VERL ``generate()`` calls on the CPU.

    Args:
        model_dir: a model directory (e.g. from ``teamgym.adapters.local_model.build_local_model``)
            or an already loaded model (with ``tokenizer``).
        seed: mixed with each request's id and prompt so sampling is reproducible.
        max_workers: concurrent generations (threads; torch releases the GIL).
    """

    def __init__(
        self,
        model_dir: str | Path | Any,
        tokenizer: Any = None,
        seed: int = 0,
        max_workers: int = 8,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model_dir, (str, Path)):
            self.model = AutoModelForCausalLM.from_pretrained(model_dir)
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        else:
            self.model, self.tokenizer = model_dir, tokenizer
        self.model.eval()
        self.seed = seed
        self.stop_ids = {self.tokenizer.eos_token_id}
        self.pool = ThreadPoolExecutor(max_workers=max_workers)
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        """VERL's server interface: sample a reply to ``prompt_ids``."""
        self.calls += 1
        max_tokens = int(sampling_params.get("max_tokens", 64))
        temperature = float(sampling_params.get("temperature", 1.0))
        top_p = float(sampling_params.get("top_p", 1.0))
        key = hashlib.sha256(
            f"{self.seed}/{request_id}/{len(prompt_ids)}/{prompt_ids[-8:]}".encode()
        ).digest()
        generator = torch.Generator().manual_seed(int.from_bytes(key[:8], "little") & (2**63 - 1))
        tokens, logprobs = await asyncio.get_running_loop().run_in_executor(
            self.pool,
            lambda: sample_tokens(
                self.model,
                list(prompt_ids),
                max_tokens,
                temperature,
                self.stop_ids,
                generator,
                top_p,
            ),
        )
        return TokenOutput(token_ids=tokens, log_probs=logprobs, stop_reason="completed")


_VALID = re.compile(r"^Valid actions: (.*)$", re.MULTILINE)


def policy_reply(policy: Any) -> Callable[[str], str]:
    """Turn a teamgym baseline policy into a ``reply(prompt_text)`` for :class:`ScriptedServer`:
    it reads the last user turn of the chat and the valid actions listed in it."""

    def reply(prompt_text: str) -> str:
        last_user = prompt_text.rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>", 1)[0]
        found = _VALID.findall(last_user)
        valid = [a.strip() for a in found[-1].split("|")] if found else []
        return policy.act("", last_user, {"valid_actions": valid})

    return reply


class ScriptedServer:
    """Rollout-server double (implements VERL's ``generate()`` interface): waits ``latency``
    seconds, then answers ``reply(prompt_text)`` tokenized and ended by EOS. With
    :func:`policy_reply` it plays a baseline policy; it stands in for a GPU server when measuring
    the adapter's concurrency or checking rewards, never for the model in a learning test."""

    def __init__(
        self, tokenizer: Any, reply: Callable[[str], str] | None = None, latency: float = 0.0
    ) -> None:
        self.tokenizer = tokenizer
        self.latency = latency
        self.reply = reply or (lambda _text: "<action>wait</action>")
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        """Wait, then answer the scripted reply."""
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        text = self.reply(self.tokenizer.decode(list(prompt_ids)))
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        ids = [
            *ids[: max(0, int(sampling_params.get("max_tokens", 1 << 30)) - 1)],
            self.tokenizer.eos_token_id,
        ]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")
