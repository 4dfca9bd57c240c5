"""Wrappers that each override one thing: reward sharing, recording."""

from teamgym.envs.wrappers.recorder import Recorder
from teamgym.envs.wrappers.reward_sharing import SharedReward

__all__ = ["Recorder", "SharedReward"]
