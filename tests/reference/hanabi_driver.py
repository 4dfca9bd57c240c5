"""Play Hanabi games in the reference engine (HLE 0.0.4's ``pyhanabi``) and print them as JSON.

Run with the reference venv's interpreter (plain Python and ``hanabi_learning_environment``;
no teamgym, no numpy): ``python hanabi_driver.py SPEC`` where SPEC is a JSON list of games,
each ``{"players": n, "colours": c, "lives": l, "seed": s, "moves": [...] | null,
"play_weight": w}``. A game plays ``moves`` (each ``[kind, index, value]``, kinds ``discard``,
``play``, ``colour``, ``rank``; ``index`` is the card's place or, for a hint, the target's seat
offset) or, when ``moves`` is null, random legal moves drawn from ``random.Random(seed)``, a play
drawn with weight ``play_weight`` against 1 for each other move (low weights reach the last
round, high ones the fuse-out). HLE deals at random from ``seed``.

One JSON line per game: ``deal`` (the cards dealt, in order, e.g. ``"R1"``) and ``steps``, one per
move made and one for the final state, each with the player to move, its legal moves (HLE's
order), the move made (null at the end), score, tokens, fireworks, deck size, whether the game is
over, and every hand's card knowledge as ``[colour mask, rank mask]`` per card.
"""

import json
import random
import sys

from hanabi_learning_environment import pyhanabi

KINDS = {
    pyhanabi.HanabiMoveType.DISCARD: "discard",
    pyhanabi.HanabiMoveType.PLAY: "play",
    pyhanabi.HanabiMoveType.REVEAL_COLOR: "colour",
    pyhanabi.HanabiMoveType.REVEAL_RANK: "rank",
}


def as_list(move):
    """Our notation of an HLE move: [kind, card place or target offset, colour/rank or -1]."""
    kind = KINDS[move.type()]
    if kind in ("discard", "play"):
        return [kind, move.card_index(), -1]
    value = move.color() if kind == "colour" else move.rank()
    return [kind, move.target_offset(), value]


def card_name(color, rank):
    return "RYGWB"[color] + str(rank + 1)


def knowledge(state, players, colours):
    """Every hand's knowledge, seen from player 0 (HLE lists hands relative to the observer)."""
    observation = state.observation(0)  # the knowledge points into it: keep it alive
    hands = observation.card_knowledge()
    out = []
    for hand in hands:
        cards = []
        for k in hand:
            cmask = sum(1 << c for c in range(colours) if k.color_plausible(c))
            rmask = sum(1 << r for r in range(5) if k.rank_plausible(r))
            cards.append([cmask, rmask])
        out.append(cards)
    del observation
    return out


def snapshot(state, players, colours):
    return {
        "player": state.cur_player(),
        "legal": [as_list(m) for m in state.legal_moves()] if not state.is_terminal() else [],
        "score": state.score(),
        "information": state.information_tokens(),
        "lives": state.life_tokens(),
        "fireworks": state.fireworks(),
        "deck": state.deck_size(),
        "over": state.is_terminal(),
        "knowledge": knowledge(state, players, colours),
    }


def play(spec):
    players, colours = spec["players"], spec["colours"]
    game = pyhanabi.HanabiGame(
        {
            "players": players,
            "colors": colours,
            "ranks": 5,
            "max_information_tokens": 8,
            "max_life_tokens": spec.get("lives", 3),
            "seed": spec["seed"],
            "random_start_player": False,
            "observation_type": int(pyhanabi.AgentObservationType.CARD_KNOWLEDGE),
        }
    )
    state = game.new_initial_state()
    rng = random.Random(spec["seed"])
    scripted = spec.get("moves")
    weight = spec.get("play_weight", 1.0)
    deal, steps = [], []

    def deal_cards():
        while state.cur_player() == pyhanabi.CHANCE_PLAYER_ID:
            state.deal_random_card()
            dealt = state.move_history()[-1].move()
            deal.append(card_name(dealt.color(), dealt.rank()))

    deal_cards()
    turn = 0
    while not state.is_terminal():
        step = snapshot(state, players, colours)
        legal = state.legal_moves()
        if scripted is not None:
            if turn >= len(scripted):
                break
            wanted = scripted[turn]
            move = next(m for m in legal if as_list(m) == wanted)
        else:
            weights = [weight if m.type() == pyhanabi.HanabiMoveType.PLAY else 1.0 for m in legal]
            move = rng.choices(legal, weights=weights)[0]
        step["move"] = as_list(move)
        steps.append(step)
        state.apply_move(move)
        deal_cards()
        turn += 1
    final = snapshot(state, players, colours)
    final["move"] = None
    steps.append(final)
    return {"deal": deal, "steps": steps}


def main():
    for spec in json.loads(sys.argv[1]):
        print(json.dumps(play(spec)))


if __name__ == "__main__":
    main()
