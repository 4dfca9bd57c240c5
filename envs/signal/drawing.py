"""``signal-v1`` drawn: the round's objects as the shapes, colours, sizes, patterns and textures
their words name, in the seat's own order and numbering, with the target marked for the speaker
only, and the description the seat heard."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from teamgym.envs.drawing import INK, MUTED, Drawing, act, document, el, label, tooltip, wrap
from teamgym.envs.signal.world import ATTRIBUTES

if TYPE_CHECKING:
    from teamgym.envs.signal.env import SignalEnv

__all__ = ["FILLS", "draw", "drawing", "seat_data"]

#: Colour word -> its fill.
FILLS = {
    "red": "#d7263d",
    "green": "#2e9e44",
    "blue": "#1e6fd9",
    "yellow": "#f4c20d",
    "purple": "#8e44ad",
    "orange": "#f08c00",
}
#: Size word -> the share of a tile's radius the shape takes.
_SCALE = {"tiny": 0.38, "small": 0.52, "medium": 0.66, "large": 0.8, "huge": 0.9, "giant": 1.0}
_TW, _TH, _PER_ROW = 176, 214, 5


def seat_data(env: SignalEnv, agent: str) -> dict[str, Any]:
    """What ``agent`` sees this round: the objects in its own order; the target only when it
    speaks; the messages it was delivered."""
    rnd = env.round
    assert rnd is not None, "signal needs reset() first"
    speaker = agent == env.speaker
    names = list(ATTRIBUTES)[: env.num_attributes]
    objects = []
    for number, index in enumerate(rnd.orders[agent], 1):
        obj = rnd.candidates[index]
        entry: dict[str, Any] = {
            "number": number,
            "words": env._names[index],
            "attributes": {n: ATTRIBUTES[n][v] for n, v in zip(names, obj, strict=True)},
        }
        if speaker:
            entry["target"] = index == rnd.target
        objects.append(entry)
    return {
        "seat": agent,
        "role": "speaker" if speaker else "listener",
        "speaker": env.speaker,
        "phase": env.phase,
        "round": min(env.round_index + 1, env.num_rounds),
        "num_rounds": env.num_rounds,
        "pick_by": env.pick_by,
        "word_budget": env.word_budget,
        "objects": objects,
        "heard": [[sender, text] for sender, text in env.inbox.get(agent, [])],
    }


def drawing(env: SignalEnv, agent: str) -> Drawing:
    """``agent``'s picture of the round (see the module docstring)."""
    data = seat_data(env, agent)
    if data["role"] == "listener":
        how = "click the object the speaker described to pick it."
    elif data["phase"] == "talk":
        how = "the target has the gold frame: describe it in the message box, then 'say'."
    else:
        how = "the target has the gold frame."
    legend = f"Each object is drawn as its words say (size, colour, shape, pattern, texture); {how}"
    return Drawing("signal", data, draw(data), legend=legend)


def draw(data: dict[str, Any]) -> str:
    """The round of ``data`` (see :func:`seat_data`) as SVG."""
    speaking = data["role"] == "speaker"
    head = f"Round {data['round']} of {data['num_rounds']}: "
    if speaking:
        head += (
            f"you speak; describe the target in at most {data['word_budget']} word(s)"
            if data["phase"] == "talk"
            else "you spoke; the listeners are picking"
        )
    elif data["phase"] == "talk":
        head += f"{data['speaker']} is describing one of these to you"
    else:
        head += f"pick the object {data['speaker']} described"
    out = [label(16, 30, head, 18, font_weight="bold")]
    y = 48
    for sender, text in data["heard"]:
        for i, line in enumerate(wrap(f"{sender} said: \u201c{text}\u201d", 80)):
            out.append(
                label(16 + (0 if i == 0 else 14), y + 18, line, 16, fill="#0b5394", class_="heard")
            )
            y += 22
    y += 10
    defs: dict[str, str] = {}
    for i, obj in enumerate(data["objects"]):
        x = 16 + (i % _PER_ROW) * (_TW + 12)
        ty = y + (i // _PER_ROW) * (_TH + 12)
        out.append(_tile(x, ty, obj, data, defs))
    rows = max(1, math.ceil(len(data["objects"]) / _PER_ROW))
    height = y + rows * (_TH + 12) + 6
    width = 16 + min(len(data["objects"]), _PER_ROW) * (_TW + 12) + 4
    title = f"The signal round as {data['seat']} sees it: " + "; ".join(
        f"{o['number']}. {o['words']}" + (" (the target)" if o.get("target") else "")
        for o in data["objects"]
    )
    return document(max(width, 720), height, "signal", title, *out, defs="".join(defs.values()))


def _tile(
    x: float, y: float, obj: dict[str, Any], data: dict[str, Any], defs: dict[str, str]
) -> str:
    attrs = obj["attributes"]
    target = bool(obj.get("target"))
    frame = el(
        "rect",
        {
            "x": x,
            "y": y,
            "width": _TW,
            "height": _TH,
            "rx": 12,
            "fill": "#fbfbfa",
            "stroke": "#c99a06" if target else "#c3c8ce",
            "stroke-width": 6 if target else 1.5,
            "class": "frame",
        },
    )
    cx, cy, radius = x + _TW / 2, y + 20 + 64, 60.0
    shape = _shape(cx, cy, radius * _SCALE.get(attrs.get("size", "medium"), 0.66), attrs, defs)
    lines = wrap(obj["words"], 22)
    words = [
        label(cx, y + _TH - 36 + 17 * i - 8 * (len(lines) - 1), line, 15, text_anchor="middle")
        for i, line in enumerate(lines)
    ]
    number = label(x + 12, y + 24, str(obj["number"]), 20, font_weight="bold", fill=MUTED)
    badge = (
        label(
            x + _TW - 12,
            y + 24,
            "target",
            15,
            text_anchor="end",
            font_weight="bold",
            fill="#8a6a00",
        )
        if target
        else ""
    )
    pick = f"pick {obj['number']}" if data["pick_by"] == "number" else f"pick {obj['words']}"
    what = f"object {obj['number']}: {obj['words']}" + (", the target" if target else "")
    group = {
        **act([pick], what),
        "data-number": obj["number"],
        "data-words": obj["words"],
        "data-target": "1" if target else None,
        **{f"data-{k}": v for k, v in attrs.items()},
    }
    group["class"] += " object"
    return el("g", group, tooltip(what), frame, shape, number, badge, *words)


def _shape(cx: float, cy: float, r: float, attrs: dict[str, str], defs: dict[str, str]) -> str:
    """The object's shape at ``(cx, cy)``, ``r`` its radius, filled with its colour and pattern
    and outlined as its texture."""
    colour = FILLS.get(attrs.get("colour", ""), "#7f8c8d")
    pattern = attrs.get("pattern", "plain")
    fill = (
        colour
        if pattern == "plain"
        else f"url(#{_pattern(pattern, attrs.get('colour', 'grey'), colour, defs)})"
    )
    texture = attrs.get("texture", "smooth")
    stroke = {"stroke": INK, "stroke-width": 2.5}
    if texture == "rough":
        stroke = {"stroke": INK, "stroke-width": 3, "stroke-dasharray": "5 3"}
    elif texture == "furry":
        stroke = {
            "stroke": INK,
            "stroke-width": 6,
            "stroke-dasharray": "1.5 3",
            "stroke-linecap": "round",
        }
    elif texture == "matte":
        stroke = {"stroke": "none", "opacity": 0.85}
    elif texture == "woolly":
        stroke = {
            "stroke": INK,
            "stroke-width": 7,
            "stroke-dasharray": "4 2",
            "stroke-linejoin": "round",
        }
    outline = _outline(attrs.get("shape", "circle"), cx, cy, r)
    parts = [el(outline[0], {**outline[1], "fill": fill, **stroke})]
    if texture == "shiny":
        parts.append(
            el(
                "ellipse",
                {
                    "cx": cx - r * 0.3,
                    "cy": cy - r * 0.35,
                    "rx": r * 0.28,
                    "ry": r * 0.14,
                    "fill": "#ffffff",
                    "opacity": 0.75,
                    "transform": f"rotate(-30 {cx - r * 0.3:.1f} {cy - r * 0.35:.1f})",
                },
            )
        )
    return el("g", {"class": "shape"}, *parts)


def _outline(shape: str, cx: float, cy: float, r: float) -> tuple[str, dict[str, Any]]:
    """(tag, attributes) of ``shape`` of radius ``r`` centred at ``(cx, cy)``."""

    def points(pts: list[tuple[float, float]]) -> dict[str, Any]:
        return {"points": " ".join(f"{cx + px * r:.1f},{cy + py * r:.1f}" for px, py in pts)}

    if shape == "square":
        return "rect", {
            "x": cx - 0.82 * r,
            "y": cy - 0.82 * r,
            "width": 1.64 * r,
            "height": 1.64 * r,
            "rx": 0.06 * r,
        }
    if shape == "triangle":
        return "polygon", points([(0, -1), (0.95, 0.78), (-0.95, 0.78)])
    if shape == "star":
        star = [
            (
                math.sin(k * math.pi / 5) * (1 if k % 2 == 0 else 0.45),
                -math.cos(k * math.pi / 5) * (1 if k % 2 == 0 else 0.45),
            )
            for k in range(10)
        ]
        return "polygon", points(star)
    if shape == "cross":
        a = 0.32
        return "polygon", points(
            [
                (-a, -1),
                (a, -1),
                (a, -a),
                (1, -a),
                (1, a),
                (a, a),
                (a, 1),
                (-a, 1),
                (-a, a),
                (-1, a),
                (-1, -a),
                (-a, -a),
            ]
        )
    if shape == "heart":
        d = (
            f"M {cx:.1f} {cy + 0.9 * r:.1f} "
            f"C {cx - 1.5 * r:.1f} {cy - 0.05 * r:.1f} {cx - 0.65 * r:.1f} {cy - 1.2 * r:.1f} "
            f"{cx:.1f} {cy - 0.45 * r:.1f} "
            f"C {cx + 0.65 * r:.1f} {cy - 1.2 * r:.1f} {cx + 1.5 * r:.1f} {cy - 0.05 * r:.1f} "
            f"{cx:.1f} {cy + 0.9 * r:.1f} Z"
        )
        return "path", {"d": d}
    return "circle", {"cx": cx, "cy": cy, "r": r}


def _pattern(pattern: str, name: str, colour: str, defs: dict[str, str]) -> str:
    """The id of an SVG pattern of ``pattern`` over ``colour`` (defined once in ``defs``)."""
    pid = f"sig-{pattern}-{name}"
    if pid in defs:
        return pid
    marks = {
        "striped": el(
            "path",
            {
                "d": "M -2 2 L 2 -2 M 0 12 L 12 0 M 10 14 L 14 10",
                "stroke": "#ffffff",
                "stroke-width": 3,
            },
        ),
        "dotted": el("circle", {"cx": 6, "cy": 6, "r": 2, "fill": "#ffffff"}),
        "checked": el(
            "path",
            {"d": "M 0 0 H 6 V 6 H 0 Z M 6 6 H 12 V 12 H 6 Z", "fill": "#ffffff", "opacity": 0.6},
        ),
        "zigzag": el(
            "polyline",
            {
                "points": "0,9 3,3 6,9 9,3 12,9",
                "fill": "none",
                "stroke": "#ffffff",
                "stroke-width": 2,
            },
        ),
        "spotted": el("circle", {"cx": 4, "cy": 4, "r": 3.2, "fill": INK, "opacity": 0.45})
        + el("circle", {"cx": 10, "cy": 9, "r": 2, "fill": INK, "opacity": 0.45}),
    }.get(pattern, "")
    defs[pid] = el(
        "pattern",
        {"id": pid, "width": 12, "height": 12, "patternUnits": "userSpaceOnUse"},
        el("rect", {"width": 12, "height": 12, "fill": colour}),
        marks,
    )
    return pid
