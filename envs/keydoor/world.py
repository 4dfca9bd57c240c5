"""The keydoor-v0 layout: two rooms side by side, one door between them, a plate, a treasure,
an optional key; drawn from the env's seeded generator. Coordinates are (x, y), x east, y south."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teamgym.envs.grid import offset_words

__all__ = ["MOVES", "Layout", "generate_layout", "relative"]

#: Move name -> (dx, dy).
MOVES: dict[str, tuple[int, int]] = {
    "north": (0, -1),
    "south": (0, 1),
    "east": (1, 0),
    "west": (-1, 0),
}


@dataclass(frozen=True)
class Layout:
    """Where things are. West room: x < wall; east room: x > wall; the door is (wall, door_y)."""

    width: int
    height: int
    wall: int
    door_y: int
    plate: tuple[int, int]
    treasure: tuple[int, int]
    key: tuple[int, int] | None
    starts: tuple[tuple[int, int], ...]

    @property
    def door(self) -> tuple[int, int]:
        """The doorway cell."""
        return (self.wall, self.door_y)

    def inside(self, cell: tuple[int, int]) -> bool:
        """On the grid and not in the wall (the doorway counts as inside)."""
        x, y = cell
        on_grid = 0 <= x < self.width and 0 <= y < self.height
        return on_grid and (x != self.wall or cell == self.door)

    def room(self, cell: tuple[int, int]) -> str:
        """``west``, ``east`` or ``doorway``."""
        return "west" if cell[0] < self.wall else "east" if cell[0] > self.wall else "doorway"


def generate_layout(
    rng: np.random.Generator, agents: int, room: int, height: int, with_key: bool, fixed: bool
) -> Layout:
    """Rooms ``room`` wide and ``height`` tall; with ``fixed`` the plate, door and key sit at
    set places (only starts and the treasure move), else everything is drawn."""
    wall = room
    width = 2 * room + 1
    west = [(x, y) for x in range(room) for y in range(height)]
    east = [(x, y) for x in range(room + 1, width) for y in range(height)]
    door_y = height // 2 if fixed else int(rng.integers(height))
    approach = (room - 1, door_y)  # never the plate: one agent could hold it and step through
    picks = [c for c in (west[int(i)] for i in rng.permutation(len(west))) if c != approach]
    if fixed:
        plate = (0, 0)
        key = (0, height - 1) if with_key else None
    else:
        plate = picks[0]
        key = picks[1] if with_key else None
    taken = [plate] + ([key] if key else [])
    free = [c for c in picks if c not in taken]
    starts = tuple(free[i % len(free)] for i in range(agents))
    treasure = east[int(rng.integers(len(east)))]
    return Layout(width, height, wall, door_y, plate, treasure, key, starts)


def relative(frm: tuple[int, int], to: tuple[int, int]) -> str:
    """``2 north, 1 east`` (or ``here``): how to get from one (x, y) cell to another."""
    return offset_words(to[1] - frm[1], to[0] - frm[0])
