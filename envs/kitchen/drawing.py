"""``kitchen-v0`` drawn: the layout's grid, the chefs with their facing and what they hold, the
pots with their onions and cooking timer, the counters' items, the dispensers and the serving
spot. Every chef sees the whole kitchen, so a seat's data is the whole state."""

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
from teamgym.envs.kitchen.words import FACING, HELD, TERRAIN
from teamgym.envs.kitchen.world import DIRECTIONS, RECIPE_SIZE, Item, Soup

if TYPE_CHECKING:
    from teamgym.envs.kitchen.env import KitchenEnv

__all__ = ["draw", "drawing", "seat_data"]

_S = 72  # a cell's side
_FLOOR, _COUNTER, _SERVE = "#f4efe4", "#c9a57c", "#86c08a"
_ONION, _ONION_EDGE, _SOUP = "#e9c46a", "#9c6b30", "#d9822b"
_KEYS = grid_keys("up", "down", "left", "right", i="interact", s="stay")


def _item(item: Item | None) -> dict[str, Any] | None:
    if item is None:
        return None
    if isinstance(item, Soup):
        return {"kind": "soup", "onions": item.onions}
    return {"kind": item}


def seat_data(env: KitchenEnv, agent: str) -> dict[str, Any]:
    """The kitchen as ``agent`` sees it: all of it (its observation describes every chef, pot
    and counter)."""
    k, lay = env.kitchen, env.layout
    pots = []
    for x, y in lay.pots:
        soup = k.pot((x, y))
        pots.append(
            {
                "x": x,
                "y": y,
                "onions": soup.onions if soup else 0,
                "cooking": bool(soup and soup.cooking(env.cook_time)),
                "ready": bool(soup and soup.ready(env.cook_time)),
                "tick": max(soup.tick, 0) if soup else 0,
            }
        )
    return {
        "seat": agent,
        "layout": lay.name,
        "terrain": list(lay.terrain),
        "cook_time": env.cook_time,
        "chefs": [
            {
                "name": name,
                "x": c.pos[0],
                "y": c.pos[1],
                "facing": FACING[c.facing],
                "held": _item(c.held),
            }
            for name, c in zip(env.possible_agents, k.chefs, strict=True)
        ],
        "pots": pots,
        "counters": [
            {"x": x, "y": y, "item": _item(obj)}
            for (x, y), obj in sorted(k.objects.items())
            if lay.at((x, y)) == "X"
        ],
        "soups": env.soups,
        "step": env.num_steps,
        "steps_left": env.max_steps - env.num_steps,
    }


def drawing(env: KitchenEnv, agent: str) -> Drawing:
    """``agent``'s picture of the kitchen (see the module docstring)."""
    data = seat_data(env, agent)
    legend = (
        "Your chef has the dark ring; the wedge shows where a chef faces. Click a cell next to "
        "your chef to move (or turn) there, the cell you face to interact, your chef to stay; "
        "keys: arrows move, i interacts, s stays."
    )
    return Drawing("kitchen", data, draw(data), keys=dict(_KEYS), legend=legend)


def draw(data: dict[str, Any]) -> str:
    """The kitchen of ``data`` (see :func:`seat_data`) as SVG."""
    rows = data["terrain"]
    width, height = len(rows[0]), len(rows)
    gx, gy = 16, 16
    out = []
    for y, row in enumerate(rows):
        for x, ch in enumerate(row):
            out.append(_cell(gx + x * _S, gy + y * _S, ch))
    for pot in data["pots"]:
        out.append(_pot(gx + pot["x"] * _S, gy + pot["y"] * _S, pot, data["cook_time"]))
    for counter in data["counters"]:
        cx, cy = gx + counter["x"] * _S + _S / 2, gy + counter["y"] * _S + _S / 2
        out.append(
            el(
                "g",
                {
                    "class": "counter-item",
                    "data-x": counter["x"],
                    "data-y": counter["y"],
                    "data-item": _item_name(counter["item"]),
                },
                _item_icon(cx, cy, counter["item"], 1.0),
            )
        )
    for i, chef in enumerate(data["chefs"]):
        out.append(_chef(gx, gy, i, chef, chef["name"] == data["seat"]))
    me = next(c for c in data["chefs"] if c["name"] == data["seat"])
    out += _targets(gx, gy, me, rows)
    panel_x = gx + width * _S + 28
    out += _panel(panel_x, data)
    total_w = max(panel_x + 330, 720)
    total_h = max(gy + height * _S + 16, 300)
    title = (
        f"The kitchen {data['layout']} as {data['seat']} sees it: {data['soups']} soup(s) "
        f"served, {data['steps_left']} step(s) left"
    )
    return document(total_w, total_h, "kitchen", title, *out)


def _cell(x: float, y: float, ch: str) -> str:
    """One cell's terrain."""
    what = TERRAIN.get(ch, "counter")
    base = _FLOOR if ch == " " else _SERVE if ch == "S" else _COUNTER
    parts = [
        el(
            "rect",
            {
                "x": x,
                "y": y,
                "width": _S,
                "height": _S,
                "fill": base,
                "stroke": "#d9d2c3" if ch == " " else "#9b7b55",
                "stroke-width": 1,
            },
        )
    ]
    mid_x, mid_y = x + _S / 2, y + _S / 2
    if ch == "O":
        parts.append(
            el(
                "rect",
                {
                    "x": x + 8,
                    "y": y + 8,
                    "width": _S - 16,
                    "height": _S - 16,
                    "rx": 6,
                    "fill": "#7a5a3a",
                },
            )
        )
        for dx, dy in ((-12, 4), (12, 4), (0, -10)):
            parts.append(_onion(mid_x + dx, mid_y + dy, 10))
    elif ch == "D":
        parts.append(
            el(
                "rect",
                {
                    "x": x + 8,
                    "y": y + 8,
                    "width": _S - 16,
                    "height": _S - 16,
                    "rx": 6,
                    "fill": "#6c7a89",
                },
            )
        )
        for dy in (10, 2, -6):
            parts.append(_dish(mid_x, mid_y + dy, 1.0))
    elif ch == "S":
        parts.append(
            label(mid_x, mid_y + 5, "serve", 15, text_anchor="middle", font_weight="bold", fill=INK)
        )
    return el("g", {"class": "terrain", "data-terrain": ch}, tooltip(what), *parts)


def _onion(cx: float, cy: float, r: float) -> str:
    return el(
        "circle",
        {"cx": cx, "cy": cy, "r": r, "fill": _ONION, "stroke": _ONION_EDGE, "stroke-width": 1.5},
    )


def _dish(cx: float, cy: float, scale: float) -> str:
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


def _item_name(item: dict[str, Any] | None) -> str:
    if item is None:
        return ""
    return f"soup{item['onions']}" if item["kind"] == "soup" else item["kind"]


def _held_words(item: dict[str, Any] | None) -> str:
    """What a chef holds, in words."""
    if item is None:
        return "nothing"
    return f"a {item['onions']}-onion soup" if item["kind"] == "soup" else HELD[item["kind"]]


def _item_icon(cx: float, cy: float, item: dict[str, Any] | None, scale: float) -> str:
    """An onion, an empty dish or a soup in a dish, centred at ``(cx, cy)``."""
    if item is None:
        return ""
    if item["kind"] == "onion":
        return _onion(cx, cy, 11 * scale)
    parts = [_dish(cx, cy, scale)]
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


def _pot(x: float, y: float, pot: dict[str, Any], cook_time: int) -> str:
    """A pot: its onions, a timer ring while it cooks, a green ring when ready."""
    cx, cy, r = x + _S / 2, y + _S / 2, _S * 0.36
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
        parts.append(_onion(cx + spots[i][0], cy + spots[i][1], 7))
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
                y + _S - 1,
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


def _chef(gx: float, gy: float, index: int, chef: dict[str, Any], own: bool) -> str:
    """A chef: a disc in its seat's colour, a wedge where it faces, what it holds by its side."""
    cx, cy = gx + chef["x"] * _S + _S / 2, gy + chef["y"] * _S + _S / 2
    dx, dy = DIRECTIONS[chef["facing"]]
    r = _S * 0.27
    tip = (cx + dx * (r + 12), cy + dy * (r + 12))
    side = (-dy, dx)
    base1 = (cx + dx * r + side[0] * 9, cy + dy * r + side[1] * 9)
    base2 = (cx + dx * r - side[0] * 9, cy + dy * r - side[1] * 9)
    wedge = el(
        "polygon",
        {"points": " ".join(f"{p[0]:.1f},{p[1]:.1f}" for p in (tip, base1, base2)), "fill": INK},
    )
    held = chef["held"]
    holding = el("g", {"class": "held"}, _item_icon(cx + r, cy + r, held, 0.7)) if held else ""
    words = _held_words(held)
    return el(
        "g",
        {
            "class": "chef",
            "data-seat": chef["name"],
            "data-x": chef["x"],
            "data-y": chef["y"],
            "data-facing": chef["facing"],
            "data-held": _item_name(held),
        },
        tooltip(f"{chef['name']}: facing {chef['facing']}, holding {words}"),
        wedge,
        seat_token(
            cx, cy, r, index, chef["name"].removeprefix("robot_"), own=own, name=chef["name"]
        ),
        holding,
    )


def _targets(gx: float, gy: float, me: dict[str, Any], rows: list[str]) -> list[str]:
    """The cells the seat's chef may click: its neighbours (a move or turn, ``interact`` for
    the one it faces when that is not floor) and itself (``stay``, ``interact``)."""
    out = []
    ahead = DIRECTIONS[me["facing"]]
    for name, (dx, dy) in DIRECTIONS.items():
        x, y = me["x"] + dx, me["y"] + dy
        if not (0 <= y < len(rows) and 0 <= x < len(rows[0])):
            continue
        ch = rows[y][x]
        what = TERRAIN.get(ch, "counter")
        if (dx, dy) == ahead and ch != " ":
            actions, words = ["interact"], f"interact with the {what} you face"
        else:
            verb = "move" if ch == " " else "turn"
            actions, words = [name], f"{verb} {name} ({what})"
        out.append(_hit(gx + x * _S, gy + y * _S, actions, words))
    out.append(
        _hit(
            gx + me["x"] * _S,
            gy + me["y"] * _S,
            ["stay", "interact"],
            "your chef: stay or interact",
        )
    )
    return out


def _hit(x: float, y: float, actions: list[str], words: str) -> str:
    """A transparent square over a cell that a click acts on."""
    return el(
        "g",
        act(actions, words),
        el(
            "rect",
            {
                "x": x + 2,
                "y": y + 2,
                "width": _S - 4,
                "height": _S - 4,
                "rx": 8,
                "fill": "transparent",
                "stroke": "none",
                "class": "frame",
            },
        ),
    )


def _panel(x: float, data: dict[str, Any]) -> list[str]:
    out = [
        label(x, 34, f"Soups served: {data['soups']}", 17, font_weight="bold"),
        label(x, 58, f"Step {data['step']}, {data['steps_left']} left", 14, fill=MUTED),
    ]
    y = 92
    for i, chef in enumerate(data["chefs"]):
        words = _held_words(chef["held"])
        you = " (you)" if chef["name"] == data["seat"] else ""
        out.append(seat_token(x + 12, y - 5, 10, i, str(i), own=bool(you), name=chef["name"]))
        out.append(label(x + 30, y, f"{chef['name']}{you}: faces {chef['facing']}", 14))
        out.append(label(x + 30, y + 18, f"holds {words}", 14, fill=MUTED))
        y += 46
    for pot in data["pots"]:
        if pot["ready"]:
            state = "ready: plate it"
        elif pot["cooking"]:
            state = f"cooking, {pot['tick']} of {data['cook_time']}"
        else:
            state = f"{pot['onions']} of {RECIPE_SIZE} onions" + (
                ", start it" if pot["onions"] else ""
            )
        out.append(label(x, y, f"Pot ({pot['x']}, {pot['y']}): {state}", 14))
        y += 22
    return out
