"""Drive overcooked-ai 1.1.0 (the reference engine) through joint-action sequences.

Run with the reference venv's interpreter (plain Python + ``overcooked_ai_py``, no teamgym):

    python overcooked_driver.py < request.json

The request is ``{"layout": NAME, "episodes": [[[a0, a1], ...], ...]}`` with actions named
``up``/``down``/``left``/``right``/``stay``/``interact``; each episode starts from the layout's
standard start state, or, with ``"starts": [START or null, ...]`` beside the episodes, from
``{"players": [[x, y, held], ...], "pots": [[x, y, onions, cooking_tick], ...]}`` (players
facing north, ``held`` null, ``"onion"``, ``"dish"`` or ``["soup", onions]``, a cooked soup),
as ``get_random_start_state_fn`` builds one. The answer (stdout) is one JSON list per episode, with one entry per
step: ``{"players": [[x, y, dx, dy, held], ...], "objects": [[x, y, obj], ...],
"reward": [r0, r1]}``, where ``held``/``obj`` is null, ``"onion"``, ``"dish"`` or
``["soup", onions, cooking_tick]`` and ``reward`` is the sparse reward by agent.
"""

from __future__ import annotations

import json
import sys

from overcooked_ai_py.mdp.actions import Action, Direction
from overcooked_ai_py.mdp.overcooked_mdp import (
    ObjectState,
    OvercookedGridworld,
    OvercookedState,
    SoupState,
)

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


def start_state(mdp: OvercookedGridworld, start: dict | None) -> OvercookedState:
    """The standard start, or the start ``start`` describes (built as the reference's
    ``get_random_start_state_fn`` builds its random ones)."""
    if start is None:
        return mdp.get_standard_start_state()
    state = OvercookedState.from_player_positions(
        [tuple(p[:2]) for p in start["players"]],
        bonus_orders=mdp.start_bonus_orders,
        all_orders=mdp.start_all_orders,
    )
    for x, y, onions, tick in start["pots"]:
        state.objects[(x, y)] = SoupState.get_soup((x, y), num_onions=onions, cooking_tick=tick)
    for player, (x, y, held) in zip(state.players, start["players"], strict=True):
        if isinstance(held, list):
            player.set_object(SoupState.get_soup((x, y), num_onions=held[1], finished=True))
        elif held is not None:
            player.set_object(ObjectState(held, (x, y)))
    return state


def run(
    layout: str, episodes: list[list[list[str]]], starts: list[dict | None] | None = None
) -> list[list[dict[str, object]]]:
    """Every episode from its start, one snapshot per step."""
    mdp = OvercookedGridworld.from_layout_name(layout)
    out = []
    for e, joint_actions in enumerate(episodes):
        state = start_state(mdp, starts[e] if starts else None)
        steps = []
        for joint in joint_actions:
            state, info = mdp.get_state_transition(state, [ACTIONS[a] for a in joint])
            steps.append(snapshot(state, info["sparse_reward_by_agent"]))
        out.append(steps)
    return out


def main() -> None:
    request = json.load(sys.stdin)
    json.dump(run(request["layout"], request["episodes"], request.get("starts")), sys.stdout)


if __name__ == "__main__":
    main()
