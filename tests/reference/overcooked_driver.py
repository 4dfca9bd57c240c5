"""Drive overcooked-ai 1.1.0 (the reference engine) through joint-action sequences.

Run with the reference venv's interpreter (plain Python + ``overcooked_ai_py``, no teamgym):

    python overcooked_driver.py < request.json

The request is ``{"layout": NAME, "episodes": [[[a0, a1], ...], ...]}`` with actions named
``up``/``down``/``left``/``right``/``stay``/``interact``; each episode starts from the layout's
standard start state. The answer (stdout) is one JSON list per episode, with one entry per
step: ``{"players": [[x, y, dx, dy, held], ...], "objects": [[x, y, obj], ...],
"reward": [r0, r1]}``, where ``held``/``obj`` is null, ``"onion"``, ``"dish"`` or
``["soup", onions, cooking_tick]`` and ``reward`` is the sparse reward by agent.
"""

from __future__ import annotations

import json
import sys

from overcooked_ai_py.mdp.actions import Action, Direction
from overcooked_ai_py.mdp.overcooked_mdp import OvercookedGridworld

ACTIONS = {
    "up": Direction.NORTH,
    "down": Direction.SOUTH,
    "right": Direction.EAST,
    "left": Direction.WEST,
    "stay": Action.STAY,
    "interact": Action.INTERACT,
}


def encode(obj: object) -> object:
    """An object as JSON: null, its name, or a soup's [name, onions, tick]."""
    if obj is None:
        return None
    if obj.name == "soup":
        return ["soup", len(obj.ingredients), obj._cooking_tick]
    return obj.name


def snapshot(state: object, reward: list[int]) -> dict[str, object]:
    """The parts of the state the parity test compares."""
    players = [[*p.position, *p.orientation, encode(p.held_object)] for p in state.players]
    objects = sorted([*pos, encode(obj)] for pos, obj in state.objects.items())
    return {"players": players, "objects": objects, "reward": list(reward)}


def run(layout: str, episodes: list[list[list[str]]]) -> list[list[dict[str, object]]]:
    """Every episode from the standard start, one snapshot per step."""
    mdp = OvercookedGridworld.from_layout_name(layout)
    out = []
    for joint_actions in episodes:
        state = mdp.get_standard_start_state()
        steps = []
        for joint in joint_actions:
            state, info = mdp.get_state_transition(state, [ACTIONS[a] for a in joint])
            steps.append(snapshot(state, info["sparse_reward_by_agent"]))
        out.append(steps)
    return out


def main() -> None:
    request = json.load(sys.stdin)
    json.dump(run(request["layout"], request["episodes"]), sys.stdout)


if __name__ == "__main__":
    main()
