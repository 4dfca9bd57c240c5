"""The agents a benchmark plays and the models behind them.

``kinds`` (agent specs and the kind registry), ``builtin`` (the kinds shipped: baselines,
``openai``, ``transformers``, ``human``),
``openai_agent`` and ``transformers_agent`` (the LLM kinds), ``chat`` (what an LLM agent is
shown and how its reply becomes an action), ``sampling`` (torch-only token sampling every local
model shares), ``serve`` (``teamgym serve``: a local model behind an OpenAI-compatible API),
``checkpoint`` (a frozen model directory as a teammate, ``checkpoint:DIR``), ``local_model``
(``teamgym model init``: the small model built from the environments' own text).
"""

from teamgym.adapters.agents.builtin import BaselineAgent, DefaultURLWarning
from teamgym.adapters.agents.kinds import (
    AgentError,
    AgentKind,
    AgentSpec,
    EpisodeAgent,
    RunAgent,
    agent_kinds,
    build_agent,
    distinct_labels,
    get_agent_kind,
    model_name,
    parse_agent_spec,
    register_agent_kind,
)

__all__ = [
    "AgentError",
    "AgentKind",
    "AgentSpec",
    "BaselineAgent",
    "DefaultURLWarning",
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
