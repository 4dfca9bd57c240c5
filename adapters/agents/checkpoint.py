"""A frozen model checkpoint as a teammate: ``--teammate robot_0=checkpoint:PATH``.

:class:`CheckpointPolicy` plays an agent with a saved Hugging Face model directory (a
``teamgym model init`` model, a warm-up model, a GRPO run's exported policy): it keeps the
agent's chat (instructions, observations, its own replies), renders it with the model's chat
template, exactly as the agent loop does, and answers greedily, through the same
:class:`teamgym.adapters.agents.chat.ChatModel` as the ``transformers`` agent and ``teamgym serve``.
Given a trainer's ``stop`` strings and ``forced_moves="auto"``, its replies end as the
trainer's rollouts end (cut after the stop string; a turn with one valid action played without
the model), so a warm-up that replays a policy's greedy replies replays what it wrote.
It is a baseline like the scripted ones (``reset``/``act``), so the episode loop, the warm-up
and ``run_episode`` seat it through :class:`teamgym.envs.lineup.Lineup` unchanged: ad-hoc
teamwork and population play against earlier selves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from teamgym.adapters.agents.chat import DEFAULT_MAX_PROMPT_TOKENS
from teamgym.envs.baselines import register_policy_prefix
from teamgym.names import CHECKPOINT_PREFIX

__all__ = ["CHECKPOINT_PREFIX", "CheckpointPolicy", "checkpoint_policy"]


class CheckpointPolicy:
    """Greedy replies of a frozen model directory (see the module docstring).

    Args:
        path: the model directory.
        seed: unused (greedy decoding is deterministic); accepted like every baseline's.
        max_reply_tokens: cap on one reply.
        max_prompt_tokens: the chat is cut on the left beyond this many tokens.
        stop: a reply ends after the first of these strings, kept (the agent loop's ``stop``;
            one string is one stop string).
        forced_moves: ``auto``: a turn with one valid action is played without the model;
            ``model`` (the default): the model answers every turn, as a teammate does.
    """

    def __init__(
        self,
        path: str | Path,
        seed: int | None = None,
        max_reply_tokens: int = 32,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        stop: Sequence[str] = (),
        forced_moves: Literal["auto", "model"] = "model",
    ) -> None:
        from teamgym.adapters.agents.chat import load_chat_model

        if forced_moves not in ("auto", "model"):
            raise ValueError(f"forced_moves must be 'auto' or 'model', got {forced_moves!r}")
        self.path = str(Path(path).resolve())
        try:
            self.chat_model = load_chat_model(self.path)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"checkpoint teammate: {exc}") from None
        self.max_reply_tokens = max_reply_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.stop = (stop,) if isinstance(stop, str) else tuple(stop)
        self.forced_moves = forced_moves
        self.history: dict[str, list[dict[str, str]]] = {}

    def reset(self, seed: int | None = None) -> None:
        """Forget the chats of the last episode."""
        self.history = {}

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The model's greedy reply to the agent's chat so far plus ``observation`` (cut after
        a stop string; a forced move under ``forced_moves="auto"``)."""
        from teamgym.adapters.agents.chat import cut_at_stop, forced_reply, next_chat

        chat = next_chat(self.history, agent, observation, info)
        forced = forced_reply(info.get("valid_actions", ()))
        if self.forced_moves == "auto" and forced is not None:
            reply = forced
        else:
            text = self.chat_model.complete(
                chat, max_tokens=self.max_reply_tokens, max_prompt_tokens=self.max_prompt_tokens
            ).text
            reply = cut_at_stop(text, self.stop)
        self.history[agent] = [*chat, {"role": "assistant", "content": reply}]
        return reply


def checkpoint_policy(path: str, seed: int | None = None, **options: Any) -> CheckpointPolicy:
    """``make_baseline``'s factory for ``checkpoint:PATH`` names (``options``: the
    :class:`CheckpointPolicy` arguments after ``seed``, e.g. the warm-up's reply limits)."""
    return CheckpointPolicy(path, seed=seed, **options)


register_policy_prefix(CHECKPOINT_PREFIX, checkpoint_policy)
