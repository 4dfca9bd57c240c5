"""Scripted baselines for ``publicgoods-v0``; they read only the text an LLM would read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["Contributor", "FreeRider"]

_COINS = re.compile(r"^contribute (\d+)$")


def _most(valid: list[str]) -> int:
    """The largest contribution on offer."""
    return max(int(m.group(1)) for a in valid if (m := _COINS.match(a)))


class Contributor:
    """The team optimum: pledges and contributes the whole endowment every round."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def reset(self, seed: int | None = None) -> None:
        """Stateless: nothing to reset."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """Pledge in the talk phase, contribute everything in the contribute phase."""
        valid = list(info.get("valid_actions", []))
        if "wait" in valid:
            return "<say>I will contribute everything.</say><action>wait</action>"
        return f"<action>contribute {_most(valid)}</action>"


class FreeRider:
    """The individually rational player without sharing: contributes nothing, says nothing."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def reset(self, seed: int | None = None) -> None:
        """Stateless: nothing to reset."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """Wait, then contribute 0."""
        valid = list(info.get("valid_actions", []))
        return "<action>wait</action>" if "wait" in valid else "<action>contribute 0</action>"
