"""``hanabi-v0``: Hanabi for 2-5 players; hints are the only channel, the score is shared."""

from teamgym.envs.hanabi.env import HanabiEnv

__all__ = ["HanabiEnv"]
