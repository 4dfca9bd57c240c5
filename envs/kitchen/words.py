"""How ``kitchen-v0`` puts the kitchen into words: what stands where, what chefs hold, pots'
states, what ``interact`` would do, and the small map."""

from __future__ import annotations

import functools

from teamgym.envs.grid import offset_words
from teamgym.envs.kitchen.layouts import Cell, Layout
from teamgym.envs.kitchen.world import DIRECTIONS, RECIPE_SIZE, Item, Kitchen, Soup

__all__ = ["ARROW", "FACING", "HELD", "KINDS", "PREVIEW", "TERRAIN", "draw_map", "item_words",
           "pot_words", "where"]  # fmt: skip

TERRAIN = {"X": "counter", "P": "pot", "O": "onion dispenser", "D": "dish dispenser",
            "S": "serving spot", " ": "floor"}  # fmt: skip
FACING = {v: k for k, v in DIRECTIONS.items()}
ARROW = {"up": "^", "down": "v", "right": ">", "left": "<"}
HELD = {"": "nothing", "onion": "an onion", "dish": "an empty dish", "soup": "a soup in a dish"}
#: What ``interact`` would do, in words (for the observation).
PREVIEW = {
    "put_down": "put what you hold on the counter",
    "pick_up": "pick up {item} from the counter",
    "take_onion": "take an onion from the dispenser",
    "take_dish": "take a dish from the dispenser",
    "add_onion": "put your onion in the pot",
    "start_cooking": "start cooking the pot",
    "plate": "plate the ready soup with your dish",
    "serve": "serve your soup",
    "nothing": "do nothing",
}
#: The kinds ``interact`` may have, in vector order.
KINDS = tuple(PREVIEW)


def where(frm: Cell, to: Cell) -> str:
    """``(2, 0), 1 north, 1 east`` of a cell seen from another."""
    return f"({to[0]}, {to[1]}), {offset_words(to[1] - frm[1], to[0] - frm[0])}"


def item_words(item: Item | None) -> str:
    """What a chef holds or a counter bears, in words."""
    if isinstance(item, Soup):
        kind = "3-onion" if item.onions == RECIPE_SIZE else f"{item.onions}-onion (not an order)"
        return f"a {kind} soup in a dish"
    return HELD[item or ""]


def pot_words(soup: Soup | None, cook_time: int) -> str:
    """A pot's state in words."""
    if soup is None:
        return "empty"
    if soup.tick < 0:
        state = "full" if soup.onions == RECIPE_SIZE else "not full"
        return f"{soup.onions} of {RECIPE_SIZE} onions, {state}, not cooking"
    if soup.ready(cook_time):
        return f"ready ({soup.onions} onions): plate it with a dish"
    return f"cooking {soup.onions} onions, {soup.tick} of {cook_time} steps done"


def draw_map(kitchen: Kitchen) -> list[str]:
    """The grid, two characters a cell: chefs ``0^``/``1>`` (number, facing), counters ``X``
    with ``o`` onion, ``d`` dish, ``s`` soup on them, pots ``P`` with their onion count, ``c``
    cooking or ``!`` ready, ``O``/``D`` dispensers, ``S`` serving, ``.`` floor."""
    lay = kitchen.layout
    header, background = _background(lay)
    grid = [list(row) for row in background]
    for (x, y), obj in kitchen.objects.items():  # only pots and counters hold objects
        terrain = lay.at((x, y))
        if terrain == "P" and isinstance(obj, Soup):
            mark = str(obj.onions)
            if obj.tick >= 0:
                mark = "!" if obj.ready(kitchen.cook_time) else "c"
            grid[y][x] = "P" + mark
        elif terrain == "X":
            grid[y][x] = "X" + ("s" if isinstance(obj, Soup) else obj[0])
    for i, c in enumerate(kitchen.chefs):
        grid[c.pos[1]][c.pos[0]] = f"{i}{ARROW[FACING[c.facing]]}"
    return [header] + [f"{y:<2} " + "".join(cells).rstrip() for y, cells in enumerate(grid)]


@functools.cache
def _background(lay: Layout) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """The map's header and its cells without chefs or objects (the terrain never changes)."""
    header = "   " + "".join(f"{x:<2}" for x in range(lay.width)).rstrip()
    rows = tuple(
        tuple((ch if ch != " " else ".") + " " for ch in (lay.at((x, y)) for x in range(lay.width)))
        for y in range(lay.height)
    )
    return header, rows
