"""Vector mode's action slots: which slots stand for each text action now, and the action mask.

A game lists every (action, message) an agent may ever choose (``_game_action_names``); a slot
may mean something new each episode ("goto place 3" is this episode's fridge), which the game
translates in ``_game_vector_action``. Rebuilding the mask slot by slot on every observation
costs more than the rest of a vector step, so :class:`SlotIndex` keeps, per agent, the index
text action -> slots until the game's ``_game_vector_key`` changes, and the last mask while the
legal actions stay the same. The contract check (:mod:`teamgym.envs.conformance`) compares the
masks it gives with the slot-by-slot translation.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from teamgym.envs.game import GameHooks

if TYPE_CHECKING:
    from teamgym.envs.text_env import TextParallelEnv

__all__ = ["SlotIndex"]

#: (slot count, text action -> the slots that stand for it)
Index = tuple[int, dict[str, list[int]]]


class SlotIndex:
    """One env's slot indices and last masks, per agent."""

    def __init__(self) -> None:
        self._by_agent: dict[str, tuple[Hashable, int, dict[str, list[int]]]] = {}
        self._shared: tuple[Sequence[str], dict[str, list[int]]] | None = None
        #: agent -> (slot index, legal actions, mask) of its last mask
        self._last_masks: dict[str, tuple[dict[str, list[int]], list[str], np.ndarray]] = {}

    def lookup(self, env: TextParallelEnv, agent: str) -> Index:
        """``agent``'s index, cached until ``env._game_vector_key(agent)`` changes. A class that
        translates slots below the class that keys and lists them (a subclass of a game
        overriding only ``_game_vector_action``) gets it rebuilt from its translations every
        time."""
        # Typed as plain ``type``: mypy checks ``type[TextParallelEnv]`` against the cache's
        # ``Hashable`` with the class's unbound ``__hash__``, though a class object hashes.
        env_class: type = type(env)
        if _translates_below_its_key(env_class):
            texts = GameHooks._game_vector_texts(env, agent)
            return len(texts), _slots_by_text(texts)
        key = env._game_vector_key(agent)
        cached = self._by_agent.get(agent)
        if cached is None or cached[0] != key:
            texts = env._game_vector_texts(agent)
            shared = self._shared
            if shared is not None and shared[0] is texts:  # another agent's, same slots
                index = shared[1]
            else:
                index = _slots_by_text(texts)
                self._shared = (texts, index)
            cached = self._by_agent[agent] = (key, len(texts), index)
        return cached[1], cached[2]

    def mask(self, agent: str, index: Index, valid: list[str]) -> np.ndarray:
        """The action mask of ``valid`` under ``index``, or a copy of the agent's last mask when
        the legal actions and the index are what they were then (a robot on the way, a
        listener waiting)."""
        n, slots = index
        last = self._last_masks.get(agent)
        if last is not None and last[0] is slots and last[1] == valid:
            return last[2].copy()
        mask = np.zeros(n, dtype=np.int8)
        legal = [i for action in valid for i in slots.get(action, ())]
        if legal:
            mask[legal] = 1
        self._last_masks[agent] = (slots, list(valid), mask.copy())
        return mask


@functools.cache
def _translates_below_its_key(cls: type) -> bool:
    """Whether ``cls`` defines ``_game_vector_action`` below ``_game_vector_key`` or
    ``_game_vector_texts`` in its hierarchy (their cached slot index would ignore it)."""
    mro = cls.__mro__

    def depth(name: str) -> int:
        return next(i for i, c in enumerate(mro) if name in c.__dict__)

    action = depth("_game_vector_action")
    return action < depth("_game_vector_key") or action < depth("_game_vector_texts")


def _slots_by_text(texts: Sequence[str]) -> dict[str, list[int]]:
    """Text action -> the slots that stand for it."""
    index: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        index.setdefault(text, []).append(i)
    return index
