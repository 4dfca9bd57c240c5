"""Hanabi's rules as a small, fast engine: the deck, the state, legal moves, a move applied.

No words here (the env writes those). The rules follow the Hanabi Learning Environment (HLE,
``hanabi_learning_environment`` 0.0.4) wherever conventions differ, and the tests replay HLE's
own games move by move against this engine:

* hands are lists oldest card first; a drawn card goes to the end (index ``hand_size - 1``);
* the initial deal fills player 0's hand, then player 1's, ...; player 0 moves first;
* moves are listed in HLE's order: discards, plays, colour hints by target offset then colour,
  rank hints by target offset then rank (target offsets count clockwise from the mover);
* discarding is illegal with every information token in hand; a hint must touch a card and
  costs a token; a completed firework (its 5) returns a token, when one is missing;
* a misplay costs a fuse (life) token and goes to the discards; with none left the game ends
  and scores **0**; a perfect score ends it too;
* once the deck is empty every player, the one who drew the last card included, has one more
  turn (HLE's ``turns_to_play``);
* a card's knowledge is what hints said, positive and negative, per card (HLE's
  ``CARD_KNOWLEDGE`` observation: no inference from the cards one sees).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = [
    "COLOURS",
    "COPIES",
    "NUM_RANKS",
    "Card",
    "Hanabi",
    "Move",
    "Outcome",
    "card_name",
    "hand_size_for",
    "parse_card",
    "shuffled_deck",
    "standard_deck",
]

#: Colours in HLE's order (R, Y, G, W, B); a game with ``k`` colours uses the first ``k``.
COLOURS = ("red", "yellow", "green", "white", "blue")
#: Copies of each rank (index 0 is rank 1) in every colour.
COPIES = (3, 2, 2, 2, 1)
NUM_RANKS = len(COPIES)
#: (colour index, rank index), rank index 0 meaning rank 1.
Card = tuple[int, int]
MoveKind = Literal["discard", "play", "colour", "rank"]


@dataclass(frozen=True, slots=True)
class Move:
    """One move: ``discard``/``play`` a card (``index``: its 0-based place in the hand) or a
    ``colour``/``rank`` hint to the player ``index`` seats clockwise (1..n-1) of ``value``."""

    kind: MoveKind
    index: int
    value: int = -1


@dataclass(slots=True)
class Outcome:
    """What a move did (for the env's words and events)."""

    player: int
    move: Move
    card: Card | None = None
    """The card played or discarded."""
    scored: bool = False
    """A play that went on its firework."""
    token_gained: bool = False
    """An information token came back (a discard, or a completed firework)."""
    touched: list[int] = field(default_factory=list)
    """Hand places a hint touched."""
    target: int = -1
    """Seat of the hinted player."""
    drew: bool = False
    """The mover drew a replacement card."""
    critical: bool = False
    """A discarded (or misplayed) card was the last copy of one not yet played."""


def hand_size_for(num_players: int) -> int:
    """Cards per hand: 5 for 2-3 players, 4 for 4-5 (HLE's default)."""
    return 5 if num_players < 4 else 4


def standard_deck(num_colours: int) -> list[Card]:
    """Every card of a game with ``num_colours`` colours, in a fixed order."""
    return [(c, r) for c in range(num_colours) for r in range(NUM_RANKS) for _ in range(COPIES[r])]


def card_name(card: Card) -> str:
    """HLE's short name, e.g. ``R1`` (colour letter, rank 1..5)."""
    return f"{COLOURS[card[0]][0].upper()}{card[1] + 1}"


def parse_card(name: str) -> Card:
    """The card of a short name such as ``R1``; ``ValueError`` otherwise."""
    letters = [c[0].upper() for c in COLOURS]
    if len(name) != 2 or name[0].upper() not in letters or name[1] not in "12345":
        raise ValueError(
            f"a card is a colour letter (RYGWB) and a rank 1-5, e.g. 'R1'; got {name!r}"
        )
    return letters.index(name[0].upper()), int(name[1]) - 1


class Hanabi:
    """One game's state. ``deck`` is the order cards are dealt in (first card first)."""

    def __init__(
        self,
        num_players: int,
        deck: list[Card],
        *,
        num_colours: int = 5,
        information_tokens: int = 8,
        life_tokens: int = 3,
    ) -> None:
        self.num_players = num_players
        self.num_colours = num_colours
        self.hand_size = hand_size_for(num_players)
        self.max_information = information_tokens
        self.max_lives = life_tokens
        self.information = information_tokens
        self.lives = life_tokens
        self.fireworks = [0] * num_colours
        self.discards: list[Card] = []
        self._deck = list(reversed(deck))  # drawn from the end
        self.total_cards = len(deck)
        self.hands: list[list[Card]] = [[] for _ in range(num_players)]
        #: per player and card: (bit mask of plausible colours, bit mask of plausible ranks)
        self.knowledge: list[list[list[int]]] = [[] for _ in range(num_players)]
        self._all_colours = (1 << num_colours) - 1
        self._all_ranks = (1 << NUM_RANKS) - 1
        for player in range(num_players):
            for _ in range(self.hand_size):
                self._draw(player)
        self.current = 0
        self.turns_to_play = num_players  # counts down once the deck is empty
        self.moves_made = 0
        self.history: list[Outcome] = []

    # ------------------------------------------------------------------ reading
    @property
    def deck_size(self) -> int:
        """Cards left to draw."""
        return len(self._deck)

    @property
    def max_score(self) -> int:
        """A perfect score: every firework complete."""
        return self.num_colours * NUM_RANKS

    def points(self) -> int:
        """Cards on the fireworks."""
        return sum(self.fireworks)

    def score(self) -> int:
        """HLE's score: the points, or 0 once the fuse tokens are gone."""
        return 0 if self.lives <= 0 else self.points()

    def is_over(self) -> bool:
        """Out of fuses, every firework complete, or the last round played."""
        return self.lives <= 0 or self.points() >= self.max_score or self.turns_to_play <= 0

    def playable(self, card: Card) -> bool:
        """Whether ``card`` goes on its firework now."""
        return self.fireworks[card[0]] == card[1]

    def remaining(self, card: Card) -> int:
        """Copies of ``card`` not yet discarded (in hands, in the deck or played)."""
        return COPIES[card[1]] - self.discards.count(card)

    def is_critical(self, card: Card) -> bool:
        """The last copy of a card its firework still needs."""
        return self.fireworks[card[0]] <= card[1] and self.remaining(card) == 1

    def seat(self, player: int, offset: int) -> int:
        """The player ``offset`` seats clockwise of ``player``."""
        return (player + offset) % self.num_players

    def legal_moves(self) -> list[Move]:
        """The current player's legal moves, in HLE's order (empty once the game is over)."""
        if self.is_over():
            return []
        hand = self.hands[self.current]
        moves: list[Move] = []
        if self.information < self.max_information:
            moves += [Move("discard", i) for i in range(len(hand))]
        moves += [Move("play", i) for i in range(len(hand))]
        if self.information > 0:
            hints: tuple[tuple[MoveKind, int, int], ...] = (
                ("colour", 0, self.num_colours),
                ("rank", 1, NUM_RANKS),
            )
            for kind, part, span in hints:
                for offset in range(1, self.num_players):
                    target = self.hands[self.seat(self.current, offset)]
                    present = {card[part] for card in target}
                    moves += [Move(kind, offset, v) for v in range(span) if v in present]
        return moves

    def is_legal(self, move: Move) -> bool:
        """Whether ``move`` is legal for the current player."""
        return move in self.legal_moves()

    # ------------------------------------------------------------------ acting
    def apply(self, move: Move) -> Outcome:
        """Make the current player's ``move`` (which must be legal) and pass the turn."""
        if not self.is_legal(move):
            raise ValueError(f"illegal move {move} for player {self.current}")
        if not self._deck:
            self.turns_to_play -= 1
        player = self.current
        out = Outcome(player=player, move=move)
        if move.kind in ("discard", "play"):
            card = self.hands[player].pop(move.index)
            self.knowledge[player].pop(move.index)
            out.card = card
            if move.kind == "play" and self.playable(card):
                self.fireworks[card[0]] += 1
                out.scored = True
                if card[1] == NUM_RANKS - 1 and self.information < self.max_information:
                    self.information += 1
                    out.token_gained = True
            else:
                out.critical = self.is_critical(card)
                self.discards.append(card)
                if move.kind == "play":
                    self.lives -= 1
                else:
                    self.information += 1
                    out.token_gained = True
            out.drew = self._draw(player)
        else:
            target = self.seat(player, move.index)
            out.target = target
            self.information -= 1
            part = 0 if move.kind == "colour" else 1
            bit = 1 << move.value
            for i, card in enumerate(self.hands[target]):
                know = self.knowledge[target][i]
                if card[part] == move.value:
                    know[part] = bit
                    out.touched.append(i)
                else:
                    know[part] &= ~bit
        self.current = self.seat(player, 1)
        self.moves_made += 1
        self.history.append(out)
        return out

    def _draw(self, player: int) -> bool:
        """Deal the next card to ``player``; False when the deck is empty."""
        if not self._deck:
            return False
        self.hands[player].append(self._deck.pop())
        self.knowledge[player].append([self._all_colours, self._all_ranks])
        return True


def shuffled_deck(
    rng: np.random.Generator, num_colours: int, given: list[Card] | None = None
) -> list[Card]:
    """A deal order: ``given`` first (a prefix to replay), then the rest of the game's cards in
    an order drawn from ``rng``; ``ValueError`` when ``given`` holds cards the game lacks."""
    pool = standard_deck(num_colours)
    for card in given or []:
        if card not in pool:
            raise ValueError(
                f"the deck holds more {card_name(card)} than a {num_colours}-colour game has"
            )
        pool.remove(card)
    order = rng.permutation(len(pool))
    return [*(given or []), *(pool[int(i)] for i in order)]
