"""A top-down picture of the symbolic world (``render_mode="rgb_array"``)."""

from __future__ import annotations

import numpy as np

from teamgym.envs.thor_assembly.state import AssemblyState

__all__ = ["top_down"]

CELL = 8
_FLOOR, _WALL = (235, 235, 230), (60, 60, 60)
_PLACE, _CLOSED, _BENCH = (150, 180, 220), (90, 110, 160), (220, 90, 60)
_ROBOTS = [
    (30, 120, 30),
    (200, 150, 0),
    (130, 40, 160),
    (0, 150, 160),
    (160, 60, 60),
    (60, 60, 200),
    (120, 120, 0),
    (200, 80, 160),
]


def top_down(state: AssemblyState) -> np.ndarray:
    """H x W x 3 uint8: reachable floor, receptacles (darker when closed, red = workbench),
    robots as coloured squares (a white centre when carrying a part)."""
    grid = state.scene.grid
    xs, zs = [c[0] for c in grid], [c[1] for c in grid]
    x0, z0 = min(xs) - 1, min(zs) - 1
    w, h = max(xs) - x0 + 2, max(zs) - z0 + 2
    img = np.empty((h * CELL, w * CELL, 3), dtype=np.uint8)
    img[:] = _WALL

    def paint(cell: tuple[int, int], color: tuple[int, int, int], inset: int = 0) -> None:
        """Fill one grid cell (less ``inset`` pixels each side)."""
        x, z = cell[0] - x0, h - 1 - (cell[1] - z0)
        img[
            z * CELL + inset : (z + 1) * CELL - inset, x * CELL + inset : (x + 1) * CELL - inset
        ] = color

    for cell in grid:
        paint(cell, _FLOOR)
    for oid in state.place_ids:
        o = state.obj[oid]
        color = (
            _BENCH
            if oid == state.workbench
            else (_CLOSED if o["openable"] and not o["isOpen"] else _PLACE)
        )
        paint(state.place_cell[oid], color, 1)
    for i, robot in enumerate(state.robots):
        cell = state.view[robot]["cell"]
        paint(cell, _ROBOTS[i % len(_ROBOTS)], 2)
        if state.holding_part(robot):
            paint(cell, (255, 255, 255), 3)
    return img
