"""Conformance checks for any teamgym-style environment, ours or a researcher's.

``check_env(env_fn)`` runs PettingZoo's ``parallel_api_test`` and ``parallel_seed_test`` and then
what those do not check: every observation lies in its declared space, the env-contract
``infos`` keys are present, infos are JSON-ready, and replies of any shape never raise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.test import parallel_api_test, parallel_seed_test

__all__ = ["REQUIRED_INFO_KEYS", "check_contract", "check_env"]

#: Keys every step's ``infos[agent]`` carries (``instructions`` too at reset).
REQUIRED_INFO_KEYS = ("valid_actions", "feedback", "events", "individual_reward")
_HOSTILE_REPLIES = (
    "",
    "<action>",
    "</action></say><say>",
    "\x00\ud800 é 漢字",
    "<action>" * 50,
    42,
    None,
    b"\xff",
)


def check_contract(env: ParallelEnv, seed: int = 0, num_steps: int = 200) -> None:
    """Play random legal and hostile actions; assert spaces, info keys and JSON-ready infos."""
    obs, infos = env.reset(seed=seed)
    text_mode = getattr(env.unwrapped, "obs_mode", "text") == "text"
    for agent in env.agents:
        assert "instructions" in infos[agent], f"reset infos of {agent} lack 'instructions'"
    _check_step(env, obs, infos, step=-1)
    rng_actions = {a: env.action_space(a) for a in env.possible_agents}
    for i, a in enumerate(env.possible_agents):
        rng_actions[a].seed(seed + i)
    for t in range(num_steps):
        if not env.agents:
            obs, infos = env.reset(seed=seed + t + 1)
        actions: dict[str, Any] = {}
        for k, agent in enumerate(env.agents):
            if text_mode and (t + k) % 3 == 0:
                actions[agent] = _HOSTILE_REPLIES[(t + k) % len(_HOSTILE_REPLIES)]
            elif text_mode and (t + k) % 3 == 1 and infos[agent]["valid_actions"]:
                valid = infos[agent]["valid_actions"]
                actions[agent] = f"<action>{valid[(t + k) % len(valid)]}</action>"
            else:
                actions[agent] = rng_actions[agent].sample(
                    mask=obs[agent]["action_mask"] if not text_mode else None
                )
        obs, _, _, _, infos = env.step(actions)
        _check_step(env, obs, infos, step=t)


def _check_step(env: ParallelEnv, obs: dict[str, Any], infos: dict[str, Any], step: int) -> None:
    for agent, o in obs.items():
        space = env.observation_space(agent)
        assert space.contains(o), (
            f"step {step}: observation of {agent} is outside its space {space}: {o!r:.200}"
        )
        missing = [k for k in REQUIRED_INFO_KEYS if k not in infos[agent]]
        assert not missing, f"step {step}: infos[{agent!r}] lacks {missing}"
        json.dumps(infos[agent])
        if isinstance(o, dict) and "action_mask" in o:
            _check_mask(env, agent, o["action_mask"], infos[agent]["valid_actions"], step)


def _check_mask(env: ParallelEnv, agent: str, mask: Any, valid: list[str], step: int) -> None:
    """A vector observation's mask marks exactly the slots whose action is legal now (the
    mask is kept from a cached slot index: this checks it slot by slot)."""
    translate = getattr(env.unwrapped, "_game_vector_action", None)
    if translate is None:  # not a TextParallelEnv: its own mask rules
        return
    legal = set(valid)
    expected = [int(translate(agent, i)[0] in legal) for i in range(len(mask))]
    wrong = [i for i, (m, e) in enumerate(zip(mask, expected, strict=True)) if int(m) != e]
    assert not wrong, f"step {step}: {agent}'s action mask is wrong at slots {wrong[:10]}"


def check_env(env_fn: Callable[[], ParallelEnv], num_cycles: int = 200) -> None:
    """All conformance checks on fresh envs from ``env_fn``; raises AssertionError on failure."""
    parallel_api_test(env_fn(), num_cycles=num_cycles)
    parallel_seed_test(env_fn, num_cycles=num_cycles)
    check_contract(env_fn(), num_steps=num_cycles)
