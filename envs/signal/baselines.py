"""Scripted baselines for ``signal-v1``; they read only what an LLM would read (the text)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import combinations
from typing import Any

from teamgym.envs.baselines import RandomPolicy
from teamgym.envs.signal.world import decode, describe

__all__ = [
    "CONVENTIONS",
    "ConventionSpeaker",
    "SignalAnyOrderBabbler",
    "SignalBabbler",
    "SignalExpert",
    "SignalPaletteBabbler",
]

_ITEM = re.compile(r"^(\d+)\. (.+)$", re.MULTILINE)
_TARGET = re.compile(r"^The target is: (.+)$", re.MULTILINE)
_BUDGET = re.compile(r"at most (\d+) words")
_MESSAGE = re.compile(r"^- robot_\d+: (.*)$", re.MULTILINE)
_SAY = re.compile(r"<say>(.*)</say>")


class SignalExpert:
    """Speaker: the fewest attribute words that single out the target (within the budget).
    Listener: the first object whose words contain every word of the message; with no
    message it can only guess, so without communication it is at chance."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def reset(self, seed: int | None = None) -> None:
        """Stateless: nothing to reset."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The expert's reply."""
        valid = list(info.get("valid_actions", []))
        items = [(int(n), text.split()) for n, text in _ITEM.findall(observation)]
        if "say" in valid:
            target = _TARGET.search(observation)
            budget = _BUDGET.search(observation)
            if target is None or not items:
                return "<action>pass</action>"
            words = self.describe(
                target.group(1).split(),
                [w for _, w in items],
                int(budget.group(1)) if budget else 99,
            )
            return f"<say>{' '.join(words)}</say><action>say</action>"
        picks = [a for a in valid if a.startswith("pick ")]
        if picks:
            said = _MESSAGE.findall(observation)
            heard = set(said[-1].split()) if said else set()
            for n, words in items:
                if heard and heard <= set(words):
                    by_name = f"pick {' '.join(words)}"
                    return f"<action>{by_name if by_name in valid else f'pick {n}'}</action>"
            return f"<action>{picks[0]}</action>"
        return f"<action>{valid[0] if valid else 'wait'}</action>"

    @staticmethod
    def describe(target: list[str], candidates: list[list[str]], budget: int) -> list[str]:
        """Smallest set of the target's words (by position) that no other candidate shares."""
        others = [c for c in candidates if c != target]
        for size in range(1, min(budget, len(target)) + 1):
            for positions in combinations(range(len(target)), size):
                if all(any(o[p] != target[p] for p in positions) for o in others):
                    return [target[p] for p in positions]
        return target[:budget]


class SignalBabbler(RandomPolicy):
    """Valid but uninformative: the speaker always talks, naming an object drawn at random from
    its list (whatever the target), and a listener picks at random. Success stays at chance;
    as a warm-up teacher it teaches the format of talking without making ``pass`` the habit."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """Name a random object (speaker) or pick a random one (listener)."""
        valid = list(info.get("valid_actions", []))
        items = [text for _, text in _ITEM.findall(observation)]
        if "say" in valid and items:
            return self.message(self.words(items[int(self.rng.integers(len(items)))]))
        picks = [a for a in valid if a.startswith("pick ")]
        choice = picks or valid or ["wait"]
        return f"<action>{choice[int(self.rng.integers(len(choice)))]}</action>"

    def words(self, name: str) -> str:
        """What the speaker says for the object ``name``: its name, as listed."""
        return name

    @staticmethod
    def message(name: str) -> str:
        """The speaker's reply naming ``name``: ``<say>green</say><action>say</action>``."""
        return f"<say>{name}</say><action>say</action>"


class SignalAnyOrderBabbler(SignalBabbler):
    """The babbler, but the words of the object it names come in a random order (``circle
    green`` as often as ``green circle``). The babbler says them in the listed order, so under a
    one-word budget in the colour-and-shape game its first word is always the colour and a
    warm-up on its replies leaves a speaker that never says the shape; this one's first word is
    any attribute, so RL can find which one tells the target apart."""

    def words(self, name: str) -> str:
        """The object's words in a random order."""
        words = name.split()
        return " ".join(words[int(i)] for i in self.rng.permutation(len(words)))


class SignalPaletteBabbler(SignalBabbler):
    """The babbler, but the speaker names an object drawn from the env's whole palette (every
    object the game's attributes make), never from its list: what it says is independent of
    the target, so a warm-up on its replies teaches the format of talking and nothing of the
    answer. It reads the palette from the env (``bind``), not from the text.

    Playing every seat (``teamgym baselines``, the smoke suite) its metrics, and so its
    fingerprint, equal the babbler's on every seed: the listeners pick at random alike, the
    metrics never read the words said, and naming an object of the palette or of the list is
    one draw that moves the random generator on by the same step. Only what is said differs
    (the settings' ``trajectories`` hashes); with a listener that reads the message (the
    ``expert`` as teammate or cross-play partner) the successes differ too."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed)
        self.palette: list[str] = []

    def bind(self, env: Any) -> None:
        """Every object name of ``env``'s game (its attributes and values)."""
        game = getattr(env, "unwrapped", env)
        attributes, values = game.num_attributes, game.num_values
        self.palette = [
            describe(decode(code, attributes, values), attributes)
            for code in range(values**attributes)
        ]

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """Name a random object of the palette (speaker) or pick a random one (listener)."""
        if not self.palette:
            raise RuntimeError(
                "SignalPaletteBabbler reads the palette from the env: bind(env) first"
            )
        if "say" in info.get("valid_actions", ()):
            return self.message(self.palette[int(self.rng.integers(len(self.palette)))])
        return super().act(agent, observation, info)


#: How ``convention:STYLE`` frames the expert's description (``{}``: its words). The negating
#: styles name the other object instead (two candidates only; else they speak bare).
CONVENTIONS = {
    "bare": "{}",
    "the": "the {}",
    "one": "{} one",
    "itis": "it is {}",
    "not": "not {}",
    "isnot": "is not {}",
}
_NEGATING = frozenset({"not", "isnot"})
_FILLERS = frozenset(w for t in CONVENTIONS.values() for w in t.split() if w not in ("{}", "not"))


class ConventionSpeaker(SignalExpert):
    """The expert with a convention of speech (``convention:STYLE``, :data:`CONVENTIONS`): as
    speaker it frames its description (``the red``, ``red one``, ``it is red``; bare where the
    frame would pass the word budget) or, negating, names the object that is not the target
    (``not blue``, ``is not blue``); as listener it reads every convention. The partners of
    the frozen-partner result (docs/results/partners.md): a listener that learned one
    convention meets the others as partners never seen."""

    def __init__(self, style: str = "bare", seed: int | None = None) -> None:
        if style not in CONVENTIONS:
            raise KeyError(
                f"no speaker convention {style!r}; conventions: {', '.join(CONVENTIONS)}"
            )
        super().__init__(seed)
        self.style = style

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The speaker's framed description, or the listener's pick under any convention."""
        valid = list(info.get("valid_actions", ()))
        items = [(int(n), text.split()) for n, text in _ITEM.findall(observation)]
        if "say" not in valid:
            said = _MESSAGE.findall(observation)
            heard = said[-1].split() if said else []
            words = {w for w in heard if w not in _FILLERS and w != "not"}
            if "not" in heard and words:
                for n, item in items:
                    if not words <= set(item) and (by_name := f"pick {' '.join(item)}") in valid:
                        return f"<action>{by_name}</action>"
                    if not words <= set(item) and f"pick {n}" in valid:
                        return f"<action>pick {n}</action>"
            observation = _MESSAGE.sub(
                lambda m: m.group(0).replace(m.group(1), _unframed(m.group(1))), observation
            )
            return super().act(agent, observation, info)
        reply = super().act(agent, observation, info)
        spoken = _SAY.search(reply)
        if spoken is None:
            return reply
        budget_match = _BUDGET.search(observation)
        budget = int(budget_match.group(1)) if budget_match else 99
        phrase = spoken.group(1)
        if self.style in _NEGATING:
            target = _TARGET.search(observation)
            if target is None:
                return reply
            others = [w for _, w in items if w != target.group(1).split()]
            if len(items) != 2 or len(others) != 1:
                return reply
            phrase = " ".join(self.describe(others[0], [target.group(1).split()], budget))
        framed = CONVENTIONS[self.style].format(phrase)
        if len(framed.split()) > budget:
            return reply
        return reply.replace(spoken.group(0), f"<say>{framed}</say>")


def _unframed(message: str) -> str:
    return " ".join(w for w in message.split() if w not in _FILLERS)
