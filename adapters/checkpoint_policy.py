"""A frozen model checkpoint as a teammate: ``--teammate robot_0=checkpoint:PATH``.

:class:`CheckpointPolicy` plays an agent with a saved Hugging Face model directory (a
``teamgym model init`` model, a warm-up model, a GRPO run's exported policy): it keeps the
agent's chat (instructions, observations, its own replies), renders it with the model's chat
template, exactly as the agent loop does, and answers greedily. It is a baseline like the
scripted ones (``reset``/``act``), so the episode hub, ``format_warmup`` and ``run_episode``
use it unchanged: ad-hoc teamwork and population play against earlier selves.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teamgym.envs.baselines import register_policy_prefix
from teamgym.names import CHECKPOINT_PREFIX

__all__ = ["CHECKPOINT_PREFIX", "CheckpointPolicy", "checkpoint_policy"]


@functools.lru_cache(maxsize=8)
def _load(path: str) -> tuple[Any, Any]:
    """Model and tokenizer of a directory, loaded once per process (episodes share them)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (Path(path) / "config.json").is_file():
        raise FileNotFoundError(
            f"checkpoint teammate: {path} is not a model directory (no config.json); pass a "
            "directory written by `teamgym model init` or by a training run's warm-up"
        )
    model = AutoModelForCausalLM.from_pretrained(path).eval().requires_grad_(False)
    return model, AutoTokenizer.from_pretrained(path)


class CheckpointPolicy:
    """Greedy replies of a frozen model directory (see the module docstring).

    Args:
        path: the model directory.
        seed: unused (greedy decoding is deterministic); accepted like every baseline's.
        max_reply_tokens: cap on one reply.
        max_prompt_tokens: the chat is cut on the left beyond this many tokens.
    """

    def __init__(
        self,
        path: str | Path,
        seed: int | None = None,
        max_reply_tokens: int = 32,
        max_prompt_tokens: int = 2048,
    ) -> None:
        self.path = str(Path(path).resolve())
        self.model, self.tokenizer = _load(self.path)
        self.max_reply_tokens = max_reply_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.history: dict[str, list[dict[str, str]]] = {}

    def reset(self, seed: int | None = None) -> None:
        """Forget the chats of the last episode."""
        self.history = {}

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The model's greedy reply to the agent's chat so far plus ``observation``."""
        import torch

        from teamgym.adapters.verl.server import sample_tokens

        chat = self.history.setdefault(
            agent, [{"role": "system", "content": str(info.get("instructions", ""))}]
        )
        chat.append({"role": "user", "content": observation})
        text = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        prompt = self.tokenizer.encode(text, add_special_tokens=False)[-self.max_prompt_tokens :]
        tokens, _ = sample_tokens(
            self.model,
            prompt,
            self.max_reply_tokens,
            0.0,
            {self.tokenizer.eos_token_id},
            torch.Generator(),
        )
        reply = self.tokenizer.decode(tokens, skip_special_tokens=True)
        chat.append({"role": "assistant", "content": reply})
        return reply


def checkpoint_policy(path: str, seed: int | None = None) -> CheckpointPolicy:
    """``make_baseline``'s factory for ``checkpoint:PATH`` names."""
    return CheckpointPolicy(path, seed=seed)


register_policy_prefix(CHECKPOINT_PREFIX, checkpoint_policy)
