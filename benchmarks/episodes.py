"""Play benchmark episodes: each job is one episode, played into its ``results.jsonl`` line
(see :func:`_result` for the fields) and its trajectory.

The in-process runner (:func:`teamgym.benchmarks.runner.run_suite`) and the Ray tasks
(:mod:`teamgym.benchmarks.ray_runner`) both play through :func:`play_all` / :func:`play_jobs`,
so the imports point one way: ``runner -> ray_runner -> episodes`` and ``runner -> episodes``.
Every agent of a step answers concurrently; scripted teammates are seated by
:class:`~teamgym.envs.lineup.Lineup`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from teamgym.adapters.agents import AgentError, AgentSpec, RunAgent, build_agent
from teamgym.benchmarks.suites import Job, digest
from teamgym.envs.lineup import Lineup
from teamgym.envs.metrics import EpisodeTracker
from teamgym.envs.wrappers.recorder import to_json_line

__all__ = ["package_version", "play_all", "play_jobs"]


def package_version() -> str:
    """The installed teamgym version, recorded in every result line."""
    from teamgym import __version__

    return __version__


def _env_version(env_id: str) -> int | None:
    match = re.search(r"-v(\d+)$", env_id)
    return int(match.group(1)) if match else None


def _teammates(job: Job, env: Any) -> dict[str, Any]:
    """The scripted teammates of one episode, seated by :class:`Lineup` (the agent under test
    holds slot 0): teammates each their own policy in slots 1, 2, ... in agent-name order; a
    scripted cross-play partner (a baseline or ``checkpoint:DIR``) one policy for all its
    seats, in slot 1, so its random stream is never the agent's."""
    setting = job.setting
    partner = setting.partner
    if partner is not None and partner.kind == "baseline":
        seats = dict.fromkeys(setting.partner_seats, partner.options["name"])
        return (
            Lineup.build(setting.env_id, seats, share=True, first_stream=1)
            .start(env, job.seed)
            .policies
        )
    seats = dict(sorted(setting.teammates.items()))
    return Lineup.build(setting.env_id, seats, first_stream=1).start(env, job.seed).policies


async def _play(
    job: Job, agent: RunAgent, save_observations: bool, partner: RunAgent | None = None
) -> tuple[dict, dict]:
    """One episode: every agent of a step answers concurrently; ``partner``, a cross-play
    partner that is not scripted (an LLM agent), plays the setting's ``partner_seats``;
    returns (result, trajectory)."""
    from teamgym.envs import make

    setting = job.setting
    env = make(setting.env_id, **setting.kwargs)
    digest = hashlib.sha256()
    steps: list[dict[str, Any]] = []
    try:
        obs, infos = env.reset(seed=job.seed)
        digest.update(to_json_line({"observations": obs, "infos": infos}).encode())
        player = agent.episode(env, job.seed)
        players = dict.fromkeys(env.possible_agents, player)
        distinct = [player]
        if partner is not None:
            distinct.append(partner.episode(env, job.seed))
            players.update(dict.fromkeys(setting.partner_seats, distinct[-1]))
        for p in distinct:  # agents that want the episode's key (the ``human`` kind's page)
            hook = getattr(p, "started", None)
            if hook is not None:
                hook(job.key, setting.partner.label if setting.partner is not None else "")
        mates = _teammates(job, env)
        tracker = EpisodeTracker(env.possible_agents)
        last_info = dict(infos)
        error = None
        while env.agents:
            live = list(env.agents)
            try:
                replies = await _ask_all(
                    [_reply(mates.get(a), players[a], a, obs[a], last_info[a]) for a in live]
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
        for p in distinct:
            hook = getattr(p, "finished", None)
            if hook is not None:
                hook(metrics, error)
        records = [r for p in distinct for r in getattr(p, "records", [])]  # agent, then partner
    finally:
        env.close()
    trajectory = {"key": job.key, "seed": job.seed, "steps": steps, "agent_records": records}
    result = _result(job, metrics, error, digest.hexdigest()[:16], len(steps))
    usage = llm_usage(getattr(player, "records", []))
    if usage is not None:  # LLM agents only: baselines' lines stay as they were
        result["llm"] = usage
    return result, trajectory


def llm_usage(records: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """The agent under test's replies and tokens in one episode (its chat records: the
    ``transformers`` kind's ``prompt_tokens``/``completion_tokens``, the ``openai`` kind's
    ``usage``); None for an agent that keeps no records (a baseline)."""
    if not records or all(r.get("kind") == "human" for r in records):
        return None
    total = {"replies": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for r in records:
        counts = r.get("usage") or r
        total["replies"] += r.get("reply") is not None
        for key in ("prompt_tokens", "completion_tokens"):
            total[key] += int(counts.get(key) or 0)
    return total


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
    partner = {}
    if s.partner is not None:  # only cross-play lines carry these (the others stay as they were)
        partner = {"partner": s.partner.label, "partner_seats": list(s.partner_seats)}
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
        **partner,
        "config_hash": s.config_hash,
        "seed": job.seed,
        "package_version": package_version(),
        "trajectory_hash": trajectory_hash,
        "steps": steps,
        "metrics": metrics,
    }


class _Agents:
    """Run-wide agents, built on first use (one per agent spec and env) and closed at the end."""

    def __init__(self) -> None:
        self.built: dict[tuple[str, str], RunAgent] = {}

    def get(self, spec: AgentSpec, env_id: str) -> RunAgent:
        """The run-wide agent of ``spec`` (for ``env_id``), built on first use."""
        # LLM agents serve every env (one client, one in-flight limit); baselines are per env
        env_key = env_id if spec.kind == "baseline" else ""
        key = (digest(spec.config()) + spec.label, env_key)
        if key not in self.built:
            self.built[key] = build_agent(spec, env_id)
        return self.built[key]

    async def aclose(self) -> None:
        """Close every agent; LLM clients close inside the loop that used them."""
        for agent in self.built.values():
            aclose = getattr(agent, "aclose", None)
            if aclose is not None:
                await aclose()
            agent.close()


async def play_all(
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
            setting = job.setting
            try:
                partner = setting.partner  # a scripted one is seated by _teammates
                llm = None if partner is None or partner.kind == "baseline" else partner
                agent = agents.get(setting.agent, setting.env_id)
                other = None if llm is None else agents.get(llm, setting.env_id)
                result, trajectory = await _play(job, agent, save_observations, other)
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
    asyncio.run(play_all(jobs, concurrency, save_observations, lambda r, t: out.append((r, t))))
    return out
