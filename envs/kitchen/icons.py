"""``kitchen-v0``'s pictures of things: onions, dishes, soups, pots and chefs, with the words
for what a chef holds; kept apart so :mod:`.drawing` stays short."""

from __future__ import annotations

from typing import Any

from teamgym.envs.drawing import INK, el, label, seat_token, tooltip
from teamgym.envs.kitchen.words import HELD
from teamgym.envs.kitchen.world import DIRECTIONS, RECIPE_SIZE

__all__ = [
    "CELL",
    "chef_icon",
    "dish_icon",
    "held_words",
    "item_icon",
    "item_name",
    "onion_icon",
    "pot_icon",
]

CELL = 72  # a cell's side
_ONION, _ONION_EDGE, _SOUP = "#e9c46a", "#9c6b30", "#d9822b"


def onion_icon(cx: float, cy: float, r: float) -> str:
    """An onion of radius ``r`` centred at ``(cx, cy)``."""
    return el(
        "circle",
        {"cx": cx, "cy": cy, "r": r, "fill": _ONION, "stroke": _ONION_EDGE, "stroke-width": 1.5},
    )


def dish_icon(cx: float, cy: float, scale: float) -> str:
    """An empty dish centred at ``(cx, cy)``."""
    return el(
        "ellipse",
        {
            "cx": cx,
            "cy": cy,
            "rx": 20 * scale,
            "ry": 7 * scale,
            "fill": "#ffffff",
            "stroke": "#6b7280",
            "stroke-width": 1.5,
        },
    )


def item_name(item: dict[str, Any] | None) -> str:
    """An item's ``data-`` value: ``onion``, ``dish``, ``soupN`` (``N`` onions) or empty."""
    if item is None:
        return ""
    return f"soup{item['onions']}" if item["kind"] == "soup" else item["kind"]


def held_words(item: dict[str, Any] | None) -> str:
    """What a chef holds, in words."""
    if item is None:
        return "nothing"
    return f"a {item['onions']}-onion soup" if item["kind"] == "soup" else HELD[item["kind"]]


def item_icon(cx: float, cy: float, item: dict[str, Any] | None, scale: float) -> str:
    """An onion, an empty dish or a soup in a dish, centred at ``(cx, cy)``."""
    if item is None:
        return ""
    if item["kind"] == "onion":
        return onion_icon(cx, cy, 11 * scale)
    parts = [dish_icon(cx, cy, scale)]
    if item["kind"] == "soup":
        parts.append(
            el(
                "ellipse",
                {
                    "cx": cx,
                    "cy": cy - 2 * scale,
                    "rx": 13 * scale,
                    "ry": 4.5 * scale,
                    "fill": _SOUP,
                },
            )
        )
        parts.append(
            label(
                cx,
                cy - 10 * scale,
                str(item["onions"]),
                12 * scale,
                text_anchor="middle",
                font_weight="bold",
            )
        )
    return el("g", {}, *parts)


def pot_icon(x: float, y: float, pot: dict[str, Any], cook_time: int) -> str:
    """A pot: its onions, a timer ring while it cooks, a green ring when ready."""
    cx, cy, r = x + CELL / 2, y + CELL / 2, CELL * 0.36
    if pot["ready"]:
        state = f"ready ({pot['onions']} onions)"
    elif pot["cooking"]:
        state = f"cooking {pot['onions']} onions, {pot['tick']} of {cook_time} steps"
    elif pot["onions"]:
        state = f"{pot['onions']} of {RECIPE_SIZE} onions, not cooking"
    else:
        state = "empty"
    parts = [
        tooltip(f"pot: {state}"),
        el(
            "circle",
            {"cx": cx, "cy": cy, "r": r, "fill": "#3d4046", "stroke": INK, "stroke-width": 2},
        ),
    ]
    spots = [(-9, 6), (9, 6), (0, -8)]
    for i in range(min(pot["onions"], 3)):
        parts.append(onion_icon(cx + spots[i][0], cy + spots[i][1], 7))
    if pot["cooking"]:
        done = min(pot["tick"] / cook_time, 1.0)
        circumference = 2 * 3.14159 * (r + 4)
        parts.append(
            el(
                "circle",
                {
                    "cx": cx,
                    "cy": cy,
                    "r": r + 4,
                    "fill": "none",
                    "stroke": "#f08c00",
                    "stroke-width": 5,
                    "stroke-dasharray": f"{circumference * done:.1f} {circumference:.1f}",
                    "transform": f"rotate(-90 {cx} {cy})",
                },
            )
        )
        parts.append(
            label(
                cx,
                y + CELL - 1,
                f"{pot['tick']}/{cook_time}",
                11,
                text_anchor="middle",
                font_weight="bold",
                fill=INK,
            )
        )
    if pot["ready"]:
        parts.append(
            el(
                "circle",
                {
                    "cx": cx,
                    "cy": cy,
                    "r": r + 4,
                    "fill": "none",
                    "stroke": "#2b8a3e",
                    "stroke-width": 5,
                },
            )
        )
        parts.append(
            label(cx, y + 12, "ready", 11, text_anchor="middle", font_weight="bold", fill=INK)
        )
    return el(
        "g",
        {
            "class": "pot",
            "data-x": pot["x"],
            "data-y": pot["y"],
            "data-onions": pot["onions"],
            "data-state": "ready" if pot["ready"] else "cooking" if pot["cooking"] else "idle",
        },
        *parts,
    )


def chef_icon(gx: float, gy: float, index: int, chef: dict[str, Any], own: bool) -> str:
    """A chef: a disc in its seat's colour, a wedge where it faces, what it holds by its side."""
    cx, cy = gx + chef["x"] * CELL + CELL / 2, gy + chef["y"] * CELL + CELL / 2
    dx, dy = DIRECTIONS[chef["facing"]]
    r = CELL * 0.27
    tip = (cx + dx * (r + 12), cy + dy * (r + 12))
    side = (-dy, dx)
    base1 = (cx + dx * r + side[0] * 9, cy + dy * r + side[1] * 9)
    base2 = (cx + dx * r - side[0] * 9, cy + dy * r - side[1] * 9)
    wedge = el(
        "polygon",
        {"points": " ".join(f"{p[0]:.1f},{p[1]:.1f}" for p in (tip, base1, base2)), "fill": INK},
    )
    held = chef["held"]
    holding = el("g", {"class": "held"}, item_icon(cx + r, cy + r, held, 0.7)) if held else ""
    words = held_words(held)
    return el(
        "g",
        {
            "class": "chef",
            "data-seat": chef["name"],
            "data-x": chef["x"],
            "data-y": chef["y"],
            "data-facing": chef["facing"],
            "data-held": item_name(held),
        },
        tooltip(f"{chef['name']}: facing {chef['facing']}, holding {words}"),
        wedge,
        seat_token(
            cx, cy, r, index, chef["name"].removeprefix("robot_"), own=own, name=chef["name"]
        ),
        holding,
    )
