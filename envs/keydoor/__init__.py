"""``keydoor-v0``: two rooms, a plate that holds the door open; roles must split."""

from teamgym.envs.keydoor.env import KeyDoorEnv

__all__ = ["KeyDoorEnv"]
