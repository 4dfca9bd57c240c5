"""``TextParallelEnv``: what every teamgym game shares, on top of ``pettingzoo.ParallelEnv``.

A game subclasses it and writes only its rules (the ``_game_*`` hooks). The base owns agent
names, seeding (``self.np_random``), the step limit, invalid replies (a no-op, a small penalty
and a reason in ``feedback``), the contract's ``infos`` keys and ANSI rendering; messages live
in :mod:`teamgym.envs.messages`, and all that differs between ``obs_mode="text"`` and
``"vector"`` in :mod:`teamgym.envs.views`. A step runs in four phases: read the replies, let
the game act (``_game_step``), deliver the messages, build observations and infos.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from teamgym.envs import events as ev
from teamgym.envs.counterfactual import Snapshot, idle_rewards, snapshot
from teamgym.envs.drawing import Drawing
from teamgym.envs.game import GameHooks, GameStep
from teamgym.envs.messages import (
    CHARS_PER_TOKEN,
    OBS_CHARSET,
    Inbox,
    Tokenizer,
    deliver,
    sanitize_text,
    truncate_message,
)
from teamgym.envs.slots import SlotIndex
from teamgym.envs.views import VIEWS, View

__all__ = [
    "CHARS_PER_TOKEN",
    "OBS_CHARSET",
    "GameStep",
    "TextParallelEnv",
    "Tokenizer",
    "sanitize_text",
    "truncate_message",
]

_ObsMode = Literal["text", "vector"]
#: PettingZoo's five per-agent dicts: observations, rewards, terminations, truncations, infos.
_StepResult = tuple[
    dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]
]


@dataclass
class _Replies:
    """What the env read from one step's replies, before the game acts on them."""

    chosen: dict[str, str | None] = field(default_factory=dict)
    """Legal action per live agent; ``None`` for an unusable reply (a no-op)."""
    penalties: dict[str, float] = field(default_factory=dict)
    """Reward added for an unusable reply."""
    feedback: dict[str, list[str]] = field(default_factory=dict)
    """Sentences for each agent's feedback so far."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """``invalid_action`` events."""
    outbox: list[tuple[str, str]] = field(default_factory=list)
    """(sender, text) of the messages the rules let through."""


class TextParallelEnv(GameHooks, ParallelEnv[str, Any, Any]):
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
    #: What success means in this game, one line (the benchmark report prints it beside the
    #: success rate, e.g. "a perfect score"); None: the game does not say.
    success_criterion: ClassVar[str | None] = None
    #: Actions that do nothing the team needs (the degenerate-policy guard counts an agent that
    #: only ever chose these, or made invalid replies, as idle: see :attr:`last_actions`).
    idle_actions: ClassVar[frozenset[str]] = frozenset({"wait"})
    #: Keep a copy of the state before each step, for :meth:`counterfactual_rewards` (off by
    #: default: a deep copy a step; ``SharedReward`` turns it on for ``mode="difference"``).
    keep_counterfactuals: bool = False
    _before_step: Snapshot | None = None

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
        message_feedback: bool = True,
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
            message_feedback: a step the rules said nothing about reads "Your message was
                sent." / "You received a message from ..." when that happened; False keeps
                the 0.1.0 wording, "Nothing happened." (``signal-v0``, ``thor-assembly-v0``).
            render_mode: ``"ansi"`` or None.
        """
        self._check_options(num_agents, obs_mode, max_steps, message_max_tokens, render_mode)
        self.possible_agents = [f"robot_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.obs_mode: _ObsMode = obs_mode
        #: What ``obs_mode`` decides (spaces, decoding, observations, state): a
        #: :class:`~teamgym.envs.views.View`. Replaceable, e.g. by a view that wraps this one to
        #: time its observations (``teamgym bench perf`` does).
        self.view: View = VIEWS[obs_mode]
        self._max_steps = max_steps
        self.message_max_tokens = message_max_tokens
        self.tokenizer = tokenizer
        self.invalid_penalty = float(invalid_penalty)
        self.communication = communication
        self.message_feedback = message_feedback
        self.render_mode = render_mode
        self.np_random, self.np_random_seed = seeding.np_random(None)
        self.num_steps = 0
        self.inbox: Inbox = {}
        #: sender -> message accepted this step (readable by ``_game_step``).
        self.messages_sent: dict[str, str] = {}
        #: agent -> what it sent this step, as sent (a reply or an action index), before decoding:
        #: games that read free text beyond the action (thor's plan) take it from here.
        self.raw_replies: dict[str, Any] = {}
        self._feedback: dict[str, str] = {}
        self._obs_spaces: dict[str, spaces.Space] = {}
        self._act_spaces: dict[str, spaces.Space] = {}
        self._slot_indices = SlotIndex()

    def _check_options(
        self,
        num_agents: Any,
        obs_mode: Any,
        max_steps: Any,
        message_max_tokens: Any,
        render_mode: Any,
    ) -> None:
        """Refuse a common option out of its range, saying what it must be."""
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

    # ----------------------------------------------------------------- vector slots
    def _slot_index(self, agent: str) -> tuple[int, dict[str, list[int]]]:
        """(slot count, text action -> the slots that stand for it now), for the action mask;
        cached until ``_game_vector_key`` changes (see :class:`~teamgym.envs.slots.SlotIndex`)."""
        return self._slot_indices.lookup(self, agent)

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
            space = self._obs_spaces[agent] = self.view.observation_space(self, agent)
        return space

    def action_space(self, agent: str) -> spaces.Space:
        """The agent's action space (a reply ``Text`` or ``Discrete``); the same object on every call."""
        space = self._act_spaces.get(agent)
        if space is None:
            space = self._act_spaces[agent] = self.view.action_space(self, agent)
        return space

    def vector_action(self, agent: str, index: int) -> tuple[str, str | None]:
        """The (text action, message) that vector action ``index`` stands for now (slots may
        name this episode's objects: "goto Fridge_1")."""
        return self._game_vector_action(agent, index)

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
        self.last_actions: dict[str, str | None] = {}
        self.inbox = {a: [] for a in self.agents}
        self._feedback = dict.fromkeys(self.agents, "The episode has started.")
        self._game_reset(options)
        infos = {
            agent: {
                "instructions": self._game_instructions(agent),
                **self._agent_info(agent, self._game_valid_actions(agent), [], 0.0),
            }
            for agent in self.agents
        }
        obs = {agent: self._observe(agent, infos[agent]["valid_actions"]) for agent in self.agents}
        return obs, infos

    def step(self, actions: dict[str, Any]) -> _StepResult:
        """Apply every live agent's reply (text mode) or action index (vector mode)."""
        if not self.agents:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        live = self.agents
        if self.keep_counterfactuals:  # the state before the step, for counterfactual_rewards
            self._before_step = snapshot(self, actions)
        # 1. Read the replies: legal actions, penalties, messages the rules let through.
        replies = self._read_replies(live, actions)
        #: each live agent's legal action this step (None: its reply was unusable, a no-op);
        #: read by the idle guard, never part of the env's outputs
        self.last_actions = dict(replies.chosen)
        # 2. The game acts on them.
        self.messages_sent = dict(replies.outbox)
        self.raw_replies = {a: actions.get(a) for a in live}
        result = self._game_step(replies.chosen)
        self.num_steps += 1
        # 3. This step's messages appear in the recipients' next observation.
        self.inbox, sent = deliver(
            replies.outbox, live, self._game_recipients, self.message_max_tokens, self.tokenizer
        )
        events = [*replies.events, *sent, *result.events]
        # 4. Ends, rewards and feedback; then every agent's observation and info.
        terminations, truncations = self._episode_ends(live, result.done)
        rewards = {
            a: float(result.rewards.get(a, 0.0)) + replies.penalties.get(a, 0.0) for a in live
        }
        for agent in live:
            if agent in result.feedback:
                replies.feedback[agent].append(result.feedback[agent])
            self._feedback[agent] = " ".join(replies.feedback[agent]) or self._quiet_feedback(agent)
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        obs, infos = self._outputs(live, rewards, events, result.info)
        return obs, dict(rewards), terminations, truncations, infos

    def counterfactual_rewards(self, agent: str) -> dict[str, float]:
        """The last step's rewards had ``agent`` done nothing, replayed on a copy of the state
        before it: ``agent``'s first valid :attr:`idle_actions` (an empty reply, invalid, where
        none is valid), the others' replies unchanged. What ``RewardSharing(mode="difference")``
        subtracts; :class:`~teamgym.envs.wrappers.SharedReward` sets
        :attr:`keep_counterfactuals` for it. Text mode only."""
        return idle_rewards(self, agent)

    def render(self) -> Any:
        """The global view: text for ``render_mode="ansi"``, an RGB array for ``"rgb_array"``
        (games that offer it); None without a render mode."""
        if self.render_mode == "ansi":
            return self._game_render()
        if self.render_mode == "rgb_array":
            return self._game_render_rgb()
        return None

    def picture(self, agent: str) -> str | None:
        """What a person playing ``agent`` may see of the global view (``teamgym play --web``
        draws it beside the observation), or None, the default, where that view would show what
        the seat may not know (signal's target, another seat's private state)."""
        return None

    def drawing(self, agent: str) -> Drawing | None:
        """``agent``'s picture of the game: SVG drawn from data that holds only what its
        observation allows (see :mod:`teamgym.envs.drawing`); ``teamgym play --web`` shows it.
        None, the default, for a game that draws none."""
        return None

    def _game_render_rgb(self) -> np.ndarray:
        """The global view as an H x W x 3 uint8 image (games listing ``rgb_array``)."""
        raise NotImplementedError

    def state(self) -> Any:
        """Global state: the rendered view in text mode, all agents' vectors in vector mode."""
        return self.view.state(self)

    def close(self) -> None:
        """Nothing to release for pure-Python games."""

    # ----------------------------------------------------------------- step phases
    def _quiet_feedback(self, agent: str) -> str:
        """Feedback of a step whose rules said nothing about ``agent``'s action: the messages it
        sent and received (delivered messages are news), else that nothing happened."""
        if not self.message_feedback:
            return "Nothing happened."
        news = ["Your message was sent."] if agent in self.messages_sent else []
        received = self.inbox.get(agent, [])
        if received:
            senders = ", ".join(dict.fromkeys(sender for sender, _ in received))
            what = "messages" if len(received) > 1 else "a message"
            news.append(f"You received {what} from {senders}.")
        return " ".join(news) or "Nothing happened."

    def _read_replies(self, live: list[str], actions: dict[str, Any]) -> _Replies:
        """Decode every live agent's reply; an unusable one becomes a penalised, explained no-op."""
        replies = _Replies(feedback={a: [] for a in live})
        for agent in live:
            action, message, error = self._decode(agent, actions.get(agent))
            if error is not None:
                replies.chosen[agent] = None
                replies.penalties[agent] = -self.invalid_penalty
                replies.feedback[agent].append(
                    f"Your reply was not a legal action ({error}); you did nothing."
                )
                replies.events.append(ev.invalid_action(agent, error))
            else:
                replies.chosen[agent] = action
            if message:
                note = self._accept_message(agent, message, replies.outbox)
                if note:
                    replies.feedback[agent].append(note)
        return replies

    def _decode(self, agent: str, reply: Any) -> tuple[str | None, str | None, str | None]:
        """(action, message, error) from one agent's reply or action index. The legal actions
        are asked of the game again, not reused from the last observation: a scenario may set
        the game's state between ``reset`` and ``step``."""
        valid = self._game_valid_actions(agent)
        return self.view.decode(self, agent, reply, valid)

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

    def _episode_ends(
        self, live: list[str], done: bool | dict[str, bool]
    ) -> tuple[dict[str, bool], dict[str, bool]]:
        """Terminations from the game's ``done``; truncations from the step limit."""
        terminations = {
            a: bool(done if isinstance(done, bool) else done.get(a, False)) for a in live
        }
        truncated = self.num_steps >= self.max_steps
        return terminations, {a: truncated and not terminations[a] for a in live}

    def _outputs(
        self,
        live: list[str],
        rewards: dict[str, float],
        events: list[dict[str, Any]],
        extra: dict[str, Any],
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Observations and infos of the agents that were live this step; ``extra`` is the
        game's own ``infos`` keys. Agents whose part just ended get no valid actions."""
        obs, infos = {}, {}
        for agent in live:
            valid = self._game_valid_actions(agent) if agent in self.agents else []
            infos[agent] = {**self._agent_info(agent, valid, events, rewards[agent]), **extra}
            obs[agent] = self._observe(agent, valid)
        return obs, infos

    def _agent_info(
        self, agent: str, valid: list[str], events: list[dict[str, Any]], reward: float
    ) -> dict[str, Any]:
        """The contract's ``infos[agent]`` keys (``instructions`` is added at reset)."""
        return {
            "valid_actions": valid,
            "feedback": self._feedback[agent],
            "events": events,
            "individual_reward": reward,
        }

    def _observe(self, agent: str, valid: list[str]) -> Any:
        """``agent``'s observation now, in the view of ``obs_mode``."""
        return self.view.observe(self, agent, valid)
