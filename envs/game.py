"""What a teamgym game writes: the ``_game_*`` hooks of :class:`GameHooks` and the
:class:`GameStep` its rules return. :class:`~teamgym.envs.text_env.TextParallelEnv` does the rest
(agents, seeding, replies, messages, the step limit, the views), so a new game is its rules and
its words; the defaults here are what a game that does not override a hook gets.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["GameHooks", "GameStep"]


@dataclass
class GameStep:
    """What a game's rules made of one joint action (returned by ``_game_step``)."""

    rewards: dict[str, float]
    """Individual reward per live agent (missing agents get 0)."""
    feedback: dict[str, str] = field(default_factory=dict)
    """What happened to each agent's action, in words."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Typed events of the step (see :mod:`teamgym.envs.events`)."""
    done: bool | dict[str, bool] = False
    """Whether the episode (or, per agent, that agent's part in it) has ended."""
    info: dict[str, Any] = field(default_factory=dict)
    """Extra ``infos`` keys for every agent this step (JSON-ready), e.g. the turn order."""


class GameHooks:
    """The hooks a game implements; the ones without a default raise ``NotImplementedError``."""

    agents: list[str]

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        """Build a new game state, drawing every random number from ``self.np_random``."""
        raise NotImplementedError

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        """Apply one joint action; ``None`` is a no-op (the agent's reply was unusable)."""
        raise NotImplementedError

    def _game_valid_actions(self, agent: str) -> list[str]:
        """The actions legal for ``agent`` now, in normalized form."""
        raise NotImplementedError

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        """Every (action, message) the agent may ever choose: the vector-mode action list."""
        raise NotImplementedError

    def _game_instructions(self, agent: str) -> str:
        """The system prompt: role, goal, action grammar and reply format."""
        raise NotImplementedError

    def _game_observation(self, agent: str) -> str:
        """What ``agent`` sees now (its state and what changed), without messages or feedback."""
        raise NotImplementedError

    def _game_render(self) -> str:
        """The global view, as text."""
        raise NotImplementedError

    def _game_vector_size(self) -> int:
        """Length of the vector observation."""
        raise NotImplementedError

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        """The agent's observation as a float32 vector (messages via ``self.inbox``)."""
        raise NotImplementedError

    def _game_vector_action(self, agent: str, index: int) -> tuple[str, str | None]:
        """The (text action, message) that vector action ``index`` stands for now; games whose
        action slots change meaning per episode (e.g. "goto place 3") translate here."""
        return self._game_action_names(agent)[index]

    def _game_vector_key(self, agent: str) -> Hashable:
        """What the vector slots' meaning depends on now: the mask's slot index is rebuilt only
        when this changes. Default: the action list; a game that translates slots in
        ``_game_vector_action`` returns a key that changes whenever a translation does (and
        without one, the index is rebuilt on every observation: see :meth:`_slot_index`)."""
        return tuple(self._game_action_names(agent))  # a copy: a list changed in place differs

    def _game_vector_texts(self, agent: str) -> Sequence[str]:
        """The text action every vector slot stands for now (a game whose agents share their
        slots may return one list object for all: the slot index is then built once)."""
        n = len(self._game_action_names(agent))
        return [self._game_vector_action(agent, i)[0] for i in range(n)]

    def _game_default_max_steps(self) -> int:
        """Step limit used when ``max_steps`` is None."""
        return 100

    def can_speak(self, agent: str) -> bool:
        """Whether ``agent`` may send a message now (games restrict speakers here)."""
        return True

    def _game_vet_message(self, agent: str, text: str) -> tuple[str | None, str]:
        """Apply game rules to a message (e.g. a word budget): returns (text or None, note)."""
        return text, ""

    def _game_recipients(self, agent: str) -> list[str]:
        """Who receives ``agent``'s messages: by default every other live agent."""
        return [a for a in self.agents if a != agent]
