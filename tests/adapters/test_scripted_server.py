"""The rollout-server double: with a policy's reply it decodes only the last user turn of a
prompt and answers what it answered when it decoded the whole conversation."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")

from teamgym.adapters.verl import server as server_module
from teamgym.adapters.verl.server import ScriptedServer, policy_reply
from teamgym.envs import make
from teamgym.envs.baselines import RandomPolicy


def _conversations(tokenizer, turns: int = 4):
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
    """The answers (tokens and all) equal those of a double that decodes every prompt whole;
    after the first turn what it decodes is shorter than the prompt."""
    _, tokenizer = templated
    prompts = _conversations(tokenizer)
    assert len(prompts) >= 4
    decoded: list[int] = []
    real_decode = tokenizer.decode

    def counting(ids, *args, **kwargs):
        decoded.append(len(ids))
        return real_decode(ids, *args, **kwargs)

    def answers(tail: bool) -> list[list[int]]:
        server = ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=2)))
        server._tail = tail
        params = {"max_tokens": 32}
        return [
            asyncio.run(server.generate("r", prompt_ids=p, sampling_params=params)).token_ids
            for p in prompts
        ]

    whole = answers(tail=False)
    monkeypatch.setattr(tokenizer, "decode", counting)
    assert answers(tail=True) == whole
    # the longest decode of each call (the last user turn; short peeks find where it starts)
    assert max(decoded) < max(len(p) for p in prompts)


def test_without_the_chat_markers_the_whole_prompt_is_read(tokenizer) -> None:
    """No ``<|im_start|>user`` in the ids: the reply sees the whole prompt."""
    ids = tokenizer.encode("Valid actions: wait | go", add_special_tokens=False)
    assert server_module._last_user_turn(tokenizer, ids, None) == ids
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert server_module._last_user_turn(tokenizer, ids, start) == ids
