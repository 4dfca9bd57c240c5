"""``publicgoods-v0`` drawn: each player's contribution round by round (what every round's next
observation showed the whole team), this round's multiplier, the seat's own coins, and the coins
to choose a contribution from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamgym.envs.drawing import INK, MUTED, Drawing, act, document, el, label, seat_colour, tooltip

if TYPE_CHECKING:
    from teamgym.envs.publicgoods.env import PublicGoodsEnv

__all__ = ["draw", "drawing", "seat_data"]

_SHOWN = 12  # the rounds the chart shows at most (the latest)
_COIN = "#e0a800"


def seat_data(env: PublicGoodsEnv, agent: str) -> dict[str, Any]:
    """What ``agent`` knows: the rounds played (every contribution was shown to everyone), this
    round's multiplier and phase, and its own earnings."""
    return {
        "seat": agent,
        "players": list(env.possible_agents),
        "round": min(env.round_index + 1, env.num_rounds),
        "num_rounds": env.num_rounds,
        "phase": env.phase,
        "multiplier": env.round_multiplier,
        "endowment": env.endowment,
        "earned": env.earned.get(agent, 0.0),
        "history": [
            {"round": i + 1, "multiplier": m, "contributions": dict(c)}
            for i, (m, c) in enumerate(env.history)
        ],
    }


def drawing(env: PublicGoodsEnv, agent: str) -> Drawing:
    """``agent``'s picture of the game (see the module docstring)."""
    data = seat_data(env, agent)
    legend = (
        "Bars are each player's contribution per round (coins into the pot). Click a coin "
        "count to contribute that many."
    )
    return Drawing("publicgoods", data, draw(data), legend=legend)


def draw(data: dict[str, Any]) -> str:
    """The rounds of ``data`` (see :func:`seat_data`) as SVG."""
    players, most = data["players"], data["endowment"]
    width = 940
    head = (
        f"Round {data['round']} of {data['num_rounds']}: the pot is multiplied by "
        f"{data['multiplier']:g}; you have earned {data['earned']:g} coin(s)"
    )
    out = [label(16, 28, head, 17, font_weight="bold")]
    # the legend of the players' colours
    for i, name in enumerate(players):
        x = 16 + i * 130
        you = " (you)" if name == data["seat"] else ""
        out.append(el("rect", {"x": x, "y": 42, "width": 14, "height": 14, "fill": seat_colour(i)}))
        out.append(label(x + 19, 54, name + you, 13))
    top, bottom, left = 90, 250, 56
    out += _axes(left, top, bottom, width - 16, most)
    rounds = data["history"][-_SHOWN:]
    slots = min(max(data["num_rounds"], 1), _SHOWN)
    group = (width - 16 - left) / slots
    bar = min(28.0, (group - 12) / len(players))
    for k, played in enumerate(rounds):
        gx = left + k * group + (group - bar * len(players)) / 2
        for i, name in enumerate(players):
            coins = played["contributions"].get(name, 0)
            h = (bottom - top) * coins / most
            out.append(
                el(
                    "rect",
                    {
                        "x": gx + i * bar,
                        "y": bottom - h,
                        "width": bar - 2,
                        "height": max(h, 1),
                        "fill": seat_colour(i),
                        "class": "bar",
                        "data-round": played["round"],
                        "data-seat": name,
                        "data-coins": coins,
                    },
                    tooltip(f"round {played['round']}: {name} gave {coins}"),
                )
            )
        out.append(
            label(
                left + k * group + group / 2,
                bottom + 18,
                f"round {played['round']} (x{played['multiplier']:g})",
                12,
                text_anchor="middle",
                fill=MUTED,
            )
        )
    if not rounds:
        out.append(
            label(
                (left + width) / 2,
                (top + bottom) / 2,
                "no round played yet",
                16,
                text_anchor="middle",
                fill=MUTED,
            )
        )
    y = bottom + 54
    ask = (
        "Contribute: how many of your coins go into the pot?"
        if data["phase"] == "contribute"
        else "Talk phase: say what you will do if you like, then wait."
    )
    out.append(label(16, y, ask, 16, font_weight="bold"))
    out += _coins(16, y + 14, most)
    title = f"The public-goods game as {data['seat']} sees it: round {data['round']}"
    return document(width, y + 74, "publicgoods", title, *out)


def _axes(left: float, top: float, bottom: float, right: float, most: int) -> list[str]:
    out = [
        el("line", {"x1": left, "y1": bottom, "x2": right, "y2": bottom, "stroke": INK}),
        el("line", {"x1": left, "y1": top, "x2": left, "y2": bottom, "stroke": INK}),
    ]
    for value in sorted({0, most // 2, most}):
        y = bottom - (bottom - top) * value / most
        out.append(label(left - 8, y + 4, str(value), 12, text_anchor="end", fill=MUTED))
        if value:
            out.append(el("line", {"x1": left, "y1": y, "x2": right, "y2": y, "stroke": "#e3e6ea"}))
    out.append(label(left - 8, top - 12, "coins", 12, text_anchor="end", fill=MUTED))
    return out


def _coins(x: float, y: float, most: int) -> list[str]:
    """A coin per possible contribution, 0..``most``."""
    step = min(44.0, 900 / (most + 1))
    out = []
    for k in range(most + 1):
        cx = x + 18 + k * step
        out.append(
            el(
                "g",
                {**act([f"contribute {k}"], f"contribute {k} coin(s)"), "data-coins": k},
                el(
                    "circle",
                    {
                        "cx": cx,
                        "cy": y + 22,
                        "r": min(18, step / 2 - 2),
                        "fill": _COIN if k else "#ffffff",
                        "stroke": INK,
                        "stroke-width": 1.5,
                        "class": "frame",
                    },
                ),
                label(cx, y + 27, str(k), 14, text_anchor="middle", font_weight="bold"),
            )
        )
    return out
