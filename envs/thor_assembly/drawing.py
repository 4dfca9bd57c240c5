"""``thor-assembly-v0`` drawn as a robot knows the house: the floor plan with every place (their
names are in each observation), the robot itself, the teammates at its place, what it holds and
sees there, the task's parts and connections, and, at the workbench only, what lies on it and
which connections are made (elsewhere the robot does not see them, and its data does not hold
them). Robots elsewhere, parts unseen and hidden defects are never in the data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamgym.envs.drawing import (
    INK,
    MUTED,
    Drawing,
    act,
    document,
    el,
    label,
    seat_token,
    tooltip,
    wrap,
)
from teamgym.envs.thor_assembly.views import _holding_text

if TYPE_CHECKING:
    from teamgym.envs.thor_assembly.env import ThorAssemblyEnv

__all__ = ["draw", "drawing", "seat_data"]

_FLOOR, _PLACE, _BENCH = "#e9ecef", "#8fb3de", "#e8590c"
_PLAN_W, _PLAN_H, _PANEL_X, _WIDTH = 470, 340, 510, 980


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


def _place_actions(name: str, workbench: bool = False) -> list[str]:
    """What a robot may do with a place (the page offers those valid now)."""
    return [f"goto {name}", f"open {name}", f"close {name}", f"put {name}"] + (
        ["inspect"] if workbench else []
    )


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
    panel_bottom = _panel(out, data)
    y = max(plan_bottom, panel_bottom) + 30
    y = _places(out, data, y)
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
        actions = [a for n, p in members for a in _place_actions(p["name"], p["workbench"])]
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
                        "fill": _BENCH if bench else _PLACE,
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


def _panel(out: list[str], data: dict[str, Any]) -> float:
    """The task, the robot's state, what it sees, the connections; returns its bottom."""
    x, y = _PANEL_X, 52.0

    def line(text: str, size: float = 14, **attrs: Any) -> None:
        nonlocal y
        for i, part in enumerate(wrap(text, 56)):
            out.append(label(x + (0 if i == 0 else 12), y, part, size, **attrs))
            y += size + 6

    if data["phase"] == "plan":
        line(
            "Planning turn: "
            + (
                "you write the plan."
                if data["index"] == 0
                else f"{data['robots'][0]} is planning; wait."
            ),
            15,
            font_weight="bold",
        )
    if data["travel"]:
        where = f"on the way to {data['travel']['to']} ({data['travel']['steps']} step(s) left)"
    else:
        where = f"at {data['at']}" if data["at"] else "at your start position"
    line(f"You ({data['seat']}) are {where}, holding {data['holding']}.", 15, font_weight="bold")
    parts = ", ".join(p["type"] + (" (heavy)" if p["heavy"] else "") for p in data["parts"])
    line(f"Parts: {parts}.", 14, fill=MUTED)
    if data["teammates_here"]:
        line("Teammates here: " + ", ".join(data["teammates_here"]) + ".")
    for place in data["here"]:
        if place["closed"]:
            text = f"{place['name']} is closed"
            out.append(_row(x, y, text, _place_actions(place["name"]), place=place["name"]))
            y += 22
            continue
        text = f"{place['name']} holds " + (", ".join(place["holds"]) or "nothing")
        out.append(_row(x, y, text, _place_actions(place["name"]), place=place["name"]))
        y += 22
        for thing in place["holds"]:
            out.append(_row(x + 16, y, f"\u2022 {thing}", [f"pickup {thing}"], object=thing))
            y += 22
    bench = data["bench"]
    if bench is not None:
        line("On the workbench: " + (", ".join(bench["placed"]) or "nothing") + ".")
        if bench["inspection"]:
            line(f"Last inspection: {bench['inspection']}.")
    y += 8
    line(
        "Connections" + ("" if bench is not None else " (seen at the workbench only)") + ":",
        15,
        font_weight="bold",
    )
    made = {tuple(c) for c in (bench or {}).get("made", [])}
    for a, b in data["connections"]:
        state = ("made" if (a, b) in made else "to do") if bench is not None else "?"
        colour = "#2b8a3e" if state == "made" else MUTED
        na, nb = _name_of(a, data), _name_of(b, data)
        actions = (
            [f"hold {na}", f"attach {nb} to {na}", f"hold {nb}", f"attach {na} to {nb}"]
            if na and nb
            else []
        )
        out.append(
            el(
                "g",
                {
                    **act(actions, f"connection {a}+{b}: {state}", menu=True),
                    "data-connection": f"{a}+{b}",
                    "data-state": state,
                },
                el(
                    "rect",
                    {
                        "x": x - 4,
                        "y": y - 15,
                        "width": 300,
                        "height": 21,
                        "rx": 4,
                        "fill": "transparent",
                        "class": "frame",
                    },
                ),
                el(
                    "line",
                    {
                        "x1": x,
                        "y1": y - 5,
                        "x2": x + 24,
                        "y2": y - 5,
                        "stroke": colour,
                        "stroke-width": 4,
                        "stroke-dasharray": None if state == "made" else "4 3",
                    },
                ),
                label(x + 32, y, f"{a} + {b}: {state}", 14, fill=colour),
            )
        )
        y += 22
    if data["plan"]:
        y += 6
        line(
            "Plan: " + "; ".join(f"{k} -> {', '.join(v)}" for k, v in data["plan"].items()),
            13,
            fill=MUTED,
        )
    return y


def _name_of(part: str, data: dict[str, Any]) -> str | None:
    """The name of a part's object where the seat sees it on the workbench (``Type_N``)."""
    bench = data["bench"] or {}
    return next((n for n in bench.get("placed", []) if n.rsplit("_", 1)[0] == part), None)


def _row(x: float, y: float, text: str, actions: list[str], **what: str) -> str:
    """A line of the panel that a click acts on (``what``: its ``data-`` attributes)."""
    attrs = {f"data-{k}": v for k, v in what.items()}
    return el(
        "g",
        {**act(actions, text, menu=True), **attrs},
        el(
            "rect",
            {
                "x": x - 4,
                "y": y - 15,
                "width": 440,
                "height": 21,
                "rx": 4,
                "fill": "transparent",
                "class": "frame",
            },
        ),
        label(x, y, text, 14),
    )


def _places(out: list[str], data: dict[str, Any], y: float) -> float:
    """The numbered list of places, three columns, each a click to go there."""
    out.append(label(16, y, "Places (steps away):", 15, font_weight="bold"))
    y += 8
    per = -(-len(data["places"]) // 3)
    for i, place in enumerate(data["places"]):
        col, row = divmod(i, per)
        px, py = 16 + col * 320, y + 20 + row * 22
        away = "" if place["steps"] is None else f" \u00b7 {place['steps']}"
        here = " (you are here)" if place["name"] == data["at"] else ""
        bench = " (workbench)" if place["workbench"] else ""
        actions = _place_actions(place["name"], place["workbench"])
        out.append(
            el(
                "g",
                {**act(actions, place["name"] + bench, menu=True), "data-place": place["name"]},
                el(
                    "rect",
                    {
                        "x": px - 4,
                        "y": py - 15,
                        "width": 310,
                        "height": 21,
                        "rx": 4,
                        "fill": "transparent",
                        "class": "frame",
                    },
                ),
                label(
                    px,
                    py,
                    f"{i + 1}. {place['name']}{bench}{away}{here}",
                    13,
                    fill=_BENCH if place["workbench"] else INK,
                ),
            )
        )
    return y + 20 + per * 22
