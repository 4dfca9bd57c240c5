"""``SharedReward``: apply a :class:`~teamgym.envs.sharing.RewardSharing` rule to any ParallelEnv."""

from __future__ import annotations

from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

from teamgym.envs.events import add_subtask_credit
from teamgym.envs.sharing import RewardSharing, SharingContext

__all__ = ["SharedReward"]


class SharedReward(BaseParallelWrapper):
    """Replaces each step's rewards by shared ones; the raw reward stays in
    ``infos[agent]["individual_reward"]``. Works on teamgym envs and on foreign ParallelEnvs
    (e.g. PettingZoo's MPE): ``proportional`` then splits equally (no subtask events), and
    ``difference`` needs ``env.unwrapped.counterfactual_rewards(agent)``.

    >>> from teamgym.envs import make
    >>> env = SharedReward(make("signal-v1"), RewardSharing(weight=1.0))
    >>> _ = env.reset(seed=0)
    """

    def __init__(self, env: ParallelEnv, sharing: RewardSharing | None = None) -> None:
        super().__init__(env)
        self.sharing = sharing or RewardSharing()
        self._counterfactual = getattr(env.unwrapped, "counterfactual_rewards", None)
        if self.sharing.mode == "difference" and self._counterfactual is None:
            raise ValueError(
                f"mode='difference' is not supported by {type(env.unwrapped).__name__}: it has no "
                "counterfactual_rewards(agent) method; use mode='mixed' or 'proportional'"
            )
        if self.sharing.mode == "difference" and hasattr(env.unwrapped, "keep_counterfactuals"):
            env.unwrapped.keep_counterfactuals = True
        self._credit: dict[str, float] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset the env and the contribution counts."""
        self._credit = {}
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> Any:
        """Step the env and share its rewards."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        infos = {a: dict(info) for a, info in infos.items()}
        individual = {}
        for agent, reward in rewards.items():
            info = infos.setdefault(agent, {})
            info.setdefault("individual_reward", float(reward))
            individual[agent] = float(info["individual_reward"])
        events: list[dict[str, Any]] = next(
            (i["events"] for i in infos.values() if "events" in i), []
        )
        for event in events:
            add_subtask_credit(self._credit, event)
        context = SharingContext(contributions=self._credit, counterfactual=self._counterfactual)
        shared = self.sharing(individual, context) if individual else {}
        return obs, shared, terminations, truncations, infos
