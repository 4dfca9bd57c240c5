"""An OpenAI-compatible chat server as a benchmark agent: ``{kind: openai, model: M, base_url: U}``.

:class:`OpenAIAgent` plays its agents through ``POST {base_url}/chat/completions`` of any
OpenAI-compatible server (vLLM, SGLang, a hosted API, ``teamgym serve`` for a local model).
Each agent keeps its chat (system = the env's instructions, then observations and its own
replies), sent whole on every turn. One :class:`httpx.AsyncClient` and one limit on requests in
flight serve the whole run; failures are retried with exponential backoff, and a turn that
still has no reply raises :class:`~teamgym.adapters.agents.AgentError` saying what to check.

Options (spec keys): ``model`` (required), ``base_url`` (``http://`` or ``https://``; by
default ``http://127.0.0.1:8000/v1``, where ``vllm serve`` and ``teamgym serve`` listen, said
with a :class:`~teamgym.adapters.agents.builtin.DefaultURLWarning` when a spec names none),
``api_key_env`` (the environment variable holding the key; by default ``OPENAI_API_KEY`` for
``https://api.openai.com`` and none for any other server, so a key is never sent to a host
that was not named for it; unset means no ``Authorization`` header), ``allow_http_key``
(False: an agent that would send a key over plain ``http://`` to a host other than this
machine's loopback is refused when built, saying to use ``https://``; True sends it
unencrypted, for a network you trust), ``concurrency`` (8
requests in flight, run-wide), ``timeout`` (60 s per request), ``max_retries`` (3),
``backoff`` (0.5 s, doubled per retry, plus up to 50% jitter drawn from the turn's seed), and
the sampling options ``temperature``, ``top_p``,
``max_tokens`` and ``seed`` (mixed into every request's ``seed``, see
:func:`~teamgym.adapters.agents.chat.reply_seed`), whose defaults and check are
:class:`~teamgym.adapters.agents.chat.SamplingOptions`'.

Retried: connection errors, timeouts, HTTP 429 and 5xx (waiting at least the server's
``Retry-After``), and 2xx bodies that are not a chat completion. Not retried: other 4xx
(a wrong model name, a bad key), which fail the turn at once.

Records (``episode.records``, one per turn, see :class:`~teamgym.adapters.agents.chat.ChatEpisode`):
``agent, turn, system, message, seed`` are deterministic; ``reply`` and ``finish_reason`` are
as deterministic as the server (at temperature 0 on one server, usually); ``attempts`` (a list
of ``{status, error, latency_s}``), ``latency_s`` and ``usage`` (the server's token counts, if
it sends them) describe this run only.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any

try:
    import httpx
except ImportError as exc:  # the one dependency of this agent: say which extra brings it
    raise ImportError(
        "the openai agent needs httpx: pip install 'teamgym[llm]' (or pip install -e '.[llm]' in a clone)"
    ) from exc

from teamgym.adapters.agents.chat import ChatEpisode, Message, SamplingOptions
from teamgym.adapters.agents.examples import examples_if
from teamgym.adapters.agents.kinds import AgentError, AgentSpec

__all__ = ["ChatReply", "OpenAIAgent", "parse_chat_response"]

_MAX_RETRY_AFTER = 120.0
"""Longest wait a ``Retry-After`` header can impose, in seconds."""


@dataclass(frozen=True)
class ChatReply:
    """What a chat completion body says."""

    content: str
    """``choices[0].message.content``."""
    finish_reason: str | None
    """``choices[0].finish_reason``, when a string."""
    usage: dict[str, Any] | None
    """``usage``, when an object."""


def parse_chat_response(body: bytes) -> ChatReply:
    """The reply in a chat completion body; ``ValueError`` saying what is missing if the body
    is not JSON or has no string ``choices[0].message.content``."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"the body is not JSON ({exc}): {body[:200]!r}") from None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"no choices[0] in the reply: {body[:200]!r}")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ValueError(f"no string choices[0].message.content in the reply: {body[:200]!r}")
    finish = choices[0].get("finish_reason")
    usage = data.get("usage")
    return ChatReply(
        content,
        finish if isinstance(finish, str) else None,
        usage if isinstance(usage, dict) else None,
    )


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asks us to wait (``Retry-After``: seconds or an HTTP date), capped."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def _is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine by itself (``localhost``, ``127.x``, ``::1``); a
    name is not resolved, so only ``localhost`` counts."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Failed(Exception):
    """A failed attempt: ``error`` says what happened, ``retry`` whether another may help,
    ``wait`` the least seconds to wait before it (``Retry-After``)."""

    def __init__(
        self, error: str, status: int | None = None, wait: float | None = None, retry: bool = True
    ) -> None:
        super().__init__(error)
        self.error, self.status, self.wait, self.retry = error, status, wait, retry


class _OpenAIEpisode(ChatEpisode):
    """One episode's chats, answered by the run's server."""

    def __init__(self, owner: OpenAIAgent, seed: int, examples: Any = None) -> None:
        super().__init__(
            seed, seed_base=owner.sampling.seed, examples=examples, history=owner.sampling.history
        )
        self.owner = owner

    async def complete(self, messages: list[Message], seed: int, record: dict[str, Any]) -> str:
        reply = await self.owner.request(messages, seed, record.setdefault("attempts", []))
        record["finish_reason"] = reply.finish_reason
        record["usage"] = reply.usage
        return reply.content


class OpenAIAgent:
    """A chat-completions server as a run-wide agent (see the module docstring).

    Args:
        spec: the agent's spec (options above).
        transport: an ``httpx`` transport to use instead of the network (e.g.
            ``httpx.MockTransport``).
    """

    def __init__(self, spec: AgentSpec, transport: httpx.AsyncBaseTransport | None = None) -> None:
        o = spec.options
        self.spec = spec
        self.model = str(o["model"])
        self.base_url = str(spec.option("base_url")).rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        try:
            url = httpx.URL(self.url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ValueError(
                f"{spec.label}: base_url {self.base_url!r} is not a URL: {exc}"
            ) from None
        host = url.host
        if url.scheme not in ("http", "https") or not host:  # a spec not made by parse_agent_spec
            raise ValueError(
                f"{spec.label}: base_url {self.base_url!r} is not an http:// or https:// URL "
                "with a host"
            )
        default_key = "OPENAI_API_KEY" if host == "api.openai.com" else None
        self.api_key_env: str | None = o.get("api_key_env", default_key)
        if (
            self.api_key_env
            and url.scheme == "http"
            and not _is_loopback(host)
            and not spec.option("allow_http_key")
        ):
            raise ValueError(
                f"{spec.label}: base_url {self.base_url} is plain HTTP to {host}, so the key in "
                f"${self.api_key_env} would cross the network in clear text; use https://, or "
                "set allow_http_key: true if you mean to send it unencrypted (a network you trust)"
            )
        self.concurrency = int(spec.option("concurrency"))
        self.timeout = float(spec.option("timeout"))
        self.max_retries = int(spec.option("max_retries"))
        self.backoff = float(spec.option("backoff"))
        self.sampling = SamplingOptions.from_options(o, spec.label)
        if self.concurrency < 1 or self.timeout <= 0 or self.max_retries < 0 or self.backoff < 0:
            raise ValueError(
                f"{spec.label}: need concurrency >= 1, timeout > 0, max_retries >= 0 and "
                f"backoff >= 0, got {self.concurrency}, {self.timeout}, {self.max_retries}, "
                f"{self.backoff}"
            )
        self.transport = transport
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None

    def episode(self, env: Any, seed: int) -> _OpenAIEpisode:
        """Fresh chats for the episode on ``seed`` (with the worked examples of ``env`` under
        ``example: true``)."""
        return _OpenAIEpisode(self, seed, examples_if(self.sampling.example, env))

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The client and the in-flight limit of the running event loop (made on first use:
        both belong to one loop, and a later run may bring another)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._slots is None or self._loop is not loop:
            self._discard()
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            self._client = httpx.AsyncClient(
                headers={"Authorization": f"Bearer {key}"} if key else {},
                timeout=self.timeout,
                limits=httpx.Limits(
                    max_connections=self.concurrency, max_keepalive_connections=self.concurrency
                ),
                transport=self.transport,
            )
            self._slots = asyncio.Semaphore(self.concurrency)
            self._loop = loop
        return self._client, self._slots

    def payload(self, messages: list[Message], seed: int) -> dict[str, Any]:
        """The request body for ``messages``."""
        return {
            "model": self.model,
            "messages": messages,
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "max_tokens": self.sampling.max_tokens,
            "seed": seed,
            **({"stop": list(self.sampling.stop)} if self.sampling.stop else {}),
        }

    async def request(
        self, messages: list[Message], seed: int, attempts: list[dict[str, Any]]
    ) -> ChatReply:
        """The server's reply to ``messages``, retried as the module docstring says; each
        attempt is appended to ``attempts``. Raises :class:`AgentError` when none came."""
        client, slots = self._session()
        body = self.payload(messages, seed)
        jitter = random.Random(seed)
        for attempt in range(self.max_retries + 1):
            start = time.perf_counter()
            try:
                async with slots:  # held for the request only, not while backing off
                    status, reply = await self._attempt(client, body)
            except _Failed as exc:
                attempts.append(
                    {
                        "status": exc.status,
                        "error": exc.error,
                        "latency_s": round(time.perf_counter() - start, 6),
                    }
                )
                if not exc.retry:
                    raise AgentError(exc.error) from None
                if attempt == self.max_retries:
                    raise AgentError(self._gave_up(len(attempts), exc.error)) from None
                delay = self.backoff * 2**attempt * (1 + 0.5 * jitter.random())
                await asyncio.sleep(max(delay, exc.wait or 0.0))
                continue
            attempts.append(
                {
                    "status": status,
                    "error": None,
                    "latency_s": round(time.perf_counter() - start, 6),
                }
            )
            return reply
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _attempt(
        self, client: httpx.AsyncClient, body: dict[str, Any]
    ) -> tuple[int, ChatReply]:
        """One POST: its status and reply, or :class:`_Failed`."""
        try:
            response = await asyncio.wait_for(client.post(self.url, json=body), self.timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise _Failed(f"no reply within the timeout of {self.timeout:g} s") from None
        except httpx.RequestError as exc:  # refused, reset, DNS, a bad URL, a bad encoding
            raise _Failed(f"could not reach the server ({type(exc).__name__}: {exc})") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Failed(f"HTTP {status}: {response.text[:300]}", status, _retry_after(response))
        if status >= 300:
            raise _Failed(
                f"{self.spec.label}: {self.url} refused the request with HTTP {status}: "
                f"{response.text[:300]}. Check the model name ({self.model!r}; GET "
                f"{self.base_url}/models lists the served ones), base_url, and the key "
                + (f"in ${self.api_key_env}." if self.api_key_env else "(none sent: api_key_env)."),
                status,
                retry=False,
            )
        try:
            return status, parse_chat_response(response.content)
        except ValueError as exc:
            raise _Failed(f"HTTP {status} but not a chat completion: {exc}", status) from None

    def _gave_up(self, attempts: int, error: str) -> str:
        """The message of a turn that got no reply."""
        return (
            f"{self.spec.label}: no reply from {self.url} after {attempts} attempt(s); last "
            f"error: {error}. Check that the server is up and reachable at that URL (base_url), "
            f"that it serves the model {self.model!r} (GET {self.base_url}/models), and raise "
            "timeout or max_retries if it is just slow."
        )

    async def aclose(self) -> None:
        """Close the HTTP client (call it in the event loop that used the agent)."""
        client, self._client, self._slots, self._loop = self._client, None, None, None
        if client is not None:
            await client.aclose()

    def _discard(self) -> None:
        """Close the client of an earlier event loop as well as can be done from here."""
        client, loop = self._client, self._loop
        self._client, self._slots, self._loop = None, None, None
        if client is None or loop is None or loop.is_closed():
            return  # its sockets were bound to a closed loop; they go with it
        if loop.is_running():
            loop.call_soon_threadsafe(lambda: loop.create_task(client.aclose()))
        else:
            loop.run_until_complete(client.aclose())

    def close(self) -> None:
        """Release the HTTP client; prefer ``await agent.aclose()`` inside the run's loop."""
        self._discard()


def build(spec: AgentSpec, env_id: str) -> OpenAIAgent:
    """The ``openai`` kind's builder, named in the agent-kind registry
    (:mod:`teamgym.adapters.agents.kinds`): one agent serves every env, so ``env_id`` is unused."""
    return OpenAIAgent(spec)
