"""Tokens per text observation, counted by a real tokenizer, and whether they stay flat over an
episode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from teamgym.benchmarks.perf.envs import cycling_reply
from teamgym.benchmarks.perf.report import FLAT, TokenResult
from teamgym.envs.registration import make


def load_tokenizer(path: str | None = None, small: bool = False) -> tuple[Any, str]:
    """(tokenizer, description): the one at ``path`` (a Hugging Face directory), or the local
    model's, trained in memory (``small``: on 2 episodes per env); ImportError without
    transformers."""
    if path:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path), f"the tokenizer in {path}"
    from teamgym.adapters.agents.local_model import LocalModelConfig, build_tokenizer

    config = LocalModelConfig(episodes_per_env=2) if small else LocalModelConfig()
    shown = "the local model's tokenizer" + (", trained on 2 episodes per env" if small else "")
    return build_tokenizer(config), shown


def measure_tokens(env_id: str, num_agents: int, tokenizer: Any, episodes: int = 3) -> TokenResult:
    """Tokens per text observation over ``episodes`` episodes of cycling legal replies."""
    env = make(env_id, num_agents=num_agents, obs_mode="text")

    def count(texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    every: list[int] = []  # every observation's tokens, resets included
    steps: list[tuple[int, int]] = []  # (step number, tokens) from the first step on
    first: list[int] = []
    last: list[int] = []
    instructions: list[int] = []
    lengths: list[int] = []
    k = 0
    for episode in range(episodes):
        obs, infos = env.reset(seed=episode)
        instructions += count([info["instructions"] for info in infos.values()])
        every += count(list(obs.values()))
        per_step = []
        while env.agents:
            actions = {}
            for agent in env.agents:
                k += 1
                actions[agent] = cycling_reply(env, agent, obs[agent], infos[agent], k)
            obs, _, _, _, infos = env.step(actions)
            per_step.append(count(list(obs.values())))
        first += per_step[0]
        last += per_step[-1]
        lengths.append(len(per_step))
        steps += [(t, c) for t, counts in enumerate(per_step) for c in counts]
    env.close()
    every += [c for _, c in steps]
    mean = float(np.mean(every))
    x, y = np.array(steps, dtype=float).T
    slope = float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else 0.0
    growth = slope * (float(np.mean(lengths)) - 1) / mean
    return TokenResult(
        env_id,
        num_agents,
        episodes,
        observations=len(every),
        mean=mean,
        max=max(every),
        first=float(np.mean(first)),
        last=float(np.mean(last)),
        growth=growth,
        flat=growth <= FLAT,
        instructions=float(np.mean(instructions)),
    )
