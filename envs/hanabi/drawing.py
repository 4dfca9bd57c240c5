"""``hanabi-v0`` as a seat sees the table: the teammates' cards in colour, its own cards as what
the hints say of them, the fireworks, the tokens, the discards and the last moves.

The seat's own cards are drawn from the hint knowledge only (the plausible colours and ranks per
card, as its observation words them); their colours and ranks are not in the data at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamgym.envs.drawing import INK, MUTED, Drawing, act, document, el, label, tooltip, wrap
from teamgym.envs.hanabi.rules import COLOURS, NUM_RANKS

if TYPE_CHECKING:
    from teamgym.envs.hanabi.env import HanabiEnv

__all__ = ["CARD_COLOURS", "draw", "drawing", "seat_data"]

#: Card colour -> (fill, ink on it).
CARD_COLOURS = {
    "red": ("#d7263d", "#ffffff"),
    "yellow": ("#f4c20d", INK),
    "green": ("#2e9e44", "#ffffff"),
    "white": ("#f7f7f2", INK),
    "blue": ("#1e6fd9", "#ffffff"),
}
_HIDDEN = "#dfe3e8"
_OUTLINE = {"white": "#9aa0a6"}  # an empty firework's dashed frame, where the fill would not show
_CW, _CH, _GAP = 60, 84, 12
_WIDTH, _PANEL = 980, 640


def seat_data(env: HanabiEnv, agent: str) -> dict[str, Any]:
    """What ``agent`` knows of the table: everything but its own cards, of which it knows what
    the hints said."""
    game = env.game
    assert game is not None, "hanabi-v0 needs reset() first"
    names = env.possible_agents
    me, n = names.index(agent), len(names)
    colours = list(COLOURS[: env.num_colours])

    def knows(masks: list[int]) -> dict[str, list[Any]]:
        colour_mask, rank_mask = masks
        return {
            "colours": [c for i, c in enumerate(colours) if colour_mask >> i & 1],
            "ranks": [r + 1 for r in range(NUM_RANKS) if rank_mask >> r & 1],
        }

    others = []
    for offset in range(1, n):
        seat = (me + offset) % n
        cards = [
            {
                "slot": i + 1,
                "colour": COLOURS[c],
                "rank": r + 1,
                "knows": knows(game.knowledge[seat][i]),
            }
            for i, (c, r) in enumerate(game.hands[seat])
        ]
        others.append({"player": names[seat], "cards": cards})
    own = [{"slot": i + 1, "knows": knows(masks)} for i, masks in enumerate(game.knowledge[me])]
    return {
        "seat": agent,
        "players": list(names),
        "current": None if game.is_over() else names[game.current],
        "over": game.is_over(),
        "colours": colours,
        "fireworks": {colours[i]: h for i, h in enumerate(game.fireworks)},
        "score": game.points(),
        "max_score": game.max_score,
        "information": game.information,
        "max_information": game.max_information,
        "fuses": game.lives,
        "max_fuses": game.max_lives,
        "deck": game.deck_size,
        "turns_left": game.turns_to_play if game.deck_size == 0 and not game.is_over() else None,
        "discards": [[COLOURS[c], r + 1] for c, r in sorted(game.discards)],
        "last_moves": list(env._log[-n:]),
        "others": others,
        "own": own,
    }


def drawing(env: HanabiEnv, agent: str) -> Drawing:
    """``agent``'s picture of the table (see the module docstring)."""
    data = seat_data(env, agent)
    legend = (
        "Click one of your cards to play or discard it, a teammate's card to hint its colour or "
        "rank. Your cards show only what the hints say: a colour or rank when known, else the "
        "ones still possible."
    )
    return Drawing("hanabi", data, draw(data), legend=legend)


def draw(data: dict[str, Any]) -> str:
    """The table of ``data`` (see :func:`seat_data`) as SVG."""
    left: list[str] = []
    y = 14
    for hand in data["others"]:
        left.append(_hand_title(16, y + 16, hand["player"], hand["player"] == data["current"]))
        for i, card in enumerate(hand["cards"]):
            left.append(_visible_card(16 + i * (_CW + _GAP), y + 26, hand["player"], card))
        y += 26 + _CH + 30
    left.append(_fireworks(16, y, data))
    y += 26 + _CH + 22
    mine = data["seat"]
    title = f"Your cards ({mine}): hidden, showing what the hints say"
    left.append(_hand_title(16, y + 16, title, mine == data["current"], seat=mine))
    for i, card in enumerate(data["own"]):
        left.append(_hidden_card(16 + i * (_CW + _GAP), y + 26, card, data["colours"]))
    y += 26 + _CH + 34
    right, height = _panel(_PANEL, data)
    total = max(y, height) + 8
    score = f"score {data['score']} of {data['max_score']}"
    turn = "the game is over" if data["over"] else f"{data['current']} to move"
    title = f"Hanabi as {mine} sees it: {score}, {turn}"
    return document(_WIDTH, total, "hanabi", title, *left, *right)


def _hand_title(x: float, y: float, text: str, moving: bool, seat: str | None = None) -> str:
    mark = "  \u25b6 to move" if moving else ""
    return label(x, y, text + mark, 16, font_weight="bold", fill=INK if moving else MUTED)


def _card_box(x: float, y: float, fill: str, *inner: str, attrs: dict[str, Any]) -> str:
    box = el(
        "rect",
        {
            "x": x,
            "y": y,
            "width": _CW,
            "height": _CH,
            "rx": 7,
            "fill": fill,
            "stroke": INK,
            "stroke-width": 1.5,
            "class": "frame",
        },
    )
    return el("g", attrs, box, *inner)


def _visible_card(x: float, y: float, player: str, card: dict[str, Any]) -> str:
    """A teammate's card: its colour and rank, what its owner knows under it."""
    colour, rank, slot = card["colour"], card["rank"], card["slot"]
    fill, ink = CARD_COLOURS[colour]
    known = card["knows"]
    told = (known["colours"][0][0].upper() if len(known["colours"]) == 1 else "?") + (
        str(known["ranks"][0]) if len(known["ranks"]) == 1 else "?"
    )
    what = f"{player}'s card {slot}: {colour} {rank}; {player} knows {told}"
    attrs = {
        **act([f"hint {player} {colour}", f"hint {player} {rank}"], what, menu=True),
        "data-player": player,
        "data-slot": slot,
        "data-colour": colour,
        "data-rank": rank,
    }
    attrs["class"] += " card"
    return _card_box(
        x,
        y,
        fill,
        tooltip(what),
        label(
            x + _CW / 2, y + 50, str(rank), 34, text_anchor="middle", font_weight="bold", fill=ink
        ),
        label(x + 6, y + 16, colour[0].upper(), 13, font_weight="bold", fill=ink),
        label(x + _CW / 2, y + _CH + 16, f"knows {told}", 12, text_anchor="middle", fill=MUTED),
        attrs=attrs,
    )


def _hidden_card(x: float, y: float, card: dict[str, Any], colours: list[str]) -> str:
    """One of the seat's own cards: a known colour fills it, a known rank is written on it;
    otherwise the colours and ranks still possible are listed on it."""
    slot, known = card["slot"], card["knows"]
    single = known["colours"][0] if len(known["colours"]) == 1 else None
    fill, ink = CARD_COLOURS[single] if single else (_HIDDEN, INK)
    rank = str(known["ranks"][0]) if len(known["ranks"]) == 1 else "?"
    parts = [
        label(x + _CW / 2, y + 46, rank, 30, text_anchor="middle", font_weight="bold", fill=ink)
    ]
    if single is None:  # the colours still possible, as dots
        step = (_CW - 12) / max(len(colours) - 1, 1)
        for i, colour in enumerate(colours):
            possible = colour in known["colours"]
            parts.append(
                el(
                    "circle",
                    {
                        "cx": x + 6 + i * step,
                        "cy": y + _CH - 22,
                        "r": 5,
                        "fill": CARD_COLOURS[colour][0] if possible else "none",
                        "stroke": INK if possible else "#b8bec6",
                        "stroke-width": 1,
                    },
                )
            )
    if rank == "?":  # the ranks still possible
        ranks = "".join(str(r) for r in known["ranks"])
        parts.append(label(x + _CW / 2, y + _CH - 6, ranks, 11, text_anchor="middle", fill=ink))
    colour_words = single or ("/".join(known["colours"]) + "?")
    rank_words = rank if rank != "?" else "/".join(str(r) for r in known["ranks"]) + "?"
    what = f"your card {slot}: {colour_words} {rank_words}"
    attrs = {
        **act([f"play {slot}", f"discard {slot}"], what, menu=True),
        "data-player": "you",
        "data-slot": slot,
        "data-colours": " ".join(known["colours"]),
        "data-ranks": " ".join(str(r) for r in known["ranks"]),
    }
    attrs["class"] += " card own"
    return _card_box(
        x,
        y,
        fill,
        tooltip(what),
        *parts,
        label(x + _CW / 2, y + _CH + 16, f"card {slot}", 12, text_anchor="middle", fill=MUTED),
        attrs=attrs,
    )


def _fireworks(x: float, y: float, data: dict[str, Any]) -> str:
    out = [
        label(
            x, y + 16, f"Fireworks: {data['score']} of {data['max_score']}", 16, font_weight="bold"
        )
    ]
    for i, colour in enumerate(data["colours"]):
        height = data["fireworks"][colour]
        cx, cy = x + i * (_CW + _GAP), y + 26
        fill, ink = CARD_COLOURS[colour]
        what = f"{colour} firework: {height}"
        if height:
            out.append(
                el(
                    "g",
                    {"class": "firework", "data-colour": colour, "data-height": height},
                    tooltip(what),
                    el(
                        "rect",
                        {
                            "x": cx,
                            "y": cy,
                            "width": _CW,
                            "height": _CH,
                            "rx": 7,
                            "fill": fill,
                            "stroke": INK,
                            "stroke-width": 1.5,
                        },
                    ),
                    label(
                        cx + _CW / 2,
                        cy + 52,
                        str(height),
                        34,
                        text_anchor="middle",
                        font_weight="bold",
                        fill=ink,
                    ),
                )
            )
        else:
            out.append(
                el(
                    "g",
                    {"class": "firework", "data-colour": colour, "data-height": 0},
                    tooltip(what),
                    el(
                        "rect",
                        {
                            "x": cx,
                            "y": cy,
                            "width": _CW,
                            "height": _CH,
                            "rx": 7,
                            "fill": "none",
                            "stroke": _OUTLINE.get(colour, fill),
                            "stroke-width": 3,
                            "stroke-dasharray": "6 4",
                        },
                    ),
                    label(cx + _CW / 2, cy + 50, "0", 24, text_anchor="middle", fill=MUTED),
                )
            )
    return el("g", {"class": "fireworks"}, *out)


def _tokens(x: float, y: float, title: str, have: int, most: int, fill: str, kind: str) -> str:
    out = [label(x, y, f"{title}: {have} of {most}", 15, font_weight="bold")]
    for i in range(most):
        on = i < have
        out.append(
            el(
                "circle",
                {
                    "cx": x + 12 + i * 28,
                    "cy": y + 20,
                    "r": 11,
                    "fill": fill if on else "none",
                    "stroke": fill,
                    "stroke-width": 2,
                    "class": f"token {kind}" + (" on" if on else ""),
                },
            )
        )
    return el("g", {}, *out)


def _panel(x: float, data: dict[str, Any]) -> tuple[list[str], int]:
    """The right column: tokens, deck, discards, the last moves; returns it and its bottom."""
    out = [
        _tokens(
            x,
            30,
            "Information tokens",
            data["information"],
            data["max_information"],
            "#1e6fd9",
            "information",
        ),
        _tokens(x, 90, "Fuse tokens", data["fuses"], data["max_fuses"], "#e8590c", "fuse"),
    ]
    deck = f"Deck: {data['deck']} card(s)"
    if data["turns_left"] is not None:
        deck += f", empty: {data['turns_left']} turn(s) left"
    out.append(label(x, 150, deck, 15, font_weight="bold"))
    out.append(
        label(
            x, 182, "Discarded:" + (" none" if not data["discards"] else ""), 15, font_weight="bold"
        )
    )
    y = 192
    for colour in data["colours"]:
        ranks = [r for c, r in data["discards"] if c == colour]
        if not ranks:
            continue
        fill, ink = CARD_COLOURS[colour]
        for i, rank in enumerate(ranks):
            cx = x + i * 26
            out.append(
                el(
                    "g",
                    {"class": "discard", "data-colour": colour, "data-rank": rank},
                    el(
                        "rect",
                        {
                            "x": cx,
                            "y": y,
                            "width": 22,
                            "height": 30,
                            "rx": 3,
                            "fill": fill,
                            "stroke": INK,
                            "stroke-width": 1,
                        },
                    ),
                    label(
                        cx + 11,
                        y + 21,
                        str(rank),
                        15,
                        text_anchor="middle",
                        font_weight="bold",
                        fill=ink,
                    ),
                )
            )
        y += 36
    y += 22
    out.append(
        label(
            x,
            y,
            "Last moves:" + (" none yet" if not data["last_moves"] else ""),
            15,
            font_weight="bold",
        )
    )
    for move in data["last_moves"]:
        for i, line in enumerate(wrap(move, 44)):
            y += 18
            out.append(label(x + (0 if i == 0 else 12), y, line, 13))
        y += 4
    return out, y + 10
