"""Agents the benchmark runner plays: one interface for scripted baselines and LLMs.

An *agent* is built once per run from a spec (:func:`build_agent`) and hands out one
:class:`EpisodeAgent` per episode (``agent.episode(seed)``), so LLM clients share their
connection pool and concurrency limit across episodes while each episode keeps its own chats
and its own log of requests and replies. ``await episode.act(agent, observation, info)``
returns the reply text; the runner queries every agent of a step concurrently.

Specs, in a suite file or on the command line:

* a baseline name: ``random``, an env's own (``expert``, ``freerider``...), or
  ``checkpoint:DIR`` (a frozen model directory, greedy);
* ``{kind: openai, model: NAME, base_url: URL, ...}`` (or the string ``openai:MODEL@URL``): any
  OpenAI-compatible chat server (vLLM, SGLang, a hosted API; ``teamgym serve`` for a local
  model), see :mod:`teamgym.adapters.agents.openai_agent`;
* ``{kind: transformers, path: DIR, ...}`` (or ``transformers:DIR``): a local Hugging Face
  model directory on CPU or GPU, see :mod:`teamgym.adapters.agents.transformers_agent`.

An agent that cannot answer (a dead server after its retries, a reply that never came) raises
:class:`AgentError`; the runner marks that episode ``errored`` with the reason and goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from teamgym.envs.baselines import Policy, make_baseline
from teamgym.names import CHECKPOINT_PREFIX

__all__ = [
    "AgentError",
    "AgentSpec",
    "BaselineAgent",
    "EpisodeAgent",
    "RunAgent",
    "build_agent",
    "parse_agent_spec",
]


class AgentError(RuntimeError):
    """An agent could not produce a reply (server unreachable, retries exhausted, timeout): the
    episode is recorded as ``errored`` with this message, never as a silent zero score."""


@runtime_checkable
class EpisodeAgent(Protocol):
    """Plays the agents of one episode."""

    records: list[dict[str, Any]]
    """Every request and reply of the episode (LLM agents), in order; saved with the
    trajectory. Empty for scripted baselines."""

    async def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The reply of ``agent`` to its observation; raises :class:`AgentError` if none."""
        ...


@runtime_checkable
class RunAgent(Protocol):
    """Built once per run; one :class:`EpisodeAgent` per episode."""

    spec: AgentSpec

    def episode(self, env: Any, seed: int) -> EpisodeAgent:
        """A fresh player for the episode of ``env`` (unwrapped env given for privileged
        baselines) on ``seed``; deterministic in ``seed``."""
        ...

    def close(self) -> None:
        """Release clients, models, pools."""
        ...


AGENT_KINDS = ("baseline", "openai", "transformers")
_OPTIONS: dict[str, tuple[str, ...]] = {
    "baseline": ("name",),
    "openai": (
        "model",
        "base_url",
        "api_key_env",
        "concurrency",
        "timeout",
        "max_retries",
        "backoff",
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
    ),
    "transformers": (
        "path",
        "device",
        "temperature",
        "top_p",
        "max_tokens",
        "max_prompt_tokens",
        "seed",
    ),
}


@dataclass(frozen=True)
class AgentSpec:
    """A validated agent spec: its ``kind``, a display ``label`` and its ``options``."""

    kind: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """What identifies the agent's behaviour (hashed into the config fingerprint): kind and
        options, minus what only changes how it is reached (keys, concurrency, timeouts)."""
        skip = {"api_key_env", "concurrency", "timeout", "max_retries", "backoff", "base_url"}
        return {
            "kind": self.kind,
            **{k: v for k, v in sorted(self.options.items()) if k not in skip},
        }

    def digest(self) -> str:
        """Short hash of :meth:`config`."""
        blob = json.dumps(self.config(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def parse_agent_spec(spec: str | Mapping[str, Any]) -> AgentSpec:
    """A spec string or mapping as an :class:`AgentSpec`; unknown kinds or keys are errors
    (``ValueError``) that list what is allowed."""
    if isinstance(spec, str):
        return _parse_string(spec)
    if not isinstance(spec, Mapping):
        raise ValueError(f"an agent is a name or a mapping, got {type(spec).__name__}: {spec!r}")
    options = dict(spec)
    kind = str(options.pop("kind", "baseline"))
    label = options.pop("label", None)
    if kind not in _OPTIONS:
        raise ValueError(f"unknown agent kind {kind!r}; allowed: {', '.join(AGENT_KINDS)}")
    unknown = sorted(set(options) - set(_OPTIONS[kind]))
    if unknown:
        raise ValueError(
            f"agent kind {kind!r} has no option(s) {', '.join(unknown)}; allowed: "
            f"label, {', '.join(_OPTIONS[kind])}"
        )
    required = {"baseline": "name", "openai": "model", "transformers": "path"}[kind]
    if required not in options:
        raise ValueError(f"agent kind {kind!r} needs {required!r}")
    if kind == "openai":
        options.setdefault("base_url", "http://127.0.0.1:8000/v1")
    if kind == "transformers":  # absolute: the same model from any working directory or node
        options["path"] = str(Path(str(options["path"])).expanduser().resolve())
    if kind == "baseline" and str(options["name"]).startswith(CHECKPOINT_PREFIX):
        path = Path(str(options["name"]).removeprefix(CHECKPOINT_PREFIX)).expanduser().resolve()
        options["name"] = f"{CHECKPOINT_PREFIX}{path}"
    default_label = {
        "baseline": str(options.get("name")),
        "openai": f"openai:{options.get('model')}",
        "transformers": f"transformers:{options.get('path')}",
    }[kind]
    return AgentSpec(kind, str(label or default_label), options)


def _parse_string(spec: str) -> AgentSpec:
    """``random`` / ``expert`` / ``checkpoint:DIR`` / ``openai:MODEL@URL`` / ``transformers:DIR``."""
    spec = spec.strip()
    if not spec:
        raise ValueError("empty agent spec")
    if spec.startswith("openai:"):
        model, _, url = spec.removeprefix("openai:").partition("@")
        return parse_agent_spec(
            {"kind": "openai", "model": model, **({"base_url": url} if url else {})}
        )
    if spec.startswith("transformers:"):
        return parse_agent_spec(
            {"kind": "transformers", "path": spec.removeprefix("transformers:")}
        )
    return parse_agent_spec({"kind": "baseline", "name": spec})


class _BaselineEpisode:
    """A scripted policy behind the async interface (it answers at once)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.records: list[dict[str, Any]] = []

    async def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        return self.policy.act(agent, observation, info)


class BaselineAgent:
    """A scripted baseline (or ``checkpoint:DIR``): a fresh policy per episode, bound to the env
    and reset exactly as :func:`teamgym.envs.baselines.run_episode` does, so its episodes
    reproduce ``teamgym baselines`` byte for byte."""

    def __init__(self, spec: AgentSpec, env_id: str) -> None:
        self.spec = spec
        self.env_id = env_id
        make_baseline(env_id, spec.options["name"])  # unknown names fail now, not mid-run

    def episode(self, env: Any, seed: int) -> EpisodeAgent:
        policy = make_baseline(self.env_id, self.spec.options["name"])
        if hasattr(policy, "bind"):
            policy.bind(env)
        policy.reset(seed * 1000)
        return _BaselineEpisode(policy)

    def close(self) -> None:
        """Nothing held."""


def build_agent(spec: AgentSpec, env_id: str) -> RunAgent:
    """The run-wide agent of ``spec`` for ``env_id`` (LLM kinds import their extras here)."""
    if spec.kind == "baseline":
        return BaselineAgent(spec, env_id)
    if spec.kind == "openai":
        from teamgym.adapters.agents.openai_agent import OpenAIAgent

        return OpenAIAgent(spec)
    if spec.kind == "transformers":
        from teamgym.adapters.agents.transformers_agent import TransformersAgent

        return TransformersAgent(spec)
    raise ValueError(f"unknown agent kind {spec.kind!r}")
