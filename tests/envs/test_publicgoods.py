"""publicgoods-v0: exact payoffs, the dilemma under reward sharing, metrics, modes, presets."""

from __future__ import annotations

import numpy as np
import pytest

from teamgym.envs import RewardSharing, SharedReward
from teamgym.envs.baselines import RandomPolicy
from teamgym.envs.lineup import run_episode
from teamgym.envs.publicgoods import PublicGoodsEnv
from teamgym.envs.publicgoods.baselines import Contributor, FreeRider
from teamgym.envs.publicgoods.env import DIFFICULTIES


def _contribute(env, amounts: dict[str, int]):
    return env.step({a: f"<action>contribute {amounts[a]}</action>" for a in env.agents})


def test_payoffs_are_the_public_goods_formula() -> None:
    env = PublicGoodsEnv(3, num_rounds=2, multiplier=1.5, multiplier_spread=0, endowment=10,
                         communication=False)  # fmt: skip
    env.reset(seed=0)
    obs, rewards, term, _, infos = _contribute(env, {"robot_0": 10, "robot_1": 4, "robot_2": 0})
    pot_share = 1.5 * 14 / 3  # 7 coins each
    expected = {"robot_0": 0 + pot_share, "robot_1": 6 + pot_share, "robot_2": 10 + pot_share}
    assert rewards == pytest.approx({a: c / 10 for a, c in expected.items()})
    assert not any(term.values())
    assert "Last round's contributions: robot_0 10, robot_1 4, robot_2 0." in obs["robot_1"]
    _, _, term, _, infos = _contribute(env, {"robot_0": 10, "robot_1": 10, "robot_2": 10})
    assert all(term.values())
    outcome = next(e for e in infos["robot_0"]["events"] if e["type"] == "outcome")
    assert outcome["score"] == pytest.approx(44 / 60)
    assert outcome["extras"]["free_riding_rate"] == pytest.approx(1 / 6)


def _episode_return(weight: float, first: object, seed: int = 3) -> float:
    """robot_0's shared return when it plays ``first`` and its teammates contribute everything."""
    env = SharedReward(PublicGoodsEnv(4), RewardSharing(weight=weight))
    policies = {a: Contributor() for a in env.possible_agents} | {"robot_0": first}
    obs, infos = env.reset(seed=seed)
    total = 0.0
    while env.agents:
        obs, rewards, _, _, new = env.step(
            {a: policies[a].act(a, obs[a], infos[a]) for a in env.agents}
        )
        infos.update(new)
        total += rewards.get("robot_0", 0.0)
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_free_riding_pays_alone_and_costs_under_shared_reward(seed: int) -> None:
    """The game's defining property: with weight 0 a free-rider earns more than by contributing
    (and more than its contributing teammates); with weight 1 it earns less."""
    selfish_free, selfish_give = (
        _episode_return(0.0, p, seed) for p in (FreeRider(), Contributor())
    )
    shared_free, shared_give = (_episode_return(1.0, p, seed) for p in (FreeRider(), Contributor()))
    assert selfish_free > selfish_give
    assert shared_free < shared_give
    env = PublicGoodsEnv(4)
    policies = {a: Contributor() for a in env.possible_agents} | {"robot_0": FreeRider()}
    obs, infos = env.reset(seed=seed)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    while env.agents:
        obs, rewards, _, _, new = env.step(
            {a: policies[a].act(a, obs[a], infos[a]) for a in env.agents}
        )
        infos.update(new)
        for a, r in rewards.items():
            returns[a] += r
    assert returns["robot_0"] > max(returns[a] for a in env.possible_agents[1:])


def test_metrics_measure_free_riding() -> None:
    env = PublicGoodsEnv(4, num_rounds=3)
    policies = {a: Contributor() for a in env.possible_agents} | {"robot_0": FreeRider()}
    m = run_episode(env, policies, seed=5)
    assert m.collaboration_index == pytest.approx(0.75)  # 3 of 4 agents cooperate every round
    assert m.extras["free_riding_rate"] == pytest.approx(0.25)
    assert m.extras["mean_contribution"] == pytest.approx(0.75) and m.score == pytest.approx(0.75)
    assert m.contribution_gini is not None and m.contribution_gini > 0  # uneven: robot_0 gave 0
    assert not m.success
    everyone = run_episode(PublicGoodsEnv(4, num_rounds=3), Contributor(), seed=5)
    assert everyone.success and everyone.contribution_gini == pytest.approx(0.0)


def test_talk_phase_delivers_pledges_and_vector_mode_uses_canned_ones() -> None:
    env = PublicGoodsEnv(2, num_rounds=1)
    obs, infos = env.reset(seed=1)
    assert infos["robot_0"]["valid_actions"] == ["wait"] and "Talk phase" in obs["robot_0"]
    obs, *_ = env.step(
        {"robot_0": "<say>all in</say><action>wait</action>", "robot_1": "<action>wait</action>"}
    )
    assert "- robot_0: all in" in obs["robot_1"] and "Contribute phase" in obs["robot_1"]
    vec = PublicGoodsEnv(2, num_rounds=1, obs_mode="vector")
    obs, _ = vec.reset(seed=1)
    names = vec.action_names("robot_0")
    pledge = names.index("wait: I will contribute 10")
    assert obs["robot_0"]["action_mask"][pledge] == 1
    obs, *_ = vec.step({"robot_0": pledge, "robot_1": 0})
    heard = obs["robot_1"]["observation"]
    assert heard[5 + 2 + pledge] == 1.0  # robot_1 heard the pledge
    assert obs["robot_1"]["action_mask"][names.index("contribute 10")] == 1


def test_the_seed_draws_the_round_multipliers() -> None:
    seen = set()
    for seed in range(8):
        env = PublicGoodsEnv(2, num_rounds=1, communication=False)
        obs, _ = env.reset(seed=seed)
        seen.add(env.round_multiplier)
        assert f"multiplied by {env.round_multiplier:g}" in obs["robot_0"]
        again = PublicGoodsEnv(2, num_rounds=1, communication=False)
        again.reset(seed=seed)
        assert again.round_multiplier == env.round_multiplier
    assert len(seen) > 1 and all(1.4 <= m <= 1.8 for m in seen)


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_every_preset_separates_random_from_expert(difficulty: str) -> None:
    scores = {}
    for name, policy in (("random", RandomPolicy(seed=0)), ("expert", Contributor())):
        runs = [
            run_episode(PublicGoodsEnv(4, difficulty=difficulty), policy, seed=s) for s in range(20)
        ]
        scores[name] = (np.mean([m.score for m in runs]), np.mean([m.success for m in runs]))
    assert scores["expert"] == (1.0, 1.0)
    assert scores["random"][0] < 0.7 and scores["random"][1] == 0.0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        PublicGoodsEnv(2, difficulty="nightmare")
    with pytest.raises(ValueError, match="multiplier_spread"):
        PublicGoodsEnv(2, multiplier=1.2, multiplier_spread=1.5)
    with pytest.raises(ValueError, match="endowment"):
        PublicGoodsEnv(2, endowment=0)
