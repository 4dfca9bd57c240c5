"""Benchmark suites: which envs (with which arguments), which agents, which seeds.

A suite is a YAML file; the shipped ones (``smoke``, ``default``, ``full``) live next to this
module in ``suites/`` and are named without a path. Top-level keys:

* ``name``, ``description``;
* ``seed`` (first episode seed, default ``EVAL_SEED_BASE``) and ``episodes`` (per env entry,
  agent and setting);
* ``agents``: a list of agent specs (see :mod:`teamgym.adapters.agents`); ``baselines`` stands
  for ``random`` plus every scripted baseline the env registered;
* ``envs``: a list of entries, each ``id`` plus optional ``kwargs`` (constructor arguments),
  ``sweep`` (argument -> list of values: one setting per combination), ``agents``,
  ``episodes``, ``seed``, ``teammates`` (agent name -> baseline that plays it instead of
  the agent under test) and ``partner`` (any agent spec, a baseline, ``checkpoint:DIR`` or an
  LLM agent, that plays ``partner_seats``, by default every seat but the first, beside each
  agent under test: cross-play, see :mod:`teamgym.benchmarks.crossplay`).

Unknown keys are errors that list the allowed ones; every env, argument and baseline is
checked by building it once, before any episode runs. :meth:`Suite.jobs` expands the suite
into :class:`Job` s, one per episode, each with a stable ``key`` that names it in
``results.jsonl``.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from teamgym.adapters.agents import AgentSpec
from teamgym.adapters.agents.kinds import distinct_labels
from teamgym.benchmarks.suite_agents import (
    ALL_BASELINES,
    SuiteError,
    agent_specs,
    check_baseline_teammates,
    partner_seats,
    partner_spec,
)
from teamgym.envs.lineup import check_teammates
from teamgym.envs.seeds import episode_seeds
from teamgym.names import EVAL_SEED_BASE

__all__ = [
    "ALL_BASELINES",
    "Job",
    "Setting",
    "Suite",
    "SuiteError",
    "inline_agent",
    "load_suite",
    "parse_suite",
    "shipped_suites",
]

_TOP_KEYS = ("name", "description", "seed", "episodes", "agents", "envs")
_ENTRY_KEYS = (
    "id",
    "kwargs",
    "sweep",
    "agents",
    "episodes",
    "seed",
    "teammates",
    "partner",
    "partner_seats",
)


def digest(obj: Any, n: int = 12) -> str:
    """Short SHA-256 of canonical JSON (sorted keys, compact separators): the hashes that name
    settings, runs and run-wide agents. Config hashes and suite hashes are stored in run
    directories, so these bytes must never change."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:n]


@dataclass(frozen=True)
class Setting:
    """One env with fixed arguments, one agent (and teammates) and its episodes' seeds."""

    env_id: str
    kwargs: dict[str, Any]
    agent: AgentSpec
    teammates: dict[str, str]
    seeds: tuple[int, ...]
    partner: AgentSpec | None = None
    """Cross-play: the agent that plays :attr:`partner_seats` (one player for them all)."""
    partner_seats: tuple[str, ...] = ()
    """The seats the partner plays; the agent under test plays the others."""

    @property
    def label(self) -> str:
        """The agent's display name, with its teammates or partner if any."""
        mates = ",".join(f"{a}={b}" for a, b in sorted(self.teammates.items()))
        if self.partner is not None:
            mates = f"{','.join(self.partner_seats)}={self.partner.label}"
        return f"{self.agent.label}+{mates}" if mates else self.agent.label

    @property
    def config(self) -> dict[str, Any]:
        """Everything that decides the episodes' behaviour (the config fingerprint's input;
        a setting without a partner hashes as it did before partners existed)."""
        config = {
            "env_id": self.env_id,
            "kwargs": self.kwargs,
            "agent": self.agent.config(),
            "teammates": self.teammates,
        }
        if self.partner is not None:
            config["partner"] = self.partner.config()
            config["partner_seats"] = list(self.partner_seats)
        return config

    @property
    def config_hash(self) -> str:
        """Short hash of :attr:`config`."""
        return digest(self.config)

    @property
    def group(self) -> str:
        """The row this setting's episodes are summarised in (env, arguments, agent)."""
        args = ",".join(f"{k}={v}" for k, v in sorted(self.kwargs.items()))
        return f"{self.env_id}[{args}] {self.label}" if args else f"{self.env_id} {self.label}"


@dataclass(frozen=True)
class Job:
    """One episode to play."""

    setting: Setting
    seed: int

    @property
    def key(self) -> str:
        """Names the episode in ``results.jsonl``: config hash and seed."""
        return f"{self.setting.env_id}/{self.setting.config_hash}/{self.seed}"


@dataclass(frozen=True)
class Suite:
    """A validated suite (see the module docstring)."""

    name: str
    description: str
    settings: tuple[Setting, ...]
    source: dict[str, Any] = field(repr=False)
    """The suite as loaded, with command-line overrides applied (stored in ``run.json``)."""

    @property
    def hash(self) -> str:
        """Short hash of every setting: a run directory belongs to one suite hash."""
        return digest([[s.config, list(s.seeds)] for s in self.settings])

    def jobs(self) -> Iterator[Job]:
        """Every episode, setting by setting, seeds in order."""
        for setting in self.settings:
            for seed in setting.seeds:
                yield Job(setting, seed)

    def __len__(self) -> int:
        return sum(len(s.seeds) for s in self.settings)


def shipped_suites() -> dict[str, Path]:
    """The suites that come with the package, by name."""
    folder = resources.files("teamgym.benchmarks") / "suites"
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def load_suite(
    name_or_path: str,
    *,
    agents: Sequence[str] | None = None,
    envs: Sequence[str] | None = None,
    episodes: int | None = None,
    seed: int | None = None,
) -> Suite:
    """Read and validate a suite by shipped name or path; ``agents`` / ``episodes`` / ``seed``
    replace the suite's everywhere and ``envs`` keeps only those ids (command-line flags)."""
    import yaml

    shipped = shipped_suites()
    path = shipped.get(name_or_path) or Path(name_or_path)
    if not path.is_file():
        close = difflib.get_close_matches(name_or_path, sorted(shipped), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise SuiteError(
            f"no suite {name_or_path!r}: not a shipped suite ({', '.join(sorted(shipped))}) "
            f"and not a YAML file.{hint}"
        )
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: a suite is a mapping with keys {', '.join(_TOP_KEYS)}")
    raw.setdefault("name", path.stem)
    if agents:  # flags: names, or inline YAML mappings ("{kind: openai, model: m, ...}")
        raw["agents"] = [inline_agent(a) for a in agents]
    if episodes is not None:
        raw["episodes"] = episodes
    if seed is not None:
        raw["seed"] = seed
    for entry in raw.get("envs") or []:
        if isinstance(entry, dict):  # a flag replaces the entries' own values too
            for key, given in (("agents", agents), ("episodes", episodes), ("seed", seed)):
                if given is not None and given != []:
                    entry.pop(key, None)
    if envs:
        entries = [e for e in raw.get("envs") or [] if isinstance(e, dict)]
        known = {e.get("id") for e in entries}
        missing = sorted(set(envs) - known)
        if missing:
            raise SuiteError(
                f"--env {', '.join(missing)}: not in suite {raw['name']!r} "
                f"(its envs: {', '.join(sorted(map(str, known)))})"
            )
        raw["envs"] = [e for e in entries if e.get("id") in set(envs)]
    return parse_suite(raw, where=str(path), flag_agents=agents or None)


def inline_agent(spec: str) -> Any:
    """An ``--agent`` value: a mapping when written as inline YAML, else the string itself."""
    import yaml

    if not spec.lstrip().startswith("{"):
        return spec
    try:
        return yaml.safe_load(spec)
    except yaml.YAMLError as exc:
        raise SuiteError(f"--agent {spec!r}: not a YAML mapping: {exc}") from None


def _unknown(keys: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    extra = sorted(set(keys) - set(allowed))
    if extra:
        raise SuiteError(
            f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}"
        )


def _positive(value: Any, what: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SuiteError(f"{where}: {what} must be a positive integer, got {value!r}")
    return value


def parse_suite(
    raw: Mapping[str, Any], where: str = "suite", *, flag_agents: Sequence[str] | None = None
) -> Suite:
    """Validate a suite mapping (see the module docstring) into a :class:`Suite`;
    ``flag_agents``: the ``--agent`` values, as typed, that replaced its ``agents`` (an error
    about one names the flag, not the file)."""
    _unknown(raw, _TOP_KEYS, where)
    entries = raw.get("envs")
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{where}: 'envs' must be a non-empty list of entries with an 'id'")
    default_episodes = _positive(raw.get("episodes", 10), "episodes", where)
    default_seed = raw.get("seed", EVAL_SEED_BASE)
    if not isinstance(default_seed, int) or isinstance(default_seed, bool) or default_seed < 0:
        raise SuiteError(f"{where}: seed must be a non-negative integer, got {default_seed!r}")
    default_agents = raw.get("agents", [ALL_BASELINES])
    settings: list[Setting] = []
    for i, entry in enumerate(entries):
        at = f"{where}: envs[{i}]"
        if not isinstance(entry, dict) or "id" not in entry:
            raise SuiteError(f"{at}: an entry is a mapping with an 'id'; got {entry!r}")
        _unknown(entry, _ENTRY_KEYS, at)
        typed = None if "agents" in entry else flag_agents
        settings.extend(
            _entry_settings(entry, at, default_episodes, default_seed, default_agents, typed)
        )
    settings = _distinct_labels(settings)
    seen: dict[str, str] = {}
    for s in settings:
        if s.config_hash in seen:
            raise SuiteError(
                f"{where}: the setting {s.group!r} appears twice (two agents with one label? "
                "give each a distinct 'label:')"
            )
        seen[s.config_hash] = s.group
    return Suite(
        str(raw.get("name", "suite")), str(raw.get("description", "")), tuple(settings), dict(raw)
    )


def _distinct_labels(settings: list[Setting]) -> list[Setting]:
    """The settings with two models of one name told apart in their labels
    (:func:`~teamgym.adapters.agents.kinds.distinct_labels`), agents and partners alike."""
    specs = [spec for s in settings for spec in (s.agent, s.partner) if spec is not None]
    labelled = iter(distinct_labels(specs))
    out = []
    for s in settings:
        agent = next(labelled)
        partner = next(labelled) if s.partner is not None else None
        out.append(dataclasses.replace(s, agent=agent, partner=partner))
    return out


def _entry_settings(
    entry: Mapping[str, Any],
    at: str,
    episodes: int,
    seed: int,
    agents: Any,
    typed: Sequence[str] | None = None,
) -> list[Setting]:
    """Expand one ``envs`` entry: its sweep's combinations times its agents (``typed``: the
    ``--agent`` flags they came from)."""
    from teamgym.envs import make, spec

    env_id = str(entry["id"])
    try:
        env_spec = spec(env_id)
    except KeyError as exc:
        raise SuiteError(f"{at}: {exc.args[0]}") from None
    base = entry.get("kwargs") or {}
    sweep = entry.get("sweep") or {}
    if not isinstance(base, dict) or not isinstance(sweep, dict):
        raise SuiteError(f"{at}: 'kwargs' and 'sweep' are mappings")
    if any(not isinstance(v, list) or not v for v in sweep.values()):
        raise SuiteError(f"{at}: every 'sweep' value is a non-empty list")
    episodes = _positive(entry.get("episodes", episodes), "episodes", at)
    first = entry.get("seed", seed)
    if not isinstance(first, int) or isinstance(first, bool) or first < 0:
        raise SuiteError(f"{at}: seed must be a non-negative integer, got {first!r}")
    seeds = tuple(episode_seeds(first, episodes))
    teammates = {str(k): str(v) for k, v in (entry.get("teammates") or {}).items()}
    check_baseline_teammates(teammates, env_id, at)
    specs = agent_specs(entry.get("agents", agents), env_id, list(env_spec.baselines), at, typed)
    partner = partner_spec(entry, env_id, at, teammates)
    out = []
    names = list(sweep)
    for values in itertools.product(*sweep.values()):
        kwargs = {**base, **dict(zip(names, values, strict=True))}
        try:
            env = make(env_id, **kwargs)
        except (TypeError, ValueError, KeyError) as exc:
            raise SuiteError(f"{at}: {env_id} with {kwargs}: {exc}") from None
        agents_of_env = list(env.possible_agents)
        env.close()
        try:
            check_teammates(teammates, agents_of_env)
        except ValueError as exc:
            raise SuiteError(f"{at}: {exc}") from None
        seats = partner_seats(entry, agents_of_env, at) if partner is not None else ()
        for agent in specs:
            out.append(Setting(env_id, kwargs, agent, teammates, seeds, partner, seats))
    return out
