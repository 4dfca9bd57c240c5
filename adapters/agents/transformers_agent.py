"""A local Hugging Face model as a benchmark agent: ``{kind: transformers, path: DIR}``.

:class:`TransformersAgent` loads the model directory once per run (on ``device``) and plays
every agent it is given with it: each agent keeps its chat (system = the env's instructions,
then observations and its own replies), rendered with the model's chat template exactly as the
checkpoint teammate and ``teamgym serve`` render it (:class:`teamgym.adapters.agents.chat.ChatModel`).
Replies are greedy at temperature 0; with a temperature they are sampled from a generator
seeded by (episode seed, agent, turn), so a run reproduces. Model calls run in a worker thread,
one at a time, while the event loop keeps the other episodes going.

Options (spec keys): ``path`` (required), ``device`` (``auto``: cuda when there is one, else
``cpu``; or ``cpu``, ``cuda``), ``max_prompt_tokens`` (the chat is cut on the left beyond
it; default :data:`~teamgym.adapters.agents.chat.DEFAULT_MAX_PROMPT_TOKENS`), and the sampling
options ``temperature``, ``top_p``, ``max_tokens`` and ``seed`` (mixed into every reply's
sampling seed, as the ``openai`` agent's ``seed`` is, see
:func:`~teamgym.adapters.agents.chat.reply_seed`), whose defaults and check are
:class:`~teamgym.adapters.agents.chat.SamplingOptions`'.

Records (``episode.records``, one per reply, see :class:`~teamgym.adapters.agents.chat.ChatEpisode`):
``agent, turn, system, message, seed, reply, finish_reason, prompt_tokens, completion_tokens``
are deterministic for a given model directory, device and spec; ``latency_s`` is not.
"""

from __future__ import annotations

from typing import Any

from teamgym.adapters.agents.chat import (
    ChatEpisode,
    ChatModel,
    Message,
    SamplingOptions,
    load_chat_model,
)
from teamgym.adapters.agents.examples import examples_if
from teamgym.adapters.agents.kinds import AgentError, AgentSpec

__all__ = ["TransformersAgent"]


class _TransformersEpisode(ChatEpisode):
    """One episode's chats, answered by the run's model."""

    def __init__(self, owner: TransformersAgent, seed: int, examples: Any = None) -> None:
        super().__init__(
            seed, seed_base=owner.sampling.seed, examples=examples, history=owner.sampling.history
        )
        self.owner = owner

    async def complete(self, messages: list[Message], seed: int, record: dict[str, Any]) -> str:
        o = self.owner
        try:
            out = await o.model.acomplete(
                messages,
                max_tokens=o.sampling.max_tokens,
                temperature=o.sampling.temperature,
                top_p=o.sampling.top_p,
                seed=seed,
                stop=o.sampling.stop,
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
        self.sampling = SamplingOptions.from_options(o, spec.label)
        self.max_prompt_tokens = int(spec.option("max_prompt_tokens"))
        self.model: ChatModel = load_chat_model(o["path"], str(spec.option("device")))

    def episode(self, env: Any, seed: int) -> _TransformersEpisode:
        """Fresh chats for the episode on ``seed`` (with the worked examples of ``env`` under
        ``example: true``)."""
        return _TransformersEpisode(self, seed, examples_if(self.sampling.example, env))

    def close(self) -> None:
        """Nothing to release: the model stays cached for later runs in this process."""


def build(spec: AgentSpec, env_id: str) -> TransformersAgent:
    """The ``transformers`` kind's builder, named in the agent-kind registry
    (:mod:`teamgym.adapters.agents.kinds`): one agent serves every env, so ``env_id`` is unused."""
    return TransformersAgent(spec)
