"""The ``openai`` agent against a real HTTP server on loopback: replies, retries, timeouts,
limits, records, and a fuzz of what a server may send back."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from teamgym.adapters.agents import (  # noqa: E402
    AgentError,
    AgentSpec,
    build_agent,
    parse_agent_spec,
)
from teamgym.adapters.agents.openai_agent import OpenAIAgent, parse_chat_response  # noqa: E402

FAST = {"timeout": 2.0, "max_retries": 2, "backoff": 0.01}
INFO = {"instructions": "You are robot_0."}
LOCAL = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1"}
"""A spec that names its (never reached) server: a mock transport answers instead."""


def agent_for(url: str, **options: Any) -> OpenAIAgent:
    """An openai agent on ``url`` with fast test settings (overridable)."""
    spec = parse_agent_spec({"kind": "openai", "model": "m", "base_url": url, **FAST, **options})
    agent = build_agent(spec, "signal-v0")
    assert isinstance(agent, OpenAIAgent)
    return agent


async def one_turn(agent: OpenAIAgent, observation: str = "obs 0") -> tuple[str, Any]:
    """One reply of ``robot_0`` in a fresh episode, then close the client."""
    episode = agent.episode(None, seed=3)
    try:
        return await episode.act("robot_0", observation, INFO), episode
    finally:
        await agent.aclose()


def test_a_reply_is_the_content_and_the_request_is_the_chat(chat_server, monkeypatch) -> None:
    monkeypatch.setenv("TEAMGYM_TEST_KEY", "sekret")
    chat_server.script = lambda n, body: chat_server.Reply(
        chat_server.completion(f"<action>reply {n}</action>")
    )
    agent = agent_for(chat_server.url, api_key_env="TEAMGYM_TEST_KEY", temperature=0.5)

    async def two_turns() -> tuple[list[str], Any]:
        episode = agent.episode(None, seed=3)
        first = await episode.act("robot_0", "obs 0", INFO)
        second = await episode.act("robot_0", "obs 1", {})
        await agent.aclose()
        return [first, second], episode

    replies, episode = asyncio.run(two_turns())
    assert replies == ["<action>reply 0</action>", "<action>reply 1</action>"]
    body = chat_server.seen[1].body
    assert body["messages"] == [
        {"role": "system", "content": "You are robot_0."},
        {"role": "user", "content": "obs 0"},
        {"role": "assistant", "content": "<action>reply 0</action>"},
        {"role": "user", "content": "obs 1"},
    ]
    assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"]) == (
        "m",
        0.5,
        1.0,
        256,
    )
    assert chat_server.seen[0].headers["Authorization"] == "Bearer sekret"
    first, second = episode.records
    assert first["system"] == "You are robot_0." and "system" not in second
    assert (first["agent"], first["turn"], first["message"], first["reply"]) == (
        "robot_0",
        0,
        "obs 0",
        "<action>reply 0</action>",
    )
    assert (second["turn"], second["message"]) == (1, "obs 1")
    assert body["seed"] == second["seed"] != first["seed"]
    assert first["finish_reason"] == "stop"
    assert first["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert [a["status"] for a in first["attempts"]] == [200]
    assert first["latency_s"] >= first["attempts"][0]["latency_s"] >= 0


def test_no_key_variable_means_no_authorization_header(chat_server, monkeypatch) -> None:
    monkeypatch.delenv("TEAMGYM_TEST_KEY", raising=False)
    asyncio.run(one_turn(agent_for(chat_server.url, api_key_env="TEAMGYM_TEST_KEY")))
    assert "Authorization" not in chat_server.seen[0].headers


def test_a_slow_reply_within_the_timeout_is_taken(chat_server) -> None:
    chat_server.script = lambda n, body: chat_server.Reply(delay=0.3)
    reply, episode = asyncio.run(one_turn(agent_for(chat_server.url, timeout=2.0)))
    assert reply == "<action>wait</action>"
    assert len(episode.records[0]["attempts"]) == 1
    assert episode.records[0]["latency_s"] >= 0.3


def test_a_timeout_is_retried_then_an_agent_error(chat_server) -> None:
    chat_server.script = lambda n, body: chat_server.Reply(delay=1.0)
    agent = agent_for(chat_server.url, timeout=0.2, max_retries=1)
    start = time.monotonic()
    with pytest.raises(AgentError, match="timeout of 0.2 s") as caught:
        asyncio.run(one_turn(agent))
    assert time.monotonic() - start < 0.95, "the client waited for the slow server"
    assert len(chat_server.seen) == 2
    assert chat_server.url in str(caught.value) and "after 2 attempt(s)" in str(caught.value)


def test_a_server_error_then_a_reply_succeeds_with_two_attempts(chat_server) -> None:
    chat_server.script = lambda n, body: (
        chat_server.Reply({"error": "boom"}, status=500) if n == 0 else chat_server.Reply()
    )
    reply, episode = asyncio.run(one_turn(agent_for(chat_server.url)))
    assert reply == "<action>wait</action>"
    attempts = episode.records[0]["attempts"]
    assert [a["status"] for a in attempts] == [500, 200]
    assert "HTTP 500" in attempts[0]["error"] and attempts[1]["error"] is None


def test_429_waits_for_retry_after(chat_server) -> None:
    chat_server.script = lambda n, body: (
        chat_server.Reply({"error": "slow down"}, status=429, headers={"Retry-After": "0.4"})
        if n == 0
        else chat_server.Reply()
    )
    reply, episode = asyncio.run(one_turn(agent_for(chat_server.url, backoff=0.001)))
    assert reply == "<action>wait</action>"
    waited = chat_server.seen[1].at - chat_server.seen[0].at
    assert waited >= 0.4, f"retried after {waited:.3f} s, before Retry-After (0.4 s)"
    assert [a["status"] for a in episode.records[0]["attempts"]] == [429, 200]


def test_a_4xx_is_not_retried_and_names_what_to_check(chat_server) -> None:
    chat_server.script = lambda n, body: chat_server.Reply({"error": "no model m"}, status=404)
    with pytest.raises(AgentError, match="HTTP 404") as caught:
        asyncio.run(one_turn(agent_for(chat_server.url)))
    assert len(chat_server.seen) == 1
    assert "'m'" in str(caught.value) and f"{chat_server.url}/models" in str(caught.value)


def test_malformed_json_is_retried_then_an_agent_error(chat_server) -> None:
    chat_server.script = lambda n, body: chat_server.Reply(b"{not json" if n < 2 else {"x": 1})
    with pytest.raises(AgentError, match="not a chat completion") as caught:
        asyncio.run(one_turn(agent_for(chat_server.url, max_retries=2)))
    assert len(chat_server.seen) == 3
    assert "no choices[0]" in str(caught.value)

    chat_server.seen.clear()
    chat_server.script = lambda n, body: (
        chat_server.Reply(b"{not json") if n == 0 else chat_server.Reply()
    )
    reply, episode = asyncio.run(one_turn(agent_for(chat_server.url)))
    assert reply == "<action>wait</action>"
    assert "not JSON" in episode.records[0]["attempts"][0]["error"]


def test_a_dead_port_is_an_agent_error_naming_the_url() -> None:
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(AgentError) as caught:
        asyncio.run(one_turn(agent_for(url, max_retries=1)))
    message = str(caught.value)
    assert f"{url}/chat/completions" in message
    assert "server is up" in message and "could not reach" in message


def test_the_concurrency_limit_holds_across_episodes(chat_server) -> None:
    chat_server.script = lambda n, body: chat_server.Reply(delay=0.1)
    agent = agent_for(chat_server.url, concurrency=2)

    async def many() -> None:
        episodes = [agent.episode(None, seed) for seed in range(3)]
        await asyncio.gather(
            *(e.act(a, "obs", INFO) for e in episodes for a in ("robot_0", "robot_1"))
        )
        await agent.aclose()

    asyncio.run(many())
    assert len(chat_server.seen) == 6
    assert chat_server.max_in_flight == 2, f"{chat_server.max_in_flight} requests in flight"


def test_records_are_deterministic_but_for_timing(chat_server, play) -> None:
    chat_server.script = lambda n, body: chat_server.Reply(
        chat_server.completion(f"<say>{len(body['messages'])}</say><action>pick 1</action>")
    )
    agent = agent_for(chat_server.url)
    kwargs = {"num_rounds": 2, "num_candidates": 3}

    def records() -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            _, episode = await play(agent, "signal-v0", 5, **kwargs)
            await agent.aclose()
            return episode.records

        out = asyncio.run(run())
        for r in out:
            del r["latency_s"], r["attempts"]
        return out

    first, second = records(), records()
    assert first == second
    assert [(r["agent"], r["turn"]) for r in first[:4]] == [
        ("robot_0", 0),
        ("robot_1", 0),
        ("robot_0", 1),
        ("robot_1", 1),
    ]


def test_a_client_outlives_its_event_loop() -> None:
    """Two runs (two ``asyncio.run``) with one agent: the second gets a fresh client."""
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})
    )
    agent = OpenAIAgent(parse_agent_spec(LOCAL), transport=transport)
    for _ in range(2):
        assert asyncio.run(agent.episode(None, 0).act("robot_0", "o", INFO)) == "ok"
    agent.close()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
CHATTY = st.fixed_dictionaries(
    {
        "choices": st.lists(
            st.fixed_dictionaries({"message": JSON | st.fixed_dictionaries({"content": JSON})})
            | JSON,
            max_size=2,
        )
    },
    optional={"usage": JSON},
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=200)
    | JSON.map(lambda v: json.dumps(v).encode())
    | CHATTY.map(lambda v: json.dumps(v).encode())
)
def test_parsing_any_body_gives_a_reply_or_a_value_error(body: bytes) -> None:
    try:
        reply = parse_chat_response(body)
    except ValueError:
        return
    assert isinstance(reply.content, str)
    assert reply.content == json.loads(body)["choices"][0]["message"]["content"]


@settings(max_examples=60, deadline=None)
@given(
    status=st.sampled_from([200, 201, 400, 404, 429, 500, 503]),
    body=st.binary(max_size=100) | CHATTY.map(lambda v: json.dumps(v).encode()),
)
def test_any_response_is_a_reply_or_an_agent_error(status: int, body: bytes) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    spec = parse_agent_spec({**LOCAL, "max_retries": 1, "backoff": 0})
    agent = OpenAIAgent(spec, transport=transport)

    async def turn() -> str:
        try:
            return await agent.episode(None, 0).act("robot_0", "o", INFO)
        finally:
            await agent.aclose()

    try:
        reply = asyncio.run(turn())
    except AgentError:
        return
    assert isinstance(reply, str) and status < 300


def test_no_key_goes_to_a_server_not_named_for_it(chat_server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-private")
    chat_server.script = lambda n, body: chat_server.Reply(
        chat_server.completion("<action>x</action>")
    )
    agent = agent_for(chat_server.url)

    async def one() -> None:
        await agent.episode(None, seed=0).act("robot_0", "obs", INFO)
        await agent.aclose()

    asyncio.run(one())
    headers = {k.lower(): v for k, v in chat_server.seen[0].headers.items()}
    assert "authorization" not in headers
    official = OpenAIAgent(
        parse_agent_spec({"kind": "openai", "model": "m", "base_url": "https://api.openai.com/v1"})
    )
    assert official.api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": "http://host:80x/v1"}, "is not a URL"),
        ({"max_tokens": 0}, "max_tokens >= 1"),
        ({"temperature": -1}, "temperature >= 0"),
        ({"concurrency": 0}, "concurrency >= 1"),
    ],
)
def test_bad_options_are_refused_when_the_agent_is_built(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OpenAIAgent(parse_agent_spec({**LOCAL, **options}))


def test_a_key_never_crosses_the_network_over_plain_http(
    lan_chat_server, chat_server, monkeypatch
) -> None:
    """Issue 27: ``http://api.openai.com/v1`` sent ``OPENAI_API_KEY`` in clear text. A key over
    plain HTTP goes to loopback only, unless the spec says ``allow_http_key: true``."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-private")
    monkeypatch.setenv("TEAMGYM_TEST_KEY", "sekret")
    with pytest.raises(ValueError, match="plain HTTP to api.openai.com") as caught:
        agent_for("http://api.openai.com/v1")
    assert "use https://" in str(caught.value) and "$OPENAI_API_KEY" in str(caught.value)
    with pytest.raises(ValueError, match="allow_http_key: true"):
        agent_for(lan_chat_server.url, api_key_env="TEAMGYM_TEST_KEY")
    assert lan_chat_server.seen == [], "a refused agent reached the server"

    asyncio.run(one_turn(agent_for(lan_chat_server.url)))  # no key: plain HTTP is fine
    asyncio.run(one_turn(agent_for(chat_server.url, api_key_env="TEAMGYM_TEST_KEY")))  # loopback
    opted_in = agent_for(lan_chat_server.url, api_key_env="TEAMGYM_TEST_KEY", allow_http_key=True)
    asyncio.run(one_turn(opted_in))
    assert "Authorization" not in lan_chat_server.seen[0].headers
    assert lan_chat_server.seen[1].headers["Authorization"] == "Bearer sekret"
    assert chat_server.seen[0].headers["Authorization"] == "Bearer sekret"
    assert parse_agent_spec({**LOCAL, "allow_http_key": True}).config() == {
        "kind": "openai",
        "model": "m",
    }, "how the key travels changed the fingerprint"


@pytest.mark.parametrize("scheme", ["ftp", "file", "ws"])
def test_a_non_http_scheme_is_refused_when_the_spec_is_read(chat_server, scheme: str) -> None:
    """Issue 27: ``ftp://`` passed validation and was retried 4 times."""
    url = chat_server.url.replace("http", scheme, 1)
    for spec in ({"kind": "openai", "model": "m", "base_url": url}, f"openai:m@{url}"):
        with pytest.raises(ValueError, match="not an http:// or https:// URL"):
            parse_agent_spec(spec)
    with pytest.raises(ValueError, match="not an http:// or https:// URL"):
        OpenAIAgent(AgentSpec("openai", "made-by-hand", {"model": "m", "base_url": url}))
    assert chat_server.seen == []
