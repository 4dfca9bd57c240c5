"""foraging-v0: the rules match lbforaging's on hand-made positions; items that need two agents
cannot be loaded by one; sight; presets; the expert clears the field."""

from __future__ import annotations

import numpy as np
import pytest

from teamgym.envs.baselines import RandomPolicy
from teamgym.envs.foraging import ForagingEnv
from teamgym.envs.foraging.baselines import ForagingExpert
from teamgym.envs.foraging.env import DIFFICULTIES
from teamgym.envs.lineup import run_episode

LBF_ACTIONS = {"wait": 0, "north": 1, "south": 2, "west": 3, "east": 4, "load": 5}


def _ours(agents: list[tuple[tuple[int, int], int]], items: dict[tuple[int, int], int]):
    env = ForagingEnv(len(agents), size=8, num_items=len(items), sight=None, force_coop=False,
                      invalid_penalty=0.0)  # fmt: skip
    env.reset(seed=0)
    f = env.field
    f.pos = {f"robot_{i}": cell for i, (cell, _) in enumerate(agents)}
    f.levels = {f"robot_{i}": lv for i, (_, lv) in enumerate(agents)}
    f.items, f.food_spawned = dict(items), sum(items.values())
    return env


def _lbf(agents: list[tuple[tuple[int, int], int]], items: dict[tuple[int, int], int]):
    lbforaging = pytest.importorskip("lbforaging.foraging.environment")
    env = lbforaging.ForagingEnv(
        players=len(agents), min_player_level=1, max_player_level=3, min_food_level=1,
        max_food_level=None, field_size=(8, 8), max_num_food=len(items), sight=8,
        max_episode_steps=50, force_coop=False,
    )  # fmt: skip
    env.reset(seed=0)
    env.field[:] = 0
    for (r, c), lv in items.items():
        env.field[r, c] = lv
    for player, (cell, lv) in zip(env.players, agents, strict=True):
        player.position, player.level = cell, lv
    env._food_spawned = env.field.sum()
    env._gen_valid_moves()
    return env


SCENARIOS = {
    "two agents load a level-3 item": (
        [((3, 2), 1), ((3, 4), 2)], {(3, 3): 3}, [["load", "load"]]),
    "one agent alone fails": ([((3, 2), 1), ((3, 4), 2)], {(3, 3): 3}, [["load", "wait"]]),
    "strong agent loads alone": ([((3, 2), 3), ((6, 6), 1)], {(3, 3): 3}, [["load", "east"]]),
    "two into one cell both stay": (
        [((2, 2), 1), ((2, 4), 1), ((5, 5), 1)], {(6, 1): 2}, [["east", "west", "north"]]),
    "into a staying agent's cell": ([((2, 2), 1), ((2, 3), 1)], {(6, 1): 2}, [["east", "wait"]]),
    "a chain follows a leader": (
        [((2, 2), 1), ((2, 3), 1), ((2, 4), 1)], {(6, 1): 2}, [["east", "east", "east"]]),
    "two groups at two items": (
        [((2, 1), 1), ((2, 3), 1), ((5, 4), 2), ((5, 6), 2)], {(2, 2): 2, (5, 5): 4},
        [["load", "load", "load", "load"]]),
    "walk then load": (
        [((1, 1), 2), ((4, 3), 1)], {(3, 3): 3},
        [["south", "north"], ["south", "wait"], ["east", "wait"], ["east", "wait"], ["load", "load"]]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_rules_match_lbforaging(name: str) -> None:
    agents, items, script = SCENARIOS[name]
    ours, theirs = _ours(agents, items), _lbf(agents, items)
    for t, moves in enumerate(script):
        _, rewards, _, _, _ = ours.step(
            {f"robot_{i}": f"<action>{m}</action>" for i, m in enumerate(moves)}
        )
        _, lbf_rewards, _, _, _ = theirs.step([LBF_ACTIONS[m] for m in moves])
        where = f"{name}, step {t + 1}"
        assert [ours.field.pos[f"robot_{i}"] for i in range(len(agents))] == [
            tuple(int(x) for x in p.position) for p in theirs.players
        ], where
        assert [rewards[f"robot_{i}"] for i in range(len(agents))] == pytest.approx(
            list(lbf_rewards)
        ), where
        lbf_items = {
            (int(r), int(c)): int(theirs.field[r, c])
            for r, c in zip(*np.nonzero(theirs.field), strict=True)
        }
        assert ours.field.items == lbf_items, where


def test_an_item_that_needs_two_agents_cannot_be_loaded_by_one() -> None:
    env = _ours([((3, 2), 2), ((3, 4), 2)], {(3, 3): 3})
    for solo in ("robot_0", "robot_1"):
        _, rewards, _, _, infos = env.step(
            {
                a: "<action>load</action>" if a == solo else "<action>wait</action>"
                for a in env.agents
            }
        )
        assert env.field.items == {(3, 3): 3} and not any(rewards.values())
        assert any(e["type"] == "subtask_failed" for e in infos[solo]["events"])
    _, rewards, term, _, infos = env.step({a: "<action>load</action>" for a in env.agents})
    assert not env.field.items and all(term.values())
    assert rewards == pytest.approx({"robot_0": 0.5, "robot_1": 0.5})
    outcome = next(e for e in infos["robot_0"]["events"] if e["type"] == "outcome")
    assert outcome["success"] and outcome["score"] == 1.0


def test_force_coop_items_need_the_whole_team() -> None:
    for seed in range(5):
        env = ForagingEnv(3, difficulty="hard", force_coop=True)
        env.reset(seed=seed)
        total = sum(env.field.levels.values())
        assert set(env.field.items.values()) == {total}


def test_sight_hides_what_is_far() -> None:
    env = _ours([((0, 0), 1), ((7, 7), 1)], {(1, 1): 1, (6, 6): 1})
    env.sight = 2
    obs = env._game_observation("robot_0")
    assert "1 south, 1 east" in obs and "6 south" not in obs and "robot_1" not in obs


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_every_preset_separates_random_from_expert(difficulty: str) -> None:
    expert = [
        run_episode(ForagingEnv(3, difficulty=difficulty), ForagingExpert(), seed=s)
        for s in range(10)
    ]
    rand = [
        run_episode(ForagingEnv(3, difficulty=difficulty), RandomPolicy(seed=0), seed=s)
        for s in range(10)
    ]
    assert np.mean([m.score for m in expert]) >= 0.9
    assert np.mean([m.score for m in rand]) <= 0.5 * np.mean([m.score for m in expert])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="force_coop needs at most 4"):
        ForagingEnv(5, force_coop=True)
    with pytest.raises(ValueError, match="size"):
        ForagingEnv(2, size=3)
    with pytest.raises(ValueError, match="difficulty"):
        ForagingEnv(2, difficulty="brutal")
