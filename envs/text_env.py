"""``TextParallelEnv``: what every teamgym game shares, on top of ``pettingzoo.ParallelEnv``.

A game subclasses it and writes only its rules (the ``_game_*`` hooks below). The base owns:
agent names, seeding (``self.np_random``), the step limit, the two observation modes, reply
parsing, invalid replies (a no-op, a small penalty and a reason in ``feedback``), message
delivery with the token cap, the ``infos`` keys of the env contract, and ANSI rendering.

Text mode: observations are ``str`` in a :class:`gymnasium.spaces.Text` over printable ASCII
plus newline and tab; actions are the model's raw reply. Vector mode: observations are
``{"observation": float32 array, "action_mask": int8 array}`` and actions are ``Discrete``
indices into :meth:`TextParallelEnv.action_names`, for classic RL libraries.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from teamgym.envs import events as ev
from teamgym.envs.parsing import normalize_action, parse_reply

__all__ = [
    "OBS_CHARSET",
    "GameStep",
    "TextParallelEnv",
    "Tokenizer",
    "sanitize_text",
    "truncate_message",
]

#: Characters an observation may contain: printable ASCII, newline and tab. Anything else a
#: model writes in a message is shown as "?" so observations always lie in their space.
OBS_CHARSET = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\n", "\t"}
_OUTSIDE_CHARSET = re.compile(r"[^\t\n\x20-\x7e]")
#: Upper bound on a delivered message's characters per token of the cap (keeps spaces finite).
CHARS_PER_TOKEN = 16
_FEEDBACK_ECHO = 60  # characters of an invalid action echoed back in feedback
_ObsMode = Literal["text", "vector"]


class Tokenizer(Protocol):
    """Anything with Hugging Face style ``encode``/``decode`` can count message tokens."""

    def encode(self, text: str, /) -> Sequence[int]: ...
    def decode(self, ids: Sequence[int], /) -> str: ...


def sanitize_text(text: str) -> str:
    """Replace characters outside :data:`OBS_CHARSET` with ``?``."""
    return _OUTSIDE_CHARSET.sub("?", text)


def truncate_message(
    text: str, max_tokens: int, tokenizer: Tokenizer | None = None
) -> tuple[str, int, bool]:
    """Cap a message at ``max_tokens`` (whitespace tokens unless a tokenizer is given).

    Returns ``(text, tokens, truncated)``; the text is one sanitized line, and a cut message ends
    with a visible ``[truncated: N more tokens]`` marker so the reader knows something is missing.
    """
    text = sanitize_text(text)
    if tokenizer is None:
        words = text.split()
        kept, dropped = words[:max_tokens], max(0, len(words) - max_tokens)
        out = " ".join(kept)
        n = len(kept)
    else:
        ids = list(tokenizer.encode(text))
        dropped = max(0, len(ids) - max_tokens)
        n = min(len(ids), max_tokens)
        out = " ".join(sanitize_text(tokenizer.decode(ids[:max_tokens])).split())
    limit = max_tokens * CHARS_PER_TOKEN
    if len(out) > limit:  # very long "tokens": cap characters too
        out = out[:limit]
        dropped = max(dropped, 1)
    if dropped:
        out = f"{out} [truncated: {dropped} more tokens]"
    return out, n, bool(dropped)


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


class TextParallelEnv(ParallelEnv[str, Any, Any]):
    """Base class of the teamgym games (a ``pettingzoo.ParallelEnv``).

    Subclasses implement ``_game_reset``, ``_game_step``, ``_game_valid_actions``,
    ``_game_action_names``, ``_game_instructions``, ``_game_observation``, ``_game_render``
    and, for vector mode, ``_game_vector_size`` and ``_game_vector_observation``.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "name": "text_env",
        "is_parallelizable": True,
    }
    #: Range of team sizes the game supports.
    min_agents: ClassVar[int] = 2
    max_agents: ClassVar[int] = 8
    #: Upper bound on the characters of the game's own part of an observation.
    max_game_observation_chars: ClassVar[int] = 4096
    #: Longest reply the text action space describes (longer replies are still accepted).
    max_reply_chars: ClassVar[int] = 4096

    def __init__(
        self,
        num_agents: int = 2,
        *,
        obs_mode: _ObsMode = "text",
        max_steps: int | None = None,
        message_max_tokens: int = 512,
        tokenizer: Tokenizer | None = None,
        invalid_penalty: float = 0.01,
        communication: bool = True,
        render_mode: str | None = None,
    ) -> None:
        """Common options; games add their own keyword arguments.

        Args:
            num_agents: team size, within the game's ``min_agents``..``max_agents``.
            obs_mode: ``"text"`` (str observations, reply actions) or ``"vector"``.
            max_steps: step limit; the episode is truncated when reached (game default if None).
            message_max_tokens: cap on each delivered ``<say>`` message.
            tokenizer: counts message tokens; whitespace tokens when None.
            invalid_penalty: subtracted from the individual reward of an unusable reply.
            communication: when False, ``<say>`` messages are dropped (ablation).
            render_mode: ``"ansi"`` or None.
        """
        if not isinstance(num_agents, int) or not self.min_agents <= num_agents <= self.max_agents:
            raise ValueError(
                f"num_agents must be an int in {self.min_agents}..{self.max_agents}, got {num_agents!r}"
            )
        if obs_mode not in ("text", "vector"):
            raise ValueError(f"obs_mode must be 'text' or 'vector', got {obs_mode!r}")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
        if not isinstance(message_max_tokens, int) or message_max_tokens < 1:
            raise ValueError(
                f"message_max_tokens must be a positive int, got {message_max_tokens!r}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}"
            )
        self.possible_agents = [f"robot_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.obs_mode: _ObsMode = obs_mode
        self._max_steps = max_steps
        self.message_max_tokens = message_max_tokens
        self.tokenizer = tokenizer
        self.invalid_penalty = float(invalid_penalty)
        self.communication = communication
        self.render_mode = render_mode
        self.np_random, self.np_random_seed = seeding.np_random(None)
        self.num_steps = 0
        self.inbox: dict[str, list[tuple[str, str]]] = {}
        #: sender -> message accepted this step (readable by ``_game_step``).
        self.messages_sent: dict[str, str] = {}
        self._feedback: dict[str, str] = {}
        self._obs_spaces: dict[str, spaces.Space] = {}
        self._act_spaces: dict[str, spaces.Space] = {}

    # ----------------------------------------------------------------- game hooks
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

    # ----------------------------------------------------------------- spaces
    @property
    def max_steps(self) -> int:
        """The step limit in force."""
        return self._max_steps if self._max_steps is not None else self._game_default_max_steps()

    @functools.cached_property
    def max_observation_chars(self) -> int:
        """Upper bound on a text observation's length (the ``Text`` space's ``max_length``)."""
        per_message = self.message_max_tokens * CHARS_PER_TOKEN + 64
        return self.max_game_observation_chars + len(self.possible_agents) * per_message + 1024

    def observation_space(self, agent: str) -> spaces.Space:
        """The agent's observation space; the same object on every call."""
        space = self._obs_spaces.get(agent)
        if space is None:
            if self.obs_mode == "text":
                space = spaces.Text(self.max_observation_chars, min_length=0, charset=OBS_CHARSET)
            else:
                n = len(self._game_action_names(agent))
                space = spaces.Dict(
                    {
                        "observation": spaces.Box(
                            -1.0, 1.0, (self._game_vector_size(),), np.float32
                        ),
                        "action_mask": spaces.Box(0, 1, (n,), np.int8),
                    }
                )
            self._obs_spaces[agent] = space
        return space

    def action_space(self, agent: str) -> spaces.Space:
        """The agent's action space (a reply ``Text`` or ``Discrete``); the same object on every call."""
        space = self._act_spaces.get(agent)
        if space is None:
            if self.obs_mode == "text":
                space = spaces.Text(self.max_reply_chars, min_length=0, charset=OBS_CHARSET)
            else:
                space = spaces.Discrete(len(self._game_action_names(agent)))
            self._act_spaces[agent] = space
        return space

    def action_names(self, agent: str) -> list[str]:
        """Vector mode's action index -> text, e.g. ``["wait", "pick 1", ...]``."""
        return [a if m is None else f"{a}: {m}" for a, m in self._game_action_names(agent)]

    # ----------------------------------------------------------------- API
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start an episode; the same ``seed`` always gives the same episode."""
        if seed is not None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
        self.agents = list(self.possible_agents)
        self.num_steps = 0
        self.inbox = {a: [] for a in self.agents}
        self._feedback = dict.fromkeys(self.agents, "The episode has started.")
        self._game_reset(options)
        infos = {}
        for agent in self.agents:
            infos[agent] = {
                "instructions": self._game_instructions(agent),
                "valid_actions": self._game_valid_actions(agent),
                "feedback": self._feedback[agent],
                "events": [],
                "individual_reward": 0.0,
            }
        obs = {agent: self._observe(agent, infos[agent]["valid_actions"]) for agent in self.agents}
        return obs, infos

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, Any],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Apply every live agent's reply (text mode) or action index (vector mode)."""
        if not self.agents:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        live = self.agents
        chosen: dict[str, str | None] = {}
        penalties: dict[str, float] = {}
        step_events: list[dict[str, Any]] = []
        feedback: dict[str, list[str]] = {a: [] for a in live}
        outbox: list[tuple[str, str]] = []
        for agent in live:
            action, message, error = self._decode(agent, actions.get(agent))
            if error is not None:
                chosen[agent] = None
                penalties[agent] = -self.invalid_penalty
                feedback[agent].append(
                    f"Your reply was not a legal action ({error}); you did nothing."
                )
                step_events.append(ev.invalid_action(agent, error))
            else:
                chosen[agent] = action
            if message:
                note = self._accept_message(agent, message, outbox)
                if note:
                    feedback[agent].append(note)

        self.messages_sent = dict(outbox)
        self.raw_replies = {a: actions.get(a) for a in live}
        result = self._game_step(chosen)
        self.num_steps += 1

        # Deliver this step's messages: they appear in the recipients' next observation.
        self.inbox = {a: [] for a in live}
        for sender, text in outbox:
            recipients = self._game_recipients(sender)
            tokens_text, tokens, cut = truncate_message(
                text, self.message_max_tokens, self.tokenizer
            )
            for r in recipients:
                if r in self.inbox:
                    self.inbox[r].append((sender, tokens_text))
            step_events.append(ev.message_sent(sender, recipients, tokens, cut))
        step_events.extend(result.events)

        done = result.done
        terminations = {
            a: bool(done if isinstance(done, bool) else done.get(a, False)) for a in live
        }
        truncated = self.num_steps >= self.max_steps
        truncations = {a: truncated and not terminations[a] for a in live}
        rewards = {a: float(result.rewards.get(a, 0.0)) + penalties.get(a, 0.0) for a in live}
        for agent in live:
            if agent in result.feedback:
                feedback[agent].append(result.feedback[agent])
            self._feedback[agent] = " ".join(feedback[agent]) or "Nothing happened."

        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        obs, infos = {}, {}
        for agent in live:
            valid = self._game_valid_actions(agent) if agent in self.agents else []
            infos[agent] = {
                "valid_actions": valid,
                "feedback": self._feedback[agent],
                "events": step_events,
                "individual_reward": rewards[agent],
                **result.info,
            }
            obs[agent] = self._observe(agent, valid)
        return obs, dict(rewards), terminations, truncations, infos

    def render(self) -> Any:
        """The global view: text for ``render_mode="ansi"``, an RGB array for ``"rgb_array"``
        (games that offer it); None without a render mode."""
        if self.render_mode == "ansi":
            return self._game_render()
        if self.render_mode == "rgb_array":
            return self._game_render_rgb()
        return None

    def _game_render_rgb(self) -> np.ndarray:
        """The global view as an H x W x 3 uint8 image (games listing ``rgb_array``)."""
        raise NotImplementedError

    def state(self) -> Any:
        """Global state: the rendered view in text mode, all agents' vectors in vector mode."""
        if self.obs_mode == "text":
            return self._game_render()
        return np.concatenate([self._game_vector_observation(a) for a in self.possible_agents])

    def close(self) -> None:
        """Nothing to release for pure-Python games."""

    # ----------------------------------------------------------------- internals
    def _decode(self, agent: str, reply: Any) -> tuple[str | None, str | None, str | None]:
        """(action, message, error) from one agent's reply or action index."""
        valid = self._game_valid_actions(agent)
        if self.obs_mode == "vector":
            names = self._game_action_names(agent)
            try:
                index = int(reply)
            except (TypeError, ValueError):
                return None, None, f"expected an action index, got {reply!r:.40}"
            if not 0 <= index < len(names):
                return None, None, f"action index {index} is out of range 0..{len(names) - 1}"
            action, message = self._game_vector_action(agent, index)
            if action not in valid:
                return None, message, f"'{action}' is not possible now"
            return action, message, None
        parsed = parse_reply(reply)
        if parsed.action is None:
            return None, parsed.message, parsed.error
        action = parsed.action.strip()
        if action not in valid:  # tolerate case, spacing, quotes and trailing punctuation
            wanted = normalize_action(action)
            action = next((v for v in valid if normalize_action(v) == wanted), None)
        if action is None:
            shown = parsed.action[:_FEEDBACK_ECHO]
            return (
                None,
                parsed.message,
                f"'{sanitize_text(shown)}' is not one of: {', '.join(valid)}",
            )
        return action, parsed.message, None

    def _accept_message(self, agent: str, message: str, outbox: list[tuple[str, str]]) -> str:
        """Queue a message for delivery if the rules allow it; returns a note for feedback."""
        if not self.communication:
            return "Messages are disabled in this game; yours was not delivered."
        if not self.can_speak(agent):
            return "You cannot send messages now; yours was not delivered."
        text, note = self._game_vet_message(agent, message)
        if text:
            outbox.append((agent, text))
        return note

    def _observe(self, agent: str, valid: list[str]) -> Any:
        if self.obs_mode == "vector":
            n = len(self._game_action_names(agent))
            valid_set = set(valid)
            mask = np.fromiter(
                (self._game_vector_action(agent, i)[0] in valid_set for i in range(n)),
                dtype=np.int8,
                count=n,
            )
            return {"observation": self._game_vector_observation(agent), "action_mask": mask}
        parts = [f"Step {self.num_steps}/{self.max_steps}. {self._feedback.get(agent, '')}"]
        parts.append(self._game_observation(agent))
        messages = self.inbox.get(agent)
        if messages:
            parts.append("Messages:\n" + "\n".join(f"- {s}: {t}" for s, t in messages))
        parts.append(
            "Valid actions: " + (" | ".join(valid) if valid else "none (your part is over)")
        )
        text = "\n".join(parts)
        if not text.isascii():  # messages and echoes are sanitized already; games write ASCII
            text = sanitize_text(text)
        if len(text) > self.max_observation_chars:  # a game broke its own bound: stay in the space
            text = text[: self.max_observation_chars - 20] + "\n[observation cut]"
        return text
