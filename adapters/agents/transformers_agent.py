"""A local Hugging Face model as a benchmark agent: ``{kind: transformers, path: DIR}``.

:class:`TransformersAgent` loads the model directory once per run (on ``device``) and plays
every agent it is given with it: each agent keeps its chat (system = the env's instructions,
then observations and its own replies), rendered with the model's chat template exactly as the
checkpoint teammate and ``teamgym serve`` render it (:class:`teamgym.adapters.agents.chat.ChatModel`).
Replies are greedy at temperature 0; with a temperature they are sampled from a generator
seeded by (episode seed, agent, turn), so a run reproduces. Model calls run in a worker thread,
one at a time, while the event loop keeps the other episodes going.

Options (spec keys): ``path`` (required), ``device`` (``auto``: cuda when there is one, else
``cpu``; or ``cpu``, ``cuda``), ``temperature`` (0), ``top_p`` (1.0), ``max_tokens`` (256),
``max_prompt_tokens`` (2048; the chat is cut on the left beyond it), ``seed`` (0; mixed into
every reply's sampling seed, as the ``openai`` agent's ``seed`` is, see
:func:`~teamgym.adapters.agents.chat.reply_seed`).

Records (``episode.records``, one per reply, see :class:`~teamgym.adapters.agents.chat.ChatEpisode`):
``agent, turn, system, message, seed, reply, finish_reason, prompt_tokens, completion_tokens``
are deterministic for a given model directory, device and spec; ``latency_s`` is not.
"""

from __future__ import annotations

from typing import Any

from teamgym.adapters.agents.kinds import AgentError, AgentSpec
from teamgym.adapters.agents.chat import ChatEpisode, ChatModel, Message, load_chat_model

__all__ = ["TransformersAgent"]


class _TransformersEpisode(ChatEpisode):
    """One episode's chats, answered by the run's model."""

    def __init__(self, owner: TransformersAgent, seed: int) -> None:
        super().__init__(seed, seed_base=owner.seed)
        self.owner = owner

    async def complete(self, messages: list[Message], seed: int, record: dict[str, Any]) -> str:
        o = self.owner
        try:
            out = await o.model.acomplete(
                messages,
                max_tokens=o.max_tokens,
                temperature=o.temperature,
                top_p=o.top_p,
                seed=seed,
                max_prompt_tokens=o.max_prompt_tokens,
            )
        except RuntimeError as exc:  # out of memory, a device error: this episode fails
            raise AgentError(f"{o.spec.label}: the model failed on this turn: {exc}") from exc
        record["finish_reason"] = out.finish_reason
        record["prompt_tokens"] = out.prompt_tokens
        record["completion_tokens"] = out.completion_tokens
        return out.text


class TransformersAgent:
    """A local model directory as a run-wide agent (see the module docstring)."""

    def __init__(self, spec: AgentSpec) -> None:
        o = spec.options
        self.spec = spec
        self.temperature = float(o.get("temperature", 0.0))
        self.top_p = float(o.get("top_p", 1.0))
        self.max_tokens = int(o.get("max_tokens", 256))
        self.max_prompt_tokens = int(o.get("max_prompt_tokens", 2048))
        self.seed = int(o.get("seed", 0))
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_tokens < 1:
            raise ValueError(
                f"{spec.label}: need temperature >= 0, 0 < top_p <= 1 and max_tokens >= 1, got "
                f"{self.temperature}, {self.top_p}, {self.max_tokens}"
            )
        self.model: ChatModel = load_chat_model(o["path"], str(o.get("device", "auto")))

    def episode(self, env: Any, seed: int) -> _TransformersEpisode:
        """Fresh chats for the episode on ``seed``."""
        return _TransformersEpisode(self, seed)

    def close(self) -> None:
        """Nothing to release: the model stays cached for later runs in this process."""
