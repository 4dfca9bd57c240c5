"""``signal-v0``: referential game for emergent communication under sparse reward."""

from teamgym.envs.signal.env import SignalEnv

__all__ = ["SignalEnv"]
