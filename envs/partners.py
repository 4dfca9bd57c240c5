"""Partner pools: which frozen partner plays the non-trained seats of each training episode.

A training run may seat a *partner* in some of the env's agents (its *partner seats*): any
agent spec ``bench run`` takes (a baseline, ``checkpoint:DIR``, ``openai:MODEL@URL`` for an
OpenAI-compatible server, ``transformers:DIR``). A :class:`PartnerPool` lists the candidates
with weights; episode ``s`` gets the partner :func:`~teamgym.envs.seeds.partner_draw` picks for
``s``, so the same seed has the same partner on every machine, and the choice is written into
the dataset row (its ``teammates``), never drawn again at run time.

>>> pool = PartnerPool.parse(["expert", "random=3"], seats=["robot_0"])
>>> pool.pick(3), pool.pick(0)
('expert', 'random')
>>> pool.seats_for(3)
{'robot_0': 'expert'}
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from teamgym.envs.seeds import partner_draw

__all__ = ["SELF", "PartnerPool", "parse_weighted"]

SELF = "self"
"""The pool entry that seats no partner: the trained model plays the partner seats too
(self-play), e.g. beside held-out partners in a validation pool, so one validation gives the
self-play and cross-play figures of the same seeds' draws."""


def parse_weighted(text: str) -> tuple[str, float]:
    """``SPEC`` (weight 1) or ``SPEC=WEIGHT`` with a positive number after the last ``=``."""
    spec, sep, weight = text.strip().rpartition("=")
    if sep and spec.strip():
        try:
            value = float(weight)
        except ValueError:
            return text.strip(), 1.0  # an '=' inside the spec itself (a URL's query)
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"partner {text!r}: the weight after '=' must be > 0, got {weight}")
        return spec.strip(), value
    if not text.strip():
        raise ValueError("empty partner spec")
    return text.strip(), 1.0


@dataclass(frozen=True)
class PartnerPool:
    """Partners for the seats ``seats``: ``specs`` with their ``weights`` (see the module
    docstring). One draw per episode: one partner plays every partner seat of it."""

    seats: tuple[str, ...]
    """The agents partners play (the rest are trained, or fixed teammates)."""
    specs: tuple[str, ...]
    """The candidate partners' specs, in the order given."""
    weights: tuple[float, ...]
    """Each spec's weight (any positive numbers; normalised when drawing)."""

    def __post_init__(self) -> None:
        if not self.seats:
            raise ValueError("a partner pool needs at least one partner seat (--partner-seat)")
        if not self.specs or len(self.specs) != len(self.weights):
            raise ValueError("a partner pool needs one weight per spec and at least one spec")
        if len(set(self.specs)) != len(self.specs):
            repeated = sorted({s for s in self.specs if self.specs.count(s) > 1})
            raise ValueError(
                f"partner {repeated[0]!r} is listed twice; give it one entry with a weight "
                "(SPEC=WEIGHT)"
            )
        if len(set(self.seats)) != len(self.seats):
            raise ValueError(f"partner seats repeat an agent: {list(self.seats)}")

    @classmethod
    def parse(cls, partners: Iterable[str], seats: Iterable[str]) -> PartnerPool:
        """A pool from ``SPEC[=WEIGHT]`` strings (see :func:`parse_weighted`) and seat names."""
        pairs = [parse_weighted(p) for p in partners]
        return cls(tuple(seats), tuple(s for s, _ in pairs), tuple(w for _, w in pairs))

    def pick(self, seed: int) -> str:
        """The partner of episode ``seed``: the spec whose share of the total weight covers
        :func:`~teamgym.envs.seeds.partner_draw` ``(seed)``."""
        total = sum(self.weights)
        edges = list(itertools.accumulate(w / total for w in self.weights))
        return self.specs[min(bisect.bisect_right(edges, partner_draw(seed)), len(edges) - 1)]

    def seats_for(self, seed: int) -> dict[str, str]:
        """``{seat: spec}`` for episode ``seed``: its partner in every partner seat (none when
        the pick is :data:`SELF`)."""
        spec = self.pick(seed)
        return {} if spec == SELF else dict.fromkeys(self.seats, spec)

    def check(self, agents: Sequence[str], teammates: Iterable[str] = ()) -> None:
        """Refuse (``ValueError``) seats that are not agents of the env or that a fixed
        teammate already takes."""
        unknown = [s for s in self.seats if s not in agents]
        if unknown:
            raise ValueError(
                f"partner seat {unknown[0]!r} is not an agent of the env ({', '.join(agents)})"
            )
        taken = sorted(set(self.seats) & set(teammates))
        if taken:
            raise ValueError(f"{taken[0]} is both a partner seat and a fixed teammate")

    def to_json(self) -> dict[str, Any]:
        """The pool as the dataset's manifest records it."""
        return {
            "seats": list(self.seats),
            "partners": [
                {"spec": s, "weight": w} for s, w in zip(self.specs, self.weights, strict=True)
            ],
        }
