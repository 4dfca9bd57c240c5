"""Scripted expert for ``keydoor-v0`` (privileged: it reads the layout through ``bind``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamgym.envs.baselines import PrivilegedPolicy

__all__ = ["KeyDoorExpert"]


def _toward(here: tuple[int, int], goal: tuple[int, int], valid: list[str]) -> str:
    """A valid move that brings ``here`` closer to ``goal`` (east/west first), else ``wait``."""
    dx, dy = goal[0] - here[0], goal[1] - here[1]
    wanted = [
        "east" if dx > 0 else "west" if dx < 0 else None,
        "south" if dy > 0 else "north" if dy < 0 else None,
    ]
    return next((m for m in wanted if m in valid), "wait")


class KeyDoorExpert(PrivilegedPolicy):
    """``robot_0`` walks to the plate and holds it; with a key, ``robot_1`` fetches it and
    crosses first (unlocking the door); every other agent waits by the door, crosses while it
    is open, and takes the treasure."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The expert's reply for ``agent`` now."""
        env, valid = self.env, list(info.get("valid_actions", ["wait"]))
        lay, here = env.layout, env.pos[agent]
        if here == lay.treasure and "take" in valid:
            return "<action>take</action>"
        if agent == env.possible_agents[0]:  # the holder
            return f"<action>{_toward(here, lay.plate, valid)}</action>"
        keeper = env.possible_agents[1]
        if env.with_key and env.carrier is None and agent == keeper:
            if here == lay.key:
                return "<action>take</action>"
            return f"<action>{_toward(here, lay.key, valid)}</action>"
        if lay.room(here) == "west":
            approach = (lay.wall - 1, lay.door_y)
            if here == approach:
                move = "east" if "east" in valid else "wait"  # through while the door is open
                return f"<action>{move}</action>"
            return f"<action>{_toward(here, approach, valid)}</action>"
        if lay.room(here) == "doorway":
            return "<action>east</action>"
        return f"<action>{_toward(here, lay.treasure, valid)}</action>"
