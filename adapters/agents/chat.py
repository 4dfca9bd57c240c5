"""The chats of LLM agents and how a local model answers them, shared by every LLM player.

One agent's chat is ``[system = info["instructions"], user = observation, assistant = reply,
user, ...]``. :func:`next_chat` extends it by a turn, :class:`ChatEpisode` keeps the chats and
the request/reply records of one episode, and :class:`ChatModel` renders a chat with the
model's own chat template and samples a reply. The checkpoint teammate, the ``transformers``
agent and ``teamgym serve`` all answer through :class:`ChatModel`, so at temperature 0 an
OpenAI client of ``teamgym serve`` and the ``transformers`` agent give the same replies; with a
temperature, both seed their sampler with :func:`reply_seed` of (episode seed, agent, turn).

Importing this module is cheap: torch and transformers load when a model does.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ChatEpisode",
    "ChatModel",
    "Completion",
    "Message",
    "SamplingOptions",
    "cut_at_stop",
    "forced_reply",
    "load_chat_model",
    "next_chat",
    "recent_turns",
    "reply_seed",
]

Message = dict[str, str]
"""One chat message: ``{"role": ..., "content": ...}``."""

DEFAULT_MAX_PROMPT_TOKENS = 2048
"""Tokens of a rendered chat a local model sees at most (it is cut on the left beyond)."""


@dataclass(frozen=True)
class SamplingOptions:
    """How an LLM agent samples its replies: the spec options the ``openai`` and
    ``transformers`` kinds share, with their one set of defaults and their one check."""

    temperature: float = 0.0
    """0 is greedy; above, replies are sampled with the reply's seed."""
    top_p: float = 1.0
    """Nucleus sampling mass, in (0, 1]."""
    max_tokens: int = 256
    """Longest reply, in tokens (at least 1)."""
    seed: int = 0
    """Mixed into every reply's sampling seed (:func:`reply_seed`'s ``base``)."""
    stop: tuple[str, ...] = ()
    """Strings that end a reply (cut off, as the OpenAI API does), e.g. ``["</action>"]``: a
    small model that writes its action and runs on stops there."""
    example: bool = False
    """Show the agent a worked example before its first turn: one turn of the env's expert on
    another seed (:func:`teamgym.adapters.agents.examples.worked_examples`)."""
    history: int | None = None
    """Past turns an agent's request carries: None, all of them; N, its last N (observation and
    reply) after the system message and the example. The envs' observations state the game, so
    a small model or a long episode (a context window of 8 192 tokens fills in about 50 turns
    of foraging) can drop the oldest."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any], label: str) -> SamplingOptions:
        """The sampling options of a spec's ``options`` (defaults for those it leaves out);
        ``ValueError`` naming the agent ``label`` when one is out of range."""
        default = cls()
        stop = options.get("stop", default.stop)
        stop = (stop,) if isinstance(stop, str) else stop
        example = options.get("example", default.example)
        if not isinstance(stop, (list, tuple)) or not all(isinstance(x, str) and x for x in stop):
            raise ValueError(
                f"{label}: stop is a string or a list of non-empty strings, got {stop!r}"
            )
        if not isinstance(example, bool):
            raise ValueError(f"{label}: example is true or false, got {example!r}")
        history = options.get("history", default.history)
        if history is not None and (
            isinstance(history, bool) or not isinstance(history, int) or history < 0
        ):
            raise ValueError(f"{label}: history is null or a whole number >= 0, got {history!r}")
        sampling = cls(
            temperature=float(options.get("temperature", default.temperature)),
            top_p=float(options.get("top_p", default.top_p)),
            max_tokens=int(options.get("max_tokens", default.max_tokens)),
            seed=int(options.get("seed", default.seed)),
            stop=tuple(stop),
            example=example,
            history=history,
        )
        t, p, n = sampling.temperature, sampling.top_p, sampling.max_tokens
        if t < 0 or not 0 < p <= 1 or n < 1:
            raise ValueError(
                f"{label}: need temperature >= 0, 0 < top_p <= 1 and max_tokens >= 1, got "
                f"{t}, {p}, {n}"
            )
        return sampling


def next_chat(
    history: Mapping[str, list[Message]],
    agent: str,
    observation: str,
    info: Mapping[str, Any],
    example: Sequence[Message] = (),
) -> list[Message]:
    """``agent``'s chat so far (on its first turn: a system message of ``info["instructions"]``,
    then the worked ``example``'s messages, if any) plus ``observation`` as the next user
    message; ``history`` is left as it was, so a failed reply leaves no half turn behind."""
    chat = history.get(agent) or [
        {"role": "system", "content": str(info.get("instructions", ""))},
        *(dict(m) for m in example),
    ]
    return [*chat, {"role": "user", "content": observation}]


def recent_turns(messages: Sequence[Message], head: int, history: int | None) -> list[Message]:
    """``messages`` with only the last ``history`` exchanges before the newest message: the
    ``head`` first messages (system, example) and the newest always stay; None keeps all."""
    if history is None:
        return list(messages)
    past = list(messages[head:-1])
    return [*messages[:head], *(past[len(past) - 2 * history :] if history else []), messages[-1]]


def forced_reply(valid: Sequence[str]) -> str | None:
    """The reply played without the model under ``forced_moves="auto"`` when a turn has one
    valid action (a listener's ``wait``), else None: the agent loop and every replay of it
    write the same text."""
    return f"<action>{valid[0]}</action>" if len(valid) == 1 else None


def cut_at_stop(text: str, stop: str | Sequence[str]) -> str:
    """``text`` up to and including its first ``stop`` string, as a rollout ends under vLLM's
    ``stop`` with ``include_stop_str_in_output`` (the agent loop's setting). The cut is at the
    character; a model server cuts at the token, the same wherever the stop string ends a token
    (``</action>`` does in every tokenizer the project builds)."""
    stop = (stop,) if isinstance(stop, str) else stop
    cuts = [text.index(s) + len(s) for s in stop if s and s in text]
    return text[: min(cuts)] if cuts else text


def reply_seed(episode_seed: int, agent: str, turn: int, base: int = 0) -> int:
    """A sampling seed for one reply, fixed by (``base``, episode seed, agent, turn) so sampled
    runs reproduce; 31 bits, which every OpenAI-compatible server accepts as ``seed``."""
    key = hashlib.sha256(f"{base}/{episode_seed}/{agent}/{turn}".encode()).digest()
    return int.from_bytes(key[:4], "little") & 0x7FFFFFFF


class ChatEpisode:
    """One episode of an LLM agent: each agent's chat and the records of its turns.

    Subclasses answer a chat in :meth:`complete`. Each call of :meth:`act` appends a record
    before the request is made (so the records keep the order the runner asked in, and a failed
    turn is recorded too) and fills it in as the reply comes. A record holds ``agent``, ``turn``
    (0, 1, ... per agent), ``system`` (first turn only), ``message`` (the new user message),
    ``seed``, ``reply`` (None if none came), ``finish_reason`` and ``latency_s``; subclasses add
    their own fields (HTTP attempts, token usage).
    """

    def __init__(
        self,
        seed: int,
        seed_base: int = 0,
        examples: Mapping[str, Sequence[Message]] | None = None,
        history: int | None = None,
    ) -> None:
        self.seed = seed
        self.history = history
        """:attr:`SamplingOptions.history`: past turns a request carries (None: all)."""
        self.seed_base = seed_base
        self.examples: dict[str, list[Message]] = {a: list(m) for a, m in (examples or {}).items()}
        """Each agent's worked example (shown before its first turn), when the agent has one."""
        self.chats: dict[str, list[Message]] = {}
        self.records: list[dict[str, Any]] = []

    async def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The reply of ``agent`` to its chat plus ``observation`` (its last ``history`` turns
        when set); the chat keeps both."""
        example = self.examples.get(agent, [])
        messages = next_chat(self.chats, agent, observation, info, example)
        turn = (len(messages) - 2 - len(example)) // 2
        record: dict[str, Any] = {"agent": agent, "turn": turn}
        if turn == 0:
            record["system"] = messages[0]["content"]
            if example:
                record["example"] = example
        record["message"] = observation
        record["seed"] = reply_seed(self.seed, agent, turn, self.seed_base)
        record["reply"] = None
        self.records.append(record)
        start = time.perf_counter()
        try:
            sent = recent_turns(messages, 1 + len(example), self.history)
            reply = await self.complete(sent, record["seed"], record)
        finally:
            record["latency_s"] = round(time.perf_counter() - start, 6)
        record["reply"] = reply
        self.chats[agent] = [*messages, {"role": "assistant", "content": reply}]
        return reply

    async def complete(self, messages: list[Message], seed: int, record: dict[str, Any]) -> str:
        """The reply to ``messages`` (sampled with ``seed``); may add fields to ``record``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Completion:
    """A reply of :class:`ChatModel`."""

    text: str
    """The reply, special tokens removed, cut before a stop string."""
    prompt_tokens: int
    """Tokens of the rendered prompt (after the cut to ``max_prompt_tokens``)."""
    completion_tokens: int
    """Tokens sampled."""
    finish_reason: str
    """``stop`` (end-of-sequence token or a stop string) or ``length`` (``max_tokens``)."""


class ChatModel:
    """A local Hugging Face chat model: renders chats with its template, samples replies.

    Replies are made one at a time (a lock), so one model serves threads and event loops alike.

    Args:
        path: a model directory (``teamgym model init``, a warm-up or exported policy, a hub
            snapshot).
        device: ``cpu``, ``cuda`` (``cuda:N``) or ``auto`` (cuda when there is one).
    """

    def __init__(self, path: str | Path, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{path} is not a model directory (no config.json); pass a directory written "
                "by `teamgym model init DIR`, by a training run's warm-up, or a Hugging Face "
                "model snapshot"
            )
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.path = str(path)
        self.device = device
        model: Any = AutoModelForCausalLM.from_pretrained(path)
        self.model: Any = model.to(device).eval().requires_grad_(False)
        self.tokenizer: Any = AutoTokenizer.from_pretrained(path)
        stop = {self.tokenizer.eos_token_id}
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        stop.update(configured if isinstance(configured, list) else [configured])
        self.stop_ids = {i for i in stop if i is not None}
        self.lock = threading.Lock()

    def prompt_ids(
        self, messages: Sequence[Mapping[str, str]], max_prompt_tokens: int
    ) -> list[int]:
        """The chat rendered by the model's chat template (with the assistant's turn opened),
        as tokens, cut on the left to ``max_prompt_tokens``."""
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, tokenize=False
        )
        return self.tokenizer.encode(text, add_special_tokens=False)[-max_prompt_tokens:]

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int = SamplingOptions.max_tokens,
        temperature: float = SamplingOptions.temperature,
        top_p: float = SamplingOptions.top_p,
        seed: int = SamplingOptions.seed,
        stop: Sequence[str] = (),
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
    ) -> Completion:
        """The model's reply to ``messages``: greedy at temperature 0, else sampled from a
        generator seeded with ``seed``; it ends at an end token, a ``stop`` string (cut off,
        as the OpenAI API does) or ``max_tokens``."""
        import torch

        from teamgym.adapters.agents.sampling import _Request, sample_batch

        stop = tuple(s for s in stop if s)
        with self.lock:  # the tokenizer too: a fast tokenizer is not safe across threads
            prompt = self.prompt_ids(messages, max_prompt_tokens)
            request = _Request(
                prompt,
                max_tokens,
                temperature,
                top_p,
                torch.Generator().manual_seed(seed),
                None,
                stop=stop,
            )
            tokens, _ = sample_batch(
                self.model, [request], self.stop_ids, pad_id=0, decode=self.tokenizer.decode
            )[0]
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        cuts = [text.index(s) for s in stop if s in text]
        ended = bool(tokens) and tokens[-1] in self.stop_ids
        if cuts:
            text = text[: min(cuts)]
        finish = "stop" if ended or cuts else "length"
        return Completion(text, len(prompt), len(tokens), finish)

    async def acomplete(self, messages: Sequence[Mapping[str, str]], **kwargs: Any) -> Completion:
        """:meth:`complete` in a worker thread, so the event loop keeps serving other agents."""
        return await asyncio.to_thread(self.complete, messages, **kwargs)


@functools.lru_cache(maxsize=4)
def _cached(path: str, device: str) -> ChatModel:
    """One loaded model per (directory, device) and process."""
    return ChatModel(path, device)


def load_chat_model(path: str | Path, device: str = "cpu") -> ChatModel:
    """The :class:`ChatModel` of a directory, loaded once per process: the episodes, agents
    and teammates that play the same model share its weights."""
    return _cached(str(Path(path).resolve()), device)
