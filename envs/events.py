"""Typed events: what happened in a step, in ``infos[agent]["events"]``.

Events are plain JSON-ready dicts with a ``"type"`` key so they can be logged, hashed and
compared across processes. Every live agent's info carries the same list for a step (a
team-level log); :mod:`teamgym.envs.metrics` computes every episode metric from them. Build
them with the functions here so the keys stay the ones the metrics read.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

__all__ = [
    "EVENT_TYPES",
    "add_subtask_credit",
    "invalid_action",
    "message_sent",
    "outcome",
    "plan_issued",
    "role",
    "subtask_attempted",
    "subtask_completed",
    "subtask_failed",
]

Event = dict[str, Any]

#: Every event type an env may emit; metrics ignore types they do not know.
EVENT_TYPES = (
    "subtask_attempted",
    "subtask_completed",
    "subtask_failed",
    "message",
    "plan",
    "invalid_action",
    "outcome",
    "role",
    # a game's own events, read by its docs and by researchers, not by the shared metrics
    "hint",  # hanabi-v0: a hint given (giver, receiver, colour or rank, cards pointed)
    "play",  # hanabi-v0: a card played that scored
    "misplay",  # hanabi-v0: a card played that burned a fuse
    "discard",  # hanabi-v0: a card discarded (critical: the last copy of one still needed)
)


def subtask_attempted(subtask: str, agents: Sequence[str]) -> Event:
    """Agents started (or tried) a subtask."""
    return {"type": "subtask_attempted", "subtask": subtask, "agents": list(agents)}


def subtask_completed(subtask: str, agents: Sequence[str]) -> Event:
    """Agents finished a subtask; each named agent gets an equal share of the credit."""
    return {"type": "subtask_completed", "subtask": subtask, "agents": list(agents)}


def subtask_failed(subtask: str, agents: Sequence[str], reason: str) -> Event:
    """An attempt at a subtask failed, with the reason in words."""
    return {"type": "subtask_failed", "subtask": subtask, "agents": list(agents), "reason": reason}


def message_sent(sender: str, recipients: Sequence[str], tokens: int, truncated: bool) -> Event:
    """An agent's ``<say>`` text was delivered (``tokens`` counted after truncation)."""
    return {
        "type": "message",
        "sender": sender,
        "recipients": list(recipients),
        "tokens": tokens,
        "truncated": truncated,
    }


def plan_issued(
    agent: str, assignments: Mapping[str, Sequence[str]], required: Sequence[str]
) -> Event:
    """A leader assigned subtasks to agents (``assignments``: subtask -> agents) in a planning
    phase; ``required`` lists the subtasks the task needs, for plan coverage."""
    return {
        "type": "plan",
        "agent": agent,
        "assignments": {k: list(v) for k, v in assignments.items()},
        "required": list(required),
    }


def invalid_action(agent: str, reason: str) -> Event:
    """An agent's reply could not be turned into a legal action (it became a no-op)."""
    return {"type": "invalid_action", "agent": agent, "reason": reason}


def outcome(success: bool, score: float, **extras: float) -> Event:
    """How the episode ended: ``success`` by the game's rule, ``score`` in [0, 1] (e.g. the
    fraction of goals reached), and game-specific figures in ``extras`` (e.g. transport rate).
    Emitted once, on the step that ends the episode."""
    return {
        "type": "outcome",
        "success": bool(success),
        "score": float(score),
        "extras": {k: float(v) for k, v in extras.items()},
    }


def role(agent: str, name: str) -> Event:
    """The role ``agent`` played in the episode (e.g. keydoor's ``holder`` / ``fetcher``), so
    role specialisation across episodes can be counted. Emitted once per agent, at the end."""
    return {"type": "role", "agent": agent, "role": name}


def add_subtask_credit(credit: MutableMapping[str, float], event: Mapping[str, Any]) -> None:
    """Add a ``subtask_completed`` event's credit: an equal share to each agent it names.

    The one credit rule, read by the metrics (``contribution_gini``) and by ``proportional``
    reward sharing; any other event adds nothing.
    """
    if event.get("type") != "subtask_completed":
        return
    agents = list(event.get("agents") or [])
    for agent in agents:
        credit[agent] = credit.get(agent, 0.0) + 1.0 / len(agents)
