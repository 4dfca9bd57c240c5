"""Play a suite's episodes and write them to a run directory, resumably.

``RUN_DIR`` holds:

* ``run.json``: the suite (after command-line overrides), its hash, the package version;
* ``results.jsonl``: one line per finished episode (played by
  :mod:`teamgym.benchmarks.episodes`, which lists the fields), appended and fsync'd as each ends;
* ``trajectories.jsonl``: one line per episode with every reply, reward and event (and, for LLM
  agents, every request and reply); observations too with ``save_observations``.

Running the same suite into the same directory again skips the episodes whose result is
``ok`` and plays the rest (those never reached, those cut by a kill, those ``errored``), so a
killed run ends with the same results as an uninterrupted one. Episodes are independent and
deterministic in their seed, so the serial, concurrent and Ray runs give identical lines
(except ``wall_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamgym.adapters.agents import AgentSpec, build_agent
from teamgym.benchmarks.episodes import package_version, play_all
from teamgym.benchmarks.results import CorruptRunError, JsonLines, latest_by_key
from teamgym.benchmarks.suites import Job, Setting, Suite, digest

__all__ = ["RunDirError", "check_agents", "locked", "preflight", "run_suite", "suite_differences"]

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
RUN_JSON = "run.json"


class RunDirError(RuntimeError):
    """The run directory belongs to another suite, or another process is writing it."""


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold ``RUN_DIR/.lock`` so two processes never write one run."""
    with (run_dir / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(
                f"another process is writing {run_dir}; wait for it or pass another --out"
            ) from None
        yield


def _check_run_dir(run_dir: Path, suite: Suite) -> None:
    """Create ``run.json`` or check that the directory holds this suite."""
    path = run_dir / RUN_JSON
    if path.exists():
        try:
            held = json.loads(path.read_text())
        except json.JSONDecodeError:
            raise RunDirError(
                f"{path} is not JSON (edited, or cut by a kill); delete it to adopt the "
                "directory for this suite, or pass --out NEW_DIR"
            ) from None
        if held.get("suite_hash") == suite.hash and held.get("package_version") != (
            version := package_version()
        ):
            warnings.warn(
                f"{run_dir} was started with teamgym {held.get('package_version')}; resuming "
                f"with {version}: its results.jsonl lines each record the version that wrote them",
                stacklevel=2,
            )
        if held.get("suite_hash") != suite.hash:
            differ = "; ".join(suite_differences(held.get("suite"), suite.source)[:5])
            raise RunDirError(
                f"{run_dir} holds a run of suite {held.get('suite_name')!r} with other settings "
                f"(hash {held.get('suite_hash')}, this one {suite.hash})"
                + (f": {differ}" if differ else "")
                + "; pass --out NEW_DIR, or delete the directory to start again"
            )
        return
    record = {
        "suite_name": suite.name,
        "suite_hash": suite.hash,
        "suite": suite.source,
        "package_version": package_version(),
        "episodes": len(suite),
        "settings": [s.config_hash for s in suite.settings],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)  # whole or absent, even if killed here


def suite_differences(held: Any, new: Any, where: str = "") -> list[str]:
    """Where two suite sources differ, as ``path: old -> new`` lines (lists compared item by
    item, mappings key by key)."""
    if isinstance(held, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(held) | set(new), key=str):
            path = f"{where}.{key}" if where else str(key)
            out += suite_differences(held.get(key, "(none)"), new.get(key, "(none)"), path)
        return out
    if isinstance(held, list) and isinstance(new, list) and len(held) == len(new):
        return [
            line
            for i, (a, b) in enumerate(zip(held, new, strict=True))
            for line in suite_differences(a, b, f"{where}[{i}]")
        ]
    if held == new:
        return []
    return [f"{where or 'suite'}: {_short(held)} -> {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class RunProgress:
    """How much of a run is done before it (re)starts."""

    total: int
    done: int
    todo: list[Job]


def plan(suite: Suite, run_dir: Path) -> RunProgress:
    """Which of the suite's episodes still need playing in ``run_dir``."""
    results = latest_by_key(JsonLines(run_dir / RESULTS).load())
    JsonLines(run_dir / TRAJECTORIES).repair()
    todo = [j for j in suite.jobs() if results.get(j.key, {}).get("status") != "ok"]
    return RunProgress(len(suite), len(suite) - len(todo), todo)


def run_suite(
    suite: Suite,
    run_dir: str | Path,
    *,
    concurrency: int = 1,
    ray_address: str | None = None,
    save_observations: bool = False,
    write_trajectories: bool = True,
    on_result: Callable[[dict], None] | None = None,
    on_plan: Callable[[RunProgress], None] | None = None,
    on_people: Callable[[Path], None] | None = None,
) -> Path:
    """Play every episode of ``suite`` not yet ``ok`` in ``run_dir`` and append the results
    (``ray_address``: ``"local"`` starts a local Ray instance, else a cluster address;
    ``write_trajectories=False`` keeps only the results, each with its trajectory's hash);
    returns the run directory. ``on_people`` is called with the run directory before a run
    that seats people (``human`` agents): the command line keeps their journal there."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if _seats_people(suite):  # people play on this process's page
        if ray_address is not None:
            raise RunDirError("people (human agents) play on this process's page: drop --ray")
        if on_people is not None:
            on_people(run_dir)
    with locked(run_dir):
        _check_run_dir(run_dir, suite)
        progress = plan(suite, run_dir)
        if on_plan is not None:
            on_plan(progress)
        results, trajectories = JsonLines(run_dir / RESULTS), JsonLines(run_dir / TRAJECTORIES)

        def done(result: dict, trajectory: dict) -> None:
            if write_trajectories:  # before the result: a result implies its trajectory
                trajectories.append(trajectory)
            results.append(result)
            if on_result is not None:
                on_result(result)

        if ray_address is not None:
            from teamgym.benchmarks.ray_runner import play_on_ray

            play_on_ray(progress.todo, ray_address, concurrency, save_observations, done)
        else:
            asyncio.run(play_all(progress.todo, concurrency, save_observations, done))
    return run_dir


def _seats_people(suite: Suite) -> bool:
    """Whether any setting seats ``human`` agents."""
    return any(
        s.agent.kind == "human" or (s.partner is not None and s.partner.kind == "human")
        for s in suite.settings
    )


def _distinct_agents(
    settings: Iterable[Setting], kind: str | None = None
) -> Iterator[tuple[AgentSpec, str]]:
    """Each distinct non-baseline agent of ``settings`` (of ``kind``), agents under test and
    cross-play partners alike, with the env id of its first setting."""
    seen: set[str] = set()
    for setting in settings:
        for spec in (setting.agent, setting.partner):
            if spec is None or spec.kind == "baseline" or kind not in (None, spec.kind):
                continue
            key = digest(spec.config()) + spec.label
            if key not in seen:
                seen.add(key)
                yield spec, setting.env_id


def _built(spec: AgentSpec, env_id: str) -> Any:
    """The agent of ``spec``, built; its errors as ``ValueError("agent LABEL: ...")``."""
    try:
        return build_agent(spec, env_id)
    except (ValueError, TypeError, OSError) as exc:
        said = str(exc)  # the agents' own messages start with their label
        said = said if said.startswith(spec.label) else f"{spec.label}: {said}"
        raise ValueError(f"agent {said}") from None


def check_agents(suite: Suite) -> None:
    """Build every LLM agent of the suite once before any episode plays, so a missing model
    directory, a bad URL or an option out of range is reported up front (``ValueError``)."""
    for spec, env_id in _distinct_agents(suite.settings):
        _built(spec, env_id).close()


def _ok_keys(run_dir: Path | None) -> set[str]:
    """The keys of the episodes already ``ok`` in ``run_dir`` (read only; none if unreadable)."""
    if run_dir is None:
        return set()
    try:
        results = latest_by_key(JsonLines(run_dir / RESULTS).load(repair=False))
    except (OSError, CorruptRunError):  # the run itself will say what is wrong
        return set()
    return {key for key, r in results.items() if r.get("status") == "ok"}


def preflight(suite: Suite, run_dir: str | Path | None = None) -> None:
    """One request to each LLM server of the suite's ``openai`` agents before any episode, so
    a server that does not answer, a key it refuses or a model it does not serve is one
    ``ValueError`` naming the agent, not a run of errored episodes.

    Per server (base URL and key): ``GET BASE_URL/models`` with the agent's timeout, whose
    list must hold each agent's model; where the server has no such route, the smallest chat
    request (one token) per model. A busy server (429, 5xx) passes: the run retries those.
    Agents whose episodes are all ``ok`` in ``run_dir`` are not asked (a finished run needs no
    server)."""
    ok = _ok_keys(None if run_dir is None else Path(run_dir))
    todo = [s for s in suite.settings if any(Job(s, seed).key not in ok for seed in s.seeds)]
    servers: dict[tuple[str, str | None], list[Any]] = {}
    for spec, env_id in _distinct_agents(todo, kind="openai"):
        agent = _built(spec, env_id)
        agent.close()
        servers.setdefault((agent.base_url, agent.api_key_env), []).append(agent)
    for agents in servers.values():
        _preflight_server(agents)


def _preflight_server(agents: list[Any]) -> None:
    """:func:`preflight` for the agents of one server (``OpenAIAgent`` s, same base URL and key)."""
    import httpx

    first = agents[0]
    key = os.environ.get(first.api_key_env) if first.api_key_env else None
    client = httpx.Client(
        headers={"Authorization": f"Bearer {key}"} if key else {},
        timeout=max(a.timeout for a in agents),
    )

    def ask(agent: Any, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = client.request(method, url, **kwargs)
        except httpx.RequestError as exc:  # refused, timed out, no such host
            raise ValueError(
                f"agent {agent.spec.label}: no LLM server answers at {agent.base_url} "
                f"({type(exc).__name__}: {str(exc) or 'no reply'}); start it, or fix base_url"
            ) from None
        if response.status_code in (401, 403):
            sent = f"the key in ${agent.api_key_env}" if key else "no key (set api_key_env)"
            raise ValueError(
                f"agent {agent.spec.label}: {url} refused {sent} with HTTP "
                f"{response.status_code}: {response.text[:200]}"
            )
        return response

    with client:
        served = _served_models(ask(first, "GET", f"{first.base_url}/models"))
        for agent in {a.model: a for a in agents}.values():
            if served is not None:
                if agent.model not in served:
                    raise ValueError(
                        f"agent {agent.spec.label}: {agent.base_url} does not serve the model "
                        f"{agent.model!r}; it serves {', '.join(map(repr, sorted(served)))}"
                    )
                continue
            body = {"model": agent.model, "messages": [{"role": "user", "content": "Hi"}]}
            reply = ask(agent, "POST", agent.url, json={**body, "max_tokens": 1})
            if 400 <= reply.status_code < 500 and reply.status_code != 429:
                raise ValueError(
                    f"agent {agent.spec.label}: {agent.url} refused a one-token request with "
                    f"HTTP {reply.status_code}: {reply.text[:200]}; check the model name "
                    f"{agent.model!r} and base_url"
                )


def _served_models(response: Any) -> set[str] | None:
    """The model ids of a ``GET /models`` answer, or None when it is not such a list."""
    try:
        data = response.json()["data"] if response.is_success else None
        ids = {str(m["id"]) for m in data} if isinstance(data, list) else set()
    except (ValueError, KeyError, TypeError):
        return None
    return ids or None  # an empty list says nothing either
