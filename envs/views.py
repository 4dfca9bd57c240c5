"""The two ways an agent sees a :class:`~teamgym.envs.text_env.TextParallelEnv`: text and vector.

``obs_mode`` picks one view per env; the view owns everything that differs between the modes
(spaces, reading an agent's action, building its observation, the global state), so the env
itself never branches on the mode. Views call the env's ``_game_*`` hooks; they keep no state.

* ``text``: observations are ``str`` in a :class:`gymnasium.spaces.Text` over
  :data:`~teamgym.envs.messages.OBS_CHARSET`; actions are the model's raw reply.
* ``vector``: observations are ``{"observation": float32 array, "action_mask": int8 array}``
  and actions are ``Discrete`` indices into the env's ``action_names``, for classic RL libraries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from gymnasium import spaces

from teamgym.envs.messages import OBS_CHARSET, format_inbox, sanitize_text
from teamgym.envs.parsing import normalize_action, parse_reply

if TYPE_CHECKING:
    from teamgym.envs.text_env import TextParallelEnv

__all__ = ["VIEWS", "Decoded", "TextView", "VectorView", "View"]

_FEEDBACK_ECHO = 60  # characters of an invalid action echoed back in feedback

#: (action, message, error): the legal action read from a reply (None with an error saying why)
#: and the message that came with it.
Decoded = tuple[str | None, str | None, str | None]


class View(Protocol):
    """What an ``obs_mode`` decides: spaces, action decoding, observations and the state."""

    def observation_space(self, env: TextParallelEnv, agent: str) -> spaces.Space:
        """A new observation space for ``agent`` (the env caches it)."""
        ...

    def action_space(self, env: TextParallelEnv, agent: str) -> spaces.Space:
        """A new action space for ``agent`` (the env caches it)."""
        ...

    def decode(self, env: TextParallelEnv, agent: str, reply: Any, valid: list[str]) -> Decoded:
        """Read ``agent``'s action (one of ``valid``) and message from what it sent."""
        ...

    def observe(self, env: TextParallelEnv, agent: str, valid: list[str]) -> Any:
        """``agent``'s observation now, given its legal actions."""
        ...

    def state(self, env: TextParallelEnv) -> Any:
        """The global state."""
        ...


class TextView:
    """Text observations (feedback, the game's view, messages, valid actions); reply actions."""

    def observation_space(self, env: TextParallelEnv, agent: str) -> spaces.Space:
        """Printable text up to the env's ``max_observation_chars``."""
        return spaces.Text(env.max_observation_chars, min_length=0, charset=OBS_CHARSET)

    def action_space(self, env: TextParallelEnv, agent: str) -> spaces.Space:
        """Printable text up to the env's ``max_reply_chars`` (longer replies are accepted)."""
        return spaces.Text(env.max_reply_chars, min_length=0, charset=OBS_CHARSET)

    def decode(self, env: TextParallelEnv, agent: str, reply: Any, valid: list[str]) -> Decoded:
        """Parse the reply; the action matches a valid one up to case, spacing and punctuation."""
        parsed = parse_reply(reply)
        if parsed.action is None:
            return None, parsed.message, parsed.error
        action = parsed.action.strip()
        if action in valid:
            return action, parsed.message, None
        wanted = normalize_action(action)  # tolerate case, spacing, quotes, end punctuation
        match = next((v for v in valid if normalize_action(v) == wanted), None)
        if match is None:
            shown = parsed.action[:_FEEDBACK_ECHO]
            error = f"'{sanitize_text(shown)}' is not one of: {', '.join(valid)}"
            return None, parsed.message, error
        return match, parsed.message, None

    def observe(self, env: TextParallelEnv, agent: str, valid: list[str]) -> str:
        """Step and feedback, the game's view, the inbox and the valid actions, in the space."""
        parts = [f"Step {env.num_steps}/{env.max_steps}. {env._feedback.get(agent, '')}"]
        parts.append(env._game_observation(agent))
        messages = env.inbox.get(agent)
        if messages:
            parts.append(format_inbox(messages))
        parts.append(
            "Valid actions: " + (" | ".join(valid) if valid else "none (your part is over)")
        )
        text = "\n".join(parts)
        if not text.isascii():  # messages and echoes are sanitized already; games write ASCII
            text = sanitize_text(text)
        limit = env.max_observation_chars
        if len(text) > limit:  # a game broke its own bound: stay in the space
            text = text[: limit - 20] + "\n[observation cut]"
        return text

    def state(self, env: TextParallelEnv) -> str:
        """The rendered global view."""
        return env._game_render()


class VectorView:
    """Float vectors with an action mask; ``Discrete`` actions naming (action, message) pairs."""

    def observation_space(self, env: TextParallelEnv, agent: str) -> spaces.Space:
        """The game's vector in [-1, 1] and a 0/1 mask over the agent's action list."""
        n = len(env._game_action_names(agent))
        return spaces.Dict(
            {
                "observation": spaces.Box(-1.0, 1.0, (env._game_vector_size(),), np.float32),
                "action_mask": spaces.Box(0, 1, (n,), np.int8),
            }
        )

    def action_space(self, env: TextParallelEnv, agent: str) -> spaces.Space:
        """One index per entry of the agent's action list."""
        return spaces.Discrete(len(env._game_action_names(agent)))

    def decode(self, env: TextParallelEnv, agent: str, reply: Any, valid: list[str]) -> Decoded:
        """Translate the index; out-of-range and masked indices are errors."""
        names = env._game_action_names(agent)
        try:
            index = int(reply)
        except (TypeError, ValueError):
            return None, None, f"expected an action index, got {reply!r:.40}"
        if not 0 <= index < len(names):
            return None, None, f"action index {index} is out of range 0..{len(names) - 1}"
        action, message = env._game_vector_action(agent, index)
        if action not in valid:
            return None, message, f"'{action}' is not possible now"
        return action, message, None

    def observe(self, env: TextParallelEnv, agent: str, valid: list[str]) -> dict[str, Any]:
        """The game's vector and the mask of the indices legal now (set from the legal actions
        through a cached slot index, not rebuilt slot by slot)."""
        mask = env._slot_indices.mask(agent, env._slot_index(agent), valid)
        return {"observation": env._game_vector_observation(agent), "action_mask": mask}

    def state(self, env: TextParallelEnv) -> np.ndarray:
        """Every possible agent's vector, concatenated."""
        return np.concatenate([env._game_vector_observation(a) for a in env.possible_agents])


#: ``obs_mode`` -> its view.
VIEWS: dict[str, View] = {"text": TextView(), "vector": VectorView()}
