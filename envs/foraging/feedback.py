"""``foraging-v1``'s feedback: what happened to an agent's action, in words.

Pure functions of the field and the step's outcome; :class:`~teamgym.envs.foraging.ForagingEnv`
calls them when ``feedback="detailed"`` (``foraging-v0`` keeps 0.1.0's "Nothing happened.").
"""

from __future__ import annotations

from teamgym.envs.foraging.world import MOVES, Field

__all__ = ["blocked", "cannot", "load_failed", "loaded", "moved", "waited", "won"]

Cell = tuple[int, int]


def _at(cell: Cell) -> str:
    return f"row {cell[0]}, column {cell[1]}"


def _side(frm: Cell, to: Cell) -> str:
    """The compass word of a neighbouring cell (``east``)."""
    return next(m for m, (dr, dc) in MOVES.items() if (frm[0] + dr, frm[1] + dc) == to)


def _names(agents: list[str]) -> str:
    return agents[0] if len(agents) == 1 else ", ".join(agents[:-1]) + " and " + agents[-1]


def moved(move: str, cell: Cell) -> str:
    """A move that happened."""
    return f"You moved {move} to {_at(cell)}."


def blocked(move: str, here: Cell, target: Cell, stayers: list[str], movers: list[str]) -> str:
    """A legal move that did not happen: others stood in, or also moved into, the target cell."""
    why = []
    if stayers:
        why.append(f"{_names(stayers)} stayed in {_at(target)}")
    if movers:
        why.append(
            f"{_names(movers)} also moved into {_at(target)} (agents moving into one cell all stay)"
        )
    return f"You did not move {move}: {' and '.join(why)}. You are still at {_at(here)}."


def waited(cell: Cell) -> str:
    """A ``wait``."""
    return f"You waited at {_at(cell)}."


def cannot(field: Field, here: Cell, action: str | None) -> str | None:
    """Why an illegal ``action`` (a move into an item or off the field, a load with no item
    next to the agent) was refused; None for a reply that named none of those."""
    if action in MOVES:
        dr, dc = MOVES[action]
        cell = (here[0] + dr, here[1] + dc)
        if cell in field.items:
            return f"Your move {action} is blocked by a level-{field.items[cell]} item there."
        if not field.free(cell):
            return f"Your move {action} is blocked by the edge of the field."
    if action == "load" and field.adjacent_item(here) is None:
        return "You cannot load: no item is next to you (north, south, west or east)."
    return None


def _sums(field: Field, agent: str, group: list[str]) -> str:
    """``your level 2 + robot_1's 1`` over a group of loaders."""
    mates = [f"{a}'s {field.levels[a]}" for a in group if a != agent]
    return " + ".join([f"your level {field.levels[agent]}", *mates])


def loaded(
    field: Field, agent: str, item: Cell, level: int, group: list[str], reward: float
) -> str:
    """A load that happened (``field`` is the field after the step's loads)."""
    mates = [a for a in group if a != agent]
    total = f" = {sum(field.levels[a] for a in group)}" if mates else ""
    left = len(field.items)
    items = "no items" if not left else f"{left} item" + ("s" if left > 1 else "")
    return (
        f"{_names(['You', *mates])} loaded the level-{level} item "
        f"{_side(field.pos[agent], item)} of you ({_sums(field, agent, group)}{total}, enough "
        f"for {level}); your reward is {reward:.3g}; {items} left."
    )


def load_failed(field: Field, agent: str, item: Cell, level: int, group: list[str]) -> str:
    """A load whose loaders' levels fell short of the item's."""
    side = _side(field.pos[agent], item)
    total = sum(field.levels[a] for a in group)
    mates = [a for a in group if a != agent]
    idle = [
        f"{a} (level {field.levels[a]})"
        for a in sorted(field.pos)
        if a not in group and abs(field.pos[a][0] - item[0]) + abs(field.pos[a][1] - item[1]) == 1
    ]
    if mates:
        head = f"{_names(['You', *mates])} tried to load the level-{level} item {side} of you"
        why = (
            f"the loaders' levels add up to {total} ({_sums(field, agent, group)}) "
            f"and it needs {level}"
        )
    else:
        head = f"You tried to load the level-{level} item {side} of you alone"
        why = f"your level is {total} and it needs {level}: teammates next to it must load too"
    tail = f" {_names(idle)} stood next to it without loading." if idle else ""
    return f"{head}, but {why}.{tail}"


def won() -> str:
    """Said to every agent when the last item is loaded."""
    return "The field is clear: the team has won."
