"""The rules one robot's action follows in ``thor-assembly-v0``: what is legal, moving, opening,
picking up, putting down, inspecting, and the episode's outcome.

Every rule acts through the backend (``Turn.thor``, one THOR call for one robot), changes the
``AssemblyState`` and writes what happened to the step's ``StepLog``. The joint actions of two
robots (connections, heavy parts) are in ``joint.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.thor_assembly.episode import position_of
from teamgym.envs.thor_assembly.state import AssemblyState, StepLog

__all__ = [
    "Turn",
    "act_alone",
    "advance_travel",
    "arrive",
    "goto",
    "inspect",
    "outcome",
    "put",
    "valid_actions",
]


@dataclass
class Turn:
    """One step of the rules: the state they change, the log they write, the backend they use."""

    state: AssemblyState
    log: StepLog
    thor: Callable[..., tuple[bool, str]]
    """``thor(robot, action, **args) -> (success, error)``: one THOR call for one robot."""
    refresh: Callable[[], None]
    """Re-read the world from the backend's metadata into ``state``."""
    rng: np.random.Generator
    """The env's generator (connection defects are drawn from it)."""
    defect_rate: float
    subtask_reward: float


# ---------------------------------------------------------------------- legal actions
def valid_actions(state: AssemblyState, robot: str) -> list[str]:
    """The commands a robot can give now (a superset of what will succeed)."""
    if state.phase == "plan":
        return ["plan"] if robot == state.robots[0] else ["wait"]
    if robot in state.travel:
        return ["wait"]
    here = state.at[robot]
    carrying = state.holding_part(robot)
    acts = list(_moves(state, here))
    if here is None:
        return list(dict.fromkeys(acts))
    for p in state.places_here(robot):
        o, name = state.obj[p], state.names[p]
        if o["openable"] and carrying not in state.carry:
            acts.append(f"close {name}" if o["isOpen"] else f"open {name}")
        if carrying is not None and (not o["openable"] or o["isOpen"]):
            acts.append(f"put {name}")
    if carrying is None:
        for oid in state.view[robot]["visible"]:
            o = state.obj[oid]
            if o["pickupable"] and not o["isPickedUp"] and oid in state.names:
                acts.append(f"pickup {state.names[oid]}")
    if here == state.workbench and carrying is None:
        acts += _connect_actions(state)
        acts.append("inspect")
    return list(dict.fromkeys(acts))


def _moves(state: AssemblyState, here: str | None) -> tuple[str, ...]:
    """``wait`` and a ``goto`` to every other place, memoised per (names, place)."""
    key = ("moves", state.names_version, here)
    moves = state.memo.get(key)
    if moves is None:
        goto = [f"goto {state.names[p]}" for p in state.place_ids if p != here]
        moves = state.memo[key] = ("wait", *goto)
    return moves


def _connect_actions(state: AssemblyState) -> list[str]:
    acts = []
    for a, b in state.connections:
        if a in state.placed and b in state.placed and state.conn_state[(a, b)] == "todo":
            na, nb = state.part_name(a), state.part_name(b)
            if na and nb:
                acts += [f"hold {na}", f"attach {nb} to {na}", f"hold {nb}", f"attach {na} to {nb}"]
    return acts


# ---------------------------------------------------------------------- moving
def advance_travel(turn: Turn, live: list[str]) -> list[str]:
    """Robots on the way take one more step; returns those that arrive this step."""
    state, arrivals = turn.state, []
    for robot in live:
        if robot in state.travel:
            dest, left = state.travel[robot]
            if left <= 1:
                arrivals.append(robot)
            else:
                state.travel[robot] = (dest, left - 1)
                turn.log.feedback[robot] = (
                    f"On the way to {state.names[dest]}: {left - 1} step(s) left."
                )
    return arrivals


def goto(turn: Turn, robot: str, words: list[str], partner: str | None = None) -> None:
    """Set off to a place (with the partner when carrying a heavy part together)."""
    state = turn.state
    place = state.ids_by_name.get(" ".join(words[1:]))
    if place is None or place not in state.place_cell:
        turn.log.feedback[robot] = f"goto failed: there is no place called {' '.join(words[1:])}."
        return
    steps = state.steps_to(robot, place)
    for mover in [robot] + ([partner] if partner else []):
        state.at[mover] = None
        if steps <= 1:
            arrive(turn, mover, place)
        else:
            state.travel[mover] = (place, steps - 1)
            turn.log.feedback[mover] = (
                f"You set off to {state.names[place]}: {steps - 1} more step(s) on the way."
            )


def arrive(turn: Turn, robot: str, place: str | None = None) -> None:
    """Put a robot at a place (its travel destination unless given), facing the receptacle."""
    state = turn.state
    place = place or state.travel.pop(robot)[0]
    state.travel.pop(robot, None)
    ok, error = turn.thor(
        robot,
        "Teleport",
        position=position_of(state.place_cell[place]),
        rotation={"x": 0, "y": state.place_rot[place], "z": 0},
    )
    state.at[robot] = place
    state.successes[robot] += 1
    turn.log.feedback[robot] = (
        f"You arrived at {state.names[place]}." if ok else f"Arriving failed: {error}"
    )


# ---------------------------------------------------------------------- one robot's action
def act_alone(turn: Turn, robot: str, words: list[str]) -> None:
    """Apply a robot's command that no joint action took; unknown verbs do nothing."""
    verb = words[0] if words else "wait"
    rule = _ALONE.get(verb)
    if rule is not None:
        rule(turn, robot, words)


def _wait(turn: Turn, robot: str, words: list[str]) -> None:
    turn.thor(robot, "Pass")
    turn.log.feedback.setdefault(robot, "You waited.")


def _open_close(turn: Turn, robot: str, words: list[str]) -> None:
    verb, state = words[0], turn.state
    oid = state.ids_by_name.get(" ".join(words[1:]))
    ok, error = turn.thor(robot, "OpenObject" if verb == "open" else "CloseObject", objectId=oid)
    turn.log.feedback[robot] = (
        f"You {'opened' if verb == 'open' else 'closed'} {words[1]}."
        if ok
        else f"{verb} failed: {error}"
    )
    state.successes[robot] += ok


def _pickup(turn: Turn, robot: str, words: list[str]) -> None:
    state = turn.state
    oid = state.ids_by_name.get(words[1])
    part = state.part_type_of.get(oid or "")
    if part in state.heavy:
        return  # lifted as a joint action
    ok, error = turn.thor(robot, "PickupObject", objectId=oid)
    if not ok:
        turn.log.feedback[robot] = f"pickup failed: {error}"
        return
    state.successes[robot] += 1
    turn.log.feedback[robot] = f"You picked up {words[1]}."
    if part:
        state.touched.add(part)
        turn.log.events.append(ev.subtask_attempted(f"fetch {part}", [robot]))


def put(turn: Turn, robot: str, words: list[str], partner: str | None = None) -> None:
    """Put what a robot holds (a heavy part with its partner) into a place; on the workbench
    it completes that part's fetch."""
    state, log = turn.state, turn.log
    target = state.ids_by_name.get(" ".join(words[1:]))
    part = state.holding_part(robot)
    held_by = state.carry[part][0] if part in state.carry else robot
    ok, error = turn.thor(held_by, "PutObject", objectId=target)
    team = [robot] + ([partner] if partner else [])
    if not ok:
        log.tell(team, f"put failed: {error}")
        return
    if part in state.carry:
        del state.carry[part]
    part_id = state.part_ids.get(part, "") if part is not None else ""
    for a in team:
        state.successes[a] += 1
        log.feedback[a] = f"You put {state.names.get(part_id, 'it')} in {words[1]}."
    if part and target == state.workbench:
        log.events.append(ev.subtask_completed(f"fetch {part}", sorted(team)))
        state.placed_by[part] = sorted(team)
        log.reward(team, turn.subtask_reward)


def inspect(turn: Turn, robot: str, words: list[str] | None = None) -> None:
    """Check the product at the workbench: pass, or name what is missing and reveal faults
    (a faulty connection goes back to "todo")."""
    state, log = turn.state, turn.log
    log.events.append(ev.subtask_attempted("inspect", [robot]))
    if state.at[robot] != state.workbench:
        log.feedback[robot] = "inspect failed: go to the workbench first."
        log.events.append(ev.subtask_failed("inspect", [robot], "not at the workbench"))
        return
    turn.refresh()
    missing = [
        state.names.get(state.part_ids[p], p) for p in state.recipe.parts if p not in state.placed
    ]
    todo = [f"{a}+{b}" for (a, b) in state.connections if state.conn_state[(a, b)] == "todo"]
    faulty = sorted(state.faulty)
    for pair in faulty:
        state.conn_state[pair] = "todo"
        log.events.append(
            ev.subtask_failed(f"connect {pair[0]}+{pair[1]}", state.conn_by.get(pair, []), "faulty")
        )
    state.faulty = set()
    if not missing and not todo and not faulty:
        state.inspection_passed = True
        state.successes[robot] += 1
        log.events.append(ev.subtask_completed("inspect", [robot]))
        log.feedback[robot] = "Inspection passed: the product is complete."
        state.last_inspection = "passed"
        return
    problems = []
    if missing:
        problems.append("parts missing from the workbench: " + ", ".join(missing))
    if todo:
        problems.append("connections not made: " + ", ".join(todo))
    if faulty:
        problems.append("faulty connections to redo: " + ", ".join(f"{a}+{b}" for a, b in faulty))
    state.last_inspection = "; ".join(problems)
    log.feedback[robot] = f"Inspection failed: {state.last_inspection}."
    log.events.append(ev.subtask_failed("inspect", [robot], state.last_inspection))


def _plan_over(turn: Turn, robot: str, words: list[str]) -> None:
    turn.log.feedback[robot] = "The planning turn is over."


_ALONE: dict[str, Callable[[Turn, str, list[str]], None]] = {
    "wait": _wait,
    "goto": goto,
    "open": _open_close,
    "close": _open_close,
    "pickup": _pickup,
    "put": put,
    "inspect": inspect,
    "plan": _plan_over,
}


# ---------------------------------------------------------------------- the outcome
def outcome(state: AssemblyState) -> dict[str, Any]:
    """The episode's outcome event: success, the share of the task done, coverage, balance."""
    required = len(state.recipe.parts) + len(state.connections) + 1
    good = len(state.placed) + sum(
        1 for c in state.connections if state.conn_state[c] == "fixed" and c not in state.faulty
    )
    transport = (good + int(state.inspection_passed)) / required
    counts = list(state.successes.values())
    balance = min(counts) / max(counts) if max(counts) else 0.0
    return ev.outcome(
        state.inspection_passed,
        transport,
        transport_rate=transport,
        coverage=len(state.touched) / len(state.recipe.parts),
        balance=balance,
    )
