"""TorchRL's own PettingZooWrapper on every registered id in vector mode (``torchrl`` extra):
TorchRL's spec check, rollouts with masked random actions, seeding, grouped agents."""

from __future__ import annotations

import numpy as np
import pytest

from teamgym.adapters.rl.torchrl import TensorInfos
from teamgym.envs import make, registry

ENV_IDS = list(registry())
#: Small, fast settings; thor-assembly-v0 is the slow one.
FAST = {"thor-assembly-v0": {"num_agents": 2, "max_steps": 20}}


def test_tensor_infos_keeps_numeric_keys() -> None:
    env = TensorInfos(make("foraging-v0", obs_mode="vector", num_agents=3))
    obs, infos = env.reset(seed=0)
    assert infos == {a: {"individual_reward": 0.0} for a in env.possible_agents}
    actions = {a: int(np.flatnonzero(obs[a]["action_mask"])[0]) for a in env.agents}
    _, rewards, _, _, infos = env.step(actions)
    assert {a: i["individual_reward"] for a, i in infos.items()} == rewards
    assert TensorInfos(env.env, keys=("nothing",)).reset(seed=0)[1]["robot_0"] == {"nothing": 0.0}


@pytest.mark.parametrize("env_id", ENV_IDS, ids=ENV_IDS)
def test_pettingzoo_wrapper_passes_check_env_specs(env_id: str) -> None:
    pytest.importorskip("torchrl")
    from torchrl.envs import PettingZooWrapper
    from torchrl.envs.utils import check_env_specs

    par_env = make(env_id, obs_mode="vector", **FAST.get(env_id, {}))
    env = PettingZooWrapper(TensorInfos(par_env), return_state=True, use_mask=True, seed=0)
    assert env.group_map == {"robot": par_env.possible_agents}, "agents are not one group"
    check_env_specs(env, seed=0)
    rollout = env.rollout(60, break_when_any_done=False)
    mask, action = rollout["robot", "action_mask"], rollout["robot", "action"]
    assert mask.gather(-1, action.unsqueeze(-1)).all(), "random actions ignored the action mask"
    n = len(par_env.possible_agents)
    assert rollout["next", "robot", "observation", "observation"].shape[:2] == (60, n)
    assert rollout["next", "state"].shape[0] == 60


def test_rollouts_are_seeded() -> None:
    pytest.importorskip("torchrl")
    import torch
    from torchrl.envs import PettingZooWrapper

    def first_obs(seed: int) -> torch.Tensor:
        env = PettingZooWrapper(TensorInfos(make("foraging-v0", obs_mode="vector")), seed=seed)
        return env.reset()["robot", "observation", "observation"]

    assert torch.equal(first_obs(4), first_obs(4))
    assert not torch.equal(first_obs(4), first_obs(5))
