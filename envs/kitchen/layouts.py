"""The five classic Overcooked-AI layouts, embedded as data, and their parsed form.

The grids are copied from ``overcooked_ai_py/data/layouts/*.layout`` of ``overcooked-ai==1.1.0``
(MIT licence, (c) 2019 Micah Carroll and the Overcooked-AI authors). Every layout here has the
classic benchmark's single order, a soup of three onions. ``counter_circuit`` is 1.1.0's
``counter_circuit_o_1order`` grid: the classic onion-only counter circuit of Carroll et al.
(2019); 1.1.0's file named ``counter_circuit`` is a later variant with tomatoes and mixed orders.

Cells: ``X`` counter, ``P`` pot, ``O`` onion dispenser, ``D`` dish dispenser, ``S`` serving
location, space floor, ``1``/``2`` the chefs' start cells (floor). Coordinates are ``(x, y)``,
x growing east, y growing south, as in the reference.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = ["GRIDS", "LAYOUT_NAMES", "REFERENCE_NAMES", "Layout", "load_layout"]

Cell = tuple[int, int]

#: Layout name -> grid rows (from overcooked-ai 1.1.0's ``.layout`` files).
GRIDS: dict[str, tuple[str, ...]] = {
    "cramped_room": (
        "XXPXX",
        "O  2O",
        "X1  X",
        "XDXSX",
    ),
    "asymmetric_advantages": (
        "XXXXXXXXX",
        "O XSXOX S",
        "X   P 1 X",
        "X2  P   X",
        "XXXDXDXXX",
    ),
    "coordination_ring": (
        "XXXPX",
        "X 1 P",
        "D2X X",
        "O   X",
        "XOSXX",
    ),
    "forced_coordination": (
        "XXXPX",
        "O X1P",
        "O2X X",
        "D X X",
        "XXXSX",
    ),
    "counter_circuit": (
        "XXXPPXXX",
        "X  2   X",
        "D XXXX S",
        "X  1   X",
        "XXXOOXXX",
    ),
}
LAYOUT_NAMES = tuple(GRIDS)
#: Our name -> the layout file's name in overcooked-ai 1.1.0 (for the parity tests).
REFERENCE_NAMES = {name: name for name in GRIDS} | {"counter_circuit": "counter_circuit_o_1order"}


@dataclass(frozen=True)
class Layout:
    """A parsed layout: the terrain and where each kind of station is."""

    name: str
    terrain: tuple[str, ...]
    """Rows of terrain letters, the start digits replaced by floor."""
    starts: tuple[Cell, Cell]
    """Start cells of chef 1 and chef 2 (``robot_0``, ``robot_1``)."""
    pots: tuple[Cell, ...]
    onion_dispensers: tuple[Cell, ...]
    dish_dispensers: tuple[Cell, ...]
    serving: tuple[Cell, ...]
    counters: tuple[Cell, ...]

    @functools.cached_property
    def width(self) -> int:
        """Cells west to east."""
        return len(self.terrain[0])

    @functools.cached_property
    def height(self) -> int:
        """Cells north to south."""
        return len(self.terrain)

    @functools.cached_property
    def _letters(self) -> dict[Cell, str]:
        """Every cell's terrain letter (read on every step by the engine and the planner)."""
        return {(x, y): ch for y, row in enumerate(self.terrain) for x, ch in enumerate(row)}

    @functools.cached_property
    def floor(self) -> frozenset[Cell]:
        """The cells a chef may stand on."""
        return frozenset(cell for cell, ch in self._letters.items() if ch == " ")

    def at(self, cell: Cell) -> str:
        """The terrain letter at ``cell`` (``X`` off the grid)."""
        return self._letters.get(cell, "X")

    def is_floor(self, cell: Cell) -> bool:
        """Whether a chef may stand on ``cell``."""
        return cell in self.floor


@functools.cache
def load_layout(name: str) -> Layout:
    """The parsed layout ``name`` (one of :data:`LAYOUT_NAMES`)."""
    if name not in GRIDS:
        raise ValueError(f"layout must be one of {list(LAYOUT_NAMES)}, got {name!r}")
    rows = GRIDS[name]
    starts: dict[str, Cell] = {}
    kinds: dict[str, list[Cell]] = {k: [] for k in "POSDX"}
    for y, row in enumerate(rows):
        for x, ch in enumerate(row):
            if ch in "12":
                starts[ch] = (x, y)
            elif ch in kinds:
                kinds[ch].append((x, y))
    terrain = tuple(row.replace("1", " ").replace("2", " ") for row in rows)
    return Layout(
        name=name,
        terrain=terrain,
        starts=(starts["1"], starts["2"]),
        pots=tuple(kinds["P"]),
        onion_dispensers=tuple(kinds["O"]),
        dish_dispensers=tuple(kinds["D"]),
        serving=tuple(kinds["S"]),
        counters=tuple(kinds["X"]),
    )
