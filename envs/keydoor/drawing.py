"""``keydoor-v0`` drawn: the two rooms, the wall and its door (open, closed or locked, as the
seat's observation says), the plate, the key, the team; the treasure only where the seat sees it
(from the doorway or the east room: from the west room it is not in the seat's data)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamgym.envs.drawing import (
    INK,
    MUTED,
    Drawing,
    act,
    document,
    el,
    grid_keys,
    label,
    seat_token,
    tooltip,
)
from teamgym.envs.keydoor.world import MOVES

if TYPE_CHECKING:
    from teamgym.envs.keydoor.env import KeyDoorEnv

__all__ = ["draw", "drawing", "seat_data"]

_KEYS = grid_keys("north", "south", "west", "east", t="take", w="wait")
_FLOOR, _WALL, _DOOR, _PLATE, _GOLD = "#f3f1e7", "#4a4f57", "#8b5a2b", "#9aa3ad", "#e0a800"


def seat_data(env: KeyDoorEnv, agent: str) -> dict[str, Any]:
    """What ``agent`` knows: the rooms, door, plate, key and team; the treasure once it stands
    where it can see it."""
    lay = env.layout
    assert lay is not None, "keydoor needs reset() first"
    here = env.pos[agent]
    holders = env._on_plate()
    if not env.unlocked and not (holders and env.carrier == agent):
        door = "locked"
    else:
        door = "open" if holders else "closed"
    if not env.with_key:
        key = "none"
    elif env.unlocked:
        key = "used"
    elif env.carrier is not None:
        key = "carried"
    else:
        key = "on the floor" if lay.key else "none"
    return {
        "seat": agent,
        "width": lay.width,
        "height": lay.height,
        "wall": lay.wall,
        "door": list(lay.door),
        "door_state": door,
        "plate": list(lay.plate),
        "on_plate": holders,
        "with_key": env.with_key,
        "key": key,
        "key_at": list(lay.key) if key == "on the floor" and lay.key else None,
        "carrier": env.carrier if key == "carried" else None,
        "treasure": list(lay.treasure) if lay.room(here) != "west" else None,
        "agents": [
            {"name": a, "index": i, "x": env.pos[a][0], "y": env.pos[a][1]}
            for i, a in enumerate(env.possible_agents)
        ],
        "step": env.num_steps,
        "max_steps": env.max_steps,
    }


def drawing(env: KeyDoorEnv, agent: str) -> Drawing:
    """``agent``'s picture of the rooms (see the module docstring)."""
    data = seat_data(env, agent)
    legend = (
        "The door opens while someone stands on the plate (grey square); the treasure shows "
        "once you stand in the doorway or the east room. Click a cell next to you to move, "
        "your own cell to take or wait; keys: arrows move, t takes, w waits."
    )
    return Drawing("keydoor", data, draw(data), keys=dict(_KEYS), legend=legend)


def draw(data: dict[str, Any]) -> str:
    """The rooms of ``data`` (see :func:`seat_data`) as SVG."""
    gx, gy = 16, 44
    w, h, wall = data["width"], data["height"], data["wall"]
    door = tuple(data["door"])
    s = max(36, min(64, 760 // w, 400 // h))
    out = [
        label(
            16,
            28,
            f"Step {data['step']} of {data['max_steps']}: the door is {data['door_state']}",
            17,
            font_weight="bold",
        )
    ]
    for y in range(h):
        for x in range(w):
            px, py = gx + x * s, gy + y * s
            if (x, y) == door:
                out.append(_door(px, py, data["door_state"], s))
            elif x == wall:
                out.append(
                    el(
                        "rect",
                        {"x": px, "y": py, "width": s, "height": s, "fill": _WALL, "class": "wall"},
                    )
                )
            else:
                out.append(
                    el(
                        "rect",
                        {
                            "x": px,
                            "y": py,
                            "width": s,
                            "height": s,
                            "fill": _FLOOR,
                            "stroke": "#d6d3c4",
                            "stroke-width": 1,
                        },
                    )
                )
    px, py = gx + data["plate"][0] * s, gy + data["plate"][1] * s
    out.append(
        el(
            "g",
            {"class": "plate", "data-x": data["plate"][0], "data-y": data["plate"][1]},
            tooltip("the pressure plate"),
            el(
                "rect",
                {
                    "x": px + 6,
                    "y": py + 6,
                    "width": s - 12,
                    "height": s - 12,
                    "rx": 4,
                    "fill": _PLATE,
                    "stroke": INK,
                    "stroke-width": 1.5,
                },
            ),
            label(px + s / 2, py + s - 10, "plate", 11, text_anchor="middle"),
        )
    )
    if data["key_at"]:
        kx, ky = gx + data["key_at"][0] * s, gy + data["key_at"][1] * s
        out.append(_key(kx + s / 2, ky + s / 2))
    east_x = gx + (wall + 1) * s
    if data["treasure"] is not None:
        tx, ty = gx + data["treasure"][0] * s, gy + data["treasure"][1] * s
        out.append(_chest(tx, ty, data["treasure"], s))
    else:
        out.append(
            el(
                "g",
                {"class": "unseen"},
                label(
                    east_x + (w - wall - 1) * s / 2,
                    gy + h * s / 2 + 4,
                    "treasure: not visible",
                    15,
                    text_anchor="middle",
                    fill=MUTED,
                ),
                label(
                    east_x + (w - wall - 1) * s / 2,
                    gy + h * s / 2 + 24,
                    "from the west room",
                    15,
                    text_anchor="middle",
                    fill=MUTED,
                ),
            )
        )
    for agent in data["agents"]:
        cx, cy = gx + agent["x"] * s + s / 2, gy + agent["y"] * s + s / 2
        out.append(
            el(
                "g",
                {
                    "class": "agent",
                    "data-seat": agent["name"],
                    "data-x": agent["x"],
                    "data-y": agent["y"],
                },
                seat_token(
                    cx,
                    cy,
                    s * 0.28,
                    agent["index"],
                    agent["name"].removeprefix("robot_"),
                    own=agent["name"] == data["seat"],
                    name=agent["name"],
                ),
            )
        )
    out += _targets(gx, gy, data, s)
    panel = gx + w * s + 24
    out += _notes(panel, gy, data)
    title = f"The two rooms as {data['seat']} sees them: the door is {data['door_state']}"
    return document(max(panel + 260, 640), gy + h * s + 16, "keydoor", title, *out)


def _door(x: float, y: float, state: str, s: int) -> str:
    parts = [el("rect", {"x": x, "y": y, "width": s, "height": s, "fill": _WALL})]
    if state == "open":
        parts.append(
            el("rect", {"x": x, "y": y + 4, "width": s, "height": s - 8, "fill": "#b2f2bb"})
        )
        parts.append(
            el("rect", {"x": x + 2, "y": y + 4, "width": 8, "height": s - 8, "fill": _DOOR})
        )
    else:
        parts.append(
            el(
                "rect",
                {
                    "x": x + 8,
                    "y": y + 4,
                    "width": s - 16,
                    "height": s - 8,
                    "fill": _DOOR,
                    "stroke": INK,
                    "stroke-width": 1.5,
                },
            )
        )
        if state == "locked":
            parts.append(
                el(
                    "rect",
                    {
                        "x": x + s / 2 - 8,
                        "y": y + s / 2 - 2,
                        "width": 16,
                        "height": 13,
                        "rx": 2,
                        "fill": _GOLD,
                    },
                )
            )
            parts.append(
                el(
                    "path",
                    {
                        "d": f"M {x + s / 2 - 5} {y + s / 2 - 2} v -5 a 5 5 0 0 1 10 0 v 5",
                        "fill": "none",
                        "stroke": _GOLD,
                        "stroke-width": 3,
                    },
                )
            )
    return el("g", {"class": "door", "data-state": state}, tooltip(f"the door: {state}"), *parts)


def _key(cx: float, cy: float) -> str:
    return el(
        "g",
        {"class": "key"},
        tooltip("the key"),
        el(
            "circle",
            {"cx": cx - 10, "cy": cy, "r": 8, "fill": "none", "stroke": _GOLD, "stroke-width": 4},
        ),
        el(
            "path",
            {
                "d": f"M {cx - 2} {cy} H {cx + 18} M {cx + 12} {cy} v 7 M {cx + 17} {cy} v 6",
                "stroke": _GOLD,
                "stroke-width": 4,
            },
        ),
    )


def _chest(x: float, y: float, at: list[int], s: int) -> str:
    return el(
        "g",
        {"class": "treasure", "data-x": at[0], "data-y": at[1]},
        tooltip("the treasure"),
        el(
            "rect",
            {
                "x": x + 12,
                "y": y + 22,
                "width": s - 24,
                "height": s - 34,
                "rx": 3,
                "fill": "#a0522d",
                "stroke": INK,
                "stroke-width": 1.5,
            },
        ),
        el(
            "rect",
            {
                "x": x + 12,
                "y": y + 14,
                "width": s - 24,
                "height": 10,
                "rx": 4,
                "fill": _GOLD,
                "stroke": INK,
                "stroke-width": 1.5,
            },
        ),
        el("rect", {"x": x + s / 2 - 3, "y": y + 26, "width": 6, "height": 8, "fill": _GOLD}),
    )


def _targets(gx: float, gy: float, data: dict[str, Any], s: int) -> list[str]:
    """The seat's neighbouring cells (moves) and its own (``take``, ``wait``)."""
    me = next(a for a in data["agents"] if a["name"] == data["seat"])
    out = []
    for name, (dx, dy) in MOVES.items():
        x, y = me["x"] + dx, me["y"] + dy
        if 0 <= x < data["width"] and 0 <= y < data["height"]:
            out.append(_hit(gx + x * s, gy + y * s, [name], f"move {name}", s))
    out.append(_hit(gx + me["x"] * s, gy + me["y"] * s, ["take", "wait"], "you: take or wait", s))
    return out


def _hit(x: float, y: float, actions: list[str], words: str, s: int) -> str:
    return el(
        "g",
        act(actions, words),
        el(
            "rect",
            {
                "x": x + 2,
                "y": y + 2,
                "width": s - 4,
                "height": s - 4,
                "rx": 6,
                "fill": "transparent",
                "class": "frame",
            },
        ),
    )


def _notes(x: float, y: float, data: dict[str, Any]) -> list[str]:
    holders = ", ".join(data["on_plate"]) or "nobody"
    lines = [f"On the plate: {holders}."]
    if data["with_key"]:
        key = {
            "used": "used: the door is unlocked",
            "carried": f"carried by {data['carrier']}",
            "on the floor": "in the west room",
            "none": "gone",
        }[data["key"]]
        lines.append(f"Key: {key}.")
    return [label(x, y + 18 + 22 * i, line, 14) for i, line in enumerate(lines)]
