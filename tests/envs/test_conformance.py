"""Every registered env x both obs modes x several team sizes passes PettingZoo's own API and
seed tests, our contract checks, and is deterministic across processes."""

from __future__ import annotations

import json

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from teamgym.envs import make, registry, spec
from teamgym.envs.conformance import check_contract, check_env

ENV_IDS = list(registry())


def _team_sizes(env_id: str) -> list[int]:
    """Two, three and five agents, those the game supports (kitchen: two chefs only)."""
    game = spec(env_id).load()
    low, high = getattr(game, "min_agents", 2), getattr(game, "max_agents", 8)
    return [n for n in (2, 3, 5) if low <= n <= high]


CASES = [(e, m, n) for e in ENV_IDS for m in ("text", "vector") for n in _team_sizes(e)]
IDS = [f"{e}-{m}-{n}agents" for e, m, n in CASES]


@pytest.mark.parametrize(("env_id", "obs_mode", "num_agents"), CASES, ids=IDS)
def test_parallel_api(env_id: str, obs_mode: str, num_agents: int) -> None:
    parallel_api_test(make(env_id, num_agents=num_agents, obs_mode=obs_mode), num_cycles=300)


@pytest.mark.parametrize(("env_id", "obs_mode", "num_agents"), CASES, ids=IDS)
def test_parallel_seed(env_id: str, obs_mode: str, num_agents: int) -> None:
    parallel_seed_test(
        lambda: make(env_id, num_agents=num_agents, obs_mode=obs_mode), num_cycles=300
    )


@pytest.mark.parametrize(("env_id", "obs_mode", "num_agents"), CASES, ids=IDS)
def test_contract(env_id: str, obs_mode: str, num_agents: int) -> None:
    """Observations in their spaces, info keys present and JSON-ready, hostile replies harmless."""
    check_contract(make(env_id, num_agents=num_agents, obs_mode=obs_mode), seed=7, num_steps=300)


def test_check_env_is_public_and_runs() -> None:
    check_env(lambda: make(ENV_IDS[0]), num_cycles=50)


def test_the_contract_catches_a_stale_action_mask() -> None:
    """The mask comes from a cached slot index; one left stale (here: every slot shifted by
    one) fails the contract check, slot by slot."""
    env = make("signal-v1", num_agents=3, obs_mode="vector")
    real = env.unwrapped._slot_index

    def stale(agent: str):
        n, index = real(agent)
        return n, {a: [(i + 1) % n for i in slots] for a, slots in index.items()}

    env.unwrapped._slot_index = stale
    with pytest.raises(AssertionError, match="action mask is wrong"):
        check_contract(env, num_steps=20)


_TRAJECTORY = """
import json, sys
from teamgym.envs import make
from teamgym.envs.baselines import RandomPolicy
from teamgym.envs.wrappers import Recorder
env_id, mode, sizes = sys.argv[1], sys.argv[2], SIZES
hashes = []
for n in sizes:
    env = Recorder(make(env_id, num_agents=n, obs_mode=mode))
    policy = RandomPolicy(seed=5)
    for seed in (0, 1, 123456):
        obs, infos = env.reset(seed=seed)
        while env.agents:
            if mode == "text":
                acts = {a: policy.act(a, obs[a], infos[a]) for a in env.agents}
            else:
                acts = {a: int(obs[a]["action_mask"].argmax()) for a in env.agents}
            obs, _, _, _, step_infos = env.step(acts)
            infos.update(step_infos)
        hashes.append(env.episodes[-1]["trajectory_hash"])
print(json.dumps(hashes))
"""


@pytest.mark.parametrize(
    ("env_id", "obs_mode"), [(e, m) for e in ENV_IDS for m in ("text", "vector")]
)
def test_cross_process_determinism(env_id: str, obs_mode: str, run_python) -> None:
    """Two processes with different hash seeds produce byte-identical trajectories, at every
    team size of the other tests (one pair of processes per env and mode)."""
    sizes = _team_sizes(env_id)
    code = _TRAJECTORY.replace(
        "sys.argv[1], sys.argv[2], SIZES", f"{env_id!r}, {obs_mode!r}, {sizes!r}"
    )
    first = json.loads(run_python(code, env={"PYTHONHASHSEED": "1"}).stdout)
    second = json.loads(run_python(code, env={"PYTHONHASHSEED": "999"}).stdout)
    assert first == second, f"trajectory hashes differ across processes: {first} vs {second}"
    for k in range(len(sizes)):  # different seeds, different trajectories
        assert len(set(first[3 * k : 3 * k + 3])) == 3, f"{sizes[k]} agents: {first}"


def test_a_subclass_translating_slots_gets_masks_from_its_own_translation() -> None:
    """A game that keys and lists its slots (thor) subclassed to translate them otherwise:
    the cached index would follow the parent's texts, so the mask is built from the
    subclass's translation, and the contract's slot-by-slot check holds."""
    from teamgym.envs.thor_assembly.env import ThorAssemblyEnv

    class Renamed(ThorAssemblyEnv):
        def _game_vector_action(self, agent: str, index: int):
            action, message = super()._game_vector_action(agent, index)
            return ("wait" if index == 5 else action), message  # slot 5 now means "wait"

    env = Renamed(num_agents=2, obs_mode="vector")
    obs, _ = env.reset(seed=0)
    assert all(o["action_mask"][5] == 1 for o in obs.values())  # "wait" is always legal
    check_contract(env, num_steps=15)
