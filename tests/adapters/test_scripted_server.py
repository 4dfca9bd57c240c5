"""The rollout-server double: with a policy's reply it decodes only the last user turn of a
prompt and answers what it answered when it decoded the whole conversation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("verl")

from teamgym.adapters.cpu import server as server_module
from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
from teamgym.envs import make
from teamgym.envs.baselines import RandomPolicy


def _conversations(tokenizer: Any, turns: int = 4) -> list[list[int]]:
    """Each agent's prompt ids on every turn of a signal-v0 episode (the chat template of the
    conversation so far, with the generation prompt), replies picked from the valid actions."""
    env = make("signal-v0", num_rounds=turns)
    obs, infos = env.reset(seed=3)
    chats = {a: [{"role": "system", "content": infos[a]["instructions"]}] for a in obs}
    prompts = []
    for _ in range(turns):
        actions = {}
        for agent, text in obs.items():
            chats[agent].append({"role": "user", "content": text})
            prompts.append(
                tokenizer.apply_chat_template(
                    chats[agent], add_generation_prompt=True, tokenize=True, return_dict=True
                )["input_ids"]
            )
            actions[agent] = infos[agent]["valid_actions"][-1]
            chats[agent].append({"role": "assistant", "content": actions[agent]})
        obs, _, terms, truncs, infos = env.step(actions)
        if all(terms.values()) or all(truncs.values()):
            break
    return prompts


def test_a_policy_reply_is_read_from_the_last_user_turn_alone(templated, monkeypatch) -> None:
    """A ``policy_reply`` turns the tail reading on by itself; the answers (tokens and all)
    equal those of a double that decodes every prompt whole, and every call decodes less than
    its prompt (the last user turn, and short peeks to find where it starts)."""
    _, tokenizer = templated
    prompts = _conversations(tokenizer)
    assert len(prompts) >= 4
    default = ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=2)))
    assert default._tail and default._start_id is not None
    assert not ScriptedServer(tokenizer, lambda text: text[-5:])._tail  # reads it all

    def answers(tail: bool) -> list[list[int]]:
        server = ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=2)))
        server._tail = tail
        params = {"max_tokens": 32}
        return [
            asyncio.run(server.generate("r", prompt_ids=p, sampling_params=params)).token_ids
            for p in prompts
        ]

    whole = answers(tail=False)
    assert len({tuple(a) for a in whole}) > 1, "one answer throughout: the check is vacuous"
    assert answers(tail=True) == whole

    sizes: list[int] = []
    real_decode = tokenizer.decode

    def counting(ids: list[int], *args: Any, **kwargs: Any) -> str:
        sizes.append(len(ids))
        return real_decode(ids, *args, **kwargs)

    monkeypatch.setattr(tokenizer, "decode", counting)
    for prompt in prompts:
        sizes.clear()
        asyncio.run(default.generate("r", prompt_ids=prompt, sampling_params={"max_tokens": 32}))
        assert sizes and max(sizes) < len(prompt), (len(prompt), sizes)


def test_without_the_chat_markers_the_whole_prompt_is_read(tokenizer) -> None:
    """No ``<|im_start|>user`` in the ids: the reply sees the whole prompt."""
    ids = tokenizer.encode("Valid actions: wait | go", add_special_tokens=False)
    assert server_module._last_user_turn(tokenizer, ids, None) == ids
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert server_module._last_user_turn(tokenizer, ids, start) == ids
