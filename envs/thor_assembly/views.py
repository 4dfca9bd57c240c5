"""What robots and people read of ``thor-assembly-v0``: the instructions, each robot's
observation (only its own place), and the full-state text render."""

from __future__ import annotations

from teamgym.envs.thor_assembly.planning import subtask_names
from teamgym.envs.thor_assembly.state import AssemblyState

__all__ = ["instructions", "observation", "render_text", "task_line", "workbench_line"]

_RULES = (
    "Find the parts (some are inside closed cabinets, drawers or fridges: open them to look), "
    "bring each part to the workbench and 'put' it there, connect the parts, then 'inspect'. "
    "Rules: you see only the place you are at; going somewhere takes steps in proportion to the "
    "distance, so split the work; you hold one thing at a time; a heavy part needs two robots "
    "at it to 'pickup' it in the same step, and both must give the same 'goto' and one 'put' to "
    "carry it; to connect X and Y one robot says 'hold X' while another says 'attach Y to X' in "
    "the same step, both at the workbench with both parts placed; a connection can be faulty, "
    "which only 'inspect' reveals, and a failed inspection says what to redo. "
    "Commands: goto PLACE, open PLACE, close PLACE, pickup OBJECT, put PLACE, hold PART, "
    "attach PART to PART, inspect, wait (names like Cabinet_2 or Mug_1 are in your observation). "
    "Talk to your team with <say>…</say>.\n"
    "Reply format: think if you like, then give exactly one command as <action>COMMAND</action>."
)
_PLAN_FORMAT = (
    ". Write one line per subtask, e.g. "
    "'fetch Mug -> robot_1', 'connect Plate+Mug -> robot_0, robot_2', 'inspect -> robot_3', "
    "then <action>plan</action>."
)


def instructions(robot: str, num_robots: int) -> str:
    """The system prompt: role, goal, rules, commands, reply format."""
    return (
        f"You are {robot}, one of {num_robots} robots assembling a product together in a house. "
        + _RULES
    )


def task_line(state: AssemblyState) -> str:
    """The task in one line: product, workbench, parts (heavy ones marked), connections
    (memoised per naming: nothing else in it changes during an episode)."""
    key = ("task", state.names_version)
    line = state.memo.get(key)
    if line is None:
        line = state.memo[key] = _task_line(state)
    return line


def _task_line(state: AssemblyState) -> str:
    parts = ", ".join(f"{p} (heavy)" if p in state.heavy else p for p in state.recipe.parts)
    conns = ", ".join(f"{a}+{b}" for a, b in state.connections)
    return (
        f"Task: build {state.recipe.description} at the workbench {state.names[state.workbench]} "
        f"from {parts}; connect {conns}; then inspect."
    )


def workbench_line(state: AssemblyState) -> str:
    """What lies on the workbench and which connections are made."""
    placed = [state.names[state.part_ids[p]] for p in state.recipe.parts if p in state.placed]
    conns = ", ".join(
        f"{a}+{b} {'made' if state.conn_state[(a, b)] == 'fixed' else 'to do'}"
        for a, b in state.connections
    )
    return f"Workbench: placed {', '.join(placed) or 'nothing'}; connections: {conns}."


# ---------------------------------------------------------------------- observation
def observation(state: AssemblyState, robot: str, plan_template: str) -> str:
    """A robot's view: the task, the plan, where it is and what it holds, what it sees there,
    the last inspection (at the workbench) and how far every place is."""
    lines = [f"{state.scene.room.replace('_', ' ')} {state.scene.name}. {task_line(state)}"]
    if state.phase == "plan":
        return "\n".join(lines + _planning_lines(state, robot, plan_template))
    if state.plan:
        lines.append("Plan: " + "; ".join(f"{s} -> {', '.join(r)}" for s, r in state.plan.items()))
    hold_text = _holding_text(state, robot)
    if robot in state.travel:
        dest, left = state.travel[robot]
        lines.append(
            f"You are {robot}, on the way to {state.names[dest]} ({left} step(s) left), holding {hold_text}."
        )
    else:
        here = state.at[robot]
        lines.append(
            f"You are {robot} at {state.names[here] if here else 'your start position'}, holding {hold_text}."
        )
        if here is not None:
            lines += _here_lines(state, robot, here)
    if state.last_inspection and state.at.get(robot) == state.workbench:
        lines.append(f"Last inspection: {state.last_inspection}.")
    if robot not in state.travel:
        lines.append(_places_line(state, robot))
    return "\n".join(lines)


def _places_line(state: AssemblyState, robot: str) -> str:
    """ "Places (steps away): ..." from where ``robot`` stands; memoised on the state per
    (names, cell, place): robots stand still for most steps."""
    key = ("places", state.names_version, state.view[robot]["cell"], state.at[robot])
    line = state.memo.get(key)
    if line is None:
        dist = ", ".join(
            f"{state.names[p]}{' (workbench)' if p == state.workbench else ''} {state.steps_to(robot, p)}"
            for p in state.place_ids
            if p != state.at[robot]
        )
        line = state.memo[key] = f"Places (steps away): {dist}."
    return line


def _planning_lines(state: AssemblyState, robot: str, plan_template: str) -> list[str]:
    leader = state.robots[0]
    if robot != leader:
        return [f"{leader} is planning; wait."]
    task = f"'build {state.recipe.description}'"
    n_sub = len(subtask_names(state.recipe.parts, state.connections))
    return [
        plan_template.format(task=task, num_subtasks=n_sub),
        "Robots: " + ", ".join(state.robots) + _PLAN_FORMAT,
    ]


def _holding_text(state: AssemblyState, robot: str) -> str:
    held = state.holding_part(robot)
    held_name = state.names.get(state.part_ids[held]) if held else None
    if state.view[robot]["holding"] and not held_name:
        held_name = state.names.get(state.view[robot]["holding"])
    text = held_name or "nothing"
    partner = state.carry_partner(robot)
    return f"{text} (heavy, carried with {partner})" if partner else text


def _here_lines(state: AssemblyState, robot: str, here: str) -> list[str]:
    """The places a robot sees where it stands (and what lies in the open ones), its
    teammates there, and the workbench's state when it is at the workbench."""
    lines = []
    visible = set(state.view[robot]["visible"])
    for p in state.places_here(robot):
        o = state.obj[p]
        if o["openable"] and not o["isOpen"]:
            lines.append(f"{state.names[p]} is closed.")
            continue
        inside = [
            state.names[c]
            for c in (o["receptacleObjectIds"] or [])
            if c in visible and c in state.names
        ]
        content = "holds " + ", ".join(inside) if inside else "empty"
        lines.append(f"{state.names[p]} ({'open, ' if o['openable'] else ''}{content}).")
    mates = [
        a for a in state.robots if a != robot and state.at[a] == here and a not in state.travel
    ]
    if mates:
        lines.append("Teammates here: " + ", ".join(mates) + ".")
    if here == state.workbench:
        lines.append(workbench_line(state))
    return lines


# ---------------------------------------------------------------------- render
def render_text(state: AssemblyState, num_steps: int) -> str:
    """The whole state for a person: task, workbench, each robot, each part, hidden defects."""
    rows = [
        f"thor-assembly-v0 {state.scene.name} ({state.scene.room}) step {num_steps}: {task_line(state)}",
        workbench_line(state).replace("Workbench", f"Workbench {state.names[state.workbench]}"),
    ]
    for robot in state.robots:
        where = (
            f"-> {state.names[state.travel[robot][0]]}"
            if robot in state.travel
            else (state.names[at] if (at := state.at[robot]) else "start")
        )
        rows.append(f"  {robot}: {where}, holding {state.holding_part(robot) or '-'}")
    for part in state.recipe.parts:
        o = state.obj[state.part_ids[part]]
        where = (o["parentReceptacles"] or ["(carried)" if o["isPickedUp"] else "(floor)"])[0]
        rows.append(
            f"  part {part}{' heavy' if part in state.heavy else ''}: {state.names.get(where, where)}"
        )
    if state.faulty:
        rows.append("  hidden defects: " + ", ".join(f"{a}+{b}" for a, b in sorted(state.faulty)))
    return "\n".join(rows)
