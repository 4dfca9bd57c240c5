"""``teamgym play ENV --web`` as a user starts it: a process, the links it prints, its page's API
(``WebPlay``); the answers a test gives come from :func:`first_action` unless it says; and a
headless Chromium (``browser``, one per test module) to open its page."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

LINK = re.compile(r"^(?P<name>[\w.+-]+): open (?P<url>http://\S+/play/\S+\?token=(?P<token>\S+))$")


class WebPlay:
    """A ``teamgym play ... --web --port 0`` process (or any command seating ``human`` agents):
    the people's links, their page state, their replies, the end."""

    def __init__(self, args: list[str], names: tuple[str, ...] = ("player",), env=None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "teamgym", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.links: dict[str, str] = {}
        self.tokens: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while set(self.links) != set(names):
            line = self._next(deadline)
            found = LINK.match(line.strip())
            if found:
                self.links[found["name"]] = found["url"]
                self.tokens[found["name"]] = found["token"]
        self.base = next(iter(self.links.values())).split("/play/")[0]
        self.http = httpx.Client(base_url=self.base, timeout=30)

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)

    def _next(self, deadline: float) -> str:
        while True:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    pytest.fail("the command exited:\n" + "".join(self.output))
                if time.monotonic() > deadline:
                    self.proc.kill()
                    pytest.fail("no link in 120 s:\n" + "".join(self.output))
                continue
            self.output.append(line)
            return line

    def state(self, name: str = "player") -> dict[str, Any]:
        response = self.http.get(f"/api/{name}/state", params={"token": self.tokens[name]})
        assert response.status_code == 200, response.text
        return response.json()

    def open_turn(self, name: str = "player", timeout: float = 120) -> dict[str, Any] | None:
        """The person's next open turn, or None once the process has ended."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return None
            try:
                turns = [t for e in self.state(name)["episodes"] for t in e["turns"]]
            except httpx.TransportError:  # the server stopped with its last episode
                return None
            if turns:
                return turns[0]
            time.sleep(0.05)
        pytest.fail("no open turn in time:\n" + "".join(self.output))

    def reply(self, turn: dict[str, Any], name: str = "player", **body: Any) -> httpx.Response:
        body = {"turn": turn["turn"], "seat": turn["seat"], "step": turn["step"], **body}
        return self.http.post(f"/api/{name}/reply", params={"token": self.tokens[name]}, json=body)

    def play_out(
        self, choose: Callable[[dict[str, Any]], dict[str, Any]] | None = None, name: str = "player"
    ) -> list[dict[str, Any]]:
        """Answer every turn (``choose(turn)`` gives the body) until the process ends; the turns."""
        played = []
        while (turn := self.open_turn(name)) is not None:
            response = self.reply(turn, name, **(choose or first_action)(turn))
            assert response.status_code == 200, response.text
            played.append(turn)
        return played

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)  # its output read to the end
        while not self.lines.empty():
            self.output.append(self.lines.get())
        self.http.close()
        return code, "".join(self.output)

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C, as a person stops the server."""
        self.proc.send_signal(signal.SIGINT)
        return self.finish(60)


def first_action(turn: dict[str, Any]) -> dict[str, Any]:
    return {"action": turn["valid_actions"][0]}


@pytest.fixture
def web_play() -> Iterator[Callable[..., WebPlay]]:
    """``web_play(args, names=...)``: start a command that seats people (killed at the end)."""
    started: list[WebPlay] = []

    def start(args: list[str], names: tuple[str, ...] = ("player",), env=None) -> WebPlay:
        started.append(WebPlay(args, names, env))
        return started[-1]

    yield start
    for play in started:
        if play.proc.poll() is None:
            play.proc.kill()
            play.proc.wait()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[Any]:
    """Headless Chromium (Debian's, driven by Selenium), flags as this machine's closed network
    needs them; a 1200 x 1100 window unless a test sets its own size."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        message = "Debian's chromium and chromium-driver are not installed (.ci/run installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,1100",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
