"""Named difficulty settings of the games: a preset fills every option the caller left out.

``foraging-v1``, ``keydoor-v0`` and ``publicgoods-v0`` take ``difficulty="easy" | "medium" |
"hard"`` (default ``medium``) and explicit keyword arguments that override the preset's values,
so ``difficulty="hard", size=10`` is the hard preset on a 10 x 10 field. A game keeps its
presets in a ``DIFFICULTIES`` table beside its rules and resolves them with :func:`resolve`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_DIFFICULTY", "int_in", "resolve"]

DEFAULT_DIFFICULTY = "medium"


def resolve(
    presets: Mapping[str, Mapping[str, Any]], difficulty: str | None, given: Mapping[str, Any]
) -> dict[str, Any]:
    """The preset named ``difficulty`` (:data:`DEFAULT_DIFFICULTY` when None) with every option
    of ``given`` that is not None in its place; an unknown name raises ``ValueError`` naming
    the known ones."""
    if difficulty is not None and difficulty not in presets:
        raise ValueError(f"difficulty must be one of {sorted(presets)}, got {difficulty!r}")
    settings = dict(presets[difficulty or DEFAULT_DIFFICULTY])
    settings.update({k: v for k, v in given.items() if v is not None})
    return settings


def int_in(name: str, value: Any, low: int, high: int) -> int:
    """``value`` when it is an int in ``low..high``; otherwise ``ValueError`` saying so."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in {low}..{high}, got {value!r}")
    return value
