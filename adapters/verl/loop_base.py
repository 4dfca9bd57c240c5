"""The episode loop's machinery: settings, prompts, one turn, the output.

:class:`TeamLoopBase` is an ``AgentLoopBase`` that reads its :class:`AgentLoopSettings` from the
keys of its YAML entry, renders and checks the first prompt, plays one agent's turn (a forced
move, the model's reply while the budget lasts, else an empty reply) into a
:class:`~teamgym.adapters.verl.trajectory.Trajectory`, and turns a finished trajectory into the
``AgentLoopOutput`` VERL stores. The episode loop (:mod:`.episode_loop`: one row = one episode,
one trajectory per trained agent) is its subclass.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
)

from teamgym.adapters.agents.chat import forced_reply
from teamgym.adapters.verl.server import request_seed
from teamgym.adapters.verl.settings import AgentLoopSettings
from teamgym.adapters.verl.tokens import first_prompt_ids
from teamgym.adapters.verl.trajectory import Trajectory

__all__ = [
    "LOGGED_METRICS",
    "TURN_ANCHORS",
    "EpisodeIncomplete",
    "TeamLoopBase",
    "end_of_turn_ids",
    "episode_extra",
    "trajectory_output",
]

#: Episode metrics copied into VERL's reward_extra_info (numbers only; None becomes NaN).
LOGGED_METRICS = (
    "success",
    "score",
    "team_return",
    "episode_length",
    "collaboration_index",
    "communication_frequency",
    "mean_message_tokens",
    "invalid_action_rate",
    "contribution_gini",
    "idle",
)


class EpisodeIncomplete(RuntimeError):
    """The episode ended abnormally (a teammate crashed, a turn timed out, agents missing):
    its trajectories must not be trained on."""


class _Quorum:
    """The copies of one row in this process (one ``uid``: v1 starts its ``rollout.n`` sessions
    together in one worker; the CPU trainer's in-process worker, a row's copies), settling together: a copy that completed while every
    other copy failed would be a GRPO group of one, with no baseline (VERL's ``grpo`` would give
    it its raw score as advantage), so it is dropped too. Copies start before their first ``await`` (VERL creates a row's sessions
    together), so ``started`` is complete before any copy settles."""

    def __init__(self, uid: str, enforce: bool) -> None:
        self.uid, self.enforce = uid, enforce
        self.started = self.settled = self.complete = 0
        self.done = asyncio.Event()

    @classmethod
    def join(cls, uid: str, enforce: bool) -> _Quorum:
        group = _QUORUMS.get(uid)
        if group is None or group.done.is_set():
            group = _QUORUMS[uid] = cls(uid, enforce)
        group.started += 1
        return group

    async def settle(self, complete: bool) -> None:
        """Report this copy's outcome; a complete copy waits for its siblings and raises
        :class:`EpisodeIncomplete` when it is the only complete one of two or more."""
        self.settled += 1
        self.complete += int(complete)
        if self.settled == self.started:
            self.done.set()
            if _QUORUMS.get(self.uid) is self:
                del _QUORUMS[self.uid]
        if not complete:
            return
        await self.done.wait()
        if self.enforce and self.started >= 2 and self.complete < 2:
            raise EpisodeIncomplete(
                f"row {self.uid}: no other of its {self.started} copies finished, so this one "
                "would be a GRPO group of one (no baseline): left out with them"
            )


_QUORUMS: dict[str, _Quorum] = {}
"""Owned by :class:`_Quorum`: the rows whose copies are in flight in this process."""


_END_OF_TURN: dict[tuple[int, str], tuple[Any, list[int]]] = {}
"""Owned by ``TeamLoopBase.__init__``: :func:`end_of_turn_ids` per tokenizer object (kept
alive beside its ids, so no other object takes its id) and chat template."""


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The tokens the chat template writes right after an assistant reply, up to the first
    whitespace (Qwen's ``<|im_end|>``, Llama 3's ``<|eot_id|>``): what a model emits to end its
    turn, which is not always ``eos_token``. Falls back to ``eos_token_id`` when there is none."""
    marker = "\u2063teamgym-reply\u2063"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}],
            tokenize=False,
        )
    except Exception:  # no chat template: the tokenizer's own end of sequence
        text = ""
    tail = text.split(marker, 1)[1].split() if marker in text else []
    ids = tokenizer.encode(tail[0], add_special_tokens=False) if tail else []
    return list(ids) or [tokenizer.eos_token_id]


class TeamLoopBase(AgentLoopBase):
    """The agent-loop machinery of teamgym's loop (see the module docstring).

    Keyword arguments are VERL's plus the keys of the agent-loop YAML entry (not the whole
    config tree), read once into :attr:`settings`
    (:class:`~teamgym.adapters.verl.settings.AgentLoopSettings`: reward sharing, reply cap,
    timeouts, forced moves, stop strings).
    """

    tokenizer: Any  # a Hugging Face tokenizer (VERL types it as the AutoTokenizer factory)
    settings: AgentLoopSettings
    """This loop's settings, from its YAML entry."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        ours = {f.name for f in dataclasses.fields(AgentLoopSettings)} & set(kwargs)
        self.settings = AgentLoopSettings.from_dict({k: kwargs.pop(k) for k in ours})
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)
        self.prompt_length = int(self.rollout_config.prompt_length)
        key = (id(self.tokenizer), str(getattr(self.tokenizer, "chat_template", "")))
        if key not in _END_OF_TURN:  # once per tokenizer, not per trajectory
            _END_OF_TURN[key] = (self.tokenizer, end_of_turn_ids(self.tokenizer))
        self.end_of_turn = _END_OF_TURN[key][1]
        # vLLM samples a request that carries a seed from its own generator: one seed per
        # request (:func:`request_seed`), so two runs with the same seeds sample alike whatever
        # batches the engine forms (verl stamps its replica's one seed on every request, and
        # only under full_determinism); other engines are sent none
        engine, seed = str(self.rollout_config.get("name", "")), self.rollout_config.get("seed")
        seeded = engine == "vllm" and self.settings.seed_requests
        self.request_seed = int(seed or 0) if seeded else None
        self.seed_step = 0  # the row's training step (``run`` sets it), mixed into the seeds

    def _stop_tail(self, ids: list[int]) -> int:
        """How many trailing tokens of a reply spell its stop string (0: none, or not masked)."""
        stop = self.settings.stop
        if not (stop and self.settings.mask_stop):
            return 0
        text = self.tokenizer.decode(ids)
        if not any(text.endswith(s) for s in stop):
            return 0
        for k in range(1, len(ids) + 1):
            if any(s in self.tokenizer.decode(ids[-k:]) for s in stop):
                return k
        return 0

    def _prompt_ids(self, messages: list[dict], where: str) -> list[int]:
        """The first prompt as VERL's continuous-token builder renders it (once per row: its
        copies share it); refused when over ``rollout.prompt_length`` (VERL would
        left-truncate it, cutting the instructions)."""
        prompt_ids = first_prompt_ids(self.continuous_token_builder, messages)
        if len(prompt_ids) > self.prompt_length:
            raise ValueError(
                f"the first prompt of {where} is {len(prompt_ids)} tokens, over "
                f"rollout.prompt_length={self.prompt_length}: raise data.max_prompt_length, or "
                "rebuild the dataset with `teamgym verl-data --tokenizer MODEL --max-prompt-length N`"
            )
        return prompt_ids

    async def _reply(
        self, traj: Trajectory, valid: tuple[str, ...], request_id: str, sampling: dict[str, Any]
    ) -> str:
        """This turn's reply: a forced move, the model's while the budget lasts, else ""; the
        step is opened in ``traj`` (the loop closes it with the env's reward)."""
        traj.open_step()
        if self.settings.forced_moves == "auto" and (reply := forced_reply(valid)) is not None:
            # played even once the budget is spent
            ids = self.tokenizer.encode(reply, add_special_tokens=False)
            await traj.add_forced_reply([*ids, *self.end_of_turn])
            return reply
        max_tokens = min(self.settings.max_reply_tokens, traj.room())
        if not (traj.budget_left and max_tokens > 0):
            traj.budget_left = False
            return ""  # the env's no-op, so teammates never wait
        stop = list(self.settings.stop)
        extra: dict[str, Any] = {"stop": stop, "include_stop_str_in_output": True} if stop else {}
        if self.request_seed is not None and "seed" not in sampling:
            seed = request_seed(self.request_seed, request_id, traj.token_ids, self.seed_step)
            extra["seed"] = seed
        output = await self.server_manager.generate(
            request_id=request_id,
            prompt_ids=traj.token_ids,
            sampling_params={**sampling, "max_tokens": max_tokens, **extra},
        )
        await traj.add_model_reply(output, self._stop_tail(output.token_ids))
        return self.tokenizer.decode(output.token_ids, skip_special_tokens=True)

    @staticmethod
    async def _observe(
        traj: Trajectory, messages: list[dict], reply: str, observation: str
    ) -> None:
        """After a step: the agent's reply and its next observation join its chat and (mask 0
        for the observation) its trajectory, while its budget lasts."""
        if not traj.budget_left:
            return
        messages.append({"role": "assistant", "content": reply})
        previous = list(messages)
        messages.append({"role": "user", "content": observation})
        await traj.add_observation(previous, messages)


def _number(value: Any) -> float:
    """Metrics as floats for VERL's logs (None -> NaN, bools -> 0/1)."""
    return float("nan") if value is None else float(value)


def episode_extra(metrics: dict[str, Any] | None) -> dict[str, float]:
    """The episode metrics VERL logs (:data:`LOGGED_METRICS`), as floats."""
    return {name: _number((metrics or {}).get(name)) for name in LOGGED_METRICS}


#: The ``extra_fields`` key of a trajectory's anchor key per turn (GiGPO's step groups).
TURN_ANCHORS = "teamgym_turn_anchors"


def trajectory_output(
    traj: Trajectory,
    total: float,
    extra: dict[str, float],
    fields: dict[str, Any],
    row: dict[str, Any],
) -> AgentLoopOutput:
    """The ``AgentLoopOutput`` of a finished trajectory: its shared return as ``reward_score``,
    the episode metrics as ``reward_extra_info``, and the weight versions v1 checks."""
    response_ids, response_mask, response_logprobs = traj.response()
    low, high = traj.steps_range(row.get("global_steps"))
    turn_scores, anchors = traj.turn_credit()
    return AgentLoopOutput(
        prompt_ids=traj.prompt_ids,
        response_ids=response_ids,
        response_mask=response_mask,
        response_logprobs=response_logprobs,
        reward_score=float(total),
        num_turns=2 * traj.turns + 1,
        metrics=AgentLoopMetrics(),
        extra_fields={
            "reward_extra_info": extra,
            **fields,
            # one reward and one anchor state per generated turn (the turn-level estimators')
            "turn_scores": turn_scores,
            TURN_ANCHORS: anchors,
            # v1 checks staleness with these (and fails without them): the oldest and newest
            # weights that generated a turn; the current step's when none did
            "min_global_steps": low,
            "max_global_steps": high,
        },
    )
