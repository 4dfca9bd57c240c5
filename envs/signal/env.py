"""``signal-v1``: a referential game where listeners can only win through what the speaker says."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.drawing import Drawing
from teamgym.envs.signal.world import Round, decode, describe, generate_round, vocabulary
from teamgym.envs.text_env import GameStep, TextParallelEnv

__all__ = ["SignalEnv"]

_REPLY_FORMAT = (
    "Reply format: think if you like, then give exactly one command as "
    "<action>COMMAND</action>; to send a message add <say>TEXT</say>."
)


def _check_options(
    num_candidates: int,
    num_attributes: int,
    num_values: int,
    num_rounds: int,
    word_budget: int,
    speaker: str,
    listener_order: str,
    pick_by: str,
    vector: bool,
) -> None:
    """Refuse arguments outside the game's ranges, naming the range."""
    if not 1 <= num_attributes <= 5:
        raise ValueError(f"num_attributes must be in 1..5, got {num_attributes!r}")
    if not 2 <= num_values <= 6:
        raise ValueError(f"num_values must be in 2..6, got {num_values!r}")
    if not 2 <= num_candidates <= min(9, num_values**num_attributes):
        raise ValueError(
            f"num_candidates must be in 2..{min(9, num_values**num_attributes)} "
            f"(distinct objects from {num_values} values x {num_attributes} attributes), "
            f"got {num_candidates!r}"
        )
    if not isinstance(num_rounds, int) or num_rounds < 1:
        raise ValueError(f"num_rounds must be a positive int, got {num_rounds!r}")
    if not isinstance(word_budget, int) or word_budget < 1:
        raise ValueError(f"word_budget must be a positive int, got {word_budget!r}")
    if speaker not in ("rotating", "fixed"):
        raise ValueError(f"speaker must be 'rotating' or 'fixed', got {speaker!r}")
    if listener_order not in ("shuffled", "sorted"):
        raise ValueError(f"listener_order must be 'shuffled' or 'sorted', got {listener_order!r}")
    if pick_by not in ("number", "name"):
        raise ValueError(f"pick_by must be 'number' or 'name', got {pick_by!r}")
    if vector and num_values**num_attributes > 512:
        raise ValueError(
            "vector mode lists every possible description as a 'say' action; "
            f"{num_values}**{num_attributes} > 512: use fewer values or attributes"
        )


class SignalEnv(TextParallelEnv):
    """Referential game: a speaker sees the target, listeners must pick it (sparse reward).

    Each round has two steps. **Talk**: the speaker (rotating each round, or always
    ``robot_0``) sees ``num_candidates`` objects and which one is the target, and may
    ``say`` a description of at most ``word_budget`` words or ``pass``; listeners ``wait``.
    **Pick**: every listener sees the candidates in its *own* shuffled order plus the
    speaker's message, and must ``pick N``. A correct pick gives the listener 1 and the speaker
    1/listeners; nothing else is rewarded. Without the message the target is uniform over each
    listener's list, so no policy beats chance (1/num_candidates) without communication.

    ``listener_order="sorted"`` is a curriculum stage: listeners see the objects in one fixed
    order (by attribute values) instead of each its own shuffle. The target is still hidden
    without the message (its place in that order is uniform), but the message word alone then
    says much about the place, which a small model can learn before the full task, where the
    pick depends on the message *and* the list together.

    ``pick_by="name"`` lets listeners pick an object by its words (``pick small red circle``)
    instead of its number in their list (``pick 2``). Chance without the message is unchanged;
    the pick no longer depends on the list order, so following the message is a copy, which
    is how a language model would refer to an object anyway and what a small model can learn
    in minutes (by number, the right reply depends on the message *and* the list together).

    Success means every pick of the episode was right; the outcome ``score`` is the fraction
    of right picks.

    Args:
        num_agents: team size (one speaker, the others listen), 2..8.
        num_candidates: objects each listener chooses among (chance is 1 / this).
        num_attributes: attributes per object (size, colour, shape, ...).
        num_values: values per attribute.
        num_rounds: rounds per episode (two steps each: talk, then pick).
        word_budget: most words a speaker's message may have.
        speaker: ``rotating`` (a new speaker each round) or ``fixed`` (always ``robot_0``).
        listener_order: ``shuffled`` (each listener its own order) or ``sorted`` (one
            order for all: a curriculum stage).
        pick_by: listeners pick by ``number`` in their list or by ``name`` (the object's
            words).

    >>> env = SignalEnv(num_agents=2, num_rounds=1)
    >>> obs, infos = env.reset(seed=3)
    >>> infos["robot_0"]["valid_actions"], infos["robot_1"]["valid_actions"]
    (['say', 'pass'], ['wait'])
    >>> obs, rew, term, trunc, infos = env.step(
    ...     {"robot_0": "<say>tiny</say><action>say</action>", "robot_1": "<action>wait</action>"})
    >>> infos["robot_1"]["valid_actions"]
    ['pick 1', 'pick 2', 'pick 3', 'pick 4']
    >>> "- robot_0: tiny" in obs["robot_1"]
    True
    """

    metadata: ClassVar[dict[str, Any]] = {**TextParallelEnv.metadata, "name": "signal_v0"}
    max_game_observation_chars = 2048
    success_criterion = "every pick of the episode right"
    idle_actions = frozenset({"wait", "pass"})

    def __init__(
        self,
        num_agents: int = 2,
        *,
        num_candidates: int = 4,
        num_attributes: int = 3,
        num_values: int = 4,
        num_rounds: int = 2,
        word_budget: int = 3,
        speaker: Literal["rotating", "fixed"] = "rotating",
        listener_order: Literal["shuffled", "sorted"] = "shuffled",
        pick_by: Literal["number", "name"] = "number",
        **base: Any,
    ) -> None:
        """Rules in the class docstring; ``base`` takes the common options of ``TextParallelEnv``."""
        super().__init__(num_agents, **base)
        _check_options(
            num_candidates, num_attributes, num_values, num_rounds, word_budget,
            speaker, listener_order, pick_by, vector=self.obs_mode == "vector",
        )  # fmt: skip
        self.num_candidates = num_candidates
        self.num_attributes = num_attributes
        self.num_values = num_values
        self.num_rounds = num_rounds
        self.word_budget = word_budget
        self.speaker_rule = speaker
        self.listener_order = listener_order
        self.pick_by = pick_by
        self._vocab = vocabulary(num_attributes, num_values)
        self._word_index = {w: i for i, w in enumerate(self._vocab)}
        universe = num_values**num_attributes
        # Every object's words, computed once: rounds only look them up.
        self._all_names = [
            describe(decode(c, num_attributes, num_values), num_attributes) for c in range(universe)
        ]
        self._actions: list[tuple[str, str | None]] = [("wait", None), ("pass", None)]
        self._picks = [f"pick {i + 1}" for i in range(num_candidates)]
        if pick_by == "number":
            self._actions += [(pick, None) for pick in self._picks]
        else:
            self._actions += [(f"pick {name}", None) for name in self._all_names]
        if self.obs_mode == "vector":
            self._actions += [("say", name) for name in self._all_names]
        self.round_index = 0
        self.phase: Literal["talk", "pick"] = "talk"
        self.round: Round | None = None
        self.speaker = self.possible_agents[0]
        self.listeners = self.possible_agents[1:]
        self._names: list[str] = []
        self.correct = 0
        self.picks_made = 0
        self._lines: dict[str, str] = {}

    # ------------------------------------------------------------------ rules
    def _game_default_max_steps(self) -> int:
        return 2 * self.num_rounds

    def _new_round(self) -> None:
        self.round = generate_round(
            self.np_random,
            self.possible_agents,
            self.num_candidates,
            self.num_attributes,
            self.num_values,
        )
        self.phase = "talk"
        n = len(self.possible_agents)
        # The speaker sees the target this round: rotating, or always robot_0.
        self.speaker = self.possible_agents[
            0 if self.speaker_rule == "fixed" else self.round_index % n
        ]
        self.listeners = [a for a in self.possible_agents if a != self.speaker]
        if self.listener_order == "sorted":  # the curriculum stage: one fixed order of objects
            canonical = tuple(sorted(range(self.num_candidates), key=self.round.codes.__getitem__))
            self.round = dataclasses.replace(
                self.round, orders={**self.round.orders, **dict.fromkeys(self.listeners, canonical)}
            )
        self._vectors: tuple[Any, dict[str, np.ndarray]] = (None, {})  # see _round_vector
        self._names = [self._all_names[c] for c in self.round.codes]
        self._lines = {
            agent: "\n".join(f"{pos + 1}. {self._names[i]}" for pos, i in enumerate(order))
            for agent, order in self.round.orders.items()
        }

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        self.round_index = 0
        self.correct = 0
        self.picks_made = 0
        self._new_round()

    def _game_valid_actions(self, agent: str) -> list[str]:
        if agent == self.speaker:
            return ["say", "pass"] if self.phase == "talk" else ["wait"]
        if self.phase == "talk":
            return ["wait"]
        if self.pick_by == "name":
            assert self.round is not None
            return [f"pick {self._names[i]}" for i in self.round.orders[agent]]
        return list(self._picks)

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return self._actions

    def can_speak(self, agent: str) -> bool:
        return agent == self.speaker and self.phase == "talk"

    def _game_vet_message(self, agent: str, text: str) -> tuple[str | None, str]:
        words = text.split()
        if len(words) <= self.word_budget:
            return text, ""
        kept = " ".join(words[: self.word_budget])
        return kept, f"Only your first {self.word_budget} words were sent (the word budget)."

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        assert self.round is not None
        rnd, speaker = self.round, self.speaker
        if self.phase == "talk":
            said = actions.get(speaker)
            feedback = {}
            if said == "pass":
                feedback[speaker] = "You passed."
            elif said == "say":
                sent = speaker in self.messages_sent
                feedback[speaker] = (
                    "Your description was sent."
                    if sent
                    else "You chose 'say' but no "
                    "<say>...</say> text was delivered, so the listeners heard nothing."
                )
            self.phase = "pick"
            return GameStep(rewards={}, feedback=feedback)

        rewards: dict[str, float] = {}
        feedback, events = {}, []
        target_text = self._names[rnd.target]
        verdicts = []
        for listener in self.listeners:
            subtask = f"round{self.round_index + 1}:{listener}"
            team = [speaker, listener]
            events.append(ev.subtask_attempted(subtask, team))
            action = actions.get(listener)
            picked = None if action is None else self._picked(listener, action)
            self.picks_made += 1
            if picked == rnd.target:
                self.correct += 1
                rewards[listener] = 1.0
                rewards[speaker] = rewards.get(speaker, 0.0) + 1.0 / len(self.listeners)
                events.append(ev.subtask_completed(subtask, team))
                feedback[listener] = f"Correct: the target was the {target_text}."
                verdicts.append(f"{listener} right")
            else:
                reason = "no pick" if picked is None else "wrong object"
                events.append(ev.subtask_failed(subtask, team, reason))
                feedback[listener] = f"Wrong: the target was the {target_text}."
                verdicts.append(f"{listener} wrong")
        feedback[speaker] = "Picks: " + ", ".join(verdicts) + "."

        self.round_index += 1
        done = self.round_index >= self.num_rounds
        if done:
            events.append(
                ev.outcome(self.correct == self.picks_made, self.correct / self.picks_made)
            )
        else:
            self._new_round()
        return GameStep(rewards=rewards, feedback=feedback, events=events, done=done)

    def _picked(self, listener: str, action: str) -> int:
        """Candidate index of a valid pick action (by number in the listener's list, or by name)."""
        assert self.round is not None
        if self.pick_by == "name":
            return self._names.index(action.removeprefix("pick "))
        return self.round.orders[listener][int(action.split()[1]) - 1]

    # ------------------------------------------------------------------ views
    def _game_instructions(self, agent: str) -> str:
        pick_rule = (
            "'pick N' from its own list"
            if self.pick_by == "number"
            else f"pick an object by its words, e.g. 'pick {self._all_names[-1]}'"
        )
        return (
            f"You are {agent} in a team of {len(self.possible_agents)} playing a referential game "
            f"of {self.num_rounds} round(s). Each round one speaker sees {self.num_candidates} "
            "objects and which one is the target; the others (listeners) see the same objects in "
            "their own shuffled order, so numbers mean nothing across agents. The speaker may "
            f"describe the target in at most {self.word_budget} words ('say', with the words "
            f"in <say>...</say>) or 'pass'; then each listener must {pick_rule}. "
            "A right pick scores for the whole team.\n" + _REPLY_FORMAT
        )

    def _game_observation(self, agent: str) -> str:
        assert self.round is not None
        head = f"Round {min(self.round_index + 1, self.num_rounds)}/{self.num_rounds}."
        if agent == self.speaker:
            if self.phase == "talk":
                target = self._names[self.round.target]
                return (
                    f"{head} You are the speaker. Objects:\n{self._lines[agent]}\n"
                    f"The target is: {target}\nDescribe it in at most {self.word_budget} words."
                )
            return f"{head} You are the speaker; the listeners are picking."
        if self.phase == "talk":
            return f"{head} {self.speaker} is the speaker. Your objects:\n{self._lines[agent]}\nWait for the description."
        return (
            f"{head} Pick the object {self.speaker} described. Your objects:\n{self._lines[agent]}"
        )

    def drawing(self, agent: str) -> Drawing | None:
        """The round's objects drawn in ``agent``'s order, the target marked for the speaker
        only (:mod:`teamgym.envs.signal.drawing`)."""
        if self.round is None:
            return None
        from teamgym.envs.signal.drawing import drawing

        return drawing(self, agent)

    @property
    def _name(self) -> str:
        """The registered id this configuration is (the render's header)."""
        return "signal-v1" if self.message_feedback else "signal-v0"

    def _game_render(self) -> str:
        if self.round is None:
            return f"{self._name} (not reset)"
        rnd = self.round
        rows = [
            f"{self._name} round {min(self.round_index + 1, self.num_rounds)}/{self.num_rounds} "
            f"phase={self.phase} speaker={self.speaker} right={self.correct}/{self.picks_made}"
        ]
        for i, obj in enumerate(rnd.candidates):
            mark = "*" if i == rnd.target else " "
            rows.append(f" {mark} {describe(obj, self.num_attributes)}")
        return "\n".join(rows)

    def _game_vector_size(self) -> int:
        width = self.num_attributes * self.num_values
        return 5 + self.num_candidates * width + self.num_candidates + len(self._vocab)

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        out = self._round_vector(agent).copy()
        out[2 if self.phase == "talk" else 3] = 1.0
        out[4] = min(self.round_index, self.num_rounds) / self.num_rounds
        base = len(out) - len(self._vocab)
        words = self._word_index
        heard = [
            base + words[w] for _, t in self.inbox.get(agent, []) for w in t.split() if w in words
        ]
        if heard:
            out[heard] = 1.0
        return out

    def _round_vector(self, agent: str) -> np.ndarray:
        """What stays put for ``agent`` through a round (its role, the candidates in its order,
        the speaker's target), built on first use like the text view's object lines."""
        if self._vectors[0] is not self.round:  # a new round, or a round set from outside
            self._vectors = (self.round, {})
        cached = self._vectors[1].get(agent)
        if cached is not None:
            return cached
        assert self.round is not None
        rnd, k, v = self.round, self.num_candidates, self.num_values
        width = self.num_attributes * v
        ones = [0 if agent == self.speaker else 1]
        base = 5
        for pos, i in enumerate(rnd.orders[agent]):
            start = base + pos * width
            ones += [start + a * v + value for a, value in enumerate(rnd.candidates[i])]
        base += k * width
        if agent == self.speaker:
            ones.append(base + rnd.orders[agent].index(rnd.target))
        out = np.zeros(self._game_vector_size(), dtype=np.float32)
        out[ones] = 1.0
        self._vectors[1][agent] = out
        return out
