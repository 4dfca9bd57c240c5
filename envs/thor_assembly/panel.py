"""``thor-assembly-v0``'s words beside and below the floor plan: the robot's side panel and the
numbered list of places, lines a click acts on; kept apart so :mod:`.drawing` stays short."""

from __future__ import annotations

from typing import Any

from teamgym.envs.drawing import INK, MUTED, act, el, label, wrap

__all__ = ["BENCH", "place_actions", "place_list", "side_panel"]

BENCH = "#e8590c"  # the workbench's colour, on the plan and in the list
_PANEL_X = 510  # the side panel's left edge


def place_actions(name: str, workbench: bool = False) -> list[str]:
    """What a robot may do with a place (the page offers those valid now)."""
    return [f"goto {name}", f"open {name}", f"close {name}", f"put {name}"] + (
        ["inspect"] if workbench else []
    )


def side_panel(out: list[str], data: dict[str, Any]) -> float:
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
            out.append(_row(x, y, text, place_actions(place["name"]), place=place["name"]))
            y += 22
            continue
        text = f"{place['name']} holds " + (", ".join(place["holds"]) or "nothing")
        out.append(_row(x, y, text, place_actions(place["name"]), place=place["name"]))
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


def place_list(out: list[str], data: dict[str, Any], y: float) -> float:
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
        actions = place_actions(place["name"], place["workbench"])
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
                    fill=BENCH if place["workbench"] else INK,
                ),
            )
        )
    return y + 20 + per * 22
