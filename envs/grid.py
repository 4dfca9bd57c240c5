"""Words for where something is on a grid, shared by the grid games' observations."""

from __future__ import annotations

__all__ = ["offset_words"]


def offset_words(south: int, east: int) -> str:
    """``2 north, 1 east`` for an offset of -2 rows and +1 column (``here`` for none)."""
    parts = []
    if south:
        parts.append(f"{abs(south)} {'south' if south > 0 else 'north'}")
    if east:
        parts.append(f"{abs(east)} {'east' if east > 0 else 'west'}")
    return ", ".join(parts) or "here"
