"""The Gymnasium adapter: Gymnasium's own checker on every id, actions and teammates reaching the
env, joint control, seeding, reward sharing, registration, and SuperSuit's vector stepping."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from teamgym.adapters.rl.gymnasium import TeamGymEnv, register_envs
from teamgym.envs import RewardSharing, SharedReward, make, parse_reply, registry
from teamgym.envs.baselines import make_baseline

ENV_IDS = list(registry())
#: Small, fast settings; thor-assembly-v0 is the slow one.
FAST = {"thor-assembly-v0": {"num_agents": 2, "max_steps": 20}}


def first_legal(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def last_legal(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[-1])


def raw(env: TeamGymEnv) -> Any:
    """The teamgym env under the adapter (and under SharedReward, if any)."""
    return env.par_env.unwrapped


@pytest.mark.parametrize("env_id", ENV_IDS, ids=ENV_IDS)
def test_check_env_vector(env_id: str) -> None:
    """Gymnasium's checker passes through gymnasium.make, with no warnings."""
    register_envs()
    env = gymnasium.make(
        f"teamgym/{env_id}", obs_mode="vector", teammates="expert", **FAST.get(env_id, {})
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    assert isinstance(env.observation_space, spaces.Box)
    assert isinstance(env.action_space, spaces.Discrete)


def test_check_env_joint() -> None:
    register_envs()
    env = gymnasium.make("teamgym/foraging-v0", obs_mode="vector", joint=True, num_agents=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)


def test_learner_action_and_callable_teammates_reach_the_env() -> None:
    calls: list[tuple[str, int]] = []

    def teammate(agent: str, obs: dict[str, np.ndarray], info: dict[str, Any]) -> int:
        assert set(obs) == {"observation", "action_mask"}, "teammates see the native vector obs"
        assert "valid_actions" in info
        calls.append((agent, env.par_env.num_steps))
        return last_legal(obs["action_mask"])

    env = TeamGymEnv(
        "foraging-v0", obs_mode="vector", agent="robot_1", teammates=teammate, num_agents=3
    )
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    for step in range(5):
        action = first_legal(info["action_mask"])
        obs, _, terminated, truncated, info = env.step(action)
        replies = raw(env).raw_replies
        assert replies["robot_1"] == action, f"step {step}: learner action not passed on"
        assert {a for a, n in calls if n == step} == {"robot_0", "robot_2"}, (
            f"step {step}: teammate policy not asked for both teammates: {calls}"
        )
        assert not (terminated or truncated)
    assert len(calls) == 10


def test_expert_teammates_play_legal_actions_in_vector_mode() -> None:
    """Text baselines become action indices; none of them is rejected by the env."""
    for env_id in ("foraging-v0", "keydoor-v0", "publicgoods-v0", "signal-v0"):
        env = TeamGymEnv(env_id, obs_mode="vector", teammates="expert")
        _, info = env.reset(seed=0)
        done, step = False, 0
        while not done:
            _, _, terminated, truncated, info = env.step(first_legal(info["action_mask"]))
            done, step = terminated or truncated, step + 1
            bad = [
                e
                for e in info["events"]
                if e["type"] == "invalid_action" and e["agent"] != env.agent
            ]
            assert not bad, f"{env_id} step {step}: expert teammate action rejected: {bad}"


def test_expert_speaker_message_reaches_listener_in_vector_mode() -> None:
    """The signal expert's free-text message maps to the vector message slot with its words."""
    text_env = make("signal-v0")
    obs, infos = text_env.reset(seed=0)
    reply = make_baseline("signal-v0", "expert").act("robot_0", obs["robot_0"], infos["robot_0"])
    said = set(parse_reply(reply).message.split())
    env = TeamGymEnv("signal-v0", obs_mode="vector", agent="robot_1", teammates="expert")
    _, info = env.reset(seed=0)
    env.step(first_legal(info["action_mask"]))
    inbox = raw(env).inbox["robot_1"]
    assert inbox and said <= set(inbox[0][1].split()), f"expert said {said}, got {inbox}"


def test_text_mode_passes_replies_and_has_no_mask() -> None:
    env = TeamGymEnv("foraging-v0", teammates="random")
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and "action_mask" not in info
    reply = f"<action>{info['valid_actions'][0]}</action>"
    obs, *_, info = env.step(reply)
    assert raw(env).raw_replies["robot_0"] == reply
    assert not [e for e in info["events"] if e["type"] == "invalid_action"], info["events"]


def test_joint_mode_takes_a_dict_action() -> None:
    env = TeamGymEnv("publicgoods-v0", obs_mode="vector", joint=True, num_agents=3)
    agents = raw(env).possible_agents
    assert isinstance(env.action_space, spaces.Dict) and list(env.action_space) == agents
    assert all(isinstance(env.action_space[a], spaces.Discrete) for a in agents)
    obs, info = env.reset(seed=1)
    assert set(obs) == set(agents) and set(info["action_mask"]) == set(agents)
    done = False
    while not done:
        action = {a: last_legal(info["action_mask"][a]) for a in agents}
        obs, reward, terminated, truncated, info = env.step(action)
        assert raw(env).raw_replies == action
        individual = sum(info["agents"][a]["individual_reward"] for a in agents)
        assert reward == pytest.approx(individual), "joint reward is the team's summed reward"
        done = terminated or truncated
    with pytest.raises(RuntimeError, match="reset"):
        env.step(action)


def rollout(env: TeamGymEnv, seed: int, steps: int = 30) -> list[Any]:
    """(observation, reward) per step with a learner that samples legal actions."""
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    out: list[Any] = [obs.tolist()]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(
            env.action_space.sample(mask=info["action_mask"])
        )
        out.append((obs.tolist(), reward, dict(raw(env).raw_replies)))
        if terminated or truncated:
            break
    return out


def test_same_seed_same_trajectory() -> None:
    """The env and the (random) teammates are seeded by reset; another seed differs."""
    first = TeamGymEnv("foraging-v0", obs_mode="vector", teammates="random", num_agents=3)
    second = TeamGymEnv("foraging-v0", obs_mode="vector", teammates="random", num_agents=3)
    a = rollout(first, seed=11)
    assert rollout(second, seed=11) == a, "same seed, different trajectory"
    assert rollout(first, seed=11) == a, "re-seeding the same env did not repeat the run"
    assert rollout(first, seed=12) != a, "different seeds gave the same trajectory"


def test_sharing_gives_the_learner_its_shared_reward() -> None:
    sharing = RewardSharing(weight=0.5)
    learner = TeamGymEnv(
        "publicgoods-v0",
        obs_mode="vector",
        teammates=lambda a, o, i: first_legal(o["action_mask"]),
        sharing=sharing,
    )
    twin = TeamGymEnv("publicgoods-v0", obs_mode="vector", joint=True)
    assert isinstance(learner.par_env, SharedReward)
    _, info = learner.reset(seed=4)
    _, joint_info = twin.reset(seed=4)
    agents, differs, done = raw(twin).possible_agents, False, False
    while not done:
        action = last_legal(info["action_mask"])
        joint_action = {a: first_legal(joint_info["action_mask"][a]) for a in agents}
        joint_action[learner.agent] = action
        _, reward, terminated, truncated, info = learner.step(action)
        _, _, _, _, joint_info = twin.step(joint_action)
        individual = {a: joint_info["agents"][a]["individual_reward"] for a in agents}
        assert reward == pytest.approx(sharing(individual)[learner.agent])
        differs |= reward != pytest.approx(info["individual_reward"])
        done = terminated or truncated
    assert differs, "shared reward never differed from the individual one"


def test_register_envs_is_idempotent_and_lazy() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Gymnasium warns when an id is overridden
        ids = register_envs()
        assert register_envs() == ids
    assert ids == [f"teamgym/{e}" for e in ENV_IDS]
    assert all(isinstance(gymnasium.spec(i).entry_point, str) for i in ids)
    env = gymnasium.make("teamgym/keydoor-v0", obs_mode="vector")
    assert isinstance(env.unwrapped, TeamGymEnv) and env.unwrapped.env_id == "keydoor-v0"


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(KeyError) as err:
        TeamGymEnv("foragin-v0")
    assert all(e in str(err.value) for e in ENV_IDS), str(err.value)
    with pytest.raises(ValueError, match="robot_0, robot_1"):
        TeamGymEnv("foraging-v0", agent="robot_7")
    with pytest.raises(KeyError, match="expert"):
        TeamGymEnv("foraging-v0", teammates="genius")


def test_supersuit_vector_stepping_with_masks_and_auto_reset() -> None:
    """SuperSuit's parameter-sharing vector env: N copies x agents rows, masks kept, auto-reset."""
    ss = pytest.importorskip("supersuit")
    num_agents, copies, max_steps = 2, 3, 4
    par = SharedReward(
        make("foraging-v0", obs_mode="vector", num_agents=num_agents, max_steps=max_steps),
        RewardSharing(weight=1.0),
    )
    vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(par), copies, num_cpus=0)
    obs, _ = vec.reset(seed=0)
    rows = num_agents * copies
    assert obs["observation"].shape == (
        rows,
        par.observation_space("robot_0")["observation"].shape[0],
    )
    assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].shape[0] == rows
    ends = 0
    for _ in range(2 * max_steps):
        actions = np.array([first_legal(m) for m in obs["action_mask"]])
        obs, rewards, terminations, truncations, _ = vec.step(actions)
        assert rewards.shape == (rows,)
        ends += int(np.sum(terminations | truncations))
    assert ends >= rows, "no episode ended (and auto-reset) within twice the step limit"
    vec.close()
