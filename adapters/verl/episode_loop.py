"""``TeamEpisodeLoop``: one dataset row is one episode; the loop plays the whole team.

Registered in VERL as ``teamgym_episode`` (the rows' ``agent_name``; ``teamgym verl-data`` writes
one row per episode). It returns a ``list[AgentLoopOutput]``, one multi-turn trajectory per
trained agent, which teamgym's workers store one agent per uid. One coroutine
owns the env (:class:`~teamgym.adapters.verl.episode_env.EpisodeEnv`, with the scripted
teammates); each turn it sends every live agent's ``generate()`` at once (a sticky request id
per agent and session, ``{episode}#s{session}/{agent}``, for the engine's prefix cache and
reproducible sampling), steps the env with the replies, and
appends each agent's next observation. Model tokens get ``response_mask`` 1, observation
tokens 0; each output's ``reward_score`` is its agent's own return under reward sharing, and
every output carries the episode metrics (and every trained agent's return) in
``reward_extra_info``. Seats played by an LLM partner (a row's ``teammates`` naming
``openai:MODEL@URL`` or ``transformers:DIR``; :mod:`teamgym.adapters.verl.partners`) are asked in
the same turn, next to the model's requests; their replies go to the env and into no trajectory,
their count and latency into the metrics (``partner_replies``, ``partner_latency_s``), and a
partner that cannot answer ends the episode as a failed generate call does.

Identity: each output carries ``extra_fields["teamgym_seat"]``, the agent's place in the env's
``possible_agents``. teamgym's v1 worker (:class:`~teamgym.adapters.verl.workers.TeamAgentLoopWorkerTQ`)
stores agent ``k``'s trajectory of session ``s`` of row ``U`` under the uid ``U_k`` (key
``U_k_s_0``): verl's replay buffer groups keys by the text before the first ``_`` (the episode,
so DAPO filtering and refills act on whole episodes), verl's ``grpo`` and its validation group
by the uid (one agent's ``rollout.n`` trajectories), and ``team_grpo`` by the episode.

Playing a turn, building a trajectory and its output are :class:`TeamLoopBase`'s. An episode
that does not finish normally (a generate call that fails, a turn slower than ``turn_timeout``)
raises: verl's v1 worker writes nothing for that session and marks the row's group ``failure``;
a session left alone of its ``rollout.n`` copies raises too (a GRPO group of one has no
baseline).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)

from teamgym.adapters.verl.episode_env import EpisodeEnv
from teamgym.adapters.verl.loop_base import (
    EpisodeIncomplete,
    TeamLoopBase,
    _Quorum,
    episode_extra,
    trajectory_output,
)
from teamgym.adapters.verl.partners import PARTNER_METRICS
from teamgym.adapters.verl.trajectory import Trajectory
from teamgym.names import EPISODE_LOOP_NAME

__all__ = ["EPISODE_LOOP_NAME", "SEAT_FIELD", "EpisodeRow", "TeamEpisodeLoop"]

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
    """Agent loop playing a whole episode per row (see the module docstring). Takes the same
    keys of its YAML entry (:class:`~teamgym.adapters.verl.settings.AgentLoopSettings`)."""

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
        """Every live seat's reply and the LLM partners' replies, asked at once; the first
        failure (or a turn slower than ``turn_timeout``) cancels the others and ends the
        episode."""
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

            # 2. one seat per trained agent: its prompt, its trajectory, its request id (named
            # by the episode and the copy: the same in every run,
            # so a server that seeds sampling by request id samples the same)
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
                "teamgym_episode": row.episode,
                "teamgym_agent": seat.agent,
                SEAT_FIELD: seat.index,
                "teamgym_replies": seat.replies,
                "teamgym_instance": session,
            }
            output = trajectory_output(seat.traj, seat.total, extra, fields, kwargs)
            if logprobs and output.response_logprobs is None:  # one field set for the session
                output.response_logprobs = [0.0] * len(output.response_ids)
            outputs.append(output)
        return outputs


# Register under our name unless a YAML entry (agent_loop_config_path) already did.
if EPISODE_LOOP_NAME not in _agent_loop_registry:
    register(EPISODE_LOOP_NAME)(TeamEpisodeLoop)
