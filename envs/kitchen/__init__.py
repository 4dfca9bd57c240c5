"""``kitchen-v0``: Overcooked-AI's kitchen (its classic layouts), two chefs, in words."""

from teamgym.envs.kitchen.env import KitchenEnv

__all__ = ["KitchenEnv"]
