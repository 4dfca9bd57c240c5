"""The degenerate-policy guard: an episode whose trained agents only idled (invalid replies, or
the env's ``idle_actions`` such as ``wait``) is flagged, whatever reward it earned."""

from __future__ import annotations

import math

import pytest

from teamgym.adapters.verl.episode_env import EpisodeEnv
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import Lineup
from teamgym.envs.metrics import IdleCount
from teamgym.envs.registration import latest_versions, registry

ENV_IDS = latest_versions(sorted(registry()))
SMALL = {"hanabi-v0": {"max_steps": 40}, "kitchen-v0": {"max_steps": 40}}


def _play(env_id: str, policy: str | None) -> dict:
    """One episode through the loops' ``EpisodeEnv``, every agent trained, answered by the
    baseline ``policy`` (bound to the episode's env as the loops bind teammates), or with an
    unusable reply (None); its metrics."""
    episode = EpisodeEnv(env_id, SMALL.get(env_id, {}), seed=3)
    try:
        first = episode.reset()
        player = None
        if policy is not None:
            player = make_baseline(env_id, policy, seed=3)
            Lineup({a: player for a in episode.trained}).start(episode.env, 3)
        obs = {a: o for a, (o, _) in first.items()}
        while episode.live:
            replies = {
                a: "I am not sure."
                if player is None
                else player.act(a, obs[a], episode.last_info[a])
                for a in episode.live
            }
            results = episode.step(replies)
            obs.update({a: r.observation for a, r in results.items()})
        return episode.metrics()
    finally:
        episode.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_unusable_replies_are_idle_and_the_experts_are_not(env_id: str) -> None:
    assert _play(env_id, None)["idle"] == 1.0
    played = _play(env_id, "expert")
    assert played["idle"] == 0.0, played


def test_a_free_rider_wins_nothing_useful_and_is_flagged() -> None:
    """publicgoods' ``freerider`` contributes 0 every round: its own reward is the highest a
    round can pay an agent, and the guard calls the episode idle."""
    assert _play("publicgoods-v0", "freerider")["idle"] == 1.0


def test_an_env_that_does_not_name_its_idle_actions_is_not_judged() -> None:
    count = IdleCount()
    count.step(object(), ["a"])
    assert math.isnan(count.all_idle(["a"]))
