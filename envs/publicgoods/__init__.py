"""``publicgoods-v0``: repeated public-goods game, where reward sharing decides free-riding."""

from teamgym.envs.publicgoods.env import PublicGoodsEnv

__all__ = ["PublicGoodsEnv"]
