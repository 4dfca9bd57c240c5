"""A seat's picture of a game: SVG drawn from JSON-able data that holds only what the seat may
know (:meth:`TextParallelEnv.drawing <teamgym.envs.text_env.TextParallelEnv.drawing>`; the
page of ``teamgym play --web`` shows it above the buttons).

Each game's ``drawing`` module writes two functions: ``seat_data(env, agent)``, what ``agent``'s
observation allows it to know, as plain data, and ``draw(data)``, the SVG made from that data
alone, so that a picture can never show more than its data holds (the tests change what a seat
may not know and check that its data and picture stay the same). This module holds what they
share: the :class:`Drawing`, an escaping SVG writer, the seats' colours and the grid games'
keys.

Elements a person may click for an action carry ``data-actions`` (a JSON list of action texts;
the page offers those valid in the open turn, as buttons stay for every action) and
``data-label`` (what the element is, for screen readers); ``data-menu`` asks the page to show
the actions as a menu even when only one is valid (a card is never played by a stray click).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

__all__ = [
    "INK",
    "MUTED",
    "PAPER",
    "SEAT_COLOURS",
    "Drawing",
    "act",
    "document",
    "el",
    "grid_keys",
    "label",
    "seat_colour",
    "seat_token",
    "tooltip",
    "wrap",
]

#: Seats' colours (Okabe and Ito's palette, told apart by colour-blind eyes too), by seat index.
SEAT_COLOURS = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#8c6d1f",
    "#555555",
)
INK, MUTED, PAPER = "#1d232a", "#5b6570", "#ffffff"


@dataclass(frozen=True)
class Drawing:
    """One seat's picture: the data it is drawn from, the SVG, and its keyboard keys."""

    kind: str
    """The game drawn (``hanabi``, ``kitchen``, ...)."""
    data: dict[str, Any]
    """What the seat may know, JSON-able; ``svg`` is drawn from it alone."""
    svg: str
    """An SVG document (no scripts, no links, every text escaped)."""
    keys: dict[str, str] = field(default_factory=dict)
    """Keyboard key (a ``KeyboardEvent.key``) -> the action it sends when valid."""
    legend: str = ""
    """One line under the picture: what the marks mean, which keys act."""

    def public(self) -> dict[str, Any]:
        """What the page is sent: the picture, its keys and legend (the data stays here)."""
        return {"kind": self.kind, "svg": self.svg, "keys": dict(self.keys), "legend": self.legend}


def el(tag: str, attrs: Mapping[str, Any] | None = None, *children: str) -> str:
    """An SVG element; attribute values are escaped, ``None`` ones left out; ``children`` are
    markup already (use :func:`label` for text)."""
    head = [tag] + [
        f'{name}="{escape(_value(value), quote=True)}"'
        for name, value in (attrs or {}).items()
        if value is not None
    ]
    inner = "".join(children)
    return f"<{' '.join(head)}>{inner}</{tag}>" if inner else f"<{' '.join(head)}/>"


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return str(value)


def label(x: float, y: float, text: str, size: float = 14, **attrs: Any) -> str:
    """A line of text at ``(x, y)`` (its baseline); ``attrs`` with ``_`` for ``-``
    (``text_anchor="middle"``, ``font_weight="bold"``, ``class_="x"``)."""
    style = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
    style.setdefault("fill", INK)
    return el("text", {"x": x, "y": y, "font-size": size, **style}, escape(text, quote=False))


def tooltip(text: str) -> str:
    """An element's ``<title>``: what a pointer resting on it shows (escaped)."""
    return el("title", {}, escape(text, quote=False))


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters (SVG text does not wrap)."""
    return textwrap.wrap(text, width, break_long_words=True) or [""]


def act(actions: Sequence[str], what: str, *, menu: bool = False) -> dict[str, Any]:
    """The attributes of an element a person may click: the actions it stands for, in order,
    and what it is (``menu``: always offer the actions as a menu)."""
    return {
        "class": "act",
        "data-actions": json.dumps(list(actions)),
        "data-label": what,
        "data-menu": "1" if menu else None,
    }


def document(width: int, height: int, kind: str, title: str, *body: str, defs: str = "") -> str:
    """The SVG document: ``width`` x ``height`` units that the page scales to its width."""
    return el(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width} {height}",
            "role": "img",
            "aria-label": title,
            "class": "drawing-svg",
            "data-kind": kind,
            "font-family": "system-ui, sans-serif",
        },
        tooltip(title),
        el("defs", {}, defs) if defs else "",
        el("rect", {"x": 0, "y": 0, "width": width, "height": height, "fill": PAPER}),
        *body,
    )


def seat_colour(index: int) -> str:
    """The colour of the seat ``index`` (cycled past eight)."""
    return SEAT_COLOURS[index % len(SEAT_COLOURS)]


def seat_token(
    cx: float, cy: float, r: float, index: int, text: str, *, own: bool, name: str
) -> str:
    """A seat on a grid: a disc in its colour with ``text`` in it (a double ring when it is the
    seat drawn for), with ``name`` as its tooltip."""
    ring = (
        el(
            "circle",
            {"cx": cx, "cy": cy, "r": r + 4, "fill": "none", "stroke": INK, "stroke-width": 3},
        )
        if own
        else ""
    )
    return el(
        "g",
        {"class": "seat", "data-seat": name},
        tooltip(name),
        ring,
        el(
            "circle",
            {
                "cx": cx,
                "cy": cy,
                "r": r,
                "fill": seat_colour(index),
                "stroke": PAPER,
                "stroke-width": 2,
            },
        ),
        label(cx, cy + r * 0.35, text, r, text_anchor="middle", font_weight="bold", fill=PAPER),
    )


def grid_keys(up: str, down: str, left: str, right: str, **more: str) -> dict[str, str]:
    """The arrow keys for a grid game's four moves, and ``more`` keys (``key=action``)."""
    return {"ArrowUp": up, "ArrowDown": down, "ArrowLeft": left, "ArrowRight": right, **more}
