"""Scripted baseline for ``hanabi-v0``; it reads only the text an LLM would read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HanabiConventions"]

_FIREWORKS = re.compile(r"^Fireworks: (.*) \(score", re.MULTILINE)
_TOKENS = re.compile(r"Information tokens: (\d+) of (\d+)")
_OTHER = re.compile(r"^(robot_\d+)'s cards")
_MINE = re.compile(r"^- card (\d+): (.*)$")
_THEIRS = re.compile(r"^- card (\d+): (\w+) (\d) \((.*)\)$")


@dataclass
class _Card:
    """A card as the text shows it: its identity when seen, and what its owner knows."""

    colours: set[str]
    ranks: set[int]
    seen: tuple[str, int] | None = None

    @property
    def touched(self) -> bool:
        """A hint pointed at it (its colour or rank is known)."""
        return len(self.colours) == 1 or len(self.ranks) == 1


def _words(listing: str) -> list[str]:
    """``a, b or c`` -> ``[a, b, c]``."""
    return [w for w in re.split(r", | or ", listing) if w]


def _knowledge(text: str, colours: list[str]) -> tuple[set[str], set[int]]:
    """Plausible colours and ranks from ``red; rank unknown, not 1 or 2``."""
    colour_part, rank_part = text.split("; ")
    if colour_part in colours:
        plausible = {colour_part}
    else:
        out = colour_part.removeprefix("colour unknown").removeprefix(", not ")
        plausible = set(colours) - set(_words(out))
    if rank_part.startswith("rank unknown"):
        out = rank_part.removeprefix("rank unknown").removeprefix(", not ")
        ranks = {1, 2, 3, 4, 5} - {int(r) for r in _words(out)}
    else:
        ranks = {int(rank_part.split()[1])}
    return plausible, ranks


def _sure_playable(colours: set[str], ranks: set[int], fireworks: dict[str, int]) -> bool:
    """Every card the knowledge allows goes on its firework now."""
    return all(fireworks[c] == r - 1 for c in colours for r in ranks)


def _useless(colours: set[str], ranks: set[int], fireworks: dict[str, int]) -> bool:
    """Every card the knowledge allows is already on its firework."""
    return all(fireworks[c] >= r for c in colours for r in ranks)


class HanabiConventions:
    """A simple rule-based player (deterministic, text only), in order of preference:

    1. play a card the hints prove playable (every colour and rank it may have fits);
    2. with an information token, save the next player's oldest untouched card (the one it
       would discard) when it is a 5 or the last copy of a needed card, with a rank hint;
    3. with a token, hint a playable card a partner does not know is playable (partners in
       seat order, oldest card first, skipping a card another hand already holds as known
       playable), choosing the hint that proves it playable, else its rank if unknown;
    4. discard a card proven useless, else the oldest untouched card, else the oldest;
    5. with every token in hand (discarding illegal), hint a 5, else the first hint listed.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def reset(self, seed: int | None = None) -> None:
        """Stateless: nothing to reset."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The conventions' reply."""
        valid = list(info.get("valid_actions", []))
        if not valid or valid == ["wait"]:
            return "<action>wait</action>"
        return f"<action>{self.choose(observation, valid)}</action>"

    def choose(self, observation: str, valid: list[str]) -> str:
        """The move, from the observation text and the legal moves."""
        found = _FIREWORKS.search(observation)
        tokens = _TOKENS.search(observation)
        if found is None or tokens is None:
            return valid[0]
        fireworks = {w.split()[0]: int(w.split()[1]) for w in found.group(1).split(", ")}
        colours = list(fireworks)
        mine, others = self._hands(observation, colours)
        # 1. a card proven playable
        for i, card in enumerate(mine):
            if _sure_playable(card.colours, card.ranks, fireworks) and f"play {i + 1}" in valid:
                return f"play {i + 1}"
        hints = int(tokens.group(1)) > 0
        discarded = observation.split("Discarded: ", 1)[1].split("\n", 1)[0]
        if hints and others:
            save = self._save(others[0], fireworks, discarded, valid)
            if save:
                return save
            hint = self._play_hint(others, fireworks, valid)
            if hint:
                return hint
        discards = [a for a in valid if a.startswith("discard ")]
        if discards:
            for i, card in enumerate(mine):
                if _useless(card.colours, card.ranks, fireworks):
                    return f"discard {i + 1}"
            untouched = [i for i, card in enumerate(mine) if not card.touched]
            return f"discard {(untouched or [0])[0] + 1}"
        fives = [a for a in valid if a.startswith("hint ") and a.endswith(" 5")]
        hints_left = [a for a in valid if a.startswith("hint ")]
        return (fives or hints_left or valid)[0]

    @staticmethod
    def _hands(
        observation: str, colours: list[str]
    ) -> tuple[list[_Card], list[tuple[str, list[_Card]]]]:
        """My cards' knowledge, and every partner's cards (seat order from the next)."""
        mine: list[_Card] = []
        others: list[tuple[str, list[_Card]]] = []
        section = None
        for line in observation.splitlines():
            if line.startswith("Your cards"):
                section = "mine"
                continue
            header = _OTHER.match(line)
            if header:
                others.append((header.group(1), []))
                section = "theirs"
                continue
            if section == "mine" and (m := _MINE.match(line)):
                mine.append(_Card(*_knowledge(m.group(2), colours)))
            elif section == "theirs" and (m := _THEIRS.match(line)):
                plausible, ranks = _knowledge(m.group(4), colours)
                others[-1][1].append(_Card(plausible, ranks, (m.group(2), int(m.group(3)))))
            elif not line.startswith("- "):
                section = None
        return mine, others

    @staticmethod
    def _save(
        partner: tuple[str, list[_Card]],
        fireworks: dict[str, int],
        discarded: str,
        valid: list[str],
    ) -> str | None:
        """A rank hint on the next player's chop card when losing it would cost points."""
        name, cards = partner
        chop = next((c for c in cards if not c.touched), None)
        if chop is None or chop.seen is None:
            return None
        colour, rank = chop.seen
        if fireworks[colour] >= rank:
            return None
        copies = (3, 2, 2, 2, 1)[rank - 1]
        gone = discarded.count(f"{colour} {rank}")
        if f"{colour} {rank} x" in discarded:
            gone = int(discarded.split(f"{colour} {rank} x", 1)[1].split(",")[0])
        if rank == 5 or copies - gone == 1:
            hint = f"hint {name} {rank}"
            return hint if hint in valid else None
        return None

    @staticmethod
    def _play_hint(
        others: list[tuple[str, list[_Card]]], fireworks: dict[str, int], valid: list[str]
    ) -> str | None:
        """A hint that shows a partner a playable card it does not know is playable."""
        known = {
            card.seen
            for _, cards in others
            for card in cards
            if _sure_playable(card.colours, card.ranks, fireworks)
        }
        for name, cards in others:
            for card in cards:
                assert card.seen is not None
                colour, rank = card.seen
                if fireworks[colour] != rank - 1 or card.seen in known:
                    continue
                if _sure_playable(card.colours, card.ranks, fireworks):
                    continue
                by_rank, by_colour = f"hint {name} {rank}", f"hint {name} {colour}"
                if _sure_playable(card.colours, {rank}, fireworks):
                    return by_rank
                if _sure_playable({colour}, card.ranks, fireworks):
                    return by_colour
                return by_rank if len(card.ranks) > 1 else by_colour
        return None
