"""``Trajectory``: one agent's token sequence as its turns are played, for ``TeamEpisodeLoop``.

The prompt, the agent's replies (``response_mask`` 1; forced moves and stop strings 0) and the
observations between turns (mask 0), through VERL's continuous-token builder, each observation
rendered once (:mod:`teamgym.adapters.verl.tokens`): exactly what the chat template renders for
the whole conversation, until ``response_length`` is spent. Each step's reward and anchor state
are kept against its reply's tokens, for the turn-level estimators (:meth:`Trajectory.turn_credit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from teamgym.adapters.credit import anchor_key, turn_runs
from teamgym.adapters.verl.tokens import observation_ids

__all__ = ["Trajectory"]


@dataclass
class Trajectory:
    """The growing token sequence of one agent in one episode (see the module docstring)."""

    loop: Any
    """The ``AgentLoopBase`` whose ``ct_merge_*`` helpers render the tokens."""
    prompt_ids: list[int]
    response_length: int
    want_logprobs: bool
    token_ids: list[int] = field(init=False)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    budget_left: bool = True
    turns: int = 0
    """Replies the model generated (forced moves excluded)."""
    versions: list[tuple[Any, Any]] = field(default_factory=list)
    """(min, max) weight version (global step) of the server behind each generated reply."""
    steps: list[list[Any]] = field(default_factory=list)
    """Per env step: [first response token of its reply, end of its reply, reward, anchor]."""

    def __post_init__(self) -> None:
        self.token_ids = list(self.prompt_ids)

    def room(self) -> int:
        """Response tokens still free."""
        return self.response_length - len(self.mask)

    def _merge(self, ids: list[int], logprobs: list[float] | None) -> int:
        """Append the reply's tokens through VERL's builder, in this thread (its
        ``ct_merge_assistant_token`` hops to a thread pool per turn, costing more than the work)."""
        builder = self.loop.continuous_token_builder
        merged = builder.merge_assistant_tokens(self.token_ids, ids)
        self.mask, lp = builder.align_response_metadata(
            merged,
            self.mask,
            self.logprobs if self.want_logprobs else None,
            assistant_logprobs=logprobs if self.want_logprobs else None,
        )
        self.token_ids, self.logprobs = merged.token_ids, lp or []
        return merged.appended_token_count

    def _unmask_last(self, count: int) -> None:
        """The last ``count`` tokens become context (mask 0): the loop's, not the model's."""
        if count:
            self.mask = [*self.mask[: len(self.mask) - count], *([0] * count)]

    async def add_model_reply(self, output: Any, stop_tail: int = 0) -> None:
        """Append a generated reply (mask 1) whose last ``stop_tail`` tokens spell a stop string
        (mask 0: they close the command, they are not trained)."""
        appended = self._merge(list(output.token_ids), output.log_probs)
        self._unmask_last(min(stop_tail, appended))
        self.versions.append(
            (
                output.extra_fields.get("min_global_steps"),
                output.extra_fields.get("max_global_steps"),
            )
        )
        self.turns += 1

    async def add_forced_reply(self, ids: list[int]) -> None:
        """Append a move the loop played for the agent (mask 0), if it fits the budget."""
        if len(self.mask) + len(ids) > self.response_length:
            self.budget_left = False
        elif self.budget_left:
            self._unmask_last(self._merge(ids, [0.0] * len(ids)))

    async def add_observation(self, previous: list[dict], messages: list[dict]) -> None:
        """Append the messages after ``previous`` (the next observation and the generation
        prompt, mask 0), rendering only the new message when :func:`observation_ids` can, else
        through VERL's builder; when they would fill the budget the trajectory stops growing."""
        builder = self.loop.continuous_token_builder
        logprobs = self.logprobs if self.want_logprobs else None
        appended = messages[len(previous) :]
        ids = observation_ids(builder, appended[0]) if len(appended) == 1 else None
        if ids is None:
            merged, mask, lp = await self.loop.ct_merge_context_msg(
                previous, messages, self.token_ids, self.mask, logprobs
            )
        else:  # the builder's own boundary handling (Qwen's newline after <|im_end|>)
            merged = builder._merge_context_token_ids(
                self.token_ids, ids, previous_messages=previous, appended_messages=appended
            )
            mask, lp = builder.align_response_metadata(merged, self.mask, logprobs)
        if len(mask) >= self.response_length:
            self.budget_left = False
        else:
            self.token_ids, self.mask, self.logprobs = merged.token_ids, mask, lp or []

    def open_step(self) -> None:
        """A step's reply is about to be appended (call before :meth:`TeamLoopBase._reply`)."""
        self.steps.append([len(self.mask), len(self.mask), 0.0, ""])

    def close_step(self, reward: float, observation: str) -> None:
        """The step's reply is in and the env paid ``reward`` for it; ``observation`` is what
        the agent answered (its anchor state)."""
        step = self.steps[-1]
        step[1], step[2], step[3] = len(self.mask), float(reward), anchor_key(observation)

    def turn_credit(self) -> tuple[list[float], list[str]]:
        """One reward and one anchor key per generated turn (a run of mask-1 tokens): a step's
        reward goes to the last turn generated by then (or the first), so the rewards sum to the
        return; a turn's anchor is its step's. Empty when no turn was generated."""
        runs = turn_runs(torch.tensor(self.response()[1] or [0]))
        rewards, anchors = [0.0] * len(runs), [""] * len(runs)
        if not runs:
            return [], []
        owner = 0
        for start, end, reward, anchor in self.steps:
            for t, (run_start, _) in enumerate(runs):
                if start <= run_start < end:
                    owner, anchors[t] = t, anchor
            rewards[owner] += reward
        return rewards, anchors

    def steps_range(self, current: Any) -> tuple[Any, Any]:
        """Oldest and newest weight versions behind the replies (``current`` when none was
        generated): VERL's v1 trainer checks staleness with them, and fails without them."""
        lows = [lo for lo, _ in self.versions if lo is not None]
        highs = [hi for _, hi in self.versions if hi is not None]
        return min(lows, default=current), max(highs, default=current)

    def response(self) -> tuple[list[int], list[int], list[float] | None]:
        """Response ids, mask and log-probs (None when not requested), capped to the budget."""
        cap = self.response_length
        ids = self.token_ids[len(self.prompt_ids) :][:cap]
        logprobs = self.logprobs[:cap] if self.want_logprobs and self.logprobs else None
        return ids, self.mask[:cap], logprobs
