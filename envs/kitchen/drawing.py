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
from teamgym.envs.kitchen.icons import (
    CELL,
    chef_icon,
    dish_icon,
    held_words,
    item_icon,
    item_name,
    onion_icon,
    pot_icon,
)
from teamgym.envs.kitchen.words import FACING, TERRAIN
from teamgym.envs.kitchen.world import DIRECTIONS, RECIPE_SIZE, Item, Soup

if TYPE_CHECKING:
    from teamgym.envs.kitchen.env import KitchenEnv

__all__ = ["draw", "drawing", "seat_data"]

_FLOOR, _COUNTER, _SERVE = "#f4efe4", "#c9a57c", "#86c08a"
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
            out.append(_cell(gx + x * CELL, gy + y * CELL, ch))
    for pot in data["pots"]:
        out.append(pot_icon(gx + pot["x"] * CELL, gy + pot["y"] * CELL, pot, data["cook_time"]))
    for counter in data["counters"]:
        cx, cy = gx + counter["x"] * CELL + CELL / 2, gy + counter["y"] * CELL + CELL / 2
        out.append(
            el(
                "g",
                {
                    "class": "counter-item",
                    "data-x": counter["x"],
                    "data-y": counter["y"],
                    "data-item": item_name(counter["item"]),
                },
                item_icon(cx, cy, counter["item"], 1.0),
            )
        )
    for i, chef in enumerate(data["chefs"]):
        out.append(chef_icon(gx, gy, i, chef, chef["name"] == data["seat"]))
    me = next(c for c in data["chefs"] if c["name"] == data["seat"])
    out += _targets(gx, gy, me, rows)
    panel_x = gx + width * CELL + 28
    out += _panel(panel_x, data)
    total_w = max(panel_x + 330, 720)
    total_h = max(gy + height * CELL + 16, 300)
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
                "width": CELL,
                "height": CELL,
                "fill": base,
                "stroke": "#d9d2c3" if ch == " " else "#9b7b55",
                "stroke-width": 1,
            },
        )
    ]
    mid_x, mid_y = x + CELL / 2, y + CELL / 2
    if ch == "O":
        parts.append(
            el(
                "rect",
                {
                    "x": x + 8,
                    "y": y + 8,
                    "width": CELL - 16,
                    "height": CELL - 16,
                    "rx": 6,
                    "fill": "#7a5a3a",
                },
            )
        )
        for dx, dy in ((-12, 4), (12, 4), (0, -10)):
            parts.append(onion_icon(mid_x + dx, mid_y + dy, 10))
    elif ch == "D":
        parts.append(
            el(
                "rect",
                {
                    "x": x + 8,
                    "y": y + 8,
                    "width": CELL - 16,
                    "height": CELL - 16,
                    "rx": 6,
                    "fill": "#6c7a89",
                },
            )
        )
        for dy in (10, 2, -6):
            parts.append(dish_icon(mid_x, mid_y + dy, 1.0))
    elif ch == "S":
        parts.append(
            label(mid_x, mid_y + 5, "serve", 15, text_anchor="middle", font_weight="bold", fill=INK)
        )
    return el("g", {"class": "terrain", "data-terrain": ch}, tooltip(what), *parts)


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
        out.append(_hit(gx + x * CELL, gy + y * CELL, actions, words))
    out.append(
        _hit(
            gx + me["x"] * CELL,
            gy + me["y"] * CELL,
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
                "width": CELL - 4,
                "height": CELL - 4,
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
        words = held_words(chef["held"])
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
