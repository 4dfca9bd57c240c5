"""``human:NAME``: people play their seats through the web page; an agent kind like the others.

Because a person is an agent kind, every command that seats agents seats people too: ``teamgym
play ENV --web`` (one person, or ``human:alice+bob`` for several, each with a link of their
own), ``bench run`` and ``bench crossplay`` (a ``human`` row). Their episodes are written by
the same runner, so ``bench report``, ``compare`` and ``crossplay`` read them as any others.

The first episode that needs a person starts the page's server in the run's event loop
(:class:`~teamgym.web.server.WebServer`, one per host and port, shared by every ``human`` agent
of the run) and prints each person's link. A turn whose only valid action is ``wait`` is
played for the person. Each person plays one episode at a time.

Options (none changes an episode's fingerprint): ``host`` and ``port`` of the page;
``journal``, the folder where each unfinished episode's replies are kept (the run directory's
``human/`` under ``teamgym play``): a stopped server loses nothing, since the same command
replays them and asks from where the person stopped; ``replay``, a run directory (or its
``trajectories.jsonl``) whose recorded replies answer instead of a person, which reproduces
its trajectory hashes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from teamgym.adapters.agents.kinds import AgentError, AgentSpec
from teamgym.web.hub import HISTORY, EpisodeView, Hub

__all__ = [
    "HumanAgent",
    "HumanEpisode",
    "build",
    "people",
    "seat_view",
    "table",
    "use_run_journal",
]

#: Where unfinished episodes' replies (and the people's tokens) are kept unless the spec says:
#: the run directory's ``human/`` once :func:`use_run_journal` has set :data:`RUN_JOURNAL`,
#: else this.
DEFAULT_JOURNAL = Path("runs") / ".human"
RUN_JOURNAL: Path | None = None
"""``RUN_DIR/human`` of the run that seats people, set by :func:`use_run_journal`."""

#: Seconds the page stays up after the last episode for open pages to show the end.
LINGER_S = 5.0
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def use_run_journal(run_dir: Path) -> None:
    """Keep the journal of the ``human`` agents without a ``journal`` option in ``run_dir``'s
    ``human/`` (the command line passes this as the run's ``on_people`` hook)."""
    global RUN_JOURNAL
    RUN_JOURNAL = Path(run_dir) / "human"


def people(spec: AgentSpec) -> list[str]:
    """The names of a ``human`` spec: ``alice`` or ``alice+bob`` (seats go to them in turn)."""
    return str(spec.options["name"]).split("+")


class _Table:
    """One page server and its hub, shared by the ``human`` agents of one host and port."""

    def __init__(self, host: str, port: int) -> None:
        self.hub, self.host, self.port, self.asked = Hub(), host, port, (host, port)
        self.server: Any = None
        self.users = 0
        self.starting: asyncio.Lock | None = None

    async def open(self, names: list[str], tokens: Path) -> Hub:
        """Serve (once) and print the links of ``names`` not yet announced; their tokens are
        kept in ``tokens`` so that a restarted session's links still work."""
        if self.starting is None:
            self.starting = asyncio.Lock()
        async with self.starting:
            if self.server is None:
                from teamgym.web.server import WebServer

                server = WebServer(self.hub, self.host, self.port)
                try:
                    await server.start()
                except OSError as exc:
                    raise AgentError(str(exc)) from None
                self.server, self.port = server, server.port
                if self.host not in _LOOPBACK:
                    print(
                        f"serving the page on {self.host}: anyone who can reach it and holds a "
                        "link can play its seats (each link carries its person's token; plain "
                        "HTTP, so use a network you trust)",
                        file=sys.stderr,
                        flush=True,
                    )
            kept = _read_tokens(tokens)
            for name in names:
                if name not in self.hub.people:
                    person = self.hub.person(name, kept.get(name))
                    kept[name] = person.token
                    print(
                        f"{name}: open {self.link(name, person.token)}", file=sys.stderr, flush=True
                    )
            _write_tokens(tokens, kept)
        return self.hub

    def link(self, name: str, token: str) -> str:
        """The page's address for ``name``."""
        host = "THIS-MACHINE" if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/play/{name}?token={token}"

    async def close(self) -> None:
        """Stop serving once the last agent using the table closes, after each open page has
        shown the end (or :data:`LINGER_S` seconds)."""
        self.users -= 1
        if self.users <= 0 and self.server is not None:
            self.hub.end()
            deadline = time.monotonic() + LINGER_S
            while time.monotonic() < deadline and any(
                p.unseen(self.hub.over_at) for p in self.hub.people.values()
            ):
                await asyncio.sleep(0.1)
            await self.server.stop()
            self.server = None
            _TABLES.pop(self.asked, None)


_TABLES: dict[tuple[str, int], _Table] = {}


def table(host: str, port: int) -> _Table:
    """The table serving ``host:port`` in this process (made on first use)."""
    return _TABLES.setdefault((host, port), _Table(host, port))


def _read_tokens(path: Path) -> dict[str, str]:
    try:
        kept = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {str(k): str(v) for k, v in kept.items()} if isinstance(kept, dict) else {}


def _write_tokens(path: Path, tokens: dict[str, str]) -> None:
    """Keep the tokens, readable by their owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(tokens, handle, sort_keys=True)
    os.replace(tmp, path)


class HumanAgent:
    """The run-wide ``human`` agent: its people, their page, their journal or a replay."""

    def __init__(self, spec: AgentSpec, env_id: str) -> None:
        self.spec, self.env_id = spec, env_id
        self.people = people(spec)
        self.seats = [str(s) for s in spec.option("seats") or []]
        replay = spec.option("replay")
        self.replay = None if replay is None else _recorded(Path(replay))
        if self.replay is None:
            try:
                import fastapi  # noqa: F401
                import uvicorn  # noqa: F401
            except ImportError:
                raise ValueError(
                    "human agents play on a web page, which needs FastAPI and uvicorn: "
                    "pip install 'teamgym[web]' (or pip install -e '.[web]' in a clone)"
                ) from None
        self.table: _Table | None = None
        self.gate: asyncio.Lock | None = None

    @property
    def journal(self) -> Path:
        """Where the replies of unfinished episodes and the people's tokens are kept."""
        chosen = self.spec.option("journal")
        return Path(chosen) if chosen else (RUN_JOURNAL or DEFAULT_JOURNAL)

    def person_of(self, seat: str, seen: int) -> str:
        """Who plays ``seat``: the ``seats`` option's order when given, else the order seats
        are first asked (``seen`` seats so far)."""
        index = self.seats.index(seat) if seat in self.seats else seen
        return self.people[index % len(self.people)]

    def episode(self, env: Any, seed: int) -> HumanEpisode:
        return HumanEpisode(self, env, seed)

    async def hub(self) -> Hub:
        """The page's hub, serving it first if this is the run's first human turn."""
        if self.table is None:
            self.table = table(self.spec.option("host"), int(self.spec.option("port")))
            self.table.users += 1
        return await self.table.open(self.people, self.journal / "tokens.json")

    def close(self) -> None:
        """Nothing held outside the loop."""

    async def aclose(self) -> None:
        """Stop the page when no other ``human`` agent uses it."""
        if self.table is not None:
            await self.table.close()
            self.table = None


class HumanEpisode:
    """One episode's seats played by people (or by a recorded episode's replies)."""

    def __init__(self, owner: HumanAgent, env: Any, seed: int) -> None:
        self.owner, self.env, self.seed = owner, env, seed
        self.env_id = owner.env_id
        self.key = f"{owner.env_id}/{seed}"
        self.partner = ""
        self.records: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}
        self.seat_person: dict[str, str] = {}
        self.journal: dict[tuple[str, int], dict[str, Any]] = {}
        self.view: EpisodeView | None = None
        self.holding = False

    # -- the hooks the episode runner calls around an episode -----------------------------
    def started(self, key: str, partner: str = "") -> None:
        """The episode's key (its journal's name, its page's id) and who plays with the people."""
        self.key, self.partner = key, partner
        self.env_id = key.split("/")[0]  # the agent is built once for every env of the run
        if self.owner.replay is not None:
            if key not in self.owner.replay:
                raise AgentError(f"the replayed run has no episode {key}")
            return
        for line in _read_lines(self._journal_path()):
            self.journal[(line["seat"], line["step"])] = line

    def finished(self, metrics: dict[str, Any] | None, error: str | None) -> None:
        """Show the result; forget the journal of an episode that finished."""
        if self.view is not None:
            self.view.status = "errored" if error else "finished"
            if error:  # the reason (a server's URL, say) stays in the terminal and the run
                self.view.result = {
                    "error": "a teammate or the server failed; the terminal and the run's "
                    "results.jsonl say why"
                }
            elif metrics:
                keys = ("success", "score", "team_return", "episode_length")
                self.view.result = {k: metrics[k] for k in keys}
        if not error and self.owner.replay is None:
            self._journal_path().unlink(missing_ok=True)
        if self.owner.table is not None:
            self.owner.table.hub.cancel(self.key)
        if self.holding and self.owner.gate is not None:
            self.owner.gate.release()
            self.holding = False

    # -- turns ----------------------------------------------------------------------------
    async def act(self, agent: str, observation: str, info: Any) -> str:
        """The person's reply for ``agent`` (asked on the page unless forced or journaled)."""
        step = self.calls.get(agent, 0)
        self.calls[agent] = step + 1
        if self.owner.replay is not None:
            return self._replayed(agent, step)
        if agent not in self.seat_person:
            self.seat_person[agent] = self.owner.person_of(agent, len(self.seat_person))
        person = self.seat_person[agent]
        valid = [str(a) for a in info.get("valid_actions") or []]
        hub = await self.owner.hub()
        view = self._view(hub)
        view.seats[agent] = person
        if "instructions" in info:
            view.instructions[agent] = str(info["instructions"])
        view.last[agent] = seat_view(self.env, agent, person, step, observation, valid)
        start, how = time.monotonic(), "asked"
        sha = _sha(observation)
        kept = self.journal.pop((agent, step), None)
        if valid == ["wait"]:
            reply, how = "<action>wait</action>", "forced"
        elif kept is not None and kept["obs"] == sha:
            reply, how = kept["reply"], "journal"
        else:
            if kept is not None:  # the episode went elsewhere: the rest of the journal is void
                self.journal.clear()
            await self._hold()
            reply = await hub.ask(person, self.key, agent, step, observation, valid)
            self._keep({"seat": agent, "step": step, "obs": sha, "reply": reply})
        del view.history[: -4 * HISTORY]  # pages show each seat's last HISTORY moves
        view.history.append(
            {"seat": agent, "step": step, "observation": observation, "reply": reply, "how": how}
        )
        self.records.append(
            {
                "kind": "human",
                "person": person,
                "seat": agent,
                "step": step,
                "reply": reply,
                "how": how,
                "wait_s": round(time.monotonic() - start, 3),
            }
        )
        return reply

    def _view(self, hub: Hub) -> EpisodeView:
        if self.view is None:
            view = EpisodeView(self.key, self.env_id, self.seed, self.partner)
            for name in self.owner.people:
                view = hub.open_episode(name, view)
            self.view = view
        return self.view

    async def _hold(self) -> None:
        """Wait until the people have no other episode open (one at a time)."""
        if self.holding:
            return
        if self.owner.gate is None:
            self.owner.gate = asyncio.Lock()
        await self.owner.gate.acquire()
        self.holding = True

    def _replayed(self, agent: str, step: int) -> str:
        steps = (self.owner.replay or {}).get(self.key, [])
        try:
            return str(steps[step]["actions"][agent])
        except (IndexError, KeyError):
            raise AgentError(
                f"the replayed episode {self.key} has no reply of {agent} at its step {step}"
            ) from None

    def _journal_path(self) -> Path:
        return self.owner.journal / (self.key.replace("/", "_") + ".jsonl")

    def _keep(self, line: dict[str, Any]) -> None:
        """Append a reply to the episode's journal, on disk before the env sees it."""
        path = self._journal_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            handle.write(json.dumps(line, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def seat_view(
    env: Any, agent: str, person: str, step: int, observation: str, valid: list[str]
) -> dict[str, Any]:
    """What ``agent``'s page shows at this turn, and nothing its observation does not allow:
    the observation, the valid actions, the env's text ``picture`` and SVG ``drawing`` for that
    seat (each env's own, restricted to the seat), and whether a message can go with the reply
    (the message box shows only then)."""
    game = getattr(env, "unwrapped", env)
    picture = getattr(game, "picture", None)
    drawing = getattr(game, "drawing", None)
    drawn = drawing(agent) if callable(drawing) else None
    speak = getattr(game, "can_speak", None)
    return {
        "person": person,
        "step": step,
        "observation": observation,
        "valid_actions": valid,
        "picture": picture(agent) if callable(picture) else None,
        "drawing": drawn.public() if drawn is not None else None,
        "can_speak": not callable(speak)
        or (bool(getattr(game, "communication", True)) and bool(speak(agent))),
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """A journal's lines; a line cut by a kill (the last) is dropped."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_text().splitlines():
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            break
    return out


def _recorded(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The steps of every episode in a run directory's ``trajectories.jsonl``, by key."""
    file = path / "trajectories.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise ValueError(
            f"replay: {file} does not exist; pass a run directory played with "
            "trajectories (not --no-trajectories)"
        )
    return {t["key"]: t["steps"] for t in _read_lines(file)}


def build(spec: AgentSpec, env_id: str) -> HumanAgent:
    """The ``human`` kind's builder (see :mod:`teamgym.adapters.agents.kinds`)."""
    return HumanAgent(spec, env_id)
