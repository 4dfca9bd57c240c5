"""The foraging-v0 field: agents and items with levels on a grid, spawned from the env's seeded
generator the way level-based foraging (``lbforaging``) spawns them. Cells are (row, col)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MOVES", "Field", "spawn"]

#: Move name -> (drow, dcol), in lbforaging's action order.
MOVES: dict[str, tuple[int, int]] = {
    "north": (-1, 0),
    "south": (1, 0),
    "west": (0, -1),
    "east": (0, 1),
}


@dataclass
class Field:
    """The mutable state of one episode."""

    size: int
    pos: dict[str, tuple[int, int]]
    levels: dict[str, int]
    items: dict[tuple[int, int], int]
    """Cell -> level of the items still on the field."""
    food_spawned: int
    """Sum of the item levels at the start (rewards are normalised by it)."""

    def adjacent_item(self, cell: tuple[int, int]) -> tuple[int, int] | None:
        """The item next to ``cell`` (north, south, west, east first), or None."""
        r, c = cell
        for dr, dc in MOVES.values():
            if (r + dr, c + dc) in self.items:
                return (r + dr, c + dc)
        return None

    def free(self, cell: tuple[int, int]) -> bool:
        """On the field and not an item (agents do not block: collisions are resolved apart)."""
        r, c = cell
        return 0 <= r < self.size and 0 <= c < self.size and cell not in self.items


def spawn(
    rng: np.random.Generator,
    agents: list[str],
    size: int,
    num_items: int,
    max_agent_level: int,
    max_item_level: int | None,
    force_coop: bool,
) -> Field:
    """Agents anywhere, items away from the border and from each other (no item within two
    cells in a row or column, none in the 3x3 block around another), as lbforaging does.
    An item's level is drawn up to ``max_item_level`` (default: the sum of the three lowest
    agent levels); with ``force_coop`` every item has the sum of all agents' levels."""
    cells = [(r, c) for r in range(size) for c in range(size)]
    order = rng.permutation(len(cells))
    pos = {a: cells[int(i)] for a, i in zip(agents, order, strict=False)}
    levels = {a: int(rng.integers(1, max_agent_level + 1)) for a in agents}
    low3 = sum(sorted(levels.values())[:3])
    top = sum(levels.values()) if force_coop else (max_item_level or low3)
    items: dict[tuple[int, int], int] = {}
    taken = set(pos.values())
    for _ in range(1000):
        if len(items) == num_items:
            break
        r, c = int(rng.integers(1, size - 1)), int(rng.integers(1, size - 1))
        near = any(abs(r - ir) <= 1 and abs(c - ic) <= 1 for ir, ic in items) or any(
            (ir == r and abs(ic - c) <= 2) or (ic == c and abs(ir - r) <= 2) for ir, ic in items
        )
        if near or (r, c) in taken:
            continue
        items[(r, c)] = top if force_coop else int(rng.integers(1, top + 1))
    return Field(size, pos, levels, items, sum(items.values()))
