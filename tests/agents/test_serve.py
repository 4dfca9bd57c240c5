"""``teamgym serve`` on the local model: the OpenAI routes, its errors, and replies identical to
the ``transformers`` agent's through the ``openai`` agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("transformers")

from teamgym.adapters.agents import build_agent, parse_agent_spec  # noqa: E402
from teamgym.cli import main  # noqa: E402

KW = {"speaker": "fixed", "num_rounds": 2, "num_candidates": 3}


@pytest.fixture(scope="module")
def served(model_dir, serve_process) -> Iterator[Any]:
    """``teamgym serve`` of the local model on a free port, for this module's tests."""
    server = serve_process(model_dir)
    yield server
    assert "stopped" in server.stop()


def test_models_lists_the_served_name(served, model_dir) -> None:
    response = httpx.get(f"{served.url}/models")
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]] == [str(model_dir)]


def test_a_chat_completion_is_standard_json(served, model_dir) -> None:
    body = {
        "model": str(model_dir),
        "messages": [{"role": "system", "content": "hi"}, {"role": "user", "content": "go"}],
        "max_tokens": 5,
    }
    response = httpx.post(f"{served.url}/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    data = response.json()
    choice = data["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = data["usage"]
    assert usage["completion_tokens"] <= 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[]", 400, "JSON object"),
        (b'{"messages": []}', 400, "messages"),
        (b'{"messages": [{"role": "user"}]}', 400, "messages[0]"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400, "temp"),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 400, "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "x"}], "model": "gpt-9"}', 404, "gpt-9"),
    ],
    ids=["not-json", "not-object", "no-messages", "no-content", "bad-temp", "zero-max", "model"],
)
def test_a_bad_body_is_a_clear_json_error(served, body, status, says) -> None:
    response = httpx.post(f"{served.url}/chat/completions", content=body, timeout=60)
    assert response.status_code == status, response.text
    assert says in response.json()["error"]["message"]


def test_other_paths_are_404(served) -> None:
    base = served.url.removesuffix("/v1")
    assert httpx.get(f"{base}/v1/nope").status_code == 404
    assert httpx.post(f"{base}/v1/completions", json={}).status_code == 404
    assert "error" in httpx.get(f"{base}/").json()


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_openai_through_serve_replies_as_the_transformers_agent(
    served, model_dir, play, temperature
) -> None:
    """At temperature 0 (and, both seeding from the same reply seed, sampled too)."""
    common = {"temperature": temperature, "max_tokens": 16}
    openai = build_agent(
        parse_agent_spec(
            {"kind": "openai", "model": str(model_dir), "base_url": served.url, **common}
        ),
        "signal-v0",
    )
    local = build_agent(
        parse_agent_spec(
            {"kind": "transformers", "path": str(model_dir), "device": "cpu", **common}
        ),
        "signal-v0",
    )

    async def both() -> tuple:
        through_server = await play(openai, "signal-v0", 6, **KW)
        await openai.aclose()
        return through_server, await play(local, "signal-v0", 6, **KW)

    (served_steps, served_episode), (local_steps, local_episode) = asyncio.run(both())
    assert len(served_steps) == 4
    for t, (a, b) in enumerate(zip(served_steps, local_steps, strict=True)):
        assert a == b, f"step {t}: through serve {a} != transformers {b}"
    keys = ("agent", "turn", "message", "seed", "reply", "finish_reason")
    for r, s in zip(served_episode.records, local_episode.records, strict=True):
        assert [r[k] for k in keys] == [s[k] for k in keys]
        assert r["usage"]["completion_tokens"] == s["completion_tokens"]


def test_a_missing_model_dir_says_how_to_make_one(tmp_path, capsys) -> None:
    assert main(["serve", str(tmp_path / "nowhere")]) == 2
    out = capsys.readouterr().out
    assert "not a model directory" in out and "teamgym model init" in out
