"""``TeamAgentLoop``: one agent's multi-turn trajectory in a shared multi-agent episode.

Registered in VERL as ``teamgym_agent`` (and through ``agent_loop.yaml`` for
``actor_rollout_ref.rollout.agent.agent_loop_config_path``). A dataset row is one (episode
seed, agent); its loop joins the episode hub, and on every turn generates the agent's reply
(all agents of an episode are in flight at once), submits it, and appends the next observation.
Model tokens get ``response_mask`` 1, observation tokens 0. ``reward_score`` is the agent's
return under reward sharing; episode metrics go to ``extra_fields["reward_extra_info"]`` so
they reach VERL's logs.

Forced moves: with ``forced_moves: auto`` a turn whose only valid action is one command (a
listener's ``wait``) is played by the loop without calling the model; its tokens (ending with
the chat template's end-of-turn token, as a model's reply would) enter the trajectory with
``response_mask`` 0, so they cost no generation and carry no gradient. The default, ``model``,
asks the model on every turn.

Episodes that do not finish normally: when a teammate's loop crashed, a turn timed out
(``aborted``) or some agents never joined (``missing_agents``, after ``join_timeout``), every
loop of that episode raises :class:`EpisodeIncomplete` with the reason instead of returning a
trajectory of truncated returns. VERL's v1 worker then writes no trajectory for those sessions
and marks their groups ``failure``: they are left out of the update, and the GRPO statistics of
each group are taken over its complete sessions. A training row left with a single complete
copy (``rollout.n`` >= 2, every other copy aborted) raises too, once its siblings have settled:
a group of one has no baseline, and VERL's ``grpo`` would give it its raw score as advantage.
The legacy worker fails the step.

Response budget: VERL caps each trajectory at ``rollout.response_length`` tokens. When an
agent's budget runs out mid-episode its trajectory stops growing, and the agent keeps playing
with empty replies (the env's no-op with its small penalty) until the episode ends, so its
teammates never wait and its ``reward_score`` still counts the whole episode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)

from teamgym.adapters.agents.chat import forced_reply
from teamgym.adapters.verl.advantage import record_team
from teamgym.adapters.verl.hub import get_ray_hub, local_hub
from teamgym.adapters.verl.settings import AgentLoopSettings
from teamgym.adapters.verl.tokens import first_prompt_ids
from teamgym.adapters.verl.trajectory import Trajectory
from teamgym.names import AGENT_LOOP_NAME

__all__ = ["AGENT_LOOP_NAME", "EpisodeIncomplete", "TeamAgentLoop", "end_of_turn_ids"]


_SLOTS: dict[tuple[str, str], list[int]] = {}
"""Copy numbers per (episode key, agent) in this process: [next number, loops in flight].
VERL starts a batch's loops in row order and each takes its number before its first ``await``,
so the numbers (hence the hub's pairings and the sampling streams) do not depend on which
loop's tokenisation finishes first. The count restarts once every copy has finished, so a
batch that lacked a row does not shift the next batch's numbers."""
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
)


class EpisodeIncomplete(RuntimeError):
    """The episode ended abnormally (a teammate crashed, a turn timed out, agents missing):
    its trajectories must not be trained on."""


class _Quorum:
    """The copies of one row in this process (one ``uid``: v1 starts its ``rollout.n`` sessions
    together in one worker; the legacy trainer's repeated rows may be split across workers, and
    fails the step on any error anyway), settling together: a copy that completed while every
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
"""Owned by ``TeamAgentLoop.__init__``: :func:`end_of_turn_ids` per tokenizer object (kept
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


class TeamAgentLoop(AgentLoopBase):
    """Agent loop for teamgym environments (see the module docstring).

    Keyword arguments are VERL's plus the keys of the agent-loop YAML entry (not the whole
    config tree), read once into :attr:`settings`
    (:class:`~teamgym.adapters.verl.settings.AgentLoopSettings`: reward sharing, reply cap, hub,
    timeouts, forced moves, stop strings), which the loop passes on whole.
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
        s = self.settings
        self._remote = s.hub == "ray"
        if self._remote:
            self.hub = get_ray_hub(join_timeout=s.join_timeout, turn_timeout=s.turn_timeout)
        else:
            self.hub = local_hub(join_timeout=s.join_timeout, turn_timeout=s.turn_timeout)

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

    async def _ask(self, method: Any, **kwargs: Any) -> Any:
        """Call one of the hub's methods (``self.hub.join`` ...) by keyword, in-process or on
        its Ray actor."""
        return await (method.remote(**kwargs) if self._remote else method(**kwargs))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play one agent's part of one episode; returns its trajectory."""
        info = kwargs["extra_info"]
        key = (str(info["episode"]), str(info["agent"]))
        entry = _SLOTS.setdefault(key, [0, 0])  # no await before this: row order
        slot = entry[0] if kwargs.get("session_id") is None else int(kwargs["session_id"])
        entry[0] += 1
        entry[1] += 1
        group = _Quorum.join(str(kwargs.get("uid", key)), info.get("split") != "val")
        try:
            output = await self._play(sampling_params, slot, **kwargs)
        except BaseException:
            await group.settle(False)
            raise
        else:
            await group.settle(True)  # raises EpisodeIncomplete for a lone survivor
            return output
        finally:
            entry[1] -= 1
            if entry[1] == 0 and _SLOTS.get(key) is entry:
                del _SLOTS[key]

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
        """This turn's reply: a forced move, the model's while the budget lasts, else ""."""
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
        stops = {"stop": stop, "include_stop_str_in_output": True} if stop else {}
        output = await self.server_manager.generate(
            request_id=request_id,
            prompt_ids=traj.token_ids,
            sampling_params={**sampling, "max_tokens": max_tokens, **stops},
        )
        await traj.add_model_reply(output, self._stop_tail(output.token_ids))
        return self.tokenizer.decode(output.token_ids, skip_special_tokens=True)

    async def _turns(
        self,
        traj: Trajectory,
        joined: Any,
        agent: str,
        messages: list[dict],
        sampling_params: dict[str, Any],
    ) -> tuple[Any, float, list[str]]:
        """Play the agent's turns to the end of the episode: its last ``StepResult``, its
        shared return and its replies. Any error ends the episode for the teammates too."""
        request_id = f"{joined.instance}/{agent}"  # sticky per trajectory, reproducible
        total, replies, result, valid = 0.0, [], None, joined.valid_actions
        try:
            while True:
                reply = await self._reply(traj, valid, request_id, sampling_params)
                replies.append(reply)
                result = await self._ask(
                    self.hub.submit, instance=joined.instance, agent=agent, reply=reply
                )
                valid, total = result.valid_actions, total + result.reward
                if result.done:
                    return result, total, replies
                if traj.budget_left:
                    messages.append({"role": "assistant", "content": reply})
                    previous = list(messages)
                    messages.append({"role": "user", "content": result.observation})
                    await traj.add_observation(previous, messages)
        except BaseException as exc:  # a crash or a cancel
            reason = f"{type(exc).__name__}: {exc}"
            await self._ask(self.hub.leave, instance=joined.instance, agent=agent, reason=reason)
            raise

    async def _play(
        self, sampling_params: dict[str, Any], slot: int, **kwargs: Any
    ) -> AgentLoopOutput:
        # 1. the row: who we are, in which episode
        info = dict(kwargs["extra_info"])
        agent, episode = str(info["agent"]), str(info["episode"])
        env_kwargs = info["env_kwargs"]
        env_kwargs = json.loads(env_kwargs) if isinstance(env_kwargs, str) else dict(env_kwargs)
        if "uid" in kwargs:
            await record_team(str(kwargs["uid"]), episode)
        messages = [dict(m) for m in kwargs["raw_prompt"]]
        first_observation = messages[-1]["content"]  # the hub's reset must show the same

        # 2. the prompt
        prompt_ids = self._prompt_ids(messages, f"{episode} / {agent}")
        traj = Trajectory(
            self, prompt_ids, self.response_length, bool(sampling_params.get("logprobs"))
        )

        # 3. meet the teammates (agents in `teammates` are played by the hub's baselines)
        teammates = json.loads(info.get("teammates") or "{}")
        joined = await self._ask(
            self.hub.join,
            key=episode,
            agent=agent,
            env_id=str(info["env_id"]),
            env_kwargs=env_kwargs,
            seed=int(info["seed"]),
            sharing=self.settings.sharing,
            teammates=teammates,
            slot=slot,
        )

        # 4. turns: reply, step the env with the teammates, read the next observation
        result, total, replies = await self._turns(traj, joined, agent, messages, sampling_params)

        # 5. an episode that did not finish normally is never trained on
        incomplete = result.aborted or (
            f"agents {', '.join(joined.missing_agents)} never joined (join_timeout)"
            if joined.missing_agents
            else None
        )
        if incomplete:
            raise EpisodeIncomplete(f"{joined.instance}: {incomplete}")

        # 6. the trajectory, as VERL expects it
        extra = {name: _number((result.metrics or {}).get(name)) for name in LOGGED_METRICS}
        extra.update(
            budget_exhausted=float(not traj.budget_left),
            prompt_mismatch=float(joined.observation != first_observation),
        )
        fields = {"teamgym_episode": episode, "teamgym_agent": agent, "teamgym_replies": replies}
        return _output(traj, total, extra, fields | {"teamgym_instance": joined.instance}, kwargs)


def _output(
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
            # v1 checks staleness with these (and fails without them): the oldest and newest
            # weights that generated a turn; the current step's when none did
            "min_global_steps": low,
            "max_global_steps": high,
        },
    )


# Register under our name unless a YAML entry (agent_loop_config_path, with our settings) already
# did: this module is often first imported while VERL instantiates that very entry.
if AGENT_LOOP_NAME not in _agent_loop_registry:
    register(AGENT_LOOP_NAME)(TeamAgentLoop)


def _number(value: Any) -> float:
    """Metrics as floats for VERL's logs (None -> NaN, bools -> 0/1)."""
    return float("nan") if value is None else float(value)
