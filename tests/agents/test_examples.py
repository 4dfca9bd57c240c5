"""Worked examples and stop strings for small chat models (issue 43): the expert's turn on
another seed, shown before the first turn, the same on every machine; ``stop`` sent as the
OpenAI API takes it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from teamgym.adapters.agents.chat import ChatEpisode, SamplingOptions, next_chat
from teamgym.adapters.agents.examples import EXAMPLE_HEADER, EXAMPLE_SEED, worked_examples
from teamgym.adapters.agents.kinds import parse_agent_spec
from teamgym.adapters.agents.openai_agent import OpenAIAgent
from teamgym.envs import make, registry, spec
from teamgym.envs.parsing import parse_reply
from teamgym.envs.registration import latest_versions

WITH_EXPERT = [e for e in latest_versions(registry()) if "expert" in spec(e).baselines]


@pytest.mark.parametrize("env_id", WITH_EXPERT)
def test_every_agent_gets_a_valid_example_turn_with_a_choice(env_id: str) -> None:
    """Each agent's example is its first observation with more than one valid action on
    ``EXAMPLE_SEED`` and the expert's reply to it, which names one of those actions."""
    env = make(env_id)
    examples = worked_examples(env)
    assert set(examples) == set(env.possible_agents), env_id
    game = make(env_id)
    game.reset(seed=EXAMPLE_SEED)
    for agent, (user, assistant) in examples.items():
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert user["content"].startswith(EXAMPLE_HEADER)
        valid = user["content"].split("Valid actions:", 1)[1]
        action = parse_reply(assistant["content"]).action
        assert action and action.split()[0] in valid, (env_id, agent, assistant["content"])
    assert env.reset(seed=0) == make(env_id).reset(seed=0), "the env itself was left alone"


def test_the_examples_are_the_same_in_another_process() -> None:
    code = (
        "import json, sys; from teamgym.envs import make; "
        "from teamgym.adapters.agents.examples import worked_examples; "
        "print(json.dumps({e: worked_examples(make(e)) for e in sys.argv[1:]}, sort_keys=True))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *WITH_EXPERT], capture_output=True, text=True, check=True
    )
    here = {e: worked_examples(make(e)) for e in WITH_EXPERT}
    assert json.loads(out.stdout) == json.loads(json.dumps(here, sort_keys=True))


def test_the_example_sits_between_the_system_message_and_the_first_turn() -> None:
    example = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    info = {"instructions": "rules"}
    first = next_chat({}, "robot_0", "obs", info, example)
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user"]
    later = next_chat({"robot_0": [*first, {"role": "assistant", "content": "r"}]}, "robot_0",
                      "obs2", info, example)  # fmt: skip
    assert later[:4] == first and len(later) == 6, "the example is shown once"


class _Echo(ChatEpisode):
    def __init__(self, **kw: object) -> None:
        super().__init__(0, **kw)  # type: ignore[arg-type]
        self.seen: list[list[dict[str, str]]] = []

    async def complete(self, messages, seed, record):  # type: ignore[no-untyped-def]
        self.seen.append(messages)
        return "<action>wait</action>"


def test_turns_and_records_count_the_real_turns_only() -> None:
    example = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    episode = _Echo(examples={"robot_0": example})
    for _ in range(3):
        asyncio.run(episode.act("robot_0", "o", {"instructions": "rules"}))
        asyncio.run(episode.act("robot_1", "o", {"instructions": "rules"}))
    turns = [(r["agent"], r["turn"]) for r in episode.records]
    assert turns == [(a, t) for t in range(3) for a in ("robot_0", "robot_1")]
    assert episode.records[0]["example"] == example and "example" not in episode.records[1]
    assert episode.seen[0][1:3] == example and episode.seen[1][1]["content"] == "o"


@pytest.mark.parametrize("history", [0, 1, 2, None])
def test_history_keeps_the_system_example_and_the_last_turns(history: int | None) -> None:
    """``history: N``: each request carries the system message, the example and the agent's
    last N exchanges before its new observation; the chat and the records keep every turn."""
    example = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    episode = _Echo(examples={"robot_0": example}, history=history)
    for t in range(4):
        asyncio.run(episode.act("robot_0", f"o{t}", {"instructions": "rules"}))
    last = episode.seen[-1]
    assert last[0] == {"role": "system", "content": "rules"} and last[1:3] == example
    users = [m["content"] for m in last[3:] if m["role"] == "user"]
    kept = 3 if history is None else min(history, 3)
    assert users == [f"o{t}" for t in range(3 - kept, 4)]
    assert [m["role"] for m in last[3:]] == ["user", "assistant"] * kept + ["user"]
    assert len(episode.chats["robot_0"]) == 3 + 8 and [r["turn"] for r in episode.records] == [
        0,
        1,
        2,
        3,
    ]


def test_the_history_option_reaches_the_episodes_of_both_llm_kinds() -> None:
    spec_ = parse_agent_spec({"kind": "openai", "model": "m", "history": 2})
    agent = OpenAIAgent(spec_)
    assert agent.episode(make("signal-v1"), 0).history == 2
    agent.close()
    assert spec_.config() != parse_agent_spec({"kind": "openai", "model": "m"}).config()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"history": -1}, "history is null or a whole number"),
        ({"history": "2"}, "history is null or a whole number"),
        ({"history": True}, "history is null or a whole number"),
        ({"stop": ""}, "stop is a string or a list of non-empty strings"),
        ({"stop": [1]}, "stop is a string or a list of non-empty strings"),
        ({"example": "yes"}, "example is true or false"),
    ],
)
def test_bad_stop_and_example_options_are_refused(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingOptions.from_options(options, "agent")


def test_the_openai_agent_sends_the_example_and_the_stop_strings() -> None:
    """``example: true`` and ``stop`` reach the request as the OpenAI API takes them; the
    spec's fingerprint changes with them (they change what the agent does)."""
    bodies: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": "<action>pick 1"}}]})

    base = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1"}
    spec_ = parse_agent_spec({**base, "example": True, "stop": "</action>"})
    assert spec_.config() != parse_agent_spec(base).config()
    agent = OpenAIAgent(spec_, transport=httpx.MockTransport(answer))
    env = make("signal-v1")
    obs, infos = env.reset(seed=3)
    listener = next(a for a in env.agents if a != env.speaker)
    episode = agent.episode(env, 3)
    asyncio.run(episode.act(listener, obs[listener], infos[listener]))
    agent.close()
    (body,) = bodies
    assert body["stop"] == ["</action>"]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert body["messages"][1]["content"].startswith(EXAMPLE_HEADER)
    assert body["messages"][3]["content"] == obs[listener]
