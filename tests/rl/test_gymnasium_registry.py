"""Gymnasium's registry holds every teamgym id once ``teamgym.envs`` is imported, and nothing
heavy comes with it: the adapter loads only when ``gymnasium.make`` builds an env."""

from __future__ import annotations

import gymnasium
import pytest

from teamgym.envs import register, registry
from teamgym.envs.registration import GYMNASIUM_ENTRY_POINT, gymnasium_id, register_gymnasium


def test_make_after_importing_envs_alone(run_python) -> None:
    code = """
import sys, gymnasium
import teamgym.envs
assert "teamgym.adapters.rl.gymnasium" not in sys.modules, "import teamgym.envs loaded the adapter"
assert "torch" not in sys.modules, "import teamgym.envs loaded torch"
env = gymnasium.make("teamgym/foraging-v0", obs_mode="vector", num_agents=2, teammates="expert")
obs, info = env.reset(seed=0)
assert env.observation_space.contains(obs), obs
obs, reward, terminated, truncated, info = env.step(int(info["action_mask"].argmax()))
assert "teamgym.adapters.rl.gymnasium" in sys.modules
print(sorted(i for i in gymnasium.registry if i.startswith("teamgym/")))
"""
    out = run_python(code).stdout
    for env_id in registry():
        assert f"'teamgym/{env_id}'" in out, f"teamgym/{env_id} missing from {out}"


def test_every_id_is_mirrored_with_a_string_entry_point() -> None:
    for env_id in registry():
        gym_spec = gymnasium.spec(f"teamgym/{env_id}")
        assert gym_spec.entry_point == GYMNASIUM_ENTRY_POINT
        assert gym_spec.kwargs == {"env_id": env_id}


def test_registering_again_is_safe() -> None:
    before = dict(gymnasium.registry)
    for env_id in registry():
        assert register_gymnasium(env_id) == f"teamgym/{env_id}"
    assert dict(gymnasium.registry) == before


def test_gymnasium_ids() -> None:
    assert gymnasium_id("foraging-v0") == "teamgym/foraging-v0"
    assert gymnasium_id("foraging-v0", "other") == "other/foraging-v0"
    assert gymnasium_id("mypkg/maze-v2") == "mypkg/maze-v2", "a namespaced id keeps its namespace"


def test_user_registrations_reach_gymnasium(run_python) -> None:
    """A user's id (and a forced replacement of one) is what gymnasium.make builds; an id that
    Gymnasium cannot spell is left out of its registry instead of failing teamgym's register."""
    code = """
import gymnasium
from teamgym.envs import register
from teamgym.envs.signal import SignalEnv

class Three(SignalEnv):
    def __init__(self, **kw):
        super().__init__(num_agents=3, **kw)

register("mypkg/signal3-v0", "teamgym.envs.signal:SignalEnv", num_agents=3)
assert gymnasium.make("mypkg/signal3-v0", obs_mode="vector").unwrapped.par_env.max_num_agents == 3
register("signal-v0", Three, force=True)
assert gymnasium.make("teamgym/signal-v0", obs_mode="vector").unwrapped.par_env.max_num_agents == 3
register("my.pkg/signal-v0", "teamgym.envs.signal:SignalEnv")
assert not any("my.pkg" in i for i in gymnasium.registry)
print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


@pytest.mark.parametrize("env_id", ["signal-v0", "foraging-v0"])
def test_reset_is_seeded(env_id: str) -> None:
    env = gymnasium.make(f"teamgym/{env_id}", obs_mode="vector")
    a, _ = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    assert (a == b).all(), f"{env_id}: the same seed gave different first observations"


def test_bad_ids_still_raise() -> None:
    """teamgym's own validation is unchanged: a bad id still raises before Gymnasium sees it."""
    with pytest.raises(ValueError, match="versioned"):
        register("not versioned", "teamgym.envs.signal:SignalEnv")
