"""Play a suite's episodes and write them to a run directory, resumably.

``RUN_DIR`` holds:

* ``run.json``: the suite (after command-line overrides), its hash, the package version;
* ``results.jsonl``: one line per finished episode (see :func:`play_job` for the fields),
  appended and fsync'd as each ends;
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
import hashlib
import json
import os
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamgym.adapters.agents import AgentError, RunAgent, build_agent
from teamgym.benchmarks.results import JsonLines, latest_by_key
from teamgym.benchmarks.suites import Job, Suite
from teamgym.envs.baselines import make_baseline
from teamgym.envs.metrics import EpisodeTracker
from teamgym.envs.wrappers.recorder import to_json_line

__all__ = ["RunDirError", "play_jobs", "run_suite"]

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
RUN_JSON = "run.json"


class RunDirError(RuntimeError):
    """The run directory belongs to another suite, or another process is writing it."""


def _package_version() -> str:
    from teamgym import __version__

    return __version__


def _env_version(env_id: str) -> int | None:
    match = re.search(r"-v(\d+)$", env_id)
    return int(match.group(1)) if match else None


def _teammates(job: Job, env: Any) -> dict[str, Any]:
    """The scripted teammates of one episode: bound to the env, the i-th (in agent-name order)
    reset with ``seed * 1000 + i`` (the agent under test takes ``i = 0``)."""
    policies = {}
    for i, (agent, name) in enumerate(sorted(job.setting.teammates.items()), start=1):
        policy = make_baseline(job.setting.env_id, name)
        if hasattr(policy, "bind"):
            policy.bind(env)
        policy.reset(job.seed * 1000 + i)
        policies[agent] = policy
    return policies


async def _play(job: Job, agent: RunAgent, save_observations: bool) -> tuple[dict, dict]:
    """One episode: every agent of a step answers concurrently; returns (result, trajectory)."""
    from teamgym.envs import make

    setting = job.setting
    env = make(setting.env_id, **setting.kwargs)
    digest = hashlib.sha256()
    steps: list[dict[str, Any]] = []
    try:
        obs, infos = env.reset(seed=job.seed)
        digest.update(to_json_line({"observations": obs, "infos": infos}).encode())
        player = agent.episode(env, job.seed)
        mates = _teammates(job, env)
        tracker = EpisodeTracker(env.possible_agents)
        last_info = dict(infos)
        error = None
        while env.agents:
            live = list(env.agents)
            try:
                replies = await _ask_all(
                    [_reply(mates.get(a), player, a, obs[a], last_info[a]) for a in live]
                )
            except AgentError as exc:
                error = str(exc)
                break
            actions = dict(zip(live, replies, strict=True))
            obs, rewards, terms, truncs, infos = env.step(actions)
            step = {
                "actions": actions,
                "observations": obs,
                "rewards": rewards,
                "terminations": terms,
                "truncations": truncs,
                "infos": infos,
            }
            digest.update(to_json_line(step).encode())
            last_info.update(infos)
            tracker.step(rewards, infos)
            kept = {
                "actions": actions,
                "rewards": rewards,
                "events": {a: i.get("events", []) for a, i in infos.items()},
            }
            if save_observations:
                kept["observations"] = obs
            steps.append(kept)
        metrics = None if error else tracker.metrics().to_dict()
        records = list(getattr(player, "records", []))
    finally:
        env.close()
    trajectory = {"key": job.key, "seed": job.seed, "steps": steps, "agent_records": records}
    return _result(job, metrics, error, digest.hexdigest()[:16], len(steps)), trajectory


async def _ask_all(calls: list[Any]) -> list[str]:
    """Every agent's reply, asked at once; when one fails, the others' requests are cancelled
    (not left retrying against the server while the next episodes start)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _reply(policy: Any, player: Any, agent: str, observation: Any, info: Any) -> str:
    """A teammate's scripted reply, or the agent under test's."""
    if policy is not None:
        return policy.act(agent, observation, info)
    return await player.act(agent, observation, info)


def _result(
    job: Job, metrics: dict | None, error: str | None, trajectory_hash: str, steps: int
) -> dict[str, Any]:
    """The ``results.jsonl`` line of an episode (``wall_s`` is added by the caller)."""
    s = job.setting
    return {
        "key": job.key,
        "status": "errored" if error else "ok",
        "error": error,
        "group": s.group,
        "env_id": s.env_id,
        "env_version": _env_version(s.env_id),
        "kwargs": s.kwargs,
        "agent": s.label,
        "agent_config": s.agent.config(),
        "teammates": s.teammates,
        "config_hash": s.config_hash,
        "seed": job.seed,
        "package_version": _package_version(),
        "trajectory_hash": trajectory_hash,
        "steps": steps,
        "metrics": metrics,
    }


class _Agents:
    """Run-wide agents, built on first use (one per agent spec and env) and closed at the end."""

    def __init__(self) -> None:
        self.built: dict[tuple[str, str], RunAgent] = {}

    def get(self, job: Job) -> RunAgent:
        spec = job.setting.agent
        # LLM agents serve every env (one client, one in-flight limit); baselines are per env
        env_key = job.setting.env_id if spec.kind == "baseline" else ""
        key = (spec.digest() + spec.label, env_key)
        if key not in self.built:
            self.built[key] = build_agent(spec, job.setting.env_id)
        return self.built[key]

    async def aclose(self) -> None:
        """Close every agent; LLM clients close inside the loop that used them."""
        for agent in self.built.values():
            aclose = getattr(agent, "aclose", None)
            if aclose is not None:
                await aclose()
            agent.close()


async def _play_all(
    jobs: Sequence[Job],
    concurrency: int,
    save_observations: bool,
    on_done: Callable[[dict, dict], None],
) -> None:
    """Play ``jobs`` with at most ``concurrency`` episodes in flight; ``on_done`` per episode."""
    agents = _Agents()
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Job) -> None:
        async with gate:
            start = time.perf_counter()
            try:
                result, trajectory = await _play(job, agents.get(job), save_observations)
            except AgentError as exc:  # an agent that could not even start its episode
                result = _result(job, None, str(exc), "", 0)
                trajectory = {"key": job.key, "seed": job.seed, "steps": [], "agent_records": []}
            result["wall_s"] = round(time.perf_counter() - start, 4)
            on_done(result, trajectory)

    try:
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        await agents.aclose()


def play_jobs(
    jobs: Sequence[Job], concurrency: int = 1, save_observations: bool = False
) -> list[tuple[dict, dict]]:
    """Play ``jobs`` in this process; returns (result, trajectory) pairs in completion order."""
    out: list[tuple[dict, dict]] = []
    asyncio.run(_play_all(jobs, concurrency, save_observations, lambda r, t: out.append((r, t))))
    return out


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
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
            version := _package_version()
        ):
            warnings.warn(
                f"{run_dir} was started with teamgym {held.get('package_version')}; resuming "
                f"with {version}: its results.jsonl lines each record the version that wrote them",
                stacklevel=2,
            )
        if held.get("suite_hash") != suite.hash:
            raise RunDirError(
                f"{run_dir} holds a run of suite {held.get('suite_name')!r} with other settings "
                f"(hash {held.get('suite_hash')}, this one {suite.hash}); pass --out NEW_DIR, "
                "or delete the directory to start again"
            )
        return
    record = {
        "suite_name": suite.name,
        "suite_hash": suite.hash,
        "suite": suite.source,
        "package_version": _package_version(),
        "episodes": len(suite),
        "settings": [s.config_hash for s in suite.settings],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)  # whole or absent, even if killed here


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
    on_result: Callable[[dict], None] | None = None,
    on_plan: Callable[[RunProgress], None] | None = None,
) -> Path:
    """Play every episode of ``suite`` not yet ``ok`` in ``run_dir`` and append the results
    (``ray_address``: ``"local"`` starts a local Ray instance, else a cluster address);
    returns the run directory."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with _locked(run_dir):
        _check_run_dir(run_dir, suite)
        progress = plan(suite, run_dir)
        if on_plan is not None:
            on_plan(progress)
        results, trajectories = JsonLines(run_dir / RESULTS), JsonLines(run_dir / TRAJECTORIES)

        def done(result: dict, trajectory: dict) -> None:
            trajectories.append(trajectory)  # before the result: a result implies its trajectory
            results.append(result)
            if on_result is not None:
                on_result(result)

        if ray_address is not None:
            from teamgym.benchmarks.ray_runner import play_on_ray

            play_on_ray(progress.todo, ray_address, concurrency, save_observations, done)
        else:
            asyncio.run(_play_all(progress.todo, concurrency, save_observations, done))
    return run_dir


def check_agents(suite: Suite) -> None:
    """Build every LLM agent of the suite once before any episode plays, so a missing model
    directory, a bad URL or an option out of range is reported up front (``ValueError``)."""
    seen: set[str] = set()
    for setting in suite.settings:
        spec = setting.agent
        if spec.kind == "baseline" or spec.digest() + spec.label in seen:
            continue
        seen.add(spec.digest() + spec.label)
        try:
            agent = build_agent(spec, setting.env_id)
        except (ValueError, TypeError, OSError) as exc:
            raise ValueError(f"agent {spec.label}: {exc}") from None
        agent.close()
