"""Who plays which agent: the scripted policies of an episode, built, bound and seeded one way.

A :class:`Lineup` maps agents to policies: scripted baselines (``random``, ``expert``, ...) and
frozen models (``checkpoint:DIR``), named by their spec. Every place that lets a script play
some agents (``teamgym baselines``, ``bench run``'s baselines and teammates, ``play``, the VERL
episode loop, the warm-up teachers, the tokenizer corpus, the Gymnasium view) goes through it, so
"who plays which agent, with which seed" has one owner:

* :func:`resolve_spec` makes a ``checkpoint:`` path absolute (or places it where a caller
  compares paths), once, for every layer;
* :func:`check_teammates` is the one check that teammates are some, not all, of the agents;
* :meth:`Lineup.build` builds each policy with :func:`~teamgym.envs.baselines.make_baseline`;
  :meth:`Lineup.bind` lets privileged ones read the env; :meth:`Lineup.reset` seeds stream ``i``
  (the ``i``-th distinct policy, in seat order) with
  :func:`teamgym.envs.seeds.policy_seed` ``(episode, first_stream + i)``.

>>> from teamgym.envs import make
>>> env = make("signal-v1")
>>> lineup = Lineup.build("signal-v1", {"robot_1": "expert"}, first_stream=1)
>>> obs, infos = env.reset(seed=3)
>>> _ = lineup.start(env, 3)  # the expert resets with 3 * 1000 + 1
>>> reply = lineup.act("robot_1", obs["robot_1"], infos["robot_1"])
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from teamgym.envs.baselines import Policy, make_baseline
from teamgym.envs.metrics import EpisodeMetrics, EpisodeTracker
from teamgym.envs.seeds import policy_seed
from teamgym.names import CHECKPOINT_PREFIX

__all__ = ["Lineup", "check_teammates", "resolve_spec", "run_episode"]


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def resolve_spec(spec: str, place: Callable[[str], str] = _absolute) -> str:
    """``spec`` with the path of a ``checkpoint:PATH`` passed through ``place``: by default made
    absolute (``~`` expanded), so the same spec names the same model from any working directory
    or node; other specs unchanged. ``place`` lets a caller put paths where it compares them
    (the CPU trainer's resume check: relative to the run's parent)."""
    if not spec.startswith(CHECKPOINT_PREFIX):
        return spec
    return CHECKPOINT_PREFIX + place(spec.removeprefix(CHECKPOINT_PREFIX))


def check_teammates(
    teammates: Collection[str], agents: Sequence[str], keep: Collection[str] = ()
) -> None:
    """Refuse (``ValueError``) teammates that are not some, not all, of ``agents``: each must be
    an agent of the env, at least one agent must be left to the model, and the agents in
    ``keep`` (one the model is known to play) must be among those left."""
    unknown = set(teammates) - set(agents)
    taken = sorted(set(teammates) & set(keep))
    if unknown or set(teammates) >= set(agents) or taken:
        played = f" ({', '.join(taken)} is played by the model)" if taken else ""
        raise ValueError(
            f"teammates must be some, not all, of {sorted(agents)}; got {sorted(teammates)}"
            + played
        )


class Lineup:
    """The scripted policies of an episode: ``{agent: policy}``, where one policy may play
    several agents. Its distinct policies, in seat order, are its streams ``first_stream``,
    ``first_stream + 1``, ...; :meth:`reset` seeds stream ``i`` with
    :func:`~teamgym.envs.seeds.policy_seed` ``(episode, i)`` (``first_stream=None``: every policy
    with the episode seed itself, the training rule).

    A lineup answers like a :class:`~teamgym.envs.baselines.Policy` for the agents it seats.
    """

    def __init__(self, policies: Mapping[str, Policy], first_stream: int | None = 0) -> None:
        self.policies: dict[str, Policy] = dict(policies)
        """The policy of each seated agent."""
        self.distinct: tuple[Policy, ...] = tuple(dict.fromkeys(self.policies.values()))
        """The distinct policies, in the order of their first seat."""
        self.first_stream = first_stream
        """The stream number of the first policy (None: the training seed rule)."""

    @classmethod
    def build(
        cls,
        env_id: str,
        seats: Mapping[str, str],
        *,
        seed: int | None = None,
        share: bool = False,
        first_stream: int | None = 0,
        **options: Any,
    ) -> Lineup:
        """Build the policy of every seat ``{agent: spec}`` (specs resolved by
        :func:`resolve_spec`) with ``make_baseline(env_id, spec, seed, **options)``;
        ``options`` reach the prefixed families only (a checkpoint's ``max_reply_tokens``).
        ``share``: agents with the same spec share one policy (one stream), else each agent has
        its own."""
        built: dict[str, Policy] = {}
        policies: dict[str, Policy] = {}
        for agent, spec in seats.items():
            resolved = resolve_spec(spec)
            key = resolved if share else agent
            if key not in built:
                built[key] = make_baseline(env_id, resolved, seed, **options)
            policies[agent] = built[key]
        return cls(policies, first_stream)

    def bind(self, env: Any) -> Lineup:
        """Let each privileged policy (one with ``bind``) read the true state of ``env``."""
        for policy in self.distinct:
            bind = getattr(policy, "bind", None)
            if bind is not None:
                bind(env)
        return self

    def reset(self, seed: int | np.random.Generator | None = None) -> None:
        """Start episode ``seed``: stream ``i`` resets with ``policy_seed(seed, i)`` (a generator:
        one draw per stream, in stream order; None: unseeded)."""
        for i, policy in enumerate(self.distinct):
            stream = None if self.first_stream is None else self.first_stream + i
            policy.reset(None if seed is None else policy_seed(seed, stream))

    def start(self, env: Any, seed: int | np.random.Generator) -> Lineup:
        """:meth:`bind` to ``env`` and :meth:`reset` for episode ``seed``."""
        self.bind(env)
        self.reset(seed)
        return self

    def act(self, agent: str, observation: Any, info: Mapping[str, Any]) -> str:
        """The reply of ``agent``'s policy."""
        return self.policies[agent].act(agent, observation, info)

    def __contains__(self, agent: object) -> bool:
        return agent in self.policies


def run_episode(
    env: Any,
    policies: Policy | Mapping[str, Policy],
    seed: int,
    on_step: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> EpisodeMetrics:
    """Play one episode of a text env with ``policies`` (one for all agents, or per agent):
    each distinct policy is bound and reset by :class:`Lineup` (streams from 0);
    ``on_step(actions, infos)`` sees each step's replies and the env's infos."""
    obs, infos = env.reset(seed=seed)
    per_agent = (
        policies if isinstance(policies, Mapping) else dict.fromkeys(env.possible_agents, policies)
    )
    lineup = Lineup(per_agent).start(env, seed)
    tracker = EpisodeTracker(env.possible_agents)
    last_info = dict(infos)
    while env.agents:
        actions = {a: lineup.act(a, obs[a], last_info[a]) for a in env.agents}
        obs, rewards, _, _, infos = env.step(actions)
        if on_step is not None:
            on_step(actions, infos)
        last_info.update(infos)
        tracker.step(rewards, infos)
    return tracker.metrics()
