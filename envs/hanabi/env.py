"""``hanabi-v0``: Hanabi for 2-5 players, the canonical partial-information cooperation game."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.drawing import Drawing
from teamgym.envs.hanabi.rules import (
    COLOURS,
    NUM_RANKS,
    Hanabi,
    Move,
    Outcome,
    hand_size_for,
    parse_card,
    shuffled_deck,
)
from teamgym.envs.hanabi.vector import vector_observation, vector_size
from teamgym.envs.hanabi.words import card_words, describe_move, discards_text, knowledge_text
from teamgym.envs.presets import int_in, resolve
from teamgym.envs.text_env import GameStep, TextParallelEnv

__all__ = ["DIFFICULTIES", "HanabiEnv"]

#: Named settings (explicit keyword arguments override them).
DIFFICULTIES: dict[str, dict[str, Any]] = {
    "easy": {"num_colours": 3, "information_tokens": 8, "fuse_tokens": 3},
    "medium": {"num_colours": 5, "information_tokens": 8, "fuse_tokens": 3},
    "hard": {"num_colours": 5, "information_tokens": 8, "fuse_tokens": 1},
}
_REPLY_FORMAT = (
    "Reply format: think if you like, then give exactly one command as <action>COMMAND</action>. "
    "There is no table talk in Hanabi: <say> messages are not delivered; hints are actions."
)


class HanabiEnv(TextParallelEnv):
    """Hanabi: players see each other's cards but never their own, and build fireworks together.

    The deck has ``num_colours`` colours (red, yellow, green, white, blue: the first ones) of
    ranks 1-5: three 1s, two each of 2, 3 and 4, and one 5 per colour. Each player holds 5 cards
    (4 with 4-5 players). In turn, from ``robot_0``, a player either **plays** a card (it goes on
    its colour's firework if it is the next rank there, otherwise it is lost and a fuse token
    burns), **discards** one (regaining an information token; illegal while all of them are in
    hand) or, for one information token, **hints** another player: names a colour or a rank,
    and every card of it in that player's hand is pointed out (a hint must point at least one
    card; the other cards learn they are not of it). A played or discarded card is replaced
    from the deck; a completed firework (its 5) returns a token. The game ends when the last
    fuse burns (score **0**), when every firework is complete, or after the deck runs out and
    every player, the one who drew the last card included, has had one more turn. The score is
    the number of cards on the fireworks, out of 5 per colour. These are the rules of the Hanabi
    Learning Environment (HLE), and the tests replay HLE's own games move by move.

    It is turn-based inside a parallel env: the player to move has its moves as
    ``valid_actions`` (``play 2``, ``discard 1``, ``hint robot_1 red``, ``hint robot_1 3``;
    cards are numbered from 1, the oldest, to the newest, which a drawn card becomes), every
    other player has ``["wait"]``. An unusable reply is a no-op and the same player moves
    again. There is no free talk (``can_speak`` is always False): table talk is cheating in
    Hanabi, and the hints are the only channel. Each observation says, for each of the agent's
    cards, what the hints received say it is and is not, shows the other hands with what their
    owners know, and gives the fireworks, tokens, deck, discards and the last round of moves.

    The mover's reward is the change of the score its move made (+1 per card played; the move
    that burns the last fuse loses every point), so a team's rewards add up to its score. Each
    play is a subtask (named after the card, e.g. ``red 3``) attempted by the player and by
    everyone whose hints pointed at that card; it is completed when the card went on its
    firework and failed on a misplay, so ``collaboration_index`` is the share of plays that
    scored and ``contribution_gini`` how evenly the points were made. Other events: ``hint``,
    ``play``, ``misplay`` and ``discard`` (with ``critical`` when the card was the last copy
    of one still needed). The outcome ``score`` is points / maximum points; success is a
    perfect score (25 with five colours, Hanabi's canonical win); extras: ``points``,
    ``misplays``, ``hints``, ``discards``, ``critical_discards``, ``fuses_left``, ``turns``.

    ``reset(options={"deck": ["R1", "B3", ...]})`` deals those cards first, in that order
    (player 0's hand, player 1's, ..., then the draws), and the rest of the deck after them in
    the seed's order: a given deal can be replayed. Vector mode lists, per agent, every
    discard and play slot, every hint by seat offset (1 = the next player) and colour or rank,
    in HLE's move order, then ``wait``; its observation encodes the other hands (one-hot
    cards), every hand's hint knowledge, fireworks, tokens, deck, discards, whose turn it is
    and the last move.

    Args:
        num_agents: players, 2..5.
        difficulty: a named setting of the arguments below (default ``medium``, the full game);
            ``easy`` has 3 colours (15 points), ``hard`` a single fuse token.
        num_colours: colours in the deck, 2..5 (5 points each).
        information_tokens: information tokens, all in hand at the start, 1..8.
        fuse_tokens: fuse (life) tokens; the game ends with 0 points when the last burns, 1..3.

    >>> env = HanabiEnv(num_agents=2)
    >>> obs, infos = env.reset(seed=0)
    >>> infos["robot_1"]["valid_actions"]
    ['wait']
    >>> infos["robot_0"]["valid_actions"][:2], infos["robot_0"]["valid_actions"][5]
    (['play 1', 'play 2'], 'hint robot_1 red')
    >>> obs, rewards, *_ = env.step({"robot_0": "<action>hint robot_1 red</action>",
    ...                              "robot_1": "<action>wait</action>"})
    >>> env.game.information, env.game.current
    (7, 1)
    """

    metadata: ClassVar[dict[str, Any]] = {**TextParallelEnv.metadata, "name": "hanabi_v0"}
    min_agents = 2
    max_agents = 5
    #: Bound on the game's part: 5 players with every line at its longest come to about 3300
    #: characters (played games reach about 2200; tested).
    max_game_observation_chars = 4608
    success_criterion = "a perfect score: every firework complete (25 points with five colours)"

    def __init__(
        self,
        num_agents: int = 2,
        *,
        difficulty: Literal["easy", "medium", "hard"] | None = None,
        num_colours: int | None = None,
        information_tokens: int | None = None,
        fuse_tokens: int | None = None,
        **base: Any,
    ) -> None:
        """Rules in the class docstring; ``base`` takes the common options of ``TextParallelEnv``
        (``communication`` changes nothing: Hanabi has no talk)."""
        super().__init__(num_agents, **base)
        given = {
            "num_colours": num_colours,
            "information_tokens": information_tokens,
            "fuse_tokens": fuse_tokens,
        }
        preset = resolve(DIFFICULTIES, difficulty, given)
        self.num_colours = int_in("num_colours", preset["num_colours"], 2, 5)
        self.information_tokens = int_in("information_tokens", preset["information_tokens"], 1, 8)
        self.fuse_tokens = int_in("fuse_tokens", preset["fuse_tokens"], 1, 3)
        self.hand_size = hand_size_for(num_agents)
        self.game: Hanabi | None = None
        self._actions = {a: self._action_list(i) for i, a in enumerate(self.possible_agents)}
        self._log: list[str] = []
        self._hinted_by: list[list[list[str]]] = []
        self._counts: dict[str, int] = {}

    def _action_list(self, seat: int) -> list[tuple[str, str | None]]:
        """Every move of the player in ``seat``, in HLE's move order, then ``wait``."""
        n, h = len(self.possible_agents), self.hand_size
        texts = [f"discard {i + 1}" for i in range(h)] + [f"play {i + 1}" for i in range(h)]
        others = [self.possible_agents[(seat + o) % n] for o in range(1, n)]
        texts += [f"hint {p} {COLOURS[c]}" for p in others for c in range(self.num_colours)]
        texts += [f"hint {p} {r + 1}" for p in others for r in range(NUM_RANKS)]
        return [(t, None) for t in [*texts, "wait"]]

    # ------------------------------------------------------------------ rules
    def _game_default_max_steps(self) -> int:
        return 300

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        given = (options or {}).get("deck")
        prefix = [parse_card(str(c)) for c in given] if given is not None else None
        deck = shuffled_deck(self.np_random, self.num_colours, prefix)
        self.game = Hanabi(
            len(self.possible_agents),
            deck,
            num_colours=self.num_colours,
            information_tokens=self.information_tokens,
            life_tokens=self.fuse_tokens,
        )
        self._log = []
        self._hinted_by = [[[] for _ in hand] for hand in self.game.hands]
        self._counts = dict.fromkeys(("misplays", "hints", "discards", "critical_discards"), 0)

    def _move_text(self, move: Move) -> str:
        """A move of the current player, as the action it is written with."""
        assert self.game is not None
        if move.kind in ("discard", "play"):
            return f"{move.kind} {move.index + 1}"
        target = self.possible_agents[self.game.seat(self.game.current, move.index)]
        value = COLOURS[move.value] if move.kind == "colour" else str(move.value + 1)
        return f"hint {target} {value}"

    def legal_moves(self) -> dict[str, Move]:
        """The current player's legal moves by their action text (HLE's order)."""
        assert self.game is not None  # computed afresh: a scenario may edit the game
        return {self._move_text(m): m for m in self.game.legal_moves()}

    def _game_valid_actions(self, agent: str) -> list[str]:
        assert self.game is not None
        if self.game.is_over():
            return []
        if agent != self.possible_agents[self.game.current]:
            return ["wait"]
        return list(self.legal_moves())

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return self._actions[agent]

    def can_speak(self, agent: str) -> bool:
        """Never: table talk is cheating in Hanabi; hints are the only channel."""
        return False

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        game = self.game
        assert game is not None
        actor = self.possible_agents[game.current]
        action = actions.get(actor)
        rewards: dict[str, float] = {}
        feedback: dict[str, str] = {}
        events: list[dict[str, Any]] = []
        if action is not None and action in self.legal_moves():
            before = game.score()
            out = game.apply(self.legal_moves()[action])
            rewards[actor] = float(game.score() - before)
            said = describe_move(out, self.possible_agents, game.lives)
            self._log.append(said)
            events += self._move_events(out)
            for agent in self.possible_agents:
                if agent == actor:
                    feedback[agent] = "You " + said.split(" ", 1)[1]
                else:
                    feedback[agent] = said
        done = game.is_over()
        if done or self.num_steps + 1 >= self.max_steps:
            events.append(self._outcome())
        return GameStep(rewards=rewards, feedback=feedback, events=events, done=done)

    def _move_events(self, out: Outcome) -> list[dict[str, Any]]:
        """The typed events of a move, and the hint credit kept for the subtasks."""
        assert self.game is not None
        actor = self.possible_agents[out.player]
        move = out.move
        if move.kind in ("colour", "rank"):
            self._counts["hints"] += 1
            target = self.possible_agents[out.target]
            for i in out.touched:
                if actor not in self._hinted_by[out.target][i]:
                    self._hinted_by[out.target][i].append(actor)
            value = COLOURS[move.value] if move.kind == "colour" else str(move.value + 1)
            return [
                {
                    "type": "hint",
                    "agent": actor,
                    "target": target,
                    "hint": value,
                    "cards": [i + 1 for i in out.touched],
                }
            ]
        assert out.card is not None
        hinters = self._hinted_by[out.player].pop(move.index)
        if out.drew:
            self._hinted_by[out.player].append([])
        card = card_words(out.card)
        if move.kind == "discard":
            self._counts["discards"] += 1
            self._counts["critical_discards"] += out.critical
            return [{"type": "discard", "agent": actor, "card": card, "critical": out.critical}]
        team = [actor, *(a for a in hinters if a != actor)]
        found = [ev.subtask_attempted(card, team)]
        if out.scored:
            found.append(ev.subtask_completed(card, team))
            found.append({"type": "play", "agent": actor, "card": card})
        else:
            self._counts["misplays"] += 1
            self._counts["critical_discards"] += out.critical
            found.append(ev.subtask_failed(card, team, "misplay"))
            found.append(
                {"type": "misplay", "agent": actor, "card": card, "critical": out.critical}
            )
        return found

    def _outcome(self) -> dict[str, Any]:
        """Points over the maximum; success is a perfect score."""
        game = self.game
        assert game is not None
        points = game.score()
        return ev.outcome(
            points == game.max_score,
            points / game.max_score,
            points=points,
            fuses_left=game.lives,
            turns=game.moves_made,
            **self._counts,
        )

    # ------------------------------------------------------------------ views
    def _game_instructions(self, agent: str) -> str:
        n = len(self.possible_agents)
        colours = ", ".join(COLOURS[: self.num_colours])
        return (
            f"You are {agent}, one of {n} players of Hanabi, a cooperative card game. The deck "
            f"has {colours} cards of ranks 1-5 (three 1s, two each of 2, 3 and 4, one 5 per "
            f"colour). Each player holds {self.hand_size} cards: you see everyone's cards but "
            "never your own. The team builds one firework per colour, from 1 up to 5, and "
            f"scores one point per card on them ({5 * self.num_colours} at most). Players take "
            "turns; on yours do exactly one of: 'play N' (your card N goes on its firework if it "
            "is the next rank there; otherwise it is lost and a fuse token burns), 'discard N' "
            "(regains an information token; not allowed while all "
            f"{self.information_tokens} are in hand), or, for one information token, "
            "'hint PLAYER COLOUR' or 'hint PLAYER RANK' (e.g. 'hint robot_1 red', "
            "'hint robot_1 3'): every card of that colour or rank in PLAYER's hand is pointed "
            "out, and the others are known not to be of it; a hint must point at least one "
            "card. Cards are numbered 1 (your oldest) to the newest; a card you draw becomes "
            "the newest. Completing a firework returns an information token. The game is lost "
            f"with 0 points when all {self.fuse_tokens} fuse token(s) burn; otherwise it ends "
            "when every firework is complete or when the deck is empty and every player has "
            "had one more turn. When it is not your turn, reply 'wait'. There is no table "
            "talk: messages are not delivered, hints are the only way to tell.\n" + _REPLY_FORMAT
        )

    def _game_observation(self, agent: str) -> str:
        game = self.game
        assert game is not None
        me = self.possible_agents.index(agent)
        n = len(self.possible_agents)
        current = self.possible_agents[game.current]
        if game.is_over():
            turn = "the game is over"
        elif current == agent:
            turn = "it is your turn"
        else:
            turn = f"it is {current}'s turn (you wait)"
        fireworks = ", ".join(f"{COLOURS[c]} {h}" for c, h in enumerate(game.fireworks))
        deck = f"Deck: {game.deck_size} card(s)."
        if game.deck_size == 0 and not game.is_over():
            deck += f" The deck is empty: {game.turns_to_play} turn(s) left."
        lines = [
            f"Hanabi, {n} players; {turn}.",
            f"Fireworks: {fireworks} (score {game.points()} of {game.max_score}).",
            f"Information tokens: {game.information} of {game.max_information}. "
            f"Fuse tokens: {game.lives} of {game.max_lives}. {deck}",
            "Discarded: " + (discards_text(game.discards) or "none") + ".",
        ]
        recent = self._log[-n:]
        lines.append("Last moves (oldest first):" if recent else "No moves yet.")
        lines += [f"- {m}" for m in recent]
        lines.append("Your cards (you cannot see them; what the hints say):")
        for i, (colours, ranks) in enumerate(game.knowledge[me]):
            lines.append(f"- card {i + 1}: {knowledge_text(colours, ranks, self.num_colours)}")
        for offset in range(1, n):
            seat = (me + offset) % n
            lines.append(f"{self.possible_agents[seat]}'s cards (what they know in brackets):")
            for i, card in enumerate(game.hands[seat]):
                colours, ranks = game.knowledge[seat][i]
                known = knowledge_text(colours, ranks, self.num_colours)
                lines.append(f"- card {i + 1}: {card_words(card)} ({known})")
        return "\n".join(lines)

    def picture(self, agent: str) -> str | None:
        """The table as ``agent`` sees it: the global view with its own cards hidden (``??``)."""
        if self.game is None:
            return None
        seat = self.possible_agents.index(agent)
        return "\n".join(
            f"{line.split(':')[0]}: " + " ".join("??" for _ in self.game.hands[seat])
            if line[2:].startswith(f"{agent}:")
            else line
            for line in self._game_render().splitlines()
        )

    def drawing(self, agent: str) -> Drawing | None:
        """The table as ``agent`` sees it: its teammates' cards, what the hints say of its own,
        the fireworks, tokens, discards and last moves (:mod:`teamgym.envs.hanabi.drawing`)."""
        if self.game is None:
            return None
        from teamgym.envs.hanabi.drawing import drawing

        return drawing(self, agent)

    def _game_render(self) -> str:
        game = self.game
        if game is None:
            return "hanabi-v0 (not reset)"
        fireworks = " ".join(f"{COLOURS[c][0].upper()}{h}" for c, h in enumerate(game.fireworks))
        rows = [
            f"hanabi-v0 move {game.moves_made} score {game.score()}/{game.max_score} "
            f"info {game.information}/{game.max_information} fuses {game.lives}/{game.max_lives} "
            f"deck {game.deck_size}" + (" OVER" if game.is_over() else ""),
            f"fireworks {fireworks}",
        ]
        for seat, hand in enumerate(game.hands):
            cards = " ".join(f"{COLOURS[c][0].upper()}{r + 1}" for c, r in hand)
            mark = ">" if seat == game.current and not game.is_over() else " "
            rows.append(f"{mark} {self.possible_agents[seat]}: {cards}")
        rows.append("discards " + (discards_text(game.discards) or "none"))
        return "\n".join(rows)

    # ------------------------------------------------------------------ vector view
    def _game_vector_size(self) -> int:
        return vector_size(self)

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        return vector_observation(self, agent)
