"""``hanabi-v0``'s vector observation (the same information as the text, not HLE's canonical
bits): the layout and the encoding."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from teamgym.envs.hanabi.rules import COPIES, NUM_RANKS

if TYPE_CHECKING:
    from teamgym.envs.hanabi.env import HanabiEnv

__all__ = ["vector_layout", "vector_observation", "vector_size"]


def vector_layout(env: HanabiEnv) -> dict[str, int]:
    """Width of each part of the vector observation."""
    n, h, c = len(env.possible_agents), env.hand_size, env.num_colours
    cards = c * NUM_RANKS
    return {
        "hands": (n - 1) * h * cards,
        "knowledge": n * h * (c + NUM_RANKS),
        "board": c + 3 + cards + n,
        "last": 4 + 2 * n + c + NUM_RANKS + cards + 1 + h,
    }


def vector_size(env: HanabiEnv) -> int:
    """Length of the vector observation."""
    return sum(vector_layout(env).values())


def vector_observation(env: HanabiEnv, agent: str) -> np.ndarray:
    """``agent``'s view as float32: the other hands (one-hot cards, seat offsets from the
    agent), every hand's knowledge, fireworks, tokens, deck, discards, the mover, the last move."""
    game = env.game
    assert game is not None
    n, h, c = len(env.possible_agents), env.hand_size, env.num_colours
    cards = c * NUM_RANKS
    out = np.zeros(vector_size(env), dtype=np.float32)
    me = env.possible_agents.index(agent)
    at = 0
    for offset in range(1, n):  # the other hands, one-hot cards
        for i, (colour, rank) in enumerate(game.hands[(me + offset) % n]):
            out[at + i * cards + colour * NUM_RANKS + rank] = 1.0
        at += h * cards
    for offset in range(n):  # every hand's knowledge: plausible colours, then ranks
        for i, (colours, ranks) in enumerate(game.knowledge[(me + offset) % n]):
            base = at + i * (c + NUM_RANKS)
            for k in range(c):
                out[base + k] = colours >> k & 1
            for r in range(NUM_RANKS):
                out[base + c + r] = ranks >> r & 1
        at += h * (c + NUM_RANKS)
    out[at : at + c] = [f / NUM_RANKS for f in game.fireworks]
    at += c
    out[at] = game.information / game.max_information
    out[at + 1] = game.lives / game.max_lives
    out[at + 2] = game.deck_size / game.total_cards
    at += 3
    for colour, rank in game.discards:
        out[at + colour * NUM_RANKS + rank] += 1.0 / COPIES[rank]
    at += cards
    if not game.is_over():
        out[at + (game.current - me) % n] = 1.0
    at += n
    if game.history:
        last = game.history[-1]
        kinds = ("discard", "play", "colour", "rank")
        out[at + kinds.index(last.move.kind)] = 1.0
        out[at + 4 + (last.player - me) % n] = 1.0
        at += 4 + n
        if last.target >= 0:
            out[at + (last.target - me) % n] = 1.0
            part = c if last.move.kind == "rank" else 0
            out[at + n + part + last.move.value] = 1.0
        at += n + c + NUM_RANKS
        if last.card is not None:
            out[at + last.card[0] * NUM_RANKS + last.card[1]] = 1.0
            out[at + cards] = float(last.scored)
            out[at + cards + 1 + last.move.index] = 1.0
    return out
