"""How ``hanabi-v0`` puts cards and what hints say of them into words."""

from __future__ import annotations

from collections.abc import Sequence

from teamgym.envs.hanabi.rules import COLOURS, NUM_RANKS, Card, Outcome

__all__ = ["card_words", "describe_move", "discards_text", "either", "knowledge_text"]


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


def describe_move(out: Outcome, agents: Sequence[str], lives: int) -> str:
    """A move in words, starting with the mover's name (``agents``: the seats' names,
    ``lives``: fuse tokens left after the move)."""
    actor = agents[out.player]
    move = out.move
    if move.kind in ("colour", "rank"):
        target = agents[out.target]
        value = COLOURS[move.value] if move.kind == "colour" else f"rank {move.value + 1}"
        cards = either([str(i + 1) for i in out.touched], "and")
        noun = "card" if len(out.touched) == 1 else "cards"
        verb = "is" if len(out.touched) == 1 else "are"
        return f"{actor} hinted {target}: {noun} {cards} {verb} {value} (the others are not)."
    assert out.card is not None
    card = f"card {move.index + 1}, a {card_words(out.card)}"
    if move.kind == "discard":
        what = f"{actor} discarded {card}" + (" (the last copy!)" if out.critical else "")
    elif out.scored:
        what = f"{actor} played {card}: it went on the {COLOURS[out.card[0]]} firework"
        if out.token_gained:
            what += " and completed it (an information token back)"
    else:
        what = f"{actor} played {card}: it did not fit, a fuse burned"
        if lives <= 0:
            what += " (the last one: the game is lost)"
    return what + ("; a new card was drawn." if out.drew else ".")


def discards_text(discards: Sequence[Card]) -> str:
    """The discard pile, sorted, repeats counted: ``blue 1 x2, red 3`` (empty: ``""``)."""
    counts: dict[Card, int] = {}
    for card in discards:
        counts[card] = counts.get(card, 0) + 1
    return ", ".join(card_words(c) + (f" x{k}" if k > 1 else "") for c, k in sorted(counts.items()))
