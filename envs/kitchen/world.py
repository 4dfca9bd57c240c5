"""The kitchen engine: Overcooked-AI 1.1.0's dynamics, pure Python and no text.

One joint action is applied as the reference's ``OvercookedGridworld.get_state_transition``
does: first every chef's ``interact``, in chef order, on the state before the step (a chef
interacts with the cell it faces); then the moves, where a move turns the chef even when the
cell ahead is not floor, and two chefs that would end on one cell or swap cells both stay
(turned); then every cooking pot advances one tick. A pot takes up to 3 onions and cooks only
when an empty-handed chef interacts with it (1.1.0 has no automatic start); a pot holding 1 or
2 onions can be cooked too, but only the order of the classic layouts, three onions, is worth
:data:`SOUP_VALUE` when served. Coordinates are ``(x, y)``, y growing south.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from teamgym.envs.kitchen.layouts import Cell, Layout

__all__ = [
    "ACTIONS",
    "DEFAULT_COOK_TIME",
    "DIRECTIONS",
    "RECIPE_SIZE",
    "SOUP_VALUE",
    "Chef",
    "Happening",
    "Item",
    "Kitchen",
    "Soup",
    "item_name",
]

#: Move name -> (dx, dy), in the reference's action order (north, south, east, west).
DIRECTIONS: dict[str, Cell] = {"up": (0, -1), "down": (0, 1), "right": (1, 0), "left": (-1, 0)}
#: Every action, in the reference's ``Action.ALL_ACTIONS`` order.
ACTIONS: tuple[str, ...] = ("up", "down", "right", "left", "stay", "interact")
#: Onions in the one recipe of the classic layouts.
RECIPE_SIZE = 3
#: Cook time of every soup in the classic layouts (the reference's default ``Recipe.time``).
DEFAULT_COOK_TIME = 20
#: What serving a three-onion soup is worth in the reference (its sparse reward).
SOUP_VALUE = 20


@dataclass
class Soup:
    """A soup: in a pot (idle while ``tick`` is -1, then cooking), or plated (ready)."""

    onions: int
    tick: int = -1
    hands: tuple[int, ...] = ()
    """The chefs who added its onions, started it and plated it, in order (for credit)."""

    def cooking(self, cook_time: int) -> bool:
        """Started and not yet done."""
        return 0 <= self.tick < cook_time

    def ready(self, cook_time: int) -> bool:
        """Done cooking (a plated soup always is)."""
        return self.tick >= cook_time

    def value(self) -> int:
        """What serving it is worth: only the three-onion order pays."""
        return SOUP_VALUE if self.onions == RECIPE_SIZE else 0


#: ``"onion"``, ``"dish"`` or a :class:`Soup`.
Item = str | Soup


@dataclass
class Chef:
    """A chef's position, facing (a unit (dx, dy)) and what it holds."""

    pos: Cell
    facing: Cell = (0, -1)
    held: Item | None = None

    @property
    def ahead(self) -> Cell:
        """The cell the chef faces (and interacts with)."""
        return (self.pos[0] + self.facing[0], self.pos[1] + self.facing[1])


class Happening(NamedTuple):
    """Something a chef's action did: ``kind`` is one of ``take_onion``, ``take_dish``,
    ``put_down`` / ``pick_up`` (an item on a counter), ``add_onion``, ``start_cooking``,
    ``plate``, ``serve``, ``moved``, ``turned`` (a move into a non-floor cell), ``collided``,
    ``nothing`` (an interact that did nothing)."""

    chef: int
    kind: str
    cell: Cell
    item: str = ""
    value: int = 0
    """Points of a ``serve``; onions in the pot after ``add_onion`` / ``start_cooking``."""
    other: int = -1
    """The chef who put down a picked-up counter item (``pick_up``), who plated a served soup
    (``serve``)."""


def item_name(item: Item | None) -> str:
    """``onion``, ``dish``, ``soup`` or empty."""
    return "" if item is None else "soup" if isinstance(item, Soup) else item


@dataclass
class Kitchen:
    """The state of one episode and its rules."""

    layout: Layout
    cook_time: int = DEFAULT_COOK_TIME
    chefs: list[Chef] = field(default_factory=list)
    objects: dict[Cell, Item] = field(default_factory=dict)
    """Items on counters and soups in pots, by cell."""
    placed_by: dict[Cell, int] = field(default_factory=dict)
    """Which chef put each counter item down."""
    timestep: int = 0

    @classmethod
    def start(cls, layout: Layout, cook_time: int = DEFAULT_COOK_TIME) -> Kitchen:
        """The reference's standard start: chefs on their start cells, facing north, empty."""
        return cls(layout, cook_time, [Chef(pos) for pos in layout.starts])

    @classmethod
    def random_start(
        cls,
        layout: Layout,
        rng: np.random.Generator,
        cook_time: int = DEFAULT_COOK_TIME,
        positions: bool = True,
        objects: float = 0.0,
    ) -> Kitchen:
        """The reference's ``get_random_start_state_fn(random_start_pos, rnd_obj_prob_thresh)``
        with onions only: with ``positions``, the chefs on two distinct floor cells drawn
        uniformly (facing north); then each pot with probability ``objects`` holds 1-3 onions
        (cooking from tick 0, again with probability ``objects``), and each chef with
        probability ``objects`` holds a dish, an onion or a cooked soup of 1-3 onions (0.2,
        0.6, 0.2). Every draw comes from ``rng``, in the reference's order."""
        kitchen = cls.start(layout, cook_time)
        if positions:
            floor = sorted(layout.floor, key=lambda c: (c[1], c[0]))  # the reference's scan
            pairs = [(a, b) for a in floor for b in floor if a != b]
            first, second = pairs[int(rng.integers(len(pairs)))]
            kitchen.chefs = [Chef(first), Chef(second)]
        if objects <= 0:
            return kitchen
        for pot in layout.pots:
            if rng.random() < objects:
                onions = int(rng.integers(1, RECIPE_SIZE + 1))
                tick = 0 if rng.random() < objects else -1
                kitchen.objects[pot] = Soup(onions, tick)
        for chef in kitchen.chefs:
            if rng.random() < objects:
                kind = str(rng.choice(["dish", "onion", "soup"], p=[0.2, 0.6, 0.2]))
                onions = int(rng.integers(1, RECIPE_SIZE + 1))
                chef.held = Soup(onions, cook_time) if kind == "soup" else kind
        return kitchen

    # ------------------------------------------------------------------ queries
    def pot(self, cell: Cell) -> Soup | None:
        """The soup in the pot at ``cell`` (None when empty)."""
        soup = self.objects.get(cell)
        return soup if isinstance(soup, Soup) else None

    def interaction(self, i: int) -> str:
        """What ``interact`` would do for chef ``i`` now (a :class:`Happening` kind)."""
        chef = self.chefs[i]
        cell, held = chef.ahead, chef.held
        terrain = self.layout.at(cell)
        if terrain == "X":
            if held is not None and cell not in self.objects:
                return "put_down"
            if held is None and cell in self.objects:
                return "pick_up"
        elif terrain == "O" and held is None:
            return "take_onion"
        elif terrain == "D" and held is None:
            return "take_dish"
        elif terrain == "P":
            soup = self.pot(cell)
            if held is None:
                if soup is not None and soup.tick < 0 and soup.onions > 0:
                    return "start_cooking"
            elif held == "dish":
                if soup is not None and soup.ready(self.cook_time):
                    return "plate"
            elif held == "onion" and (soup is None or (soup.tick < 0 and soup.onions < 3)):
                return "add_onion"
        elif terrain == "S" and isinstance(held, Soup):
            return "serve"
        return "nothing"

    # ------------------------------------------------------------------ rules
    def step(self, actions: list[str]) -> list[Happening]:
        """Apply one joint action (one of :data:`ACTIONS` per chef); returns what happened,
        interacts first (in chef order), then moves. Rewards are the ``serve`` values."""
        out = [self._interact(i) for i, a in enumerate(actions) if a == "interact"]
        out += self._move(actions)
        for obj in self.objects.values():
            if isinstance(obj, Soup) and obj.cooking(self.cook_time):
                obj.tick += 1
        self.timestep += 1
        return out

    def _interact(self, i: int) -> Happening:
        chef = self.chefs[i]
        cell, kind = chef.ahead, self.interaction(i)
        item, value = item_name(chef.held), 0
        if kind == "put_down":
            assert chef.held is not None
            self.objects[cell], chef.held = chef.held, None
            self.placed_by[cell] = i
        elif kind == "pick_up":
            chef.held = self.objects.pop(cell)
            item = item_name(chef.held)
            return Happening(i, kind, cell, item, 0, self.placed_by.pop(cell, i))
        elif kind in ("take_onion", "take_dish"):
            chef.held = kind.removeprefix("take_")
            item = chef.held
        elif kind == "start_cooking":
            soup = self.pot(cell)
            assert soup is not None
            soup.tick, value = 0, soup.onions
            soup.hands += (i,)
        elif kind == "plate":
            plated = self.objects.pop(cell)
            assert isinstance(plated, Soup)
            plated.hands += (i,)
            chef.held = plated
            item = "soup"
        elif kind == "add_onion":
            soup = self.pot(cell)
            if soup is None:
                soup = self.objects[cell] = Soup(0)
            soup.onions += 1
            soup.hands += (i,)
            chef.held, value = None, soup.onions
        elif kind == "serve":
            assert isinstance(chef.held, Soup)
            plater = chef.held.hands[-1] if chef.held.hands else i
            value, chef.held = chef.held.value(), None
            return Happening(i, kind, cell, item, value, plater)
        return Happening(i, kind, cell, item, value)

    def _move(self, actions: list[str]) -> list[Happening]:
        old = [c.pos for c in self.chefs]
        new = list(old)
        for i, (chef, action) in enumerate(zip(self.chefs, actions, strict=True)):
            if action in DIRECTIONS:
                chef.facing = DIRECTIONS[action]
                if self.layout.is_floor(chef.ahead):
                    new[i] = chef.ahead
        collided = new[0] == new[1] or (new[0] == old[1] and new[1] == old[0])
        out = []
        for i, (chef, action) in enumerate(zip(self.chefs, actions, strict=True)):
            if action not in DIRECTIONS:
                continue
            if new[i] == old[i]:
                out.append(Happening(i, "turned", chef.ahead, self.layout.at(chef.ahead)))
            elif collided:
                out.append(Happening(i, "collided", new[i]))
            else:
                chef.pos = new[i]
                out.append(Happening(i, "moved", new[i]))
        return out
