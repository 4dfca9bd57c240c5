"""A Gymnasium view of any teamgym env: one learning agent, teammates played by a policy.

Classic single-agent RL libraries (Stable-Baselines3, CleanRL, RLlib's single-agent path) speak
``gymnasium.Env``. :class:`TeamGymEnv` turns a teamgym ``ParallelEnv`` into one: the learner's
action goes to the env, every teammate's comes from a baseline (``"expert"``, ``"random"``) or a
callable, and the learner's reward is its (optionally shared) reward. With ``joint=True`` the
learner controls the whole team through one ``Dict`` action instead.

In ``obs_mode="vector"`` the observation is the float ``Box`` and the legal-action mask sits in
``info["action_mask"]`` (how masked Gymnasium envs expose it, e.g. for MaskablePPO); in text mode
observations and actions are strings. Every teamgym id is in Gymnasium's own registry as
``teamgym/<id>`` once ``teamgym.envs`` is imported (:func:`teamgym.envs.register` mirrors it);
:func:`register_envs` adds the ids of installed plugins too (read lazily) or another namespace.

>>> import gymnasium
>>> import teamgym.envs
>>> env = gymnasium.make("teamgym/foraging-v0", obs_mode="vector", teammates="expert")
>>> obs, info = env.reset(seed=0)
>>> obs.shape == env.observation_space.shape, info["action_mask"].dtype.name
(True, 'int8')

For many agents at once (parameter sharing), SuperSuit's ``pettingzoo_env_to_vec_env_v1`` and
``concat_vec_envs_v1`` work on the vector-mode ``ParallelEnv`` directly (see the README).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
from gymnasium import spaces

from teamgym.envs import make, registry
from teamgym.envs.baselines import Policy
from teamgym.envs.lineup import Lineup
from teamgym.envs.registration import GYMNASIUM_ENTRY_POINT, GYMNASIUM_NAMESPACE, register_gymnasium
from teamgym.envs.sharing import RewardSharing
from teamgym.envs.text_env import TextParallelEnv
from teamgym.envs.views import VIEWS
from teamgym.envs.wrappers import SharedReward

__all__ = ["ENTRY_POINT", "NAMESPACE", "TeamGymEnv", "TeammatePolicy", "register_envs"]

#: Gymnasium namespace of the teamgym ids (``teamgym/foraging-v0``).
NAMESPACE = GYMNASIUM_NAMESPACE
#: Lazy entry point Gymnasium stores for every id (a string: registering imports nothing).
ENTRY_POINT = GYMNASIUM_ENTRY_POINT

#: A teammate: a baseline name, or ``(agent, observation, info) -> action`` in the env's own
#: obs mode (an index in vector mode, a reply string in text mode).
TeammatePolicy = str | Callable[[str, Any, Mapping[str, Any]], Any]


def register_envs(namespace: str = NAMESPACE) -> list[str]:
    """Register every teamgym env id, installed plugins' included, with Gymnasium as
    ``<namespace>/<id>`` (a namespaced id keeps its own); returns the Gymnasium ids (ids that
    Gymnasium cannot spell, with a ``.`` in their namespace, are left out).

    Cheap and safe to repeat: it stores the entry-point string and skips ids already there.
    """
    gym_ids = (register_gymnasium(env_id, namespace) for env_id in registry())
    return [gym_id for gym_id in gym_ids if gym_id is not None]


def _is_masked(space: spaces.Space) -> bool:
    """Whether ``space`` is vector mode's ``{"observation", "action_mask"}`` Dict."""
    return isinstance(space, spaces.Dict) and set(space.spaces) == {"observation", "action_mask"}


class _BaselineTeammate:
    """A text baseline playing in either obs mode: in vector mode it reads the text view of the
    same state and its reply becomes the closest action index (an unusable reply stays unusable).
    Its :class:`~teamgym.envs.lineup.Lineup` binds and seeds it."""

    def __init__(self, policy: Policy, env: Any) -> None:
        self.policy = policy
        self.par_env = env

    def __call__(self, agent: str, observation: Any, info: Mapping[str, Any]) -> Any:
        raw = self.par_env.unwrapped
        if not (isinstance(raw, TextParallelEnv) and raw.obs_mode == "vector"):
            return self.policy.act(agent, observation, info)
        valid = list(info.get("valid_actions", []))
        reply = self.policy.act(agent, VIEWS["text"].observe(raw, agent, valid), info)
        action, message, error = VIEWS["text"].decode(raw, agent, reply, valid)
        space = raw.action_space(agent)
        assert isinstance(space, spaces.Discrete), "vector mode's action space is Discrete"
        n = int(space.n)
        if error is not None:
            return n  # out of range: the env penalises it like an unusable text reply
        words = set((message or "").split())
        best, best_score = n, -1
        for i in range(n):
            slot_action, slot_message = raw.vector_action(agent, i)
            if slot_action != action:
                continue
            score = len(words & set((slot_message or "").split())) - (slot_message != message)
            if score > best_score:
                best, best_score = i, score
        return best


class TeamGymEnv(gymnasium.Env):
    """One teamgym env as a ``gymnasium.Env``: the learner acts, teammates follow ``teammates``.

    Args:
        env_id: a registered teamgym id (``teamgym.envs.registry()``).
        agent: the learning agent; the first of ``possible_agents`` when None.
        teammates: a baseline name (``"random"``, ``"expert"``, ...) or a callable
            ``(agent, obs, info) -> action`` in the env's obs mode; ignored when ``joint``.
        joint: control every agent through one ``Dict`` action; the reward is the team's sum.
        sharing: reward sharing applied with :class:`~teamgym.envs.wrappers.SharedReward`.
        render_mode: passed to the env (``"ansi"``).
        **env_kwargs: the env's own options, e.g. ``obs_mode="vector"``, ``num_agents=3``.

    >>> env = TeamGymEnv("signal-v1", obs_mode="vector", teammates="expert")
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(int(info["action_mask"].argmax()))
    """

    #: What some teamgym env can render; each instance lists its own env's modes.
    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(
        self,
        env_id: str,
        *,
        agent: str | None = None,
        teammates: TeammatePolicy = "random",
        joint: bool = False,
        sharing: RewardSharing | None = None,
        render_mode: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        if render_mode is not None:
            env_kwargs["render_mode"] = render_mode
        env = make(env_id, **env_kwargs)
        self.par_env = SharedReward(env, sharing) if sharing is not None else env
        self.env_id = env_id
        self.joint = joint
        self.render_mode = render_mode
        self.metadata = {
            "render_modes": list(env.metadata.get("render_modes", [])),
            "render_fps": env.metadata.get("render_fps", 4),
        }
        agents = list(self.par_env.possible_agents)
        self.agent = agents[0] if agent is None else agent
        if self.agent not in agents:
            raise ValueError(f"agent {self.agent!r} is not in {env_id}: {', '.join(agents)}")
        self.teammates = [] if joint else [a for a in agents if a != self.agent]
        self._masked = _is_masked(self.par_env.observation_space(self.agent))
        self._policies, self._lineup = self._seat(teammates)
        controlled = agents if joint else [self.agent]
        obs_spaces = {a: self._inner(self.par_env.observation_space(a)) for a in controlled}
        act_spaces = {a: self.par_env.action_space(a) for a in controlled}
        if joint:
            self.observation_space = spaces.Dict(obs_spaces)
            self.action_space = spaces.Dict(act_spaces)
        else:
            self.observation_space = obs_spaces[self.agent]
            self.action_space = act_spaces[self.agent]
        self._obs: dict[str, Any] = {}
        self._infos: dict[str, dict[str, Any]] = {}
        self._done = True

    def _seat(self, teammates: TeammatePolicy) -> tuple[dict[str, Callable[..., Any]], Lineup]:
        """Each teammate's policy, and the lineup of the baseline ones: a baseline name becomes
        one instance per teammate, bound to the env and reseeded by :meth:`reset`."""
        if callable(teammates):
            return dict.fromkeys(self.teammates, teammates), Lineup({})
        if self.teammates and not isinstance(teammates, str):
            raise TypeError(f"teammates must be a baseline name or a callable, got {teammates!r}")
        lineup = Lineup.build(self.env_id, dict.fromkeys(self.teammates, teammates))
        lineup.bind(self.par_env)
        policies: dict[str, Callable[..., Any]] = {
            a: _BaselineTeammate(p, self.par_env) for a, p in lineup.policies.items()
        }
        return policies, lineup

    def _inner(self, space: spaces.Space) -> spaces.Space:
        """The observation part of vector mode's Dict (the mask goes to ``info``)."""
        if not self._masked:
            return space
        assert isinstance(space, spaces.Dict), "a masked observation space is a Dict"
        return space["observation"]

    def _split(self, agent: str) -> tuple[Any, Any]:
        """(observation, mask or None) of ``agent``'s latest observation."""
        obs = self._obs[agent]
        return (obs["observation"], obs["action_mask"]) if self._masked else (obs, None)

    def _output(self) -> tuple[Any, dict[str, Any]]:
        """The Gymnasium observation and info of the controlled agent(s)."""
        if self.joint:
            pairs = {a: self._split(a) for a in self.par_env.possible_agents}
            info: dict[str, Any] = {"agents": dict(self._infos)}
            if self._masked:
                info["action_mask"] = {a: mask for a, (_, mask) in pairs.items()}
            return {a: obs for a, (obs, _) in pairs.items()}, info
        obs, mask = self._split(self.agent)
        info = dict(self._infos[self.agent])
        if mask is not None:
            info["action_mask"] = mask
        return obs, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode; ``seed`` fixes the env and every teammate (same seed, same run):
        each baseline teammate resets with a draw from ``np_random``, in teammate order."""
        super().reset(seed=seed)
        obs, infos = self.par_env.reset(seed=seed, options=options)
        self._lineup.reset(self.np_random)
        self._obs, self._infos, self._done = dict(obs), dict(infos), False
        return self._output()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Play the learner's (or, jointly, the team's) action with the teammates' actions."""
        if self._done:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        live = list(self.par_env.agents)
        if self.joint:
            actions = {a: action[a] for a in live}
        else:
            actions = {
                a: self._policies[a](a, self._obs[a], self._infos[a])
                for a in live
                if a != self.agent
            }
            actions[self.agent] = action
        obs, rewards, terminations, truncations, infos = self.par_env.step(actions)
        self._obs.update(obs)
        self._infos.update(infos)
        if self.joint:
            reward = float(sum(rewards.values()))
            over = not self.par_env.agents
            terminated = over and any(terminations.values())
            truncated = over and not terminated
        else:
            reward = float(rewards.get(self.agent, 0.0))
            terminated = bool(terminations.get(self.agent, False))
            truncated = bool(truncations.get(self.agent, False))
        self._done = terminated or truncated
        observation, info = self._output()
        return observation, reward, terminated, truncated, info

    def render(self) -> Any:
        """The env's global view (``render_mode="ansi"``: text)."""
        return self.par_env.render()

    def close(self) -> None:
        """Close the env."""
        self.par_env.close()


register_envs()
