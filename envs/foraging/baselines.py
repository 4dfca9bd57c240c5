"""Scripted expert for ``foraging-v0`` (privileged: it plans on the true field through ``bind``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from teamgym.envs.baselines import PrivilegedPolicy
from teamgym.envs.foraging.world import MOVES, Field

__all__ = ["ForagingExpert"]

Cell = tuple[int, int]


def _dist(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _first_step(field: Field, start: Cell, goal: Cell, blocked: set[Cell]) -> str | None:
    """The first move of a shortest path around items (and ``blocked`` cells when possible)."""
    for avoid in (blocked, set()):
        seen, queue = {start: ""}, deque([start])
        while queue:
            cell = queue.popleft()
            if cell == goal:
                return seen[cell] or None
            for move, (dr, dc) in MOVES.items():
                nxt = (cell[0] + dr, cell[1] + dc)
                if nxt not in seen and field.free(nxt) and (nxt == goal or nxt not in avoid):
                    seen[nxt] = seen[cell] or move
                    queue.append(nxt)
    return None


def _team_for(field: Field, item: Cell, agents: list[str]) -> list[str] | None:
    """The nearest agents whose levels reach the item's (at most 4: its neighbours)."""
    level = field.items[item]
    for order in (
        sorted(agents, key=lambda a: (_dist(field.pos[a], item), a)),
        sorted(agents, key=lambda a: (-field.levels[a], a)),
    ):
        team, total = [], 0
        for a in order[:4]:
            team.append(a)
            total += field.levels[a]
            if total >= level:
                return team
    return None


def plan(field: Field, agents: list[str]) -> dict[str, str]:
    """One action per agent: a team walks to the cheapest loadable item and loads it together;
    agents left over go for items they can load alone; moves never collide."""
    todo: dict[str, Cell] = {}
    free_agents = list(agents)
    for item in sorted(field.items, key=lambda c: (field.items[c], c)):
        team = _team_for(field, item, free_agents)
        if team is None:
            continue
        for a in team:
            todo[a] = item
        free_agents = [a for a in free_agents if a not in team]
        if not free_agents:
            break
    actions: dict[str, str] = {}
    reserved: set[Cell] = set()
    for item in dict.fromkeys(todo.values()):
        team = [a for a in agents if todo.get(a) == item]
        if all(_dist(field.pos[a], item) == 1 for a in team):
            actions.update(dict.fromkeys(team, "load"))
            continue
        spots = [(item[0] + dr, item[1] + dc) for dr, dc in MOVES.values()]
        spots = [s for s in spots if field.free(s)]
        for a in sorted(team, key=lambda a: (_dist(field.pos[a], item), a)):
            if _dist(field.pos[a], item) == 1:
                spot = field.pos[a]
            else:
                spot = (
                    min(spots, key=lambda s: (_dist(field.pos[a], s), s)) if spots else field.pos[a]
                )
            if spot in spots:
                spots.remove(spot)
            others = {field.pos[b] for b in agents if b != a}
            move = _first_step(field, field.pos[a], spot, others)
            actions[a] = move or "wait"
    for a in agents:
        actions.setdefault(a, "wait")
    for a in agents:  # no two agents into one cell, nobody into a cell someone stays in
        if actions[a] in MOVES:
            dr, dc = MOVES[actions[a]]
            nxt = (field.pos[a][0] + dr, field.pos[a][1] + dc)
            staying = {field.pos[b] for b in agents if actions[b] not in MOVES}
            if nxt in reserved or nxt in staying:
                actions[a] = "wait"
            else:
                reserved.add(nxt)
    return actions


class ForagingExpert(PrivilegedPolicy):
    """A team that loads items one by one with just enough levels (see :func:`plan`)."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """This agent's part of the team plan."""
        action = plan(self.env.field, list(self.env.agents)).get(agent, "wait")
        valid = info.get("valid_actions", [action])
        return f"<action>{action if action in valid else 'wait'}</action>"
