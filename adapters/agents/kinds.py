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
  model directory on CPU or GPU, see :mod:`teamgym.adapters.agents.transformers_agent`;
* ``human:NAME`` (or ``human:alice+bob``): people playing through the web page, see
  :mod:`teamgym.web.agent`.

Each kind is one :class:`AgentKind` in a registry (the shipped ones in
:mod:`teamgym.adapters.agents.builtin`, registered when the package is imported; add one with :func:`register_agent_kind`): its options
and their defaults, the option it requires, its string form and default label, and its builder.
:func:`parse_agent_spec` and :func:`build_agent` read nothing else; the LLM kinds share
:class:`~teamgym.adapters.agents.chat.SamplingOptions`.

An agent's default label is its string form, but a model directory (``transformers:DIR``,
``checkpoint:DIR``) is labelled by the model's name, not its path: ``transformers:smollm2``
(:func:`model_name`); :func:`distinct_labels` tells apart two models of one name in a suite.

An agent that cannot answer (a dead server after its retries, a reply that never came) raises
:class:`AgentError`; the runner marks that episode ``errored`` with the reason and goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from teamgym.envs.registration import load_entry_point

__all__ = [
    "AgentError",
    "AgentKind",
    "AgentSpec",
    "EpisodeAgent",
    "RunAgent",
    "agent_kinds",
    "build_agent",
    "distinct_labels",
    "get_agent_kind",
    "model_name",
    "parse_agent_spec",
    "register_agent_kind",
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


@dataclass(frozen=True)
class AgentSpec:
    """A validated agent spec: its ``kind``, a display ``label`` and its ``options`` (those the
    spec sets; :meth:`option` fills in the kind's defaults)."""

    kind: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """What identifies the agent's behaviour (hashed into the config fingerprint): kind and
        options, minus those that only change how it is reached (:attr:`AgentKind.reach`)."""
        reach = get_agent_kind(self.kind).reach
        return {
            "kind": self.kind,
            **{k: v for k, v in sorted(self.options.items()) if k not in reach},
        }

    def option(self, name: str) -> Any:
        """The value of option ``name``: the spec's own, else its kind's default."""
        return self.options.get(name, get_agent_kind(self.kind).defaults[name])


@dataclass(frozen=True)
class AgentKind:
    """One kind of agent, declared once: the options its specs may set and their defaults,
    how a spec is completed and labelled, and how its run-wide agent is built.

    A spec of this kind is ``{kind: NAME, REQUIRED: VALUE, ...}`` or the string
    ``PREFIX + VALUE``, which is also its default label.
    """

    name: str
    """The spec's ``kind``."""
    required: str
    """The option every spec of this kind must set (``name``, ``model``, ``path``)."""
    defaults: Mapping[str, Any]
    """Every other option, in the order error messages list them, with its default (the
    agent reads it with :meth:`AgentSpec.option`; None where the agent decides)."""
    prefix: str
    """The string form's prefix (``openai:``); the default label is ``prefix + required``
    (with a model directory named, :attr:`model`)."""
    build: str | Callable[[AgentSpec, str], RunAgent]
    """Builds the run-wide agent of a spec for an env id: a callable, or a lazy
    ``"module:attr"`` entry point naming one (the LLM kinds: their extras load when an agent is
    built, so importing this module stays light)."""
    resolve: Callable[[dict[str, Any]], None] | None = None
    """Completes a spec's options in place when it is parsed (an absolute path, the URL)."""
    from_string: Callable[[str], dict[str, Any]] | None = None
    """The options of the string form after its prefix (None: that text is ``required``)."""
    reach: frozenset[str] = frozenset()
    """Options that only change how the agent is reached (address, key, concurrency,
    timeouts): left out of :meth:`AgentSpec.config`, so they never change a fingerprint."""
    model: Callable[[Mapping[str, Any]], str | None] | None = None
    """The model directory a spec's (completed) options name, if any (``transformers:DIR``,
    ``checkpoint:DIR``): the default label then ends with the model's name, not its path."""

    @property
    def options(self) -> tuple[str, ...]:
        """Every option a spec of this kind may set besides ``kind`` and ``label``."""
        return (self.required, *self.defaults)

    def default_label(self, options: Mapping[str, Any], depth: int = 0) -> str:
        """The label of a spec that sets none: its string form, ``prefix + required``, with a
        model directory's path replaced by :func:`model_name` (``depth`` > 0: by the path's last
        ``depth`` parts, what :func:`distinct_labels` falls back to)."""
        string = f"{self.prefix}{options[self.required]}"
        path = self.model(options) if self.model is not None else None
        if not path or not string.endswith(path):
            return string
        shown = "/".join(Path(path).parts[-depth:]) if depth else model_name(path)
        return string.removesuffix(path) + shown


_KINDS: dict[str, AgentKind] = {}


def register_agent_kind(kind: AgentKind) -> AgentKind:
    """Make ``kind`` available to specs; a name already taken raises ``ValueError``."""
    if kind.name in _KINDS:
        raise ValueError(f"agent kind {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def get_agent_kind(name: str) -> AgentKind:
    """The registered kind ``name``; ``ValueError`` listing the kinds there are."""
    if name not in _KINDS:
        raise ValueError(f"unknown agent kind {name!r}; allowed: {', '.join(_KINDS)}")
    return _KINDS[name]


def agent_kinds() -> tuple[str, ...]:
    """The registered kinds' names, in registration order."""
    return tuple(_KINDS)


def parse_agent_spec(spec: str | Mapping[str, Any]) -> AgentSpec:
    """A spec string or mapping as an :class:`AgentSpec`; unknown kinds or keys are errors
    (``ValueError``) that list what is allowed."""
    if isinstance(spec, str):
        return _parse_string(spec)
    if not isinstance(spec, Mapping):
        raise ValueError(f"an agent is a name or a mapping, got {type(spec).__name__}: {spec!r}")
    options = dict(spec)
    kind = get_agent_kind(str(options.pop("kind", "baseline")))
    label = options.pop("label", None)
    unknown = sorted(set(options) - set(kind.options))
    if unknown:
        raise ValueError(
            f"agent kind {kind.name!r} has no option(s) {', '.join(unknown)}; allowed: "
            f"label, {', '.join(kind.options)}"
        )
    if kind.required not in options:
        raise ValueError(f"agent kind {kind.name!r} needs {kind.required!r}")
    if kind.resolve is not None:
        kind.resolve(options)
    return AgentSpec(kind.name, str(label or kind.default_label(options)), options)


def model_name(path: str | Path) -> str:
    """What a model directory is called in labels: the ``name`` of its ``teamgym_model.json``
    (``teamgym model import smollm2`` writes ``smollm2``), else the directory's own name. Read
    once when a spec is parsed; a missing or unreadable manifest is no error here (building the
    agent reports a missing model)."""
    from teamgym.adapters.agents.pretrained import MANIFEST

    path = Path(path)
    try:
        name = json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        name = None
    if isinstance(name, str) and name.strip() and "\n" not in name:
        return name.strip()
    return path.name or str(path)


def distinct_labels(specs: Sequence[AgentSpec]) -> list[AgentSpec]:
    """``specs`` with each set of model agents that share a default label but not a model
    directory (two imports named ``smollm2``, ``a/model`` and ``b/model``) labelled by the
    fewest trailing parts of their paths that tell them apart (``transformers:a/model``). A
    spec given its own ``label``, or one the same agent as another (same config), is kept."""
    first: dict[str, AgentSpec] = {}
    for spec in specs:
        first.setdefault(_identity(spec), spec)
    by_label: dict[str, list[AgentSpec]] = {}
    for spec in first.values():
        by_label.setdefault(spec.label, []).append(spec)
    renamed: dict[str, str] = {}
    for same in by_label.values():
        kinds = [get_agent_kind(s.kind) for s in same]
        paths = [k.model(s.options) if k.model else None for k, s in zip(kinds, same, strict=True)]
        models = [
            (s, k, p)
            for s, k, p in zip(same, kinds, paths, strict=True)
            if p is not None and s.label == k.default_label(s.options)
        ]
        if len({p for _, _, p in models}) < 2:
            continue
        deepest = max(len(Path(p).parts) for _, _, p in models)
        for depth in range(1, deepest + 1):
            labels = {p: k.default_label(s.options, depth) for s, k, p in models}
            if len(set(labels.values())) == len(labels):
                break
        renamed.update({_identity(s): labels[p] for s, _, p in models})
    return [
        replace(s, label=renamed[_identity(s)]) if _identity(s) in renamed else s for s in specs
    ]


def _identity(spec: AgentSpec) -> str:
    """One agent's identity: its label and config (kind and options), canonically."""
    return json.dumps([spec.label, spec.config()], sort_keys=True, default=str)


def _parse_string(spec: str) -> AgentSpec:
    """``random`` / ``expert`` / ``checkpoint:DIR`` / ``openai:MODEL@URL`` / ``transformers:DIR``."""
    spec = spec.strip()
    if not spec:
        raise ValueError("empty agent spec")
    for kind in _KINDS.values():
        if kind.prefix and spec.startswith(kind.prefix):
            rest = spec.removeprefix(kind.prefix)
            options = kind.from_string(rest) if kind.from_string else {kind.required: rest}
            return parse_agent_spec({"kind": kind.name, **options})
    return parse_agent_spec({"kind": "baseline", "name": spec})


def build_agent(spec: AgentSpec, env_id: str) -> RunAgent:
    """The run-wide agent of ``spec`` for ``env_id``, built by its kind."""
    build: Callable[[AgentSpec, str], RunAgent] = load_entry_point(get_agent_kind(spec.kind).build)
    return build(spec, env_id)
