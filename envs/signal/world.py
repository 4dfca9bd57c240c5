"""World data and generator of ``signal-v0``: objects described by attributes, rounds of
candidates. Kept apart from the game dynamics so it can be read, tested and reused alone."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ATTRIBUTES", "Round", "describe", "generate_round", "vocabulary"]

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
    words = {name: ATTRIBUTES[name][v] for name, v in zip(names, obj)}
    return " ".join(words[name] for name in _ORDER if name in words)


def vocabulary(num_attributes: int, num_values: int) -> list[str]:
    """Every attribute word in play, attribute by attribute."""
    return [w for name in _enabled(num_attributes) for w in ATTRIBUTES[name][:num_values]]


@dataclass(frozen=True)
class Round:
    """One round: the candidates, which one is the target, and each agent's display order."""

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
    """Draw distinct candidates, a uniform target, and an independent shuffle per agent."""
    seen: set[Obj] = set()
    candidates: list[Obj] = []
    while len(candidates) < num_candidates:
        obj = tuple(int(v) for v in rng.integers(0, num_values, size=num_attributes))
        if obj not in seen:
            seen.add(obj)
            candidates.append(obj)
    target = int(rng.integers(num_candidates))
    orders = {a: tuple(int(i) for i in rng.permutation(num_candidates)) for a in agents}
    return Round(tuple(candidates), target, orders)
