"""Difference rewards (``RewardSharing(mode="difference")``) on every env: the counterfactual
("had this agent idled this step") is the step replayed from the state before it, equal to an
independent replay of the episode from its seed; keeping the copies changes no output; and on
publicgoods a contributor earns credit a free-rider does not."""

from __future__ import annotations

import pytest

from teamgym.envs import make, registry
from teamgym.envs.lineup import Lineup
from teamgym.envs.registration import latest_versions
from teamgym.envs.sharing import RewardSharing
from teamgym.envs.wrappers import SharedReward

ENVS = latest_versions(sorted(registry()))


def _episode(env_id: str, keep: bool, steps: int = 6):
    env = make(env_id)
    env.unwrapped.keep_counterfactuals = keep
    obs, infos = env.reset(seed=3)
    policy = Lineup.build(env_id, dict.fromkeys(env.possible_agents, "random"), share=True)
    policy.start(env, 3)
    trace, played = [obs], []
    while env.agents and len(played) < steps:
        actions = {a: policy.act(a, obs[a], infos[a]) for a in env.agents}
        obs, rewards, _, _, infos = env.step(actions)
        played.append(actions)
        trace.append((obs, rewards))
    return env, played, trace


@pytest.mark.parametrize("env_id", ENVS)
def test_the_counterfactual_is_the_step_replayed_with_the_agent_idle(env_id: str) -> None:
    env, played, _ = _episode(env_id, keep=True)
    last = played[-1]
    for agent in last:
        fresh = make(env_id)
        fresh.reset(seed=3)
        for actions in played[:-1]:
            fresh.step(actions)
        valid = fresh.unwrapped._game_valid_actions(agent)
        idle = next((a for a in valid if a in fresh.unwrapped.idle_actions), None)
        _, expected, *_ = fresh.step({**last, agent: f"<action>{idle}</action>" if idle else ""})
        assert env.unwrapped.counterfactual_rewards(agent) == expected, agent


@pytest.mark.parametrize("env_id", ENVS)
def test_keeping_the_copies_changes_no_output(env_id: str) -> None:
    assert _episode(env_id, keep=False)[2] == _episode(env_id, keep=True)[2]


def test_difference_credit_on_publicgoods_rewards_contributing_not_free_riding() -> None:
    env = SharedReward(make("publicgoods-v0"), RewardSharing(mode="difference"))
    env.reset(seed=0)
    assert env.unwrapped.keep_counterfactuals
    env.step({a: "<action>wait</action>" for a in env.agents})  # the talk phase
    replies = {a: "<action>contribute 0</action>" for a in env.agents}
    replies["robot_0"] = "<action>contribute 10</action>"
    _, shared, *_ = env.step(replies)
    assert shared["robot_0"] == pytest.approx(
        0.8
    )  # the pot gained by its 10 coins, in reward units
    assert all(shared[a] == 0.0 for a in env.agents if a != "robot_0")  # idling changes nothing


def test_without_the_copy_the_counterfactual_says_what_to_set() -> None:
    env = make("publicgoods-v0")
    env.reset(seed=0)
    env.step({a: "<action>wait</action>" for a in env.agents})
    with pytest.raises(RuntimeError, match="keep_counterfactuals"):
        env.unwrapped.counterfactual_rewards("robot_0")
