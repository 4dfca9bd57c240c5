"""``foraging-v1`` (and ``foraging-v0``): level-based foraging, the classic cooperative
sparse-reward benchmark."""

from teamgym.envs.foraging.env import ForagingEnv

__all__ = ["ForagingEnv"]
