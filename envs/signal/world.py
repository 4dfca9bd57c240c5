"""World data and generator of ``signal-v1``: objects described by attributes, rounds of
candidates. Kept apart from the game dynamics so it can be read, tested and reused alone."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ATTRIBUTES", "Round", "decode", "describe", "generate_round", "vocabulary"]

#: Attribute name -> values, in the order attributes are enabled by ``num_attributes``.
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "colour": ("red", "green", "blue", "yellow", "purple", "orange"),
    "shape": ("circle", "square", "triangle", "star", "heart", "cross"),
    "size": ("small", "large", "tiny", "huge", "medium", "giant"),
    "pattern": ("plain", "striped", "dotted", "checked", "zigzag", "spotted"),
    "texture": ("smooth", "rough", "furry", "shiny", "matte", "woolly"),
}
#: Word order in a description (adjectives first, the shape last, as English would have it).
_ORDER = ("size", "texture", "pattern", "colour", "shape")

Obj = tuple[int, ...]  # one value index per enabled attribute


def _enabled(num_attributes: int) -> list[str]:
    return list(ATTRIBUTES)[:num_attributes]


def describe(obj: Obj, num_attributes: int) -> str:
    """Words of an object, e.g. ``"small red circle"``."""
    names = _enabled(num_attributes)
    words = {name: ATTRIBUTES[name][v] for name, v in zip(names, obj, strict=False)}
    return " ".join(words[name] for name in _ORDER if name in words)


def decode(code: int, num_attributes: int, num_values: int) -> Obj:
    """The object numbered ``code`` in ``0 .. num_values**num_attributes - 1``."""
    return tuple(code // num_values**a % num_values for a in range(num_attributes))


def vocabulary(num_attributes: int, num_values: int) -> list[str]:
    """Every attribute word in play, attribute by attribute."""
    return [w for name in _enabled(num_attributes) for w in ATTRIBUTES[name][:num_values]]


@dataclass(frozen=True)
class Round:
    """One round: the candidates, which one is the target, and each agent's display order."""

    codes: tuple[int, ...]
    """Candidate object numbers (see :func:`decode`)."""
    candidates: tuple[Obj, ...]
    target: int
    """Index into ``candidates``."""
    orders: dict[str, tuple[int, ...]]
    """Agent -> candidate indices in the order that agent sees them."""


def generate_round(
    rng: np.random.Generator,
    agents: list[str],
    num_candidates: int,
    num_attributes: int,
    num_values: int,
) -> Round:
    """Draw distinct candidates, a uniform target, and an independent shuffle per agent.

    One call to ``rng`` per round (draws are the hot path of a reset)."""
    universe, n = num_values**num_attributes, len(agents)
    u = rng.random(2 * num_candidates + 1 + n * num_candidates)
    codes: dict[int, None] = {}
    for x in (u[: 2 * num_candidates] * universe).astype(np.int64).tolist():
        codes.setdefault(x)
    while len(codes) < num_candidates:  # rare: too many repeats among the first draws
        codes.setdefault(int(rng.integers(universe)))
    chosen = tuple(list(codes)[:num_candidates])
    candidates = tuple(decode(code, num_attributes, num_values) for code in chosen)
    target = int(u[2 * num_candidates] * num_candidates)
    shuffles = (
        u[2 * num_candidates + 1 :]
        .reshape(n, num_candidates)
        .argsort(axis=1, kind="stable")
        .tolist()
    )
    orders = {a: tuple(order) for a, order in zip(agents, shuffles, strict=True)}
    return Round(chosen, candidates, target, orders)
