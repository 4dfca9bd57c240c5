"""In-process LLM servers with VERL's ``generate()`` interface: the CPU trainer's rollout engine,
and a scripted double for tests and ``teamgym verl-bench``.

VERL's agent loops call ``await server_manager.generate(request_id, prompt_ids=...,
sampling_params=...) -> TokenOutput``. On a GPU cluster that is VERL's vLLM/SGLang server;
here it is:

* :class:`LocalModelServer`: a Hugging Face causal LM on the CPU (sampling with a KV cache,
  seeded per request, so runs are reproducible). Concurrent calls are served in batches, so the
  agents and episodes of a rollout cost a few batched passes per turn.
* :class:`SeatRouter`: several servers behind one, each serving the seats of one policy (the
  CPU trainer's ``--policy``): a request goes to the server of the agent its id names.
* :class:`ScriptedServer`: a double of a rollout server that waits ``latency`` seconds per call
  and answers a scripted reply (e.g. a baseline policy's); it measures the adapter's
  concurrency and checks rewards, it is not a model.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from verl.workers.rollout.replica import TokenOutput

from teamgym.adapters.agents.sampling import _Request, request_seed, sample_batch

__all__ = [
    "LocalModelServer",
    "ScriptedServer",
    "SeatRouter",
    "policy_reply",
]


class LocalModelServer:
    """A local Hugging Face model answering VERL ``generate()`` calls on the CPU.

    Concurrent calls (the agents and episodes of a batch are all in flight at once) are served
    together: requests that arrive while the model is busy form the next batch, so a rollout of
    many episodes costs a few batched forward passes per turn instead of one per agent.

    Args:
        model_dir: a model directory (e.g. from ``teamgym.adapters.agents.local_model.build_local_model``)
            or an already loaded model (with ``tokenizer``).
        seed: mixed with each request's id and prompt so sampling is reproducible: every request
            samples from its own generator, whatever batch it lands in.
        max_batch: most requests per batched pass.
    """

    def __init__(
        self,
        model_dir: str | Path | Any,
        tokenizer: Any = None,
        seed: int = 0,
        max_batch: int = 256,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model: Any  # a Hugging Face causal LM, loaded here or handed in
        self.tokenizer: Any
        if isinstance(model_dir, (str, Path)):
            self.model = AutoModelForCausalLM.from_pretrained(model_dir)
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        else:
            self.model, self.tokenizer = model_dir, tokenizer
        self.model.eval()
        self.seed = seed
        self.max_batch = max_batch
        self.stop_ids = {self.tokenizer.eos_token_id}
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.calls = 0
        self.batches = 0
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None

    def __getstate__(self) -> dict[str, Any]:
        """What travels to another process (a Ray actor under verl's v1 trainer): the model, the
        tokenizer and the settings; the thread pool and the pending batch are rebuilt there."""
        state = dict(self.__dict__)
        for local in ("pool", "_pending", "_worker"):
            del state[local]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.pool = ThreadPoolExecutor(max_workers=1)
        self._pending = []
        self._worker = None

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        """VERL's server interface: sample a reply to ``prompt_ids``."""
        self.calls += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[list[int], list[float]]] = loop.create_future()
        request = _Request(
            prompt_ids=list(prompt_ids),
            max_tokens=int(sampling_params.get("max_tokens", 64)),
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            generator=torch.Generator().manual_seed(
                request_seed(self.seed, request_id, list(prompt_ids))
            ),
            future=future,
            stop=tuple(s for s in (sampling_params.get("stop") or ()) if s),
        )
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        tokens, logprobs = await future
        return TokenOutput(token_ids=tokens, log_probs=logprobs, stop_reason="completed")

    async def _serve(self) -> None:
        """Run batches while requests are pending (one at a time, off the event loop)."""
        loop = asyncio.get_running_loop()
        while self._pending:
            await asyncio.sleep(0)  # let the other agents of this tick submit theirs
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            batch.sort(key=lambda r: len(r.prompt_ids))  # similar lengths pad less
            self.batches += 1
            try:
                results = await loop.run_in_executor(
                    self.pool,
                    sample_batch,
                    self.model,
                    batch,
                    self.stop_ids,
                    self.pad_id,
                    self.tokenizer.decode,
                )
            except BaseException as exc:  # fail these calls, keep serving the others
                for r in batch:
                    assert r.future is not None  # generate() gives every request one
                    if not r.future.done():
                        r.future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for r, result in zip(batch, results, strict=True):
                assert r.future is not None
                if not r.future.done():
                    r.future.set_result(result)


class SeatRouter:
    """VERL's ``generate()`` interface over one server per seat: the episode loop names each
    request ``{session}/{agent}``, and the request goes to that agent's server (its policy's
    model), so one worker plays seats served by different models. An agent with no server is
    an error, never a silent fallback (a seat would be played by another seat's policy)."""

    def __init__(self, servers: Mapping[str, Any]) -> None:
        self.servers = dict(servers)
        """Agent -> the server of its policy (one server may serve several agents)."""

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any
    ) -> TokenOutput:
        """The reply of the server of the agent ``request_id`` ends with."""
        agent = request_id.rsplit("/", 1)[-1]
        server = self.servers.get(agent)
        if server is None:
            raise KeyError(
                f"request {request_id!r}: no policy plays {agent!r} (the policies' seats: "
                f"{sorted(self.servers)})"
            )
        return await server.generate(
            request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw
        )


_VALID = re.compile(r"^Valid actions: (.*)$", re.MULTILINE)


def policy_reply(policy: Any) -> Callable[[str], str]:
    """Turn a teamgym baseline policy into a ``reply(prompt_text)`` for :class:`ScriptedServer`:
    it reads the last user turn of the chat and the valid actions listed in it."""

    def reply(prompt_text: str) -> str:
        last_user = prompt_text.rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>", 1)[0]
        found = _VALID.findall(last_user)
        valid = [a.strip() for a in found[-1].split("|")] if found else []
        return policy.act("", last_user, {"valid_actions": valid})

    reply.reads_last_user_turn = True  # type: ignore[attr-defined]  # ScriptedServer decodes less
    return reply


def _last_user_turn(tokenizer: Any, prompt_ids: list[int], start_id: int | None) -> list[int]:
    """The ids from the last ``<|im_start|>user`` on (the whole prompt if there is none or the
    tokenizer has no ``<|im_start|>`` token): what :func:`policy_reply` reads, without decoding
    the whole conversation on every turn."""
    if start_id is None:
        return prompt_ids
    for i in range(len(prompt_ids) - 1, -1, -1):
        if prompt_ids[i] == start_id and tokenizer.decode(prompt_ids[i : i + 8]).startswith(
            "<|im_start|>user"
        ):
            return prompt_ids[i:]
    return prompt_ids


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
        # a reply that reads only the last user turn (policy_reply) gets only that decoded
        start = tokenizer.convert_tokens_to_ids("<|im_start|>")
        unknown = start is None or start == tokenizer.unk_token_id
        self._start_id = None if unknown else int(start)
        self._tail = bool(getattr(self.reply, "reads_last_user_turn", False))
        self._encoded: dict[str, list[int]] = {}  # reply text -> ids (a policy's few actions)
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
        ids = list(prompt_ids)
        if self._tail:
            ids = _last_user_turn(self.tokenizer, ids, self._start_id)
        text = self.reply(self.tokenizer.decode(ids))
        cap = int(sampling_params.get("max_tokens", 1 << 30))
        for stop in sampling_params.get("stop") or ():  # like vLLM: end at the first stop string
            if stop and stop in text:
                ids = self._encode(text[: text.index(stop) + len(stop)])[:cap]
                return TokenOutput(
                    token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed"
                )
        ids = [*self._encode(text)[: max(0, cap - 1)], self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")

    def _encode(self, text: str) -> list[int]:
        """``text``'s token ids, cached (a scripted policy repeats a few replies)."""
        ids = self._encoded.get(text)
        if ids is None:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(self._encoded) < 4096:
                self._encoded[text] = ids
        return list(ids)
