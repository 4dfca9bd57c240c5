"""The agents of a suite entry: its ``agents`` list, its scripted ``teammates`` and its
cross-play ``partner`` and ``partner_seats``, each parsed and built once so that a bad name
fails before any episode runs (see :mod:`teamgym.benchmarks.suites` for the file format)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from teamgym.adapters.agents import AgentSpec, parse_agent_spec

__all__ = [
    "ALL_BASELINES",
    "SuiteError",
    "agent_specs",
    "check_baseline_teammates",
    "partner_seats",
    "partner_spec",
]

ALL_BASELINES = "baselines"
"""The agent name that expands to ``random`` plus the env's own scripted baselines."""


class SuiteError(ValueError):
    """A suite file that cannot run: says where and what is allowed."""


def partner_spec(
    entry: Mapping[str, Any], env_id: str, at: str, teammates: Mapping[str, str]
) -> AgentSpec | None:
    """The entry's ``partner``, parsed and (for a baseline) built once; None without one."""
    if "partner" not in entry:
        if "partner_seats" in entry:
            raise SuiteError(f"{at}: 'partner_seats' needs a 'partner'")
        return None
    if teammates:
        raise SuiteError(f"{at}: an entry has 'teammates' or a 'partner', not both")
    written = entry["partner"]
    if written == ALL_BASELINES:
        raise SuiteError(f"{at}: partner: name one agent, not {ALL_BASELINES!r}")
    return _built_spec(env_id, written, f"{at}: partner {written!r}")


def partner_seats(entry: Mapping[str, Any], agents: Sequence[str], at: str) -> tuple[str, ...]:
    """The seats the partner plays: the entry's ``partner_seats``, else every seat but the
    first; at least one seat is left to the agent under test."""
    written = entry.get("partner_seats", list(agents[1:]))
    if isinstance(written, str):
        written = [s.strip() for s in written.split(",") if s.strip()]
    if not isinstance(written, list) or not written:
        raise SuiteError(f"{at}: 'partner_seats' is a non-empty list of agent names")
    unknown = sorted(set(map(str, written)) - set(agents))
    if unknown:
        raise SuiteError(
            f"{at}: partner_seats: no agent(s) {', '.join(unknown)} in this env "
            f"(its agents: {', '.join(agents)})"
        )
    seats = tuple(a for a in agents if a in set(map(str, written)))
    if len(seats) == len(agents):
        raise SuiteError(f"{at}: partner_seats takes every seat; leave one to the agent under test")
    return seats


def check_baseline_teammates(teammates: Mapping[str, str], env_id: str, at: str) -> None:
    """Teammates are scripted baselines (or ``checkpoint:DIR``), each built once now."""
    from teamgym.envs.baselines import make_baseline

    for agent, name in teammates.items():
        if name == ALL_BASELINES:
            raise SuiteError(f"{at}: teammates: {agent}: name one baseline, not {ALL_BASELINES!r}")
        try:
            make_baseline(env_id, name)
        except (ValueError, KeyError, FileNotFoundError) as exc:
            message = exc.args[0] if exc.args else exc
            raise SuiteError(f"{at}: teammates: {agent}={name!r}: {message}") from None


def agent_specs(
    agents: Any, env_id: str, baselines: list[str], at: str, typed: Sequence[str] | None = None
) -> list[AgentSpec]:
    """Parse an ``agents`` list; ``baselines`` expands; baseline names are checked. An error
    names where the agent was written: ``at`` in the file, or its ``--agent`` flag (``typed``,
    one per agent)."""
    if isinstance(agents, (str, dict)):
        agents = [agents]
    if not isinstance(agents, list) or not agents:
        raise SuiteError(f"{at}: 'agents' is a non-empty list of agent specs")
    specs = []
    for i, written in enumerate(agents):
        for agent in ["random", *baselines] if written == ALL_BASELINES else [written]:
            said = f"--agent {typed[i]!r}" if typed else f"{at}: agent {agent!r}"
            specs.append(_built_spec(env_id, agent, said))
    return specs


def _built_spec(env_id: str, written: Any, said: str) -> AgentSpec:
    """``written`` parsed as an agent spec, a baseline built once to check its name; a bad one
    is a :class:`SuiteError` that starts with ``said`` (where it was written)."""
    from teamgym.envs.baselines import make_baseline

    try:
        spec = parse_agent_spec(written)
        if spec.kind == "baseline":
            make_baseline(env_id, spec.options["name"])
    except (ValueError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if exc.args else exc
        raise SuiteError(f"{said}: {message}") from None
    return spec
