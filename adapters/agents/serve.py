"""An OpenAI-compatible chat server over a local model directory (``teamgym serve DIR``).

:func:`make_server` answers ``GET /v1/models`` and ``POST /v1/chat/completions`` (``messages``,
``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``stop``) with the standard JSON, and
``GET /health``. Replies come from :class:`teamgym.adapters.agents.chat.ChatModel`, the very code the
``transformers`` agent uses, one request at a time: at temperature 0 an ``openai`` agent
through this server and a ``transformers`` agent on the same directory give the same replies
(and with a temperature too, since both seed a reply with the same
:func:`~teamgym.adapters.agents.chat.reply_seed`). Standard library only; for throughput on a GPU,
serve the directory with vLLM or SGLang instead.

A bad body is a 400 with an OpenAI-style ``{"error": {"message": ...}}``; a model name other
than the served one is a 404, as vLLM answers; other paths are a 404 too.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from teamgym.adapters.agents.chat import (
    DEFAULT_MAX_PROMPT_TOKENS,
    ChatModel,
    SamplingOptions,
    load_chat_model,
)

__all__ = ["BadRequest", "ChatServer", "make_server", "parse_request"]

_MAX_BODY = 32 << 20
"""Largest request body accepted, in bytes."""


class BadRequest(ValueError):
    """A request the server cannot answer: ``status`` and a message for the client."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param = status, param


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    """``body[key]`` as a finite number in [low, high]; ``default`` when absent or null."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"{key} must be a number, got {value!r}", param=key)
    if not low <= value <= high:
        raise BadRequest(f"{key} must be in [{low:g}, {high:g}], got {value!r}", param=key)
    return float(value)


def _integer(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    """``body[key]`` as an integer in [low, high]; ``default`` when absent or null."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{key} must be an integer, got {value!r}", param=key)
    if not low <= value <= high:
        raise BadRequest(f"{key} must be in [{low}, {high}], got {value!r}", param=key)
    return value


def parse_request(body: Any, served: str, max_tokens: int) -> dict[str, Any]:
    """The arguments of :meth:`ChatModel.complete` in a chat completion request body, or
    :class:`BadRequest` saying which field is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served:
        raise BadRequest(f"the model `{model}` does not exist; this server serves `{served}`", 404)
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by teamgym serve", param="stream")
    if body.get("n") not in (None, 1):
        raise BadRequest("only n=1 is supported", param="n")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", param="messages")
    for i, m in enumerate(messages):
        if not (
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
        ):
            raise BadRequest(
                f"messages[{i}] must be an object with string role and content", param="messages"
            )
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is None:
        stop = []
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("stop must be a string or a list of strings", param="stop")
    cap = body.get("max_completion_tokens", body.get("max_tokens"))
    return {
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "temperature": _number(body, "temperature", 0.0, 0.0, 2.0),
        "top_p": _number(body, "top_p", 1.0, 1e-9, 1.0),
        "max_tokens": _integer({"max_tokens": cap}, "max_tokens", max_tokens, 1, 1 << 20),
        "seed": _integer(body, "seed", 0, -(1 << 63), (1 << 63) - 1),
        "stop": stop,
    }


class ChatServer(ThreadingHTTPServer):
    """A threading HTTP server holding the model; see :func:`make_server`."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        model: ChatModel,
        served: str,
        max_tokens: int,
        max_prompt_tokens: int,
        quiet: bool,
    ) -> None:
        super().__init__(address, _Handler)
        self.model, self.served, self.quiet = model, served, quiet
        self.max_tokens, self.max_prompt_tokens = max_tokens, max_prompt_tokens
        self.ids = itertools.count()
        self.created = int(time.time())

    @property
    def url(self) -> str:
        """The base URL clients use (``.../v1``)."""
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to the model."""

    server: ChatServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        """``/v1/models`` and ``/health``."""
        if self.path == "/v1/models":
            model = {
                "id": self.server.served,
                "object": "model",
                "created": self.server.created,
                "owned_by": "teamgym",
            }
            self._send(200, {"object": "list", "data": [model]})
        elif self.path == "/health":
            self._send(200, {"status": "ok"})
        elif self.path == "/v1/chat/completions":
            self._error(405, "use POST for /v1/chat/completions", "invalid_request_error")
        else:
            self._not_found()

    def do_POST(self) -> None:
        """``/v1/chat/completions``."""
        if self.path != "/v1/chat/completions":
            self._drain()
            self._not_found()
            return
        try:
            length = int(self.headers.get("content-length") or 0)
            if not 0 <= length <= _MAX_BODY:
                self.close_connection = True
                raise BadRequest(f"the body must be at most {_MAX_BODY} bytes", 413)
            try:
                body = json.loads(self.rfile.read(length))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                raise BadRequest(f"the body is not JSON: {exc}") from None
            args = parse_request(body, self.server.served, self.server.max_tokens)
        except BadRequest as exc:
            kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
            self._error(exc.status, str(exc), kind, exc.param)
            return
        except ValueError:  # a malformed content-length
            self.close_connection = True
            self._error(400, "bad content-length header", "invalid_request_error")
            return
        try:
            out = self.server.model.complete(
                **args, max_prompt_tokens=self.server.max_prompt_tokens
            )
        except Exception as exc:  # the client hears of it; the server keeps serving
            self._error(500, f"the model failed: {type(exc).__name__}: {exc}", "server_error")
            return
        self._send(
            200,
            {
                "id": f"chatcmpl-{next(self.server.ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.server.served,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": out.text},
                        "finish_reason": out.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": out.prompt_tokens,
                    "completion_tokens": out.completion_tokens,
                    "total_tokens": out.prompt_tokens + out.completion_tokens,
                },
            },
        )

    def _drain(self) -> None:
        """Read and drop a body we will not use, so the connection stays usable."""
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= _MAX_BODY:
            self.rfile.read(length)
        else:
            self.close_connection = True

    def _not_found(self) -> None:
        """404 naming the routes there are."""
        self._error(
            404,
            f"no route {self.command} {self.path}; this server answers GET /v1/models, "
            "POST /v1/chat/completions and GET /health",
            "not_found_error",
        )

    def _error(self, status: int, message: str, kind: str, param: str | None = None) -> None:
        """An OpenAI-style error body."""
        self._send(status, {"error": {"message": message, "type": kind, "param": param}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        """``payload`` as JSON with ``status``."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Access log on stderr unless the server is quiet."""
        if not self.server.quiet:
            super().log_message(format, *args)


def make_server(
    model_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    served_name: str | None = None,
    device: str = "auto",
    max_tokens: int = SamplingOptions.max_tokens,
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
    quiet: bool = False,
) -> ChatServer:
    """A server of ``model_dir`` bound to ``host:port`` (port 0: a free one; read ``.url``);
    run it with ``serve_forever()``, stop it with ``shutdown()``. Clients name the model
    ``served_name`` (default: ``model_dir`` as given). Raises ``FileNotFoundError`` for a
    directory that holds no model."""
    model = load_chat_model(model_dir, device)
    return ChatServer(
        (host, port), model, served_name or str(model_dir), max_tokens, max_prompt_tokens, quiet
    )
