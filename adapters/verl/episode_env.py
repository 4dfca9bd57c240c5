"""One episode's env as the episode loop (:mod:`teamgym.adapters.verl.episode_loop`) plays it,
one per copy of an episode: reward sharing, the seats nobody trains, the episode metrics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamgym.adapters.verl.llm_partners import PARTNER_METRICS, LLMPartners, split_teammates
from teamgym.envs.lineup import Lineup, check_teammates
from teamgym.envs.metrics import EpisodeTracker, IdleCount
from teamgym.envs.registration import make
from teamgym.envs.sharing import RewardSharing
from teamgym.envs.wrappers import SharedReward

__all__ = ["EpisodeEnv", "StepResult"]


@dataclass(frozen=True)
class StepResult:
    """What one agent gets after the env stepped (or the episode ended)."""

    observation: str
    """The agent's next observation ("" when done)."""
    reward: float
    """The agent's shared reward for this step."""
    done: bool
    """Whether the agent's part of the episode is over."""
    valid_actions: tuple[str, ...] = ()
    """The agent's valid actions on its next turn."""


class EpisodeEnv:
    """One episode: env, reward sharing, the seats nobody trains, metrics.

    Args:
        seed: the episode seed (reset, and the teammates' seeds by ``Lineup``'s training rule).
        teammates: the seats not trained: a baseline or ``checkpoint:DIR`` (played here) or an
            LLM partner (``openai:MODEL@URL``, ``transformers:DIR``: :meth:`partner_replies`).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any],
        seed: int,
        sharing: RewardSharing | None = None,
        teammates: Mapping[str, str] | None = None,
    ) -> None:
        self.env = SharedReward(make(env_id, **env_kwargs), sharing or RewardSharing())
        names = dict(sorted((teammates or {}).items()))
        self.seed = int(seed)
        self.partners: LLMPartners | None = None
        """The LLM partners' seats (None without any): the caller asks them each turn."""
        try:
            check_teammates(names, self.env.possible_agents)
            scripted, llm = split_teammates(names)
            lineup = Lineup.build(env_id, scripted, seed=seed, first_stream=None)
            self.teammates = lineup.start(self.env, seed).policies
            if llm:
                self.partners = LLMPartners(env_id, llm, self.env.unwrapped, seed)
        except BaseException:
            self.env.close()
            raise

        self.trained: tuple[str, ...] = tuple(a for a in self.env.possible_agents if a not in names)
        """The agents the model plays, in the env's order."""
        self.tracker: EpisodeTracker | None = None
        self.idle = IdleCount()
        self.last_obs: dict[str, Any] = {}
        self.last_info: dict[str, Any] = {}

    def reset(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Reset with the seed: each agent's first observation and valid actions."""
        obs, infos = self.env.reset(seed=self.seed)
        self.tracker = EpisodeTracker(self.env.possible_agents)
        self.idle = IdleCount()
        self.last_obs, self.last_info = dict(obs), dict(infos)
        return {a: (obs[a], tuple(infos[a].get("valid_actions", ()))) for a in obs}

    @property
    def live(self) -> tuple[str, ...]:
        """The trained agents still acting."""
        return tuple(a for a in self.env.agents if a in self.trained)

    async def partner_replies(self) -> dict[str, str]:
        """The LLM partners' replies this turn (none without partners); raises
        :class:`~teamgym.adapters.verl.llm_partners.PartnerFailed` when one cannot answer."""
        if self.partners is None:
            return {}
        return await self.partners.replies(list(self.env.agents), self.last_obs, self.last_info)

    def step(self, replies: Mapping[str, str]) -> dict[str, StepResult]:
        """Step with ``replies`` of the trained agents (a live agent without one: the env's
        no-op) and of the LLM partners (:meth:`partner_replies`), and the scripted teammates'
        moves; a :class:`StepResult` per agent that acted."""
        joint = {a: replies.get(a, "") for a in self.env.agents}
        for agent, policy in self.teammates.items():
            if agent in joint:
                joint[agent] = policy.act(agent, self.last_obs[agent], self.last_info[agent])
        obs, rewards, terms, truncs, infos = self.env.step(joint)
        self.last_obs.update(obs)
        self.last_info.update(infos)
        assert self.tracker is not None, "step() before reset()"
        self.tracker.step(rewards, infos)
        self.idle.step(self.env.unwrapped, [a for a in joint if a in self.trained])
        out = {}
        for agent in joint:
            done = bool(terms.get(agent, True) or truncs.get(agent, True))
            out[agent] = StepResult(
                "" if done else obs.get(agent, ""),
                float(rewards.get(agent, 0.0)),
                done,
                () if done else tuple(infos.get(agent, {}).get("valid_actions", ())),
            )
        return out

    def metrics(self, aborted: str | None = None) -> dict[str, Any]:
        """The episode metrics so far (JSON-ready; ``aborted``: why it was cut short, if it was)."""
        tracker = self.tracker or EpisodeTracker(self.env.possible_agents)
        out = tracker.metrics().to_dict()
        out["idle"] = self.idle.all_idle(self.trained)
        out["aborted"] = aborted
        partner_figures = self.partners.metrics() if self.partners is not None else {}
        out |= {name: partner_figures.get(name, 0.0) for name in PARTNER_METRICS}
        return json.loads(json.dumps(out))

    def close(self) -> None:
        self.env.close()
