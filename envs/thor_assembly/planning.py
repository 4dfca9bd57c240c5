"""The planning turn of ``thor-assembly-v0``: the leader's reply, read as (subtask, robot) lines.

A plan is one line per subtask, e.g. ``fetch Mug -> robot_1`` or ``connect Plate+Mug -> robot_0,
robot_2`` or ``inspect -> robot_3``. Lines are read leniently: a line that names a robot and one
or more known subtasks assigns them; a line naming two parts of a connection and a verb like
"connect" or "attach" assigns that connection. Nothing a model writes raises: an unreadable
plan gives empty assignments and a reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from teamgym.envs import events as ev

if TYPE_CHECKING:
    from teamgym.envs.thor_assembly.state import AssemblyState, StepLog

__all__ = ["parse_plan", "plan_balance", "planning_turn", "subtask_names"]

_ROBOT = re.compile(r"robot[_ ]?(\d+)", re.IGNORECASE)
_JOIN = re.compile(r"\b(connect|attach|join|fix|assemble|link)", re.IGNORECASE)
_INSPECT = re.compile(r"\b(inspect|inspection|quality check|check)\b", re.IGNORECASE)
MAX_PLAN_CHARS = 20_000


def subtask_names(parts: Sequence[str], connections: Sequence[tuple[str, str]]) -> list[str]:
    """Every subtask the task requires, named as events and plans name them."""
    return (
        [f"fetch {p}" for p in parts] + [f"connect {a}+{b}" for a, b in connections] + ["inspect"]
    )


def parse_plan(
    text: object,
    parts: Sequence[str],
    connections: Sequence[tuple[str, str]],
    robots: Sequence[str],
) -> tuple[dict[str, list[str]], str | None]:
    """(subtask -> robots, error or None) from the leader's reply; never raises."""
    if not isinstance(text, str) or not text.strip():
        return {}, "the plan is empty"
    assignments: dict[str, list[str]] = {}
    lower_parts = {p.lower(): p for p in parts}
    for line in text[:MAX_PLAN_CHARS].splitlines():
        who = [f"robot_{m}" for m in _ROBOT.findall(line) if f"robot_{m}" in robots]
        if not who:
            continue
        low = line.lower()
        mentioned = [
            lower_parts[w]
            for w in sorted(lower_parts, key=len, reverse=True)
            if re.search(rf"\b{re.escape(w)}\b", low)
        ]
        found: list[str] = []
        if _JOIN.search(line):
            for a, b in connections:
                if a in mentioned and b in mentioned:
                    found.append(f"connect {a}+{b}")
        if not found:
            found = [f"fetch {p}" for p in mentioned]
        if _INSPECT.search(line):
            found.append("inspect")
        for subtask in found:
            bucket = assignments.setdefault(subtask, [])
            bucket.extend(r for r in who if r not in bucket)
    if not assignments:
        return {}, (
            "no line names a robot and a subtask; write one line per subtask, "
            "e.g. 'fetch Mug -> robot_1' or 'connect Plate+Mug -> robot_0, robot_2'"
        )
    return assignments, None


def plan_balance(assignments: dict[str, list[str]], robots: Sequence[str]) -> float:
    """min/max subtasks per robot (1 = evenly spread, 0 = some robot got nothing)."""
    counts = {r: 0 for r in robots}
    for who in assignments.values():
        for r in who:
            counts[r] += 1
    high = max(counts.values())
    return min(counts.values()) / high if high else 0.0


def planning_turn(state: AssemblyState, log: StepLog, reply: object) -> float:
    """Read the leader's plan into ``state``, tell the leader how it was read, log the plan
    event and start acting; returns the plan's balance."""
    leader = state.robots[0]
    required = subtask_names(state.recipe.parts, state.connections)
    state.plan, state.plan_error = parse_plan(
        reply, state.recipe.parts, state.connections, state.robots
    )
    if state.plan_error:
        log.feedback[leader] = (
            f"Your plan could not be read: {state.plan_error}. The team acts without a plan."
        )
    else:
        covered = sum(1 for s in required if s in state.plan)
        log.feedback[leader] = f"Plan recorded: {covered}/{len(required)} subtasks assigned."
    log.events.append(ev.plan_issued(leader, state.plan or {}, required))
    state.phase = "act"
    return plan_balance(state.plan or {}, state.robots)
