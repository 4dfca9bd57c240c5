"""RLlib's own ParallelPettingZooEnv wrapper on foraging-v0 in vector mode (``rllib`` extra):
the multi-agent env contract, and two PPO iterations on CPU with one policy per agent."""

from __future__ import annotations

import numpy as np
import pytest

from teamgym.envs import make


def needs_rllib() -> None:
    """Skip without RLlib's own dependencies (ray alone comes with verl); imported here, not at
    collection, since RLlib takes seconds to import."""
    pytest.importorskip("ray.rllib.algorithms.ppo")


def test_parallel_pettingzoo_env_steps_and_resets() -> None:
    needs_rllib()
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    env = ParallelPettingZooEnv(make("foraging-v0", obs_mode="vector", num_agents=3))
    assert set(env.observation_space) == {"robot_0", "robot_1", "robot_2"}
    obs, _ = env.reset(seed=2)
    again, _ = env.reset(seed=2)
    assert all((obs[a]["observation"] == again[a]["observation"]).all() for a in obs)
    rng = np.random.default_rng(0)
    for step in range(200):
        assert all(env.observation_space[a].contains(o) for a, o in obs.items()), f"step {step}"
        actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        obs, rewards, terminateds, truncateds, _ = env.step(actions)
        assert set(rewards) == set(actions), f"step {step}: rewards for {set(rewards)}"
        if terminateds["__all__"] or truncateds["__all__"]:
            obs, _ = env.reset()
    env.close()


@pytest.mark.slow
def test_ppo_trains_two_iterations() -> None:
    needs_rllib()
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module import FlattenObservations
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    register_env(
        "teamgym-foraging",
        lambda cfg: ParallelPettingZooEnv(make("foraging-v0", obs_mode="vector", **cfg)),
    )
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        config = (
            PPOConfig()
            .environment("teamgym-foraging", env_config={"num_agents": 2, "difficulty": "easy"})
            .env_runners(
                num_env_runners=0,
                env_to_module_connector=lambda env, spaces, device: FlattenObservations(
                    multi_agent=True
                ),
            )
            .multi_agent(
                policies={"robot_0", "robot_1"},
                policy_mapping_fn=lambda agent_id, episode, **kwargs: agent_id,
            )
            .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=1)
        )
        algo = config.build_algo()
        for i in range(2):
            result = algo.train()
            learners = result["learners"]
            assert {"robot_0", "robot_1"} <= set(learners), f"iteration {i}: {set(learners)}"
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 512
        algo.stop()
    finally:
        ray.shutdown()
