"""The joint actions of ``thor-assembly-v0``: two robots acting together in the same step.

A connection is one robot's ``hold X`` plus another's ``attach Y to X`` at the workbench; a heavy
part is lifted by two ``pickup``s and carried by two equal ``goto``s and one ``put``. Joint
actions resolve before single ones, in the step's seeded turn order.
"""

from __future__ import annotations

from teamgym.envs import events as ev
from teamgym.envs.thor_assembly.rules import Turn, goto, put

__all__ = ["carry_heavy", "connect", "joint_actions", "lift_heavy"]


def joint_actions(turn: Turn, parsed: dict[str, list[str]], order: list[str]) -> set[str]:
    """Resolve every joint action of the step; returns the robots whose action they took."""
    handled: set[str] = set()
    connect(turn, parsed, order, handled)
    lift_heavy(turn, parsed, order, handled)
    carry_heavy(turn, parsed, handled)
    return handled


# ---------------------------------------------------------------------- connections
def connect(turn: Turn, parsed: dict[str, list[str]], order: list[str], handled: set[str]) -> None:
    """Pair each ``attach Y to X`` with a teammate's ``hold X`` (first in turn order)."""
    state, log = turn.state, turn.log
    holds = {
        a: w[1]
        for a, w in parsed.items()
        if len(w) == 2 and w[0] == "hold" and a not in state.travel
    }
    for robot in order:
        words = parsed[robot]
        if robot in state.travel or len(words) != 4 or words[0] != "attach" or words[2] != "to":
            continue
        y_name, x_name = words[1], words[3]
        holder = next(
            (h for h in order if holds.get(h) == x_name and h != robot and h not in handled),
            None,
        )
        handled.add(robot)
        if holder is None:
            log.feedback[robot] = (
                f"attach failed: a teammate must 'hold {x_name}' at the workbench in the same step."
            )
            continue
        handled.add(holder)
        _join(turn, robot, holder, x_name, y_name)
    for robot, x_name in holds.items():
        if robot not in handled:
            handled.add(robot)
            log.feedback[robot] = (
                f"You held {x_name}, but no teammate attached anything to it this step."
            )


def _join(turn: Turn, robot: str, holder: str, x_name: str, y_name: str) -> None:
    """``robot`` attaches Y to X while ``holder`` holds X: the connection is made (perhaps
    with a hidden defect) if both are at the workbench with both parts placed."""
    state, log = turn.state, turn.log
    pair = state.connection_of(x_name, y_name)
    team = sorted([robot, holder])
    if pair is None or state.conn_state[pair] != "todo":
        log.tell((robot, holder), f"{x_name}+{y_name} is not a connection left to make.")
        return
    name = f"connect {pair[0]}+{pair[1]}"
    log.events.append(ev.subtask_attempted(name, team))
    if state.at[robot] != state.workbench or state.at[holder] != state.workbench:
        log.tell((robot, holder), "Both robots must be at the workbench to connect parts.")
        log.events.append(ev.subtask_failed(name, team, "not at the workbench"))
        return
    if pair[0] not in state.placed or pair[1] not in state.placed:
        log.tell((robot, holder), "Both parts must be placed on the workbench first.")
        log.events.append(ev.subtask_failed(name, team, "parts not placed"))
        return
    state.conn_state[pair] = "fixed"
    state.conn_by[pair] = team
    if turn.rng.random() < turn.defect_rate:
        state.faulty.add(pair)
    for a in team:
        log.rewards[a] += turn.subtask_reward
        state.successes[a] += 1
    log.events.append(ev.subtask_completed(name, team))
    log.feedback[robot] = f"You attached {y_name} to {x_name}, held by {holder}."
    log.feedback[holder] = f"You held {x_name} while {robot} attached {y_name}."


# ---------------------------------------------------------------------- heavy parts
def lift_heavy(
    turn: Turn, parsed: dict[str, list[str]], order: list[str], handled: set[str]
) -> None:
    """A heavy part is lifted when two robots at it say ``pickup`` in the same step."""
    state = turn.state
    for part in sorted(state.heavy):
        name = state.part_name(part)
        lifters = [a for a in order if name and parsed[a] == ["pickup", name] and a not in handled]
        if not lifters:
            continue
        handled.update(lifters)
        if len(lifters) < 2:
            turn.log.feedback[lifters[0]] = (
                f"{name} is heavy: two robots must 'pickup {name}' in the same step."
            )
            continue
        _lift(turn, part, lifters)


def _lift(turn: Turn, part: str, lifters: list[str]) -> None:
    """The first two lifters in turn order try to lift ``part`` together."""
    state, log = turn.state, turn.log
    oid, name = state.part_ids[part], state.part_name(part)
    holder, partner = lifters[0], lifters[1]
    if state.holding_part(partner) is not None:
        log.tell((partner, holder), f"{partner} already carries something.")
        return
    ok, error = turn.thor(holder, "PickupObject", objectId=oid)
    partner_at = state.at[partner]
    if not ok or partner_at is None or state.place_cell[partner_at] != state.view[holder]["cell"]:
        log.tell(
            (holder, partner), f"Lifting {name} failed: {error or 'both robots must be at it'}."
        )
        if ok:
            turn.thor(holder, "PutObject", objectId=state.at[holder])
        return
    state.carry[part] = (holder, partner)
    state.touched.add(part)
    log.events.append(ev.subtask_attempted(f"fetch {part}", [holder, partner]))
    log.tell((holder, partner), f"You lifted {name} together ({holder} and {partner}).")
    for extra in lifters[2:]:
        log.feedback[extra] = f"{name} is already carried by {holder} and {partner}."


def carry_heavy(turn: Turn, parsed: dict[str, list[str]], handled: set[str]) -> None:
    """Both carriers of a heavy part move together (the same ``goto``) or one ``put``s it."""
    state = turn.state
    for part, (holder, partner) in list(state.carry.items()):
        wh, wp = parsed[holder], parsed[partner]
        if wh[:1] == ["goto"] or wp[:1] == ["goto"]:
            handled.update((holder, partner))
            if wh != wp:
                turn.log.tell(
                    (holder, partner),
                    f"You carry {state.part_name(part)} together: both must give the same goto.",
                )
                continue
            goto(turn, holder, wh, partner=partner)
        elif wh[:1] == ["put"] or wp[:1] == ["put"]:
            handled.update((holder, partner))
            put(turn, holder, wh if wh[:1] == ["put"] else wp, partner=partner)
