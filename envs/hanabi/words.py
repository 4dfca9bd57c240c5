"""How ``hanabi-v0`` puts cards and what hints say of them into words."""

from __future__ import annotations

from teamgym.envs.hanabi.rules import COLOURS, NUM_RANKS, Card

__all__ = ["card_words", "either", "knowledge_text"]


def either(words: list[str], last: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c`` (or with ``and``)."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {last} " + words[-1]


def knowledge_text(colours: int, ranks: int, num_colours: int) -> str:
    """What hints say of one card, from its masks of plausible colours and ranks, e.g.
    ``red; rank unknown, not 1 or 2`` or ``colour unknown, not blue; rank 5``."""
    names = COLOURS[:num_colours]
    plausible = [c for i, c in enumerate(names) if colours >> i & 1]
    ruled_out = [c for i, c in enumerate(names) if not colours >> i & 1]
    if len(plausible) == 1:
        colour = plausible[0]
    else:
        colour = "colour unknown" + (f", not {either(ruled_out)}" if ruled_out else "")
    ranks_left = [str(r + 1) for r in range(NUM_RANKS) if ranks >> r & 1]
    ranks_out = [str(r + 1) for r in range(NUM_RANKS) if not ranks >> r & 1]
    if len(ranks_left) == 1:
        rank = f"rank {ranks_left[0]}"
    else:
        rank = "rank unknown" + (f", not {either(ranks_out)}" if ranks_out else "")
    return f"{colour}; {rank}"


def card_words(card: Card) -> str:
    """``red 3``."""
    return f"{COLOURS[card[0]]} {card[1] + 1}"
