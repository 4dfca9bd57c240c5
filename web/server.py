"""The web page's server: FastAPI routes over a :class:`~teamgym.web.hub.Hub`, served by uvicorn
inside the event loop that plays the episodes.

Routes (every one but the page needs the person's ``token`` query parameter):

* ``GET /play/{name}``: the page (it reads its token from its own link);
* ``GET /api/{name}/state``: the person's episodes and open turns (the page polls it);
* ``POST /api/{name}/reply``: a reply to an open turn (``turn``, ``seat``, ``step``, then
  ``action`` and an optional ``say``, or a full ``text``);
* ``GET /healthz``: ``ok`` (for scripts that wait for the server).

A refused request answers its status with ``{"error": REASON}``; bodies over
:data:`MAX_BODY_BYTES` are refused before they are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from importlib import resources
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from teamgym.web.hub import Hub, Refused

__all__ = ["MAX_BODY_BYTES", "WebServer", "make_app"]

#: The largest request body taken, in bytes.
MAX_BODY_BYTES = 16_384


def make_app(hub: Hub) -> Any:
    """The FastAPI application serving ``hub``."""
    app = FastAPI(title="teamgym play", docs_url=None, redoc_url=None, openapi_url=None)
    page = resources.files("teamgym.web").joinpath("page.html").read_text()

    def refused(exc: Refused) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=_NO_STORE)

    @app.get("/healthz", response_class=PlainTextResponse)
    async def healthz() -> str:
        return "ok"

    @app.get("/play/{name}", response_class=HTMLResponse)
    async def play(name: str) -> Any:
        return HTMLResponse(page, headers=_NO_STORE)

    @app.get("/api/{name}/state")
    async def state(name: str, token: str | None = None) -> Any:
        try:
            return JSONResponse(hub.state(name, token), headers=_NO_STORE)
        except Refused as exc:
            return refused(exc)

    @app.post("/api/{name}/reply")
    async def reply(name: str, request: Request, token: str | None = None) -> Any:
        try:
            hub.check(name, token)
            body = await _json_body(request)
            return {"sent": hub.reply(name, token, body)}
        except Refused as exc:
            return refused(exc)

    return app


_NO_STORE = {
    "Cache-Control": "no-store",
    # the links carry tokens: never sent on as a referrer; the page is never framed
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; frame-ancestors 'none'",
}


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; :class:`Refused` when it is too large or not one."""
    import json

    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise Refused(413, f"the request body is over {MAX_BODY_BYTES} bytes")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise Refused(413, f"the request body is over {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise Refused(400, "the request body is not JSON (or nested too deep)") from None
    if not isinstance(body, dict):
        raise Refused(400, "the request body must be a JSON object")
    return body


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``OSError`` naming the way out when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(
            f"cannot serve the page on {host}:{port} ({exc.strerror or exc}); pass another "
            "--port, or --port 0 for any free one"
        ) from None
    sock.listen(64)
    sock.setblocking(False)
    return sock


class WebServer:
    """uvicorn serving :func:`make_app` as a task of the running loop; :meth:`stop` ends it."""

    def __init__(self, hub: Hub, host: str, port: int) -> None:
        config = uvicorn.Config(make_app(hub), host=host, port=port, log_level="warning")
        self.server = _QuietServer(config)
        self.host, self.port = host, port
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bind the socket here (a taken port is an ``OSError`` that says what to do, not
        uvicorn's exit), then serve on it as a task of the running loop."""
        self.socket = bind(self.host, self.port)
        self.port = self.socket.getsockname()[1]  # the real one when port 0 was asked
        self.task = asyncio.create_task(self.server.serve(sockets=[self.socket]))
        while not self.server.started:
            if self.task.done():
                self.task.result()
                raise OSError(f"the page's server stopped as it started on {self.host}")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        """Stop serving (open connections get uvicorn's graceful close)."""
        if self.task is None:
            return
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, SystemExit):
            await self.task
        self.task = None


class _QuietServer(uvicorn.Server):
    """uvicorn's server without its signal handlers: Ctrl-C stays the benchmark's to handle (it
    saves what finished and says how to resume), and a failed bind raises instead of exiting."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
