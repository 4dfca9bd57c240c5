"""foraging-v1's feedback says what happened to each action (scenarios with exact sentences);
foraging-v0 still reproduces traces recorded before v1 existed, byte for byte; v1 differs from
v0 in the feedback alone."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest

from teamgym.envs import make, registry, spec
from teamgym.envs.baselines import make_baseline
from teamgym.envs.foraging import ForagingEnv
from teamgym.envs.registration import latest_versions

Cell = tuple[int, int]


def _field(agents: list[tuple[Cell, int]], items: dict[Cell, int], **kwargs: Any) -> ForagingEnv:
    """A v1 env with agents (cell, level) and items set by hand, no penalty for illegal replies."""
    env = ForagingEnv(len(agents), size=8, num_items=len(items), sight=None, force_coop=False,
                      invalid_penalty=0.0, **kwargs)  # fmt: skip
    env.reset(seed=0)
    f = env.field
    f.pos = {f"robot_{i}": cell for i, (cell, _) in enumerate(agents)}
    f.levels = {f"robot_{i}": lv for i, (_, lv) in enumerate(agents)}
    f.items, f.food_spawned = dict(items), sum(items.values())
    return env


def _step(env: ForagingEnv, *moves: str) -> tuple[dict[str, str], dict[str, float]]:
    """Play one step of text replies; (feedback, rewards) per agent."""
    _, rewards, _, _, infos = env.step(
        {f"robot_{i}": f"<action>{m}</action>" for i, m in enumerate(moves)}
    )
    return {a: i["feedback"] for a, i in infos.items()}, rewards


def test_a_move_says_where_it_led() -> None:
    said, _ = _step(_field([((2, 2), 1), ((5, 5), 1)], {(6, 1): 2}), "east", "north")
    assert said == {
        "robot_0": "You moved east to row 2, column 3.",
        "robot_1": "You moved north to row 4, column 5.",
    }


def test_a_move_blocked_by_an_agent_moving_into_the_same_cell() -> None:
    env = _field([((2, 2), 1), ((2, 4), 1), ((5, 5), 1)], {(6, 1): 2})
    said, _ = _step(env, "east", "west", "wait")
    assert said["robot_0"] == (
        "You did not move east: robot_1 also moved into row 2, column 3 (agents moving into one "
        "cell all stay). You are still at row 2, column 2."
    )
    assert said["robot_1"].startswith("You did not move west: robot_0 also moved into row 2,")
    assert said["robot_2"] == "You waited at row 5, column 5."
    assert env.field.pos["robot_0"] == (2, 2) and env.field.pos["robot_1"] == (2, 4)


def test_a_move_blocked_by_an_agent_that_stayed() -> None:
    said, _ = _step(_field([((2, 2), 1), ((2, 3), 1)], {(6, 1): 2}), "east", "wait")
    assert said == {
        "robot_0": "You did not move east: robot_1 stayed in row 2, column 3. "
        "You are still at row 2, column 2.",
        "robot_1": "You waited at row 2, column 3.",
    }


def test_a_move_into_an_item_or_off_the_field_says_what_blocks_it() -> None:
    env = _field([((3, 2), 1), ((0, 0), 1)], {(3, 3): 3})
    said, rewards = _step(env, "east", "north")
    assert said["robot_0"] == (
        "Your reply was not a legal action ('east' is not one of: north, south, west, load, "
        "wait); you did nothing. Your move east is blocked by a level-3 item there."
    )
    assert said["robot_1"].endswith("you did nothing. Your move north is blocked by the edge of the field.")  # fmt: skip
    assert rewards == {"robot_0": 0.0, "robot_1": 0.0}  # the rules are v0's: a no-op


def test_vector_mode_explains_a_masked_move_too() -> None:
    env = _field([((0, 0), 1), ((5, 5), 1)], {(3, 3): 3}, obs_mode="vector")
    _, _, _, _, infos = env.step({"robot_0": 0, "robot_1": 5})  # north off the field; wait
    assert infos["robot_0"]["feedback"].endswith("Your move north is blocked by the edge of the field.")  # fmt: skip
    assert infos["robot_1"]["feedback"] == "You waited at row 5, column 5."


def test_a_load_says_with_whom_the_reward_and_the_items_left() -> None:
    env = _field([((3, 2), 1), ((3, 4), 2)], {(3, 3): 3, (6, 6): 1})
    said, rewards = _step(env, "load", "load")
    assert rewards == pytest.approx({"robot_0": 0.25, "robot_1": 0.5})
    assert said == {
        "robot_0": "You and robot_1 loaded the level-3 item east of you (your level 1 + "
        "robot_1's 2 = 3, enough for 3); your reward is 0.25; 1 item left.",
        "robot_1": "You and robot_0 loaded the level-3 item west of you (your level 2 + "
        "robot_0's 1 = 3, enough for 3); your reward is 0.5; 1 item left.",
    }


def test_the_winning_step_says_the_field_is_clear_to_everyone() -> None:
    env = _field([((3, 2), 3), ((0, 0), 1)], {(3, 3): 2})
    said, _ = _step(env, "load", "wait")
    assert said == {
        "robot_0": "You loaded the level-2 item east of you (your level 3, enough for 2); your "
        "reward is 1; no items left. The field is clear: the team has won.",
        "robot_1": "You waited at row 0, column 0. The field is clear: the team has won.",
    }


def test_two_loads_in_one_step_count_the_items_left_after_both() -> None:
    env = _field([((2, 1), 1), ((5, 4), 2)], {(2, 2): 1, (5, 5): 2})
    said, _ = _step(env, "load", "load")
    assert all("no items left. The field is clear" in s for s in said.values()), said


def test_a_load_tried_alone_says_the_levels_and_who_did_not_help() -> None:
    said, rewards = _step(_field([((3, 2), 1), ((3, 4), 2)], {(3, 3): 3}), "load", "wait")
    assert said["robot_0"] == (
        "You tried to load the level-3 item east of you alone, but your level is 1 and it needs "
        "3: teammates next to it must load too. robot_1 (level 2) stood next to it without "
        "loading."
    )
    assert not any(rewards.values())


def test_a_load_whose_loaders_fall_short_says_their_sum_and_the_need() -> None:
    env = _field([((3, 2), 1), ((3, 4), 1), ((2, 3), 1)], {(3, 3): 4})
    said, _ = _step(env, "load", "load", "wait")
    assert said["robot_0"] == (
        "You and robot_1 tried to load the level-4 item east of you, but the loaders' levels add "
        "up to 2 (your level 1 + robot_1's 1) and it needs 4. robot_2 (level 1) stood next to it "
        "without loading."
    )


def test_a_load_with_no_item_next_to_the_agent_says_so() -> None:
    said, _ = _step(_field([((0, 0), 1), ((5, 5), 1)], {(3, 3): 3}), "load", "wait")
    assert said["robot_0"].endswith(
        "you did nothing. You cannot load: no item is next to you (north, south, west or east)."
    )


def test_legacy_feedback_is_v0s_wording() -> None:
    env = _field([((3, 2), 1), ((3, 4), 2)], {(3, 3): 3}, feedback="legacy")
    assert _step(env, "north", "load") == (
        {"robot_0": "Nothing happened.", "robot_1": "Nothing happened."},
        {"robot_0": 0.0, "robot_1": 0.0},
    )
    with pytest.raises(ValueError, match="feedback must be 'detailed' or 'legacy'"):
        ForagingEnv(2, feedback="verbose")  # type: ignore[arg-type]


def test_v1_is_registered_as_the_newest_and_v0_keeps_legacy_feedback() -> None:
    assert spec("foraging-v0").kwargs == {"feedback": "legacy"}
    assert spec("foraging-v1").kwargs == {}
    newest = latest_versions(registry())
    assert "foraging-v1" in newest and "foraging-v0" not in newest
    assert spec("foraging-v1").baselines == spec("foraging-v0").baselines


# ------------------------------------------------------------------ v0 on recorded traces
_MOVES = ["north", "south", "west", "east", "load", "wait"]


class _AnyReply:
    """Any command, legal or not, now and then no tags or a message (as recorded)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, agent: str, observation: str, info: dict[str, Any]) -> str:
        k = int(self.rng.integers(10))
        a = _MOVES[int(self.rng.integers(len(_MOVES)))]
        if k == 0:
            return "no tags here"
        if k == 1:
            return f"<say>go {a}</say><action>{a}</action>"
        return f"<action>{a}</action>"


def _plain(x: Any) -> Any:
    """JSON-ready copy (arrays to lists, numpy scalars to Python)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return x


def _trace(env_id: str, kwargs: dict[str, Any], n: int, policy: str, seed: int) -> list[Any]:
    """Every step of one episode: actions, observations, rewards, ends, infos and state."""
    env = make(env_id, num_agents=n, **kwargs)
    player = _AnyReply(seed) if policy == "any" else make_baseline(env_id, policy, seed=seed)
    if hasattr(player, "bind"):
        player.bind(env)
    player.reset(seed)
    obs, infos = env.reset(seed=seed)
    steps = [_plain([obs, infos])]
    rng = np.random.default_rng(seed)
    while env.agents:
        if kwargs.get("obs_mode") == "vector":
            acts = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        else:
            acts = {a: player.act(a, obs[a], infos[a]) for a in env.agents}
        obs, rewards, terms, truncs, infos = env.step(acts)
        steps.append(_plain([acts, obs, rewards, terms, truncs, infos, env.state()]))
    return json.loads(json.dumps(steps))


#: (kwargs, team size, policy, seed) -> sha256 prefix of the episode's trace, recorded from
#: foraging-v0 before foraging-v1 existed.
_RECORDED = {
    ("{}", 2, "any", 0): "cb1fbde728b71460",
    ("{}", 2, "expert", 0): "36dfd17af9e8e42a",
    ("{}", 2, "random", 0): "f24110c41f4f09e9",
    ("{}", 3, "any", 0): "b0b757766d7f6204",
    ("{}", 3, "expert", 0): "d697eeebdd537e65",
    ("{}", 3, "random", 0): "9ca35b0bade34fe4",
    ("{}", 4, "any", 0): "25f204e4fd75329c",
    ("{}", 4, "expert", 0): "3b5ac649ef4df72e",
    ("{}", 4, "random", 0): "903d02b0a800a269",
    ('{"difficulty": "easy"}', 2, "any", 1): "8c7663c45f97fede",
    ('{"difficulty": "easy"}', 2, "expert", 1): "531da6ba31f3d5be",
    ('{"difficulty": "easy"}', 2, "random", 1): "1e1d572180d0af2d",
    ('{"difficulty": "hard"}', 4, "any", 2): "eaaac0173eb8beb3",
    ('{"difficulty": "hard"}', 4, "expert", 2): "fd58e065fe69346e",
    ('{"difficulty": "hard"}', 4, "random", 2): "7a33adcc390ab66a",
    ('{"obs_mode": "vector"}', 3, "random", 0): "c0a941f886e93f2b",
}


@pytest.mark.parametrize(("kwargs", "n", "policy", "seed"), list(_RECORDED), ids=str)
def test_v0_reproduces_the_traces_recorded_before_v1(
    kwargs: str, n: int, policy: str, seed: int
) -> None:
    trace = _trace("foraging-v0", json.loads(kwargs), n, policy, seed)
    digest = hashlib.sha256(json.dumps(trace, sort_keys=True).encode()).hexdigest()[:16]
    assert digest == _RECORDED[kwargs, n, policy, seed], (
        f"foraging-v0 changed: {kwargs} n={n} {policy} seed={seed} traces to {digest}"
    )


@pytest.mark.parametrize("policy", ["expert", "random", "any"])
def test_v1_differs_from_v0_in_the_feedback_alone(policy: str) -> None:
    old, new = (_trace(e, {}, 3, policy, 0) for e in ("foraging-v0", "foraging-v1"))
    assert len(old) == len(new)
    for t, (a, b) in enumerate(zip(old[1:], new[1:], strict=True), start=1):
        (_, obs_a, *ends_a, infos_a, state_a), (_, obs_b, *ends_b, infos_b, state_b) = a, b
        assert ends_a == ends_b, f"step {t}: rewards or ends differ"
        assert state_b == state_a.replace("foraging-v0", "foraging-v1"), f"step {t}: state"
        for agent in infos_a:
            said = infos_b[agent].pop("feedback")
            assert said != "Nothing happened.", f"step {t}, {agent}: v1 said nothing"
            infos_a[agent].pop("feedback")
            assert infos_a[agent] == infos_b[agent], f"step {t}, {agent}: infos differ"
            first, rest = obs_b[agent].split("\n", 1)
            assert rest == obs_a[agent].split("\n", 1)[1], f"step {t}, {agent}: observation"
            assert first.endswith(said), f"step {t}, {agent}: the feedback is not shown"
