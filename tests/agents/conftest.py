"""Fixtures for the LLM agents: a scripted chat server on loopback (``chat_server``, with its
``Reply`` and ``completion`` helpers as attributes) and an episode player (``play``)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def completion(content: str, finish: str = "stop") -> dict[str, Any]:
    """A standard chat completion body answering ``content``."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


@dataclass
class Reply:
    """What the scripted server answers one request: after ``delay`` seconds, ``status`` with
    ``body`` (a dict is sent as JSON, bytes as they are) and ``headers``."""

    body: dict[str, Any] | bytes = field(
        default_factory=lambda: completion("<action>wait</action>")
    )
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    """A request the scripted server received."""

    body: Any
    headers: dict[str, str]
    at: float


class ScriptedChatServer(ThreadingHTTPServer):
    """A chat completions server on loopback whose answers a test programs with ``script``
    (request number, parsed body -> :class:`Reply`); it counts requests in flight."""

    daemon_threads = True
    Reply = Reply
    completion = staticmethod(completion)

    def __init__(self, bind: str = "127.0.0.1", host: str = "127.0.0.1") -> None:
        super().__init__((bind, 0), _ScriptedHandler)
        self.host = host
        self.script: Callable[[int, Any], Reply] = lambda n, body: Reply()
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def url(self) -> str:
        """Base URL (``.../v1``)."""
        return f"http://{self.host}:{self.server_address[1]}/v1"


class _ScriptedHandler(BaseHTTPRequestHandler):
    server: ScriptedChatServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw)
        with self.server.lock:
            n = len(self.server.seen)
            self.server.seen.append(Seen(body, dict(self.headers), time.monotonic()))
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        try:
            reply = self.server.script(n, body)
            time.sleep(reply.delay)
        finally:
            with self.server.lock:
                self.server.in_flight -= 1
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def chat_server() -> Iterator[ScriptedChatServer]:
    """A fresh scripted chat server, serving in a thread for the test."""
    server = ScriptedChatServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _outward_address() -> str | None:
    """This machine's address on its way out (not loopback), or None if it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # UDP: picks a route, sends nothing
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback else address


@pytest.fixture
def lan_chat_server() -> Iterator[ScriptedChatServer]:
    """A scripted chat server reached at this machine's non-loopback address (skipped where
    there is none): what a server on another host looks like to the client."""
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    server = ScriptedChatServer(bind="0.0.0.0", host=address)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def play() -> Callable[..., Any]:
    """``await play(run_agent, env_id, seed, **env_kwargs)``: see :func:`_play`."""
    return _play


async def _play(run_agent: Any, env_id: str, seed: int, **env_kwargs: Any) -> tuple[list, Any]:
    """Play one episode of ``env_id`` with ``run_agent`` for every agent, acting concurrently
    as the benchmark runner does; returns (the replies of each step, the episode agent)."""
    from teamgym.envs import make

    env = make(env_id, **env_kwargs)
    obs, infos = env.reset(seed=seed)
    last_info = dict(infos)
    episode = run_agent.episode(env, seed)
    steps = []
    while env.agents:
        names = list(env.agents)
        replies = await asyncio.gather(*(episode.act(a, obs[a], last_info[a]) for a in names))
        steps.append(dict(zip(names, replies, strict=True)))
        obs, _, _, _, infos = env.step(steps[-1])
        last_info.update(infos)
    env.close()
    return steps, episode
