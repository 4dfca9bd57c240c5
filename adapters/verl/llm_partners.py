"""Frozen LLM partners in training episodes: seats played by an OpenAI-compatible server or a
local model, never by the model being trained (docs: Frozen and LLM partners).

Scripted teammates stay with :class:`~teamgym.envs.lineup.Lineup`; the LLM kinds
(``openai:MODEL@URL``, ``transformers:DIR``, or their mapping form as JSON) are built here once
per process and spec (so a server's connection pool is shared across the episodes a worker
plays). A partner that cannot answer raises :class:`PartnerFailed`: the episode ends as a crashed
one does.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from teamgym.adapters.agents.kinds import (
    AgentError,
    EpisodeAgent,
    RunAgent,
    build_agent,
    parse_agent_spec,
)
from teamgym.envs.partners import SELF

if TYPE_CHECKING:
    from teamgym.envs.partners import PartnerPool

__all__ = [
    "PARTNER_METRICS",
    "LLMPartners",
    "PartnerFailed",
    "check_partner_pools",
    "is_llm_partner",
    "partner_source",
    "partner_spec",
    "split_teammates",
]

#: The partner figures every episode-loop output carries (0 without LLM partners).
PARTNER_METRICS = ("partner_replies", "partner_latency_s")

_AGENTS: dict[tuple[str, str], RunAgent] = {}
_AGENTS_LOCK = threading.Lock()


class PartnerFailed(RuntimeError):
    """An LLM partner gave no reply: the episode cannot go on and is not trained on."""


def partner_spec(text: str) -> Any:
    """A teammate spec as the row stores it: a string, or a mapping as JSON (for options the
    string form cannot set, e.g. ``{"kind": "openai", ..., "max_retries": 0}``)."""
    stripped = text.strip()
    return json.loads(stripped) if stripped.startswith("{") else stripped


def is_llm_partner(spec: str) -> bool:
    """Whether a teammate spec is an LLM agent (played here), not a scripted one (Lineup) nor
    :data:`~teamgym.envs.partners.SELF` (the trained model)."""
    return spec != SELF and parse_agent_spec(partner_spec(spec)).kind != "baseline"


def split_teammates(teammates: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(scripted, llm)``: the seats Lineup plays and the seats :class:`LLMPartners` plays."""
    scripted: dict[str, str] = {}
    llm: dict[str, str] = {}
    for agent, spec in teammates.items():
        (llm if is_llm_partner(spec) else scripted)[agent] = spec
    return scripted, llm


def _run_agent(env_id: str, spec: str) -> RunAgent:
    """The process's agent for ``spec`` on ``env_id``, built on first use."""
    key = (env_id, spec)
    with _AGENTS_LOCK:
        if key not in _AGENTS:
            _AGENTS[key] = build_agent(parse_agent_spec(partner_spec(spec)), env_id)
        return _AGENTS[key]


class LLMPartners:
    """The LLM partners of one episode: one :class:`EpisodeAgent` per distinct spec, seeded
    with the episode seed (the training rule of every teammate), playing its seats."""

    def __init__(self, env_id: str, seats: Mapping[str, str], env: Any, seed: int) -> None:
        self.seats = dict(seats)
        players: dict[str, EpisodeAgent] = {}
        self.players: dict[str, EpisodeAgent] = {}
        for agent, spec in sorted(self.seats.items()):
            if spec not in players:
                players[spec] = _run_agent(env_id, spec).episode(env, seed)
            self.players[agent] = players[spec]
        self._episodes = list(players.values())

    async def replies(
        self, agents: list[str], observations: Mapping[str, Any], infos: Mapping[str, Any]
    ) -> dict[str, str]:
        """The replies of the partner seats among ``agents``, asked at once; raises
        :class:`PartnerFailed` naming the seat and the partner when one cannot answer."""
        seats = [a for a in agents if a in self.players]

        async def one(agent: str) -> str:
            try:
                return await self.players[agent].act(agent, observations[agent], infos[agent])
            except (AgentError, OSError, asyncio.TimeoutError) as exc:
                raise PartnerFailed(
                    f"partner {self.seats[agent]} in seat {agent} gave no reply: {exc}"
                ) from exc

        replies = await asyncio.gather(*(one(a) for a in seats))
        return dict(zip(seats, replies, strict=True))

    def metrics(self) -> dict[str, float]:
        """The partners' answered turns and their mean latency in seconds."""
        records = [r for e in self._episodes for r in e.records if r.get("reply") is not None]
        latency = [float(r.get("latency_s", 0.0)) for r in records]
        return {
            "partner_replies": float(len(records)),
            "partner_latency_s": sum(latency) / len(latency) if latency else 0.0,
        }


def partner_source(env_id: str, partner: str) -> str:
    """A row's ``data_source``: the env id, with the partner's label when a pool seats one
    (``signal-v0/with:expert``). VERL's validation groups its metrics by data source, so each
    partner gets its own ``val-aux/<env>/with:<partner>/...`` figures (cross-play per partner)."""
    if not partner:
        return env_id
    if partner == SELF:
        return f"{env_id}/with:{SELF}"
    return f"{env_id}/with:{parse_agent_spec(partner_spec(partner)).label}"


def check_partner_pools(train: PartnerPool | None = None, *val: PartnerPool | None) -> None:
    """Refuse :data:`~teamgym.envs.partners.SELF` in the training pool (its rows would hold more
    trained agents than the partners' rows, and verl's batch sizes count trajectories per row);
    ``val``: the held-out pools, where it may play."""
    if train is not None and SELF in train.specs:
        raise ValueError(
            f"{SELF!r} is a held-out partner only (--val-partner self, --eval-partner self): "
            "a training row with "
            "it holds every agent's trajectory, a partner's row fewer, and one run's rows must "
            "hold the same number; train self-play in a run without --partner"
        )
