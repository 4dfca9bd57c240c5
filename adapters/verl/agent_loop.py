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

import json
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)

from teamgym.adapters.verl.advantage import record_team
from teamgym.adapters.verl.hub import get_ray_hub, local_hub
from teamgym.adapters.verl.loop_base import (
    EpisodeIncomplete,
    TeamLoopBase,
    _Quorum,
    end_of_turn_ids,
    episode_extra,
    trajectory_output,
)
from teamgym.adapters.verl.trajectory import Trajectory
from teamgym.names import AGENT_LOOP_NAME

__all__ = ["AGENT_LOOP_NAME", "EpisodeIncomplete", "TeamAgentLoop", "end_of_turn_ids"]


_SLOTS: dict[tuple[str, str], list[int]] = {}
"""Copy numbers per (episode key, agent) in this process: [next number, loops in flight].
VERL starts a batch's loops in row order and each takes its number before its first ``await``,
so the numbers (hence the hub's pairings and the sampling streams) do not depend on which
loop's tokenisation finishes first. The count restarts once every copy has finished, so a
batch that lacked a row does not shift the next batch's numbers."""


class TeamAgentLoop(TeamLoopBase):
    """Agent loop for teamgym environments, one row per (episode, agent) (see the module
    docstring); settings, prompts, turns and outputs from :class:`TeamLoopBase`, plus the
    episode hub (``hub: local`` or ``ray``, its timeouts)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        s = self.settings
        self._remote = s.hub == "ray"
        if self._remote:
            self.hub = get_ray_hub(join_timeout=s.join_timeout, turn_timeout=s.turn_timeout)
        else:
            self.hub = local_hub(join_timeout=s.join_timeout, turn_timeout=s.turn_timeout)

    async def _ask(self, method: Any, **kwargs: Any) -> Any:
        """Call one of the hub's methods (``self.hub.join`` ...) by keyword, in-process or on
        its Ray actor."""
        return await (method.remote(**kwargs) if self._remote else method(**kwargs))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play one agent's part of one episode; returns its trajectory."""
        self.seed_step = int(kwargs.get("global_steps") or 0)  # verl's v1 rows carry it
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
                traj.close_step(result.reward, messages[-1]["content"])
                if result.done:
                    return result, total, replies
                await self._observe(traj, messages, reply, result.observation)
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
        extra = episode_extra(result.metrics)
        extra.update(
            budget_exhausted=float(not traj.budget_left),
            prompt_mismatch=float(joined.observation != first_observation),
        )
        fields = {"teamgym_episode": episode, "teamgym_agent": agent, "teamgym_replies": replies}
        return trajectory_output(
            traj, total, extra, fields | {"teamgym_instance": joined.instance}, kwargs
        )


# Register under our name unless a YAML entry (agent_loop_config_path, with our settings) already
# did: this module is often first imported while VERL instantiates that very entry.
if AGENT_LOOP_NAME not in _agent_loop_registry:
    register(AGENT_LOOP_NAME)(TeamAgentLoop)
