"""Scripted planner for ``kitchen-v0`` (privileged: it reads the true kitchen through ``bind``).

Each step every chef picks the most urgent job its hands and its part of the kitchen allow,
then walks a shortest path to a cell next to the station, turns to face it and interacts.
Jobs, most urgent first: serve a held soup; plate with a held dish at a ready pot (or wait at
a cooking one); put a held onion in the fullest pot that takes one; start a full pot; pick up
a soup, or an onion or dish a reachable pot needs, from a counter; fetch a dish when the
cooking pots outnumber the dishes in play; fetch an onion when the pots lack more onions than
are in play. A chef that holds something its side of the kitchen cannot use (on
``forced_coordination``) puts it on a counter both chefs reach.

``robot_0`` leads: it plans first, ignoring ``robot_1``. ``robot_1`` counts what ``robot_0``
set out to fetch, keeps off the cell ``robot_0`` steps into, and steps off ``robot_0``'s path
when it stands on it. Nothing is random: the planner is deterministic.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamgym.envs.baselines import PrivilegedPolicy
from teamgym.envs.kitchen.layouts import Cell, Layout
from teamgym.envs.kitchen.world import DIRECTIONS, RECIPE_SIZE, Kitchen, Soup

__all__ = ["Decision", "KitchenPlanner", "plan"]

_MOVES = tuple(DIRECTIONS.items())
#: Jobs that fetch something, and what they fetch (``robot_1`` counts ``robot_0``'s).
_CLAIM = {"fetch_dish": "dish", "fetch_onion": "onion"}
#: How many of the leader's next cells the other chef keeps off.
_PATH_KEPT_CLEAR = 4


@dataclass(frozen=True)
class Decision:
    """A chef's job, its action now and the cells it will walk through (next first)."""

    job: str
    action: str
    path: tuple[Cell, ...] = ()


def _region(k: Kitchen, start: Cell) -> frozenset[Cell]:
    """The floor cells reachable from ``start`` (chefs ignored)."""
    return _flood(k.layout, start)


@functools.cache
def _flood(layout: Layout, start: Cell) -> frozenset[Cell]:
    """The floor cells of ``layout`` reachable from ``start`` (the terrain never changes)."""
    seen, queue = {start}, deque([start])
    while queue:
        x, y = queue.popleft()
        for dx, dy in DIRECTIONS.values():
            nxt = (x + dx, y + dy)
            if nxt not in seen and layout.is_floor(nxt):
                seen.add(nxt)
                queue.append(nxt)
    return frozenset(seen)


def _reaches(region: frozenset[Cell], cell: Cell) -> bool:
    """Whether a chef in ``region`` can stand next to ``cell``."""
    return any((cell[0] - dx, cell[1] - dy) in region for dx, dy in DIRECTIONS.values())


def _step(here: Cell, name: str) -> Cell:
    dx, dy = DIRECTIONS[name]
    return (here[0] + dx, here[1] + dy)


def _route(
    k: Kitchen, i: int, targets: list[Cell], lead: Decision | None
) -> tuple[str, tuple[Cell, ...]] | None:
    """(action, path) toward interacting with the nearest of ``targets``: ``interact`` when
    facing one from next to it, a turn, or the first move of a shortest path; None when none
    is reachable. The leader (``lead`` None) ignores the other chef; the follower avoids the
    leader's next cell, and the leader's cell when next to it (a route around a distant chef
    would be dropped as soon as it moves, and the chefs would dither)."""
    chef, other = k.chefs[i], k.chefs[1 - i].pos
    goals: dict[Cell, list[str]] = {}
    for tx, ty in targets:
        for name, (dx, dy) in _MOVES:
            stand = (tx - dx, ty - dy)
            if k.layout.is_floor(stand):
                goals.setdefault(stand, []).append(name)
    if chef.pos in goals:
        names = goals[chef.pos]
        facing = next((n for n, d in _MOVES if d == chef.facing), "")
        return ("interact" if facing in names else names[0]), ()
    blocked: set[Cell] = set()
    if lead is not None:
        near = abs(other[0] - chef.pos[0]) + abs(other[1] - chef.pos[1]) <= 1
        standing = not lead.path and lead.action != "interact" and lead.job == "idle"
        blocked = {*lead.path[:1], *([other] if near or standing else [])}
    for avoid in (blocked, set()):
        parent: dict[Cell, Cell | None] = {chef.pos: None}
        queue = deque([chef.pos])
        while queue:
            cell = queue.popleft()
            if cell in goals:
                path = [cell]
                while parent[path[-1]] != chef.pos:
                    path.append(parent[path[-1]])  # type: ignore[arg-type]
                path.reverse()
                if lead is not None and (path[0] == other or path[0] in lead.path[:1]):
                    return "stay", ()  # only a way through the leader: wait for it
                delta = (path[0][0] - chef.pos[0], path[0][1] - chef.pos[1])
                return next(n for n, d in _MOVES if d == delta), tuple(path)
            for dx, dy in DIRECTIONS.values():
                nxt = (cell[0] + dx, cell[1] + dy)
                if nxt not in parent and k.layout.is_floor(nxt) and nxt not in avoid:
                    parent[nxt] = cell
                    queue.append(nxt)
    return None


def _make_way(k: Kitchen, i: int, lead: Decision) -> str:
    """The follower's move off the leader's path: to a free cell off it if there is one, else
    one further along it; stay when boxed in."""
    chef, other = k.chefs[i], k.chefs[1 - i].pos
    ahead = lead.path[:_PATH_KEPT_CLEAR]
    options = []
    for name, _ in _MOVES:
        nxt = _step(chef.pos, name)
        if k.layout.is_floor(nxt) and nxt != other and nxt not in lead.path[:1]:
            rank = ahead.index(nxt) if nxt in ahead else len(ahead) + 1
            options.append((-rank, name))
    return min(options)[1] if options else "stay"


def _out_of_the_way(k: Kitchen, i: int, lead: Decision | None) -> str:
    """An idle chef's move: off a cell next to a pot or serving spot (the other chef may need
    it), onto a free floor cell that is not; else stay."""
    lay, chef, other = k.layout, k.chefs[i], k.chefs[1 - i].pos
    busy = {
        (x - dx, y - dy) for x, y in (*lay.pots, *lay.serving) for dx, dy in DIRECTIONS.values()
    }
    if chef.pos not in busy:
        return "stay"
    taken = {other, *(lead.path[:1] if lead else ())}
    for name, _ in _MOVES:
        nxt = _step(chef.pos, name)
        if lay.is_floor(nxt) and nxt not in taken and nxt not in busy:
            return name
    return "stay"


def plan(k: Kitchen, i: int, lead: Decision | None = None) -> Decision:
    """Chef ``i``'s decision now; ``lead`` is the leader's (``robot_0``'s) when ``i`` follows."""
    lay, chef = k.layout, k.chefs[i]
    if lead is not None and chef.pos in lead.path[:_PATH_KEPT_CLEAR]:
        return Decision("make_way", _make_way(k, i, lead))
    claims = [_CLAIM[lead.job]] if lead is not None and lead.job in _CLAIM else []
    mine, theirs = _region(k, chef.pos), _region(k, k.chefs[1 - i].pos)
    pots = [p for p in lay.pots if _reaches(mine, p)]
    counters = {c: o for c, o in k.objects.items() if lay.at(c) == "X"}
    empty = [c for c in lay.counters if c not in counters and _reaches(mine, c)]
    shared = [c for c in empty if _reaches(theirs, c)] if not mine & theirs else []
    soups = [k.pot(p) for p in lay.pots]
    held = [c.held for c in k.chefs]
    cooking = sum(1 for s in soups if s is not None and (s.tick >= 0 or s.onions == RECIPE_SIZE))
    dishes = held.count("dish") + claims.count("dish")
    dishes += sum(1 for o in counters.values() if o == "dish")
    missing = sum(RECIPE_SIZE if s is None else RECIPE_SIZE - s.onions if s.tick < 0 else 0
                  for s in soups)  # fmt: skip
    onions = held.count("onion") + claims.count("onion")
    onions += sum(1 for o in counters.values() if o == "onion")

    def go(job: str, cells: list[Cell]) -> Decision | None:
        found = _route(k, i, cells, lead) if cells else None
        return Decision(job, *found) if found else None

    h = chef.held
    choice: Decision | None = None
    if isinstance(h, Soup):
        choice = go("serve", [s for s in lay.serving if _reaches(mine, s)]) or go("pass", shared)
    elif h == "dish":
        ready = [p for p in pots if (s := k.pot(p)) and s.ready(k.cook_time)]
        busy = [p for p in pots if (s := k.pot(p)) and (s.tick >= 0 or s.onions == RECIPE_SIZE)]
        choice = go("plate", ready) or (go("pass", shared) if not pots else None)
        if choice is None and pots and not any(k.pot(p).tick >= 0 for p in busy):  # type: ignore[union-attr]
            choice = go("put_down", empty)  # nothing cooks (a random start): free the hands
        if choice is None and busy:
            choice = go("wait_plate", busy)
            if choice and choice.action == "interact":
                choice = Decision("wait_plate", "stay")
    elif h == "onion":
        takes = {p: s.onions if (s := k.pot(p)) else 0 for p in pots}
        open_pots = [p for p in pots if (s := k.pot(p)) is None or s.tick < 0]
        open_pots = [p for p in open_pots if takes[p] < RECIPE_SIZE]
        open_pots.sort(key=lambda p: -takes[p])
        choice = go("add_onion", open_pots[:1])
        choice = choice or (go("pass", shared) if not pots else go("put_down", empty))
    else:
        full = [p for p in pots if (s := k.pot(p)) and s.tick < 0 and s.onions == RECIPE_SIZE]
        choice = go("start_cooking", full)
        if choice is None and any(_reaches(mine, s) for s in lay.serving):
            plated = [c for c, o in counters.items() if isinstance(o, Soup) and _reaches(mine, c)]
            choice = go("fetch_soup", plated)
        usable = [c for c, o in counters.items() if _reaches(mine, c) and pots and (
            (o == "onion" and missing > 0)
            or (o == "dish" and cooking > 0 and "dish" not in held))]  # fmt: skip
        choice = choice or go("fetch_counter", usable)
        if choice is None and cooking > dishes and (pots or shared):
            choice = go("fetch_dish", [d for d in lay.dish_dispensers if _reaches(mine, d)])
        if (
            choice is None
            and missing > onions
            and (pots or any(_reaches(theirs, p) for p in lay.pots))
        ):
            choice = go("fetch_onion", [o for o in lay.onion_dispensers if _reaches(mine, o)])
    return choice or Decision("idle", _out_of_the_way(k, i, lead))


class KitchenPlanner(PrivilegedPolicy):
    """Both chefs run :func:`plan` on the true state; ``robot_1`` follows ``robot_0``'s lead."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The planner's reply for ``agent`` now."""
        k: Kitchen = self.env.kitchen
        i = self.env.possible_agents.index(agent)
        lead = plan(k, 0) if i == 1 else None
        return f"<action>{plan(k, i, lead).action}</action>"
