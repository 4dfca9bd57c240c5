"""The ``transformers`` agent on the local model: the checkpoint teammate's greedy replies,
seeded samples that reproduce, and records."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers")

from teamgym.adapters.agents import build_agent, parse_agent_spec
from teamgym.adapters.agents.checkpoint import CheckpointPolicy
from teamgym.adapters.agents.transformers_agent import TransformersAgent
from teamgym.envs import make

KW = {"speaker": "fixed", "num_rounds": 2, "num_candidates": 3}


def agent_for(model_dir, **options) -> TransformersAgent:
    """A transformers agent on the local model, on the CPU."""
    spec = parse_agent_spec(
        {"kind": "transformers", "path": str(model_dir), "device": "cpu", **options}
    )
    agent = build_agent(spec, "signal-v0")
    assert isinstance(agent, TransformersAgent)
    return agent


def test_greedy_replies_are_the_checkpoint_teammates(model_dir, play) -> None:
    steps, episode = asyncio.run(play(agent_for(model_dir, max_tokens=16), "signal-v0", 4, **KW))

    env = make("signal-v0", **KW)
    obs, infos = env.reset(seed=4)
    policy = CheckpointPolicy(model_dir, max_reply_tokens=16)
    for t, step in enumerate(steps):
        expected = {a: policy.act(a, obs[a], infos[a]) for a in env.agents}
        assert step == expected, f"step {t}: agent {step} != checkpoint {expected}"
        obs, _, _, _, new_infos = env.step(step)
        infos.update(new_infos)
    assert not env.agents
    first = episode.records[0]
    assert first["finish_reason"] in ("stop", "length") and first["prompt_tokens"] > 0
    assert {"agent", "turn", "message", "seed", "reply", "latency_s"} <= set(first)


def test_sampled_replies_reproduce_from_the_episode_seed(model_dir, play) -> None:
    agent = agent_for(model_dir, temperature=1.0, max_tokens=12)

    def replies(seed: int) -> list:
        return asyncio.run(play(agent, "signal-v0", seed, **KW))[0]

    first = replies(1)
    assert first == replies(1)
    assert first != replies(2)
    reseeded = agent_for(model_dir, temperature=1.0, max_tokens=12, seed=7)
    assert first != asyncio.run(play(reseeded, "signal-v0", 1, **KW))[0]
    assert first != asyncio.run(play(agent_for(model_dir, max_tokens=12), "signal-v0", 1, **KW))[0]


def test_a_missing_directory_says_what_to_pass(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="teamgym model init"):
        agent_for(tmp_path / "nowhere")
