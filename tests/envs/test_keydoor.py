"""keydoor-v0: no agent wins alone, the plate opens the door for the others, the key, roles."""

from __future__ import annotations

import numpy as np
import pytest

from teamgym.envs.baselines import RandomPolicy
from teamgym.envs.keydoor import KeyDoorEnv
from teamgym.envs.keydoor.baselines import KeyDoorExpert
from teamgym.envs.keydoor.env import DIFFICULTIES
from teamgym.envs.lineup import run_episode


def _step(env, moves: dict[str, str]):
    return env.step({a: f"<action>{moves.get(a, 'wait')}</action>" for a in env.agents})


def _walk(env, agent: str, goal: tuple[int, int]) -> None:
    """Move ``agent`` to ``goal`` inside its room, the others waiting."""
    while env.pos[agent] != goal:
        x, y = env.pos[agent]
        move = (
            "east"
            if goal[0] > x
            else "west"
            if goal[0] < x
            else "south"
            if goal[1] > y
            else "north"
        )
        _step(env, {agent: move})


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
@pytest.mark.parametrize("seed", range(6))
def test_no_single_agent_can_enter_the_doorway(difficulty: str, seed: int) -> None:
    """Every west-room cell is reachable by one agent while its teammate stays off the plate,
    and from none of them is the doorway ever a legal move: the treasure needs two agents."""
    env = KeyDoorEnv(2, difficulty=difficulty, max_steps=500)
    env.reset(seed=seed)
    lay = env.layout
    if env.pos["robot_1"] == lay.plate:  # keep the teammate off the plate
        _step(env, {"robot_1": next(m for m in ("north", "south", "east", "west")
                                    if m in env._game_valid_actions("robot_1"))})  # fmt: skip
    for x in range(lay.wall):
        for y in range(lay.height):
            _walk(env, "robot_0", (x, y))
            if env.pos["robot_0"] == lay.plate:
                continue  # standing on the plate itself: the doorway is never next to it
            door_move = (
                env._target("robot_0", "east") if (x, y) == (lay.wall - 1, lay.door_y) else None
            )
            assert door_move is None, f"robot_0 could enter the doorway alone from {(x, y)}"
    assert abs(lay.plate[0] - lay.door[0]) + abs(lay.plate[1] - lay.door[1]) > 1


def test_holding_the_plate_lets_a_teammate_cross_and_win() -> None:
    env = KeyDoorEnv(3, difficulty="easy")
    env.reset(seed=4)
    lay = env.layout
    _walk(env, "robot_0", lay.plate)
    approach = (lay.wall - 1, lay.door_y)
    _walk(env, "robot_1", approach)
    assert "east" in env._game_valid_actions("robot_1")
    _, _, _, _, infos = _step(env, {"robot_1": "east"})
    done = [e for e in infos["robot_1"]["events"] if e["type"] == "subtask_completed"]
    assert done == [
        {"type": "subtask_completed", "subtask": "open_door", "agents": ["robot_0", "robot_1"]}
    ]
    _step(env, {"robot_1": "east"})
    assert env.layout.room(env.pos["robot_1"]) == "east"
    obs, *_ = _step(env, {})
    assert (
        "Treasure: not visible" not in obs["robot_1"] and "Treasure: not visible" in obs["robot_2"]
    )
    _walk(env, "robot_1", lay.treasure)
    _, rewards, term, _, infos = _step(env, {"robot_1": "take"})
    assert rewards == {"robot_0": 0.0, "robot_1": 1.0, "robot_2": 0.0} and all(term.values())
    roles = {e["agent"]: e["role"] for e in infos["robot_0"]["events"] if e["type"] == "role"}
    assert roles == {"robot_0": "holder", "robot_1": "fetcher", "robot_2": "idle"}


def test_the_key_unlocks_the_door_once_carried_through() -> None:
    env = KeyDoorEnv(2, difficulty="hard")
    env.reset(seed=2)
    lay = env.layout
    _walk(env, "robot_0", lay.plate)
    approach = (lay.wall - 1, lay.door_y)
    _walk(env, "robot_1", approach)
    assert "east" not in env._game_valid_actions("robot_1")  # plate held, but locked
    _walk(env, "robot_1", lay.key)
    _step(env, {"robot_1": "take"})
    assert env.carrier == "robot_1"
    _walk(env, "robot_1", approach)
    _, _, _, _, infos = _step(env, {"robot_1": "east"})
    assert env.unlocked
    assert any(
        e.get("subtask") == "unlock" and e["type"] == "subtask_completed"
        for e in infos["robot_1"]["events"]
    )


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_every_preset_separates_random_from_expert(difficulty: str) -> None:
    expert = [
        run_episode(KeyDoorEnv(3, difficulty=difficulty), KeyDoorExpert(), seed=s)
        for s in range(10)
    ]
    rand = [
        run_episode(KeyDoorEnv(3, difficulty=difficulty), RandomPolicy(seed=0), seed=s)
        for s in range(10)
    ]
    assert np.mean([m.success for m in expert]) == 1.0
    assert np.mean([m.success for m in rand]) <= 0.2
    assert all(m.collaboration_index is not None and m.collaboration_index > 0.5 for m in expert)


def test_vector_observations_fit_their_space() -> None:
    env = KeyDoorEnv(4, difficulty="hard", obs_mode="vector")
    obs, _ = env.reset(seed=0)
    for agent, o in obs.items():
        assert env.observation_space(agent).contains(o)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        KeyDoorEnv(2, difficulty="impossible")
    with pytest.raises(ValueError, match="room_size"):
        KeyDoorEnv(2, room_size=1)
    with pytest.raises(ValueError, match="num_agents"):
        KeyDoorEnv(7)
