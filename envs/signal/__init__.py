"""``signal-v1`` (and ``signal-v0``, its 0.1.0 wording): referential game for emergent communication under sparse reward."""

from teamgym.envs.signal.env import SignalEnv

__all__ = ["SignalEnv"]
