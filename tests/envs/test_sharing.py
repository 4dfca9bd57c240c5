"""Reward sharing: the formulas as properties, the wrapper on our envs and on PettingZoo's MPE."""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given
from hypothesis import strategies as st
from pettingzoo import ParallelEnv

from teamgym.envs import RewardSharing, SharedReward, make, register_sharing_mode
from teamgym.envs.sharing import SharingContext, get_sharing_mode, sharing_modes

_REWARDS = st.dictionaries(
    st.sampled_from([f"robot_{i}" for i in range(8)]),
    st.floats(-10, 10, allow_nan=False),
    min_size=1,
)
_UNIT = st.floats(0.0, 1.0)


@given(_REWARDS, st.floats(0.1, 3.0), st.sampled_from(["sum", "mean"]))
def test_weight_zero_gives_individual_rewards(rewards, factor, team) -> None:
    shared = RewardSharing(weight=0.0, sharing_factor=factor, team=team)(rewards)
    assert shared == pytest.approx(rewards)


@given(_REWARDS, st.floats(0.1, 3.0), st.sampled_from(["sum", "mean"]))
def test_weight_one_gives_team_score_to_all(rewards, factor, team) -> None:
    rule = RewardSharing(weight=1.0, sharing_factor=factor, team=team)
    expected = factor * (sum(rewards.values()) / (len(rewards) if team == "mean" else 1))
    assert all(v == pytest.approx(expected) for v in rule(rewards).values())


@given(_REWARDS, _UNIT, st.floats(0.1, 3.0))
def test_mixed_sum_follows_the_formula(rewards, weight, factor) -> None:
    s, n = sum(rewards.values()), len(rewards)
    shared = RewardSharing(weight=weight, sharing_factor=factor)(rewards)
    assert sum(shared.values()) == pytest.approx(
        (1 - weight) * s + weight * n * factor * s, abs=1e-6
    )


@given(
    _REWARDS, st.dictionaries(st.sampled_from([f"robot_{i}" for i in range(8)]), st.floats(0, 5))
)
def test_proportional_splits_the_team_score(rewards, credit) -> None:
    shared = RewardSharing(mode="proportional")(rewards, SharingContext(contributions=credit))
    assert sum(shared.values()) == pytest.approx(sum(rewards.values()), abs=1e-6)
    kept = {a: credit.get(a, 0.0) for a in rewards}
    if sum(kept.values()) > 0:
        t = sum(rewards.values())
        for a in rewards:
            assert shared[a] == pytest.approx(t * (kept[a] / sum(kept.values())), abs=1e-6)
    else:
        assert len(set(np.round(list(shared.values()), 9))) == 1


def test_difference_needs_a_counterfactual() -> None:
    rule = RewardSharing(mode="difference")
    with pytest.raises(ValueError, match="counterfactual"):
        rule({"a": 1.0})
    shared = rule(
        {"a": 1.0, "b": 2.0},
        SharingContext(
            counterfactual=lambda agent: (
                {"a": 0.0, "b": 2.0} if agent == "a" else {"a": 1.0, "b": 0.5}
            )
        ),
    )
    assert shared == {"a": 1.0, "b": 1.5}


def test_bad_configs_raise() -> None:
    with pytest.raises(ValueError, match="weight"):
        RewardSharing(weight=1.5)
    with pytest.raises(ValueError, match="team"):
        RewardSharing(team="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="valid: difference, mixed, proportional"):
        RewardSharing(mode="nope")


def test_mode_registry() -> None:
    assert {"mixed", "proportional", "difference"} <= set(sharing_modes())
    with pytest.raises(ValueError, match="already registered"):
        register_sharing_mode("mixed")(lambda rule, r, ctx: dict(r))
    assert get_sharing_mode("mixed") is get_sharing_mode("mixed")


def test_shared_reward_on_signal_keeps_individual_rewards() -> None:
    env = SharedReward(make("signal-v0", num_agents=3, num_rounds=1), RewardSharing(weight=0.7))
    _obs, infos = env.reset(seed=4)
    env.step({"robot_0": "<say>x</say><action>say</action>", "robot_1": "wait", "robot_2": "wait"})
    # robot_1 picks right (found via the render-free round data), robot_2 picks wrong
    rnd = env.unwrapped.round
    right = {a: rnd.orders[a].index(rnd.target) + 1 for a in ("robot_1", "robot_2")}
    wrong = right["robot_2"] % 4 + 1
    _, rewards, _, _, infos = env.step(
        {"robot_0": "wait", "robot_1": f"pick {right['robot_1']}", "robot_2": f"pick {wrong}"}
    )
    individual = {a: infos[a]["individual_reward"] for a in rewards}
    assert individual == {"robot_0": 0.5, "robot_1": 1.0, "robot_2": 0.0}
    t = 1.5
    assert rewards == pytest.approx({a: 0.3 * r + 0.7 * t for a, r in individual.items()})


def test_shared_reward_proportional_uses_completed_subtasks() -> None:
    env = SharedReward(
        make("signal-v0", num_agents=3, num_rounds=1), RewardSharing(mode="proportional")
    )
    env.reset(seed=4)
    env.step({"robot_0": "<say>x</say><action>say</action>", "robot_1": "wait", "robot_2": "wait"})
    rnd = env.unwrapped.round
    pick = {a: f"pick {rnd.orders[a].index(rnd.target) + 1}" for a in ("robot_1", "robot_2")}
    pick["robot_2"] = "pick 99"  # invalid: a no-op with the penalty
    _, rewards, _, _, infos = env.step({"robot_0": "wait", **pick})
    t = sum(infos[a]["individual_reward"] for a in rewards)
    # only (robot_0, robot_1) completed a subtask: half the credit each, robot_2 none
    assert rewards == pytest.approx({"robot_0": t / 2, "robot_1": t / 2, "robot_2": 0.0})


def test_shared_reward_on_pettingzoo_mpe() -> None:
    from mpe2 import simple_spread_v3

    env = SharedReward(simple_spread_v3.parallel_env(N=3, max_cycles=5), RewardSharing(weight=1.0))
    env.reset(seed=0)
    while env.agents:
        _, rewards, _, _, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
        team = sum(infos[a]["individual_reward"] for a in rewards)
        assert all(math.isclose(r, team, rel_tol=1e-9, abs_tol=1e-9) for r in rewards.values())


def test_difference_mode_is_refused_for_envs_without_counterfactuals() -> None:
    class Foreign(ParallelEnv):
        """A ParallelEnv with no ``counterfactual_rewards``."""

        metadata: ClassVar[dict] = {"name": "foreign"}
        possible_agents: ClassVar[list[str]] = ["robot_0"]

    with pytest.raises(ValueError, match="not supported by Foreign"):
        SharedReward(Foreign(), RewardSharing(mode="difference"))
    # every teamgym env computes them (tests/envs/test_difference_rewards.py)
    assert SharedReward(
        make("signal-v0"), RewardSharing(mode="difference")
    ).unwrapped.keep_counterfactuals


class _ContributionGame(ParallelEnv):
    """Each agent adds 0..2 to a pot; individual reward = own contribution; the counterfactual
    of an agent is the same step with its contribution set to 0."""

    metadata: ClassVar[dict] = {"name": "contribution_game"}

    def __init__(self) -> None:
        self.possible_agents = ["robot_0", "robot_1"]
        self.agents = []
        self._last: dict[str, float] = {}

    @functools.cache  # noqa: B019 - one instance per test
    def observation_space(self, agent):
        return spaces.Discrete(1)

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return dict.fromkeys(self.agents, 0), {a: {} for a in self.agents}

    def step(self, actions):
        self._last = {a: float(actions[a]) for a in self.agents}
        done = dict.fromkeys(self.agents, True)
        infos = {a: {} for a in self.agents}
        obs = dict.fromkeys(self.agents, 0)
        self.agents = []
        return obs, dict(self._last), done, dict.fromkeys(done, False), infos

    def counterfactual_rewards(self, agent):
        return {**self._last, agent: 0.0}


def test_difference_mode_on_an_env_with_counterfactuals() -> None:
    env = SharedReward(_ContributionGame(), RewardSharing(mode="difference"))
    env.reset()
    _, rewards, _, _, infos = env.step({"robot_0": 2, "robot_1": 1})
    assert rewards == {"robot_0": 2.0, "robot_1": 1.0}  # T - T_without_i = own contribution
    assert infos["robot_0"]["individual_reward"] == 2.0
