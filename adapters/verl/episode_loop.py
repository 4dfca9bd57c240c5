"""``TeamEpisodeLoop``: one dataset row is one episode; the loop plays the whole team.

Registered in VERL as ``teamgym_episode`` (the rows' ``agent_name``; docs: Train with VERL). One
coroutine owns the env (:class:`~teamgym.adapters.verl.episode_env.EpisodeEnv`); each turn it
sends every live agent's ``generate()`` at once, with a sticky request id per agent and session
(``{episode}#s{session}/{agent}``, for the engine's prefix cache and reproducible sampling), asks
the LLM partners in the same turn, steps the env and appends each agent's next observation. It
returns one trajectory per trained agent, with its seat in ``extra_fields`` (:data:`SEAT_FIELD`),
by which teamgym's workers store it. An episode that does not finish normally (a failed generate
call or partner, a turn slower than ``turn_timeout``) raises: verl's v1 worker writes nothing for
that session and marks the row's group ``failure``; a copy left alone of its ``rollout.n`` raises
too (no group mean to compare).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)

from teamgym.adapters.agents.chat import forced_reply
from teamgym.adapters.agents.sampling import request_seed
from teamgym.adapters.verl.episode_env import EpisodeEnv
from teamgym.adapters.verl.llm_partners import PARTNER_METRICS
from teamgym.adapters.verl.settings import AgentLoopSettings
from teamgym.adapters.verl.tokens import first_prompt_ids
from teamgym.adapters.verl.trajectory import Trajectory
from teamgym.names import EPISODE_LOOP_NAME

__all__ = [
    "EPISODE_LOOP_NAME",
    "LOGGED_METRICS",
    "SEAT_FIELD",
    "TURN_ANCHORS",
    "EpisodeIncomplete",
    "EpisodeRow",
    "TeamEpisodeLoop",
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
    """The copies of one row (``uid``) in this process, started together (``started`` is complete
    before any settles), settling together: a complete copy whose siblings all failed would be a
    GRPO group of one (VERL's ``grpo`` would give it its raw score), so it is dropped too."""

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
                "would be a GRPO group of one (no group mean): left out with them"
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
    """The machinery of teamgym's loop: its ``settings`` (the keys of its YAML entry, beside
    VERL's keyword arguments), the first prompt, and one agent's turn (a forced move, the model's
    reply while the budget lasts, else an empty reply) played into a ``Trajectory``."""

    tokenizer: Any  # a Hugging Face tokenizer (VERL types it as the AutoTokenizer factory)
    settings: AgentLoopSettings

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
        """The first prompt as VERL's builder renders it (once per row); refused when over
        ``rollout.prompt_length`` (VERL would left-truncate it, cutting the instructions)."""
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


#: The ``extra_fields`` key holding an output's agent: its index in ``env.possible_agents``.
SEAT_FIELD = "teamgym_seat"


@dataclass(frozen=True)
class EpisodeRow:
    """One dataset row (an episode), as the loop reads it from ``extra_info``."""

    env_id: str
    env_kwargs: dict[str, Any]
    seed: int
    episode: str
    """The episode key (env, kwargs hash, split, seed)."""
    split: str
    agents: tuple[str, ...]
    """The trained agents, in the env's order (the rest are ``teammates``)."""
    teammates: dict[str, str]
    prompts: dict[str, list[dict[str, str]]]
    """Each trained agent's first messages (system: instructions; user: first observation)."""

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> EpisodeRow:
        info = kwargs["extra_info"]
        if "prompts" not in info:
            raise ValueError(
                f"row {info.get('episode', '?')} is not an episode row (one per agent, as the "
                "retired legacy trainer read?): rebuild the dataset with `teamgym verl-data`"
            )

        def load(value: Any) -> Any:
            return json.loads(value) if isinstance(value, str) else value

        return cls(
            env_id=str(info["env_id"]),
            env_kwargs=dict(load(info["env_kwargs"])),
            seed=int(info["seed"]),
            episode=str(info["episode"]),
            split=str(info.get("split", "train")),
            agents=tuple(load(info["agents"])),
            teammates=dict(load(info.get("teammates") or "{}")),
            prompts={a: [dict(m) for m in ms] for a, ms in load(info["prompts"]).items()},
        )


@dataclass
class _Seat:
    """One trained agent in one session."""

    agent: str
    index: int
    traj: Trajectory
    messages: list[dict]
    request_id: str
    valid: tuple[str, ...]
    total: float = 0.0
    replies: list[str] = field(default_factory=list)


class TeamEpisodeLoop(TeamLoopBase):
    """Agent loop playing a whole episode per row (see the module docstring)."""

    # verl types run() as returning one output; its v1 worker takes a list (agent_loop_tq.py:150-155)
    async def run(  # type: ignore[override]
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> list[AgentLoopOutput]:
        """Play one copy of the row's episode; returns one trajectory per trained agent, in
        the env's agent order."""
        self.seed_step = int(kwargs.get("global_steps") or 0)  # verl's v1 rows carry it
        row = EpisodeRow.from_kwargs(kwargs)
        group = _Quorum.join(str(kwargs.get("uid", row.episode)), row.split != "val")
        try:
            outputs = await self._play(row, sampling_params, kwargs)
        except BaseException:
            await group.settle(False)
            raise
        await group.settle(True)  # raises EpisodeIncomplete for a lone survivor
        return outputs

    async def _turn(
        self, seats: list[_Seat], sampling: dict[str, Any], where: str, episode: EpisodeEnv
    ) -> tuple[list[str], dict[str, str]]:
        """Every live seat's reply and the LLM partners', asked at once; the first failure (or a
        turn slower than ``turn_timeout``) cancels the others and ends the episode."""
        tasks: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(self._reply(s.traj, s.valid, s.request_id, sampling))
            for s in seats
        ]
        tasks.append(asyncio.ensure_future(episode.partner_replies()))
        try:
            done, pending = await asyncio.wait(
                tasks, timeout=self.settings.turn_timeout, return_when=asyncio.FIRST_EXCEPTION
            )
        finally:  # this turn cancelled, failed or slow: no reply outlives it
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        failed = [t for t in tasks if t in done and not t.cancelled() and t.exception()]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
        if pending:
            names = [s.agent for s in seats] + ["the partners"]
            late = ", ".join(n for n, t in zip(names, tasks, strict=True) if t in pending)
            raise EpisodeIncomplete(
                f"{where}: turn timed out after {self.settings.turn_timeout}s waiting for {late}"
            )
        return [t.result() for t in tasks[:-1]], tasks[-1].result()

    async def _play(
        self, row: EpisodeRow, sampling_params: dict[str, Any], kwargs: dict[str, Any]
    ) -> list[AgentLoopOutput]:
        # 1. the env, its scripted teammates, the first observations
        episode = EpisodeEnv(
            row.env_id, row.env_kwargs, row.seed, self.settings.sharing, row.teammates
        )
        try:
            first = episode.reset()
            if tuple(episode.trained) != row.agents:
                raise ValueError(
                    f"{row.episode}: the row trains {list(row.agents)}, the env leaves "
                    f"{list(episode.trained)} to the model: rebuild the dataset"
                )
            where = f"{row.episode} (session {kwargs.get('session_id', 0)})"

            # 2. one seat per trained agent: its prompt, its trajectory, its request id (the same
            # in every run, so a server that seeds sampling by request id samples the same)
            session = f"{row.episode}#s{kwargs.get('session_id', 0)}"
            logprobs = bool(sampling_params.get("logprobs"))
            seats, mismatch = [], 0.0
            for agent in row.agents:
                messages = row.prompts[agent]
                ids = self._prompt_ids(messages, f"{row.episode} / {agent}")
                traj = Trajectory(self, ids, self.response_length, logprobs)
                index = episode.env.possible_agents.index(agent)
                seats.append(
                    _Seat(agent, index, traj, messages, f"{session}/{agent}", first[agent][1])
                )
                mismatch = max(mismatch, float(first[agent][0] != messages[-1]["content"]))

            # 3. turns: every live agent's reply at once, one env step, the next observations
            while live := [s for s in seats if s.agent in episode.live]:
                replies, partners = await self._turn(live, sampling_params, where, episode)
                joint = {s.agent: r for s, r in zip(live, replies, strict=True)} | partners
                results = episode.step(joint)
                for seat, reply in zip(live, replies, strict=True):
                    result = results[seat.agent]
                    seat.replies.append(reply)
                    seat.total += result.reward
                    seat.valid = result.valid_actions
                    seat.traj.close_step(result.reward, seat.messages[-1]["content"])
                    if not result.done:
                        await self._observe(seat.traj, seat.messages, reply, result.observation)
            metrics = episode.metrics()
        finally:
            episode.close()

        # 4. one trajectory per trained agent, each with its own return; one field set for all
        shared = episode_extra(metrics) | {"prompt_mismatch": mismatch}
        shared |= {name: float(metrics[name]) for name in PARTNER_METRICS}
        shared |= {f"return/{s.agent}": float(s.total) for s in seats}
        outputs = []
        for seat in seats:
            extra = shared | {"budget_exhausted": float(not seat.traj.budget_left)}
            fields = {
                "teamgym_episode_key": row.episode,
                "teamgym_agent": seat.agent,
                SEAT_FIELD: seat.index,
                "teamgym_replies": seat.replies,
                "teamgym_session": session,
            }
            output = trajectory_output(seat.traj, seat.total, extra, fields, kwargs)
            if logprobs and output.response_logprobs is None:  # one field set for the session
                output.response_logprobs = [0.0] * len(output.response_ids)
            outputs.append(output)
        return outputs


# Register under our name unless a YAML entry (agent_loop_config_path) already did.
if EPISODE_LOOP_NAME not in _agent_loop_registry:
    register(EPISODE_LOOP_NAME)(TeamEpisodeLoop)
