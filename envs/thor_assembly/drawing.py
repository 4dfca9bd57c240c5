"""``thor-assembly-v0`` drawn as a robot knows the house: the floor plan with every place (their
names are in each observation), the robot itself, the teammates at its place, what it holds and
sees there, the task's parts and connections, and, at the workbench only, what lies on it and
which connections are made (elsewhere the robot does not see them, and its data does not hold
them). Robots elsewhere, parts unseen and hidden defects are never in the data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamgym.envs.drawing import (
    INK,
    Drawing,
    act,
    document,
    el,
    label,
    seat_token,
    tooltip,
)
from teamgym.envs.thor_assembly.panel import BENCH, place_actions, place_list, side_panel
from teamgym.envs.thor_assembly.views import _holding_text

if TYPE_CHECKING:
    from teamgym.envs.thor_assembly.env import ThorAssemblyEnv

__all__ = ["draw", "drawing", "seat_data"]

_FLOOR, _PLACE = "#e9ecef", "#8fb3de"
_PLAN_W, _PLAN_H, _WIDTH = 470, 340, 980


def seat_data(env: ThorAssemblyEnv, agent: str) -> dict[str, Any]:
    """What ``agent`` knows: the task, the places, where it is and what it holds, what it sees
    at its place (teammates, open receptacles' contents, the workbench's state)."""
    state = env.assembly
    assert state is not None, "thor-assembly-v0 needs reset() first"
    here = None if agent in state.travel else state.at[agent]
    travel = state.travel.get(agent)
    places = [
        {
            "name": state.names[p],
            "x": state.place_cell[p][0],
            "z": state.place_cell[p][1],
            "workbench": p == state.workbench,
            "steps": None
            if travel or state.phase == "plan" or p == here
            else state.steps_to(agent, p),
        }
        for p in state.place_ids
    ]
    seen_here: list[dict[str, Any]] = []
    mates: list[str] = []
    bench = None
    if here is not None and state.phase != "plan":
        visible = set(state.view[agent]["visible"])
        for p in state.places_here(agent):
            o = state.obj[p]
            if o["openable"] and not o["isOpen"]:
                seen_here.append({"name": state.names[p], "closed": True, "holds": []})
                continue
            holds = [
                state.names[c]
                for c in (o["receptacleObjectIds"] or [])
                if c in visible and c in state.names
            ]
            seen_here.append({"name": state.names[p], "closed": False, "holds": holds})
        mates = [
            a for a in state.robots if a != agent and state.at[a] == here and a not in state.travel
        ]
        if here == state.workbench:
            bench = {
                "placed": [
                    state.names[state.part_ids[p]] for p in state.recipe.parts if p in state.placed
                ],
                "made": [
                    [a, b] for a, b in state.connections if state.conn_state[(a, b)] == "fixed"
                ],
                "inspection": state.last_inspection,
            }
    return {
        "seat": agent,
        "index": state.robots.index(agent),
        "robots": list(state.robots),
        "scene": state.scene.name,
        "room": state.scene.room,
        "phase": state.phase,
        "product": state.recipe.description,
        "workbench": state.names[state.workbench],
        "parts": [{"type": p, "heavy": p in state.heavy} for p in state.recipe.parts],
        "connections": [[a, b] for a, b in state.connections],
        "plan": {k: list(v) for k, v in state.plan.items()} if state.plan else None,
        "floor": sorted([x, z] for x, z in state.scene.floor),
        "places": places,
        "cell": list(state.view[agent]["cell"]),
        "at": state.names[here] if here else None,
        "travel": {"to": state.names[travel[0]], "steps": travel[1]} if travel else None,
        "holding": _holding_text(state, agent) if state.phase != "plan" else "nothing",
        "here": seen_here,
        "teammates_here": mates,
        "bench": bench,
        "step": env.num_steps,
        "max_steps": env.max_steps,
    }


def drawing(env: ThorAssemblyEnv, agent: str) -> Drawing:
    """``agent``'s picture of the house and the task (see the module docstring)."""
    data = seat_data(env, agent)
    legend = (
        "Squares are places (the numbers are listed below, the orange one is the workbench); "
        "your robot has the dark ring. Click a place to go there, open or close it or put what "
        "you hold; click an object or a connection to pick it up, hold it or attach it."
    )
    return Drawing("thor-assembly", data, draw(data), legend=legend)


def draw(data: dict[str, Any]) -> str:
    """The house and task of ``data`` (see :func:`seat_data`) as SVG."""
    out = [
        label(
            16,
            28,
            f"{data['room'].replace('_', ' ')} {data['scene']}: build "
            f"{data['product']} at {data['workbench']}",
            17,
            font_weight="bold",
        )
    ]
    plan_bottom = _floor_plan(out, data)
    panel_bottom = side_panel(out, data)
    y = max(plan_bottom, panel_bottom) + 30
    y = place_list(out, data, y)
    title = (
        f"The house as {data['seat']} knows it: "
        + (f"at {data['at']}" if data["at"] else "on the way" if data["travel"] else "at the start")
        + f", holding {data['holding']}"
    )
    return document(_WIDTH, round(y + 10), "thor-assembly", title, *out)


def _floor_plan(out: list[str], data: dict[str, Any]) -> float:
    """The reachable floor, the places (numbered) and the robot; returns its bottom."""
    cells = [tuple(c) for c in data["floor"]] + [(p["x"], p["z"]) for p in data["places"]]
    xs, zs = [c[0] for c in cells], [c[1] for c in cells]
    x0, z1 = min(xs), max(zs)
    w, h = max(xs) - x0 + 1, z1 - min(zs) + 1
    s = min(40.0, _PLAN_W / w, _PLAN_H / h)
    gx, gy = 16, 46

    def at(x: int, z: int) -> tuple[float, float]:  # north (larger z) up
        return gx + (x - x0) * s, gy + (z1 - z) * s

    for x, z in data["floor"]:
        px, py = at(x, z)
        out.append(
            el(
                "rect",
                {
                    "x": px,
                    "y": py,
                    "width": s,
                    "height": s,
                    "fill": _FLOOR,
                    "stroke": "#f8f9fa",
                    "stroke-width": 0.5,
                },
            )
        )
    px, py = at(*data["cell"])  # the robot first: the places' numbers stay on top
    r = max(s * 0.36, 9)
    cx, cy = px + s / 2, py + s / 2
    if data["at"]:  # beside its place's marker, not over its number
        cx, cy = px + s, py - r * 0.4
    out.append(
        el(
            "g",
            {"class": "robot", "data-seat": data["seat"]},
            seat_token(
                cx,
                cy,
                r,
                data["index"],
                data["seat"].removeprefix("robot_"),
                own=True,
                name=f"{data['seat']} (you)",
            ),
        )
    )
    for k, mate in enumerate(data["teammates_here"], 1):
        out.append(
            el(
                "g",
                {"class": "robot", "data-seat": mate},
                seat_token(
                    cx + k * r * 2.1,
                    cy,
                    r,
                    data["robots"].index(mate),
                    mate.removeprefix("robot_"),
                    own=False,
                    name=mate,
                ),
            )
        )
    groups: dict[tuple[int, int], list[tuple[int, dict[str, Any]]]] = {}
    for number, place in enumerate(data["places"], 1):
        groups.setdefault((place["x"], place["z"]), []).append((number, place))
    for (x, z), members in groups.items():
        px, py = at(x, z)
        bench = any(p["workbench"] for _, p in members)
        names = [p["name"] for _, p in members]
        actions = [a for n, p in members for a in place_actions(p["name"], p["workbench"])]
        what = " / ".join(f"{n}. {p['name']}" for n, p in members)
        size = max(s, 20)
        out.append(
            el(
                "g",
                {**act(actions, what, menu=True), "data-places": "|".join(names)},
                tooltip(what),
                el(
                    "rect",
                    {
                        "x": px + s / 2 - size / 2,
                        "y": py + s / 2 - size / 2,
                        "width": size,
                        "height": size,
                        "rx": 3,
                        "fill": BENCH if bench else _PLACE,
                        "stroke": INK,
                        "stroke-width": 1.2,
                        "class": "frame",
                    },
                ),
                label(
                    px + s / 2,
                    py + s / 2 + 4,
                    ",".join(str(n) for n, _ in members),
                    11,
                    text_anchor="middle",
                    font_weight="bold",
                ),
            )
        )
    return gy + h * s
