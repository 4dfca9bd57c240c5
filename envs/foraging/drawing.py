"""``foraging-v1`` (and ``-v0``) drawn: the field as a seat sees it, the agents and items with
their levels; with a limited ``sight`` the cells beyond it are fogged and hold nothing (what lies
there is not in the seat's data)."""

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
from teamgym.envs.foraging.world import MOVES

if TYPE_CHECKING:
    from teamgym.envs.foraging.env import ForagingEnv

__all__ = ["draw", "drawing", "seat_data"]

_KEYS = grid_keys("north", "south", "west", "east", l="load", w="wait")
_ITEM, _FOG, _GROUND = "#6a9f3a", "#c5c9ce", "#f3f1e7"


def seat_data(env: ForagingEnv, agent: str) -> dict[str, Any]:
    """What ``agent`` sees: its place and level, and the items and teammates within its sight."""
    f = env.field
    assert f is not None, "foraging needs reset() first"
    here = f.pos[agent]
    return {
        "seat": agent,
        "size": env.size,
        "sight": env.sight,
        "row": here[0],
        "col": here[1],
        "level": f.levels[agent],
        "step": env.num_steps,
        "max_steps": env.max_steps,
        "items": [
            {"row": r, "col": c, "level": lv}
            for (r, c), lv in sorted(f.items.items())
            if env._visible(here, (r, c))
        ],
        "agents": [
            {"name": a, "index": i, "row": f.pos[a][0], "col": f.pos[a][1], "level": f.levels[a]}
            for i, a in enumerate(env.possible_agents)
            if a == agent or env._visible(here, f.pos[a])
        ],
    }


def drawing(env: ForagingEnv, agent: str) -> Drawing:
    """``agent``'s picture of the field (see the module docstring)."""
    data = seat_data(env, agent)
    fog = " Grey cells are beyond your sight." if data["sight"] is not None else ""
    legend = (
        "Discs are agents, green boxes items; the numbers are their levels; yours has the dark "
        f"ring.{fog} Click a cell next to you to move there, an item next to you to load it; "
        "keys: arrows move, l loads, w waits."
    )
    return Drawing("foraging", data, draw(data), keys=dict(_KEYS), legend=legend)


def _seen(data: dict[str, Any], r: int, c: int) -> bool:
    sight = data["sight"]
    return sight is None or max(abs(r - data["row"]), abs(c - data["col"])) <= sight


def draw(data: dict[str, Any]) -> str:
    """The field of ``data`` (see :func:`seat_data`) as SVG."""
    n = data["size"]
    s = max(24, min(52, 440 // n))
    gx, gy = 16, 44
    out = [
        label(
            16,
            28,
            f"{data['seat']}, level {data['level']}: step {data['step']} of {data['max_steps']}",
            17,
            font_weight="bold",
        )
    ]
    for r in range(n):
        for c in range(n):
            seen = _seen(data, r, c)
            out.append(
                el(
                    "rect",
                    {
                        "x": gx + c * s,
                        "y": gy + r * s,
                        "width": s,
                        "height": s,
                        "fill": _GROUND if seen else _FOG,
                        "stroke": "#d6d3c4",
                        "stroke-width": 1,
                        "class": "cell" if seen else "cell fog",
                    },
                )
            )
    for item in data["items"]:
        x, y = gx + item["col"] * s, gy + item["row"] * s
        out.append(
            el(
                "g",
                {
                    "class": "item",
                    "data-row": item["row"],
                    "data-col": item["col"],
                    "data-level": item["level"],
                },
                tooltip(f"an item of level {item['level']}"),
                el(
                    "rect",
                    {
                        "x": x + s * 0.14,
                        "y": y + s * 0.14,
                        "width": s * 0.72,
                        "height": s * 0.72,
                        "rx": s * 0.12,
                        "fill": _ITEM,
                        "stroke": INK,
                        "stroke-width": 1.5,
                    },
                ),
                label(
                    x + s / 2,
                    y + s * 0.66,
                    str(item["level"]),
                    s * 0.42,
                    text_anchor="middle",
                    font_weight="bold",
                    fill="#ffffff",
                ),
            )
        )
    for agent in data["agents"]:
        cx, cy = gx + agent["col"] * s + s / 2, gy + agent["row"] * s + s / 2
        own = agent["name"] == data["seat"]
        token = seat_token(
            cx,
            cy,
            s * 0.3,
            agent["index"],
            str(agent["level"]),
            own=own,
            name=f"{agent['name']}, level {agent['level']}",
        )
        out.append(
            el(
                "g",
                {
                    "class": "agent",
                    "data-seat": agent["name"],
                    "data-row": agent["row"],
                    "data-col": agent["col"],
                    "data-level": agent["level"],
                },
                token,
            )
        )
    out += _targets(gx, gy, s, data)
    panel = gx + n * s + 24
    out += _key(panel, gy, data)
    title = (
        f"The foraging field as {data['seat']} sees it: "
        f"{len(data['items'])} item(s) and {len(data['agents']) - 1} teammate(s) in sight"
    )
    return document(max(panel + 250, 640), gy + n * s + 16, "foraging", title, *out)


def _targets(gx: float, gy: float, s: int, data: dict[str, Any]) -> list[str]:
    """The seat's neighbouring cells (a move, or ``load`` for an item) and its own (``load``,
    ``wait``)."""
    items = {(i["row"], i["col"]) for i in data["items"]}
    out = []
    for name, (dr, dc) in MOVES.items():
        r, c = data["row"] + dr, data["col"] + dc
        if not (0 <= r < data["size"] and 0 <= c < data["size"]):
            continue
        actions, words = (
            (["load"], "load the item") if (r, c) in items else ([name], f"move {name}")
        )
        out.append(_hit(gx + c * s, gy + r * s, s, actions, words))
    out.append(
        _hit(gx + data["col"] * s, gy + data["row"] * s, s, ["load", "wait"], "you: load or wait")
    )
    return out


def _hit(x: float, y: float, s: int, actions: list[str], words: str) -> str:
    return el(
        "g",
        act(actions, words),
        el(
            "rect",
            {
                "x": x + 1,
                "y": y + 1,
                "width": s - 2,
                "height": s - 2,
                "rx": 6,
                "fill": "transparent",
                "class": "frame",
            },
        ),
    )


def _key(x: float, y: float, data: dict[str, Any]) -> list[str]:
    sight = "the whole field" if data["sight"] is None else f"{data['sight']} cell(s) around you"
    lines = [
        f"You see {sight}.",
        f"Items in sight: {len(data['items'])}.",
        f"Teammates in sight: {len(data['agents']) - 1}.",
    ]
    return [
        label(x, y + 18 + 22 * i, line, 14, fill=MUTED if i else INK)
        for i, line in enumerate(lines)
    ]
