"""TorchRL: teamgym envs through TorchRL's own ``PettingZooWrapper``, grouped agents.

TorchRL stacks every ``infos`` entry into a tensor, with the keys it saw at reset; teamgym's
infos also carry text (instructions, feedback, valid actions, events). :class:`TensorInfos`
keeps only named numeric entries, so a vector-mode env wraps as it is::

    from torchrl.envs import PettingZooWrapper
    from torchrl.envs.utils import check_env_specs

    env = PettingZooWrapper(
        TensorInfos(make("foraging-v0", obs_mode="vector")), return_state=True, use_mask=True
    )
    check_env_specs(env)

Agents ``robot_0..N`` form one group ``"robot"``: observations at
``("robot", "observation", "observation")``, the legal-action mask at ``("robot", "action_mask")``
(TorchRL lifts it out of the observation and masks its action spec with it), the global
``state()`` at ``"state"``. Needs the ``torchrl`` extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

__all__ = ["TensorInfos"]


class TensorInfos(BaseParallelWrapper):
    """Keep only the ``keys`` of each agent's ``infos``, as floats (0.0 when an env leaves one
    out), so the info dict has the same numeric entries at every reset and step.

    Args:
        env: a teamgym (or any PettingZoo) ``ParallelEnv``.
        keys: the info entries to keep; the reward before any sharing by default.
    """

    def __init__(self, env: ParallelEnv, keys: Sequence[str] = ("individual_reward",)) -> None:
        super().__init__(env)
        self.keys = tuple(keys)

    def _numeric(self, infos: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
        """Each agent's info reduced to ``keys``."""
        return {a: {k: float(info.get(k, 0.0)) for k in self.keys} for a, info in infos.items()}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
        """Reset the env; infos reduced to ``keys``."""
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, self._numeric(infos)

    def step(self, actions: dict[str, Any]) -> tuple[Any, ...]:
        """Step the env; infos reduced to ``keys``."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return obs, rewards, terminations, truncations, self._numeric(infos)
