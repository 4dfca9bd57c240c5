"""The kinds teamgym ships, registered when :mod:`teamgym.adapters.agents` is imported:
``baseline`` (a scripted policy or ``checkpoint:DIR``), ``openai``, ``transformers`` and
``human``. Each declares its options and defaults here and nowhere else: the agents read them
with ``spec.option(name)``, and the sampling options come from
:class:`~teamgym.adapters.agents.chat.SamplingOptions`."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from teamgym.adapters.agents.chat import DEFAULT_MAX_PROMPT_TOKENS, SamplingOptions
from teamgym.adapters.agents.kinds import AgentKind, AgentSpec, EpisodeAgent, register_agent_kind
from teamgym.envs.baselines import Policy, make_baseline
from teamgym.envs.lineup import Lineup, resolve_spec
from teamgym.names import CHECKPOINT_PREFIX


class _BaselineEpisode:
    """A scripted policy behind the async interface (it answers at once)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.records: list[dict[str, Any]] = []

    async def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        return self.policy.act(agent, observation, info)


class BaselineAgent:
    """A scripted baseline (or ``checkpoint:DIR``): a fresh policy per episode playing every agent
    it is given, seated by :class:`~teamgym.envs.lineup.Lineup` in slot 0 exactly as
    :func:`teamgym.envs.lineup.run_episode` seats it, so its episodes reproduce
    ``teamgym baselines`` byte for byte."""

    def __init__(self, spec: AgentSpec, env_id: str) -> None:
        self.spec = spec
        self.env_id = env_id
        make_baseline(env_id, spec.options["name"])  # unknown names fail now, not mid-run

    def episode(self, env: Any, seed: int) -> EpisodeAgent:
        seats = dict.fromkeys(env.possible_agents, self.spec.options["name"])
        return _BaselineEpisode(Lineup.build(self.env_id, seats, share=True).start(env, seed))

    def close(self) -> None:
        """Nothing held."""


_SAMPLING = asdict(SamplingOptions())


def _resolve_checkpoint(options: dict[str, Any]) -> None:
    """``checkpoint:DIR`` with an absolute ``DIR``: the same model from any working directory."""
    options["name"] = resolve_spec(str(options["name"]))


def _resolve_path(options: dict[str, Any]) -> None:
    """An absolute ``path``: the same model from any working directory or node."""
    options["path"] = str(Path(str(options["path"])).expanduser().resolve())


class DefaultURLWarning(UserWarning):
    """An ``openai`` spec names no ``base_url``, so the default one is used: said once, since
    ``openai:MODEL`` reaching ``http://127.0.0.1:8000/v1`` should never go unnoticed."""


def _resolve_base_url(options: dict[str, Any]) -> None:
    """The server's URL written into the spec: an ``http://`` or ``https://`` URL with a host,
    else ``ValueError``; the default one, said with a :class:`DefaultURLWarning`, if it names
    none."""
    if "base_url" not in options:
        default = options["base_url"] = _OPENAI_DEFAULTS["base_url"]
        warnings.warn(
            f"openai:{options['model']} names no server, so it uses {default} (where "
            f"`vllm serve` and `teamgym serve` listen by default); write "
            f"openai:{options['model']}@URL or set base_url to choose one",
            DefaultURLWarning,
            stacklevel=2,
        )
        return
    url = str(options["base_url"])
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"base_url {url!r} is not an http:// or https:// URL with a host (the chat "
            "completions API is HTTP), e.g. http://127.0.0.1:8000/v1 or https://api.openai.com/v1"
        )


def _openai_string(rest: str) -> dict[str, Any]:
    """``MODEL`` or ``MODEL@URL``."""
    model, _, url = rest.partition("@")
    return {"model": model, **({"base_url": url} if url else {})}


_OPENAI_DEFAULTS: dict[str, Any] = {
    "base_url": "http://127.0.0.1:8000/v1",
    "api_key_env": None,  # by host: OPENAI_API_KEY for api.openai.com only
    "allow_http_key": False,  # a key over plain HTTP to a non-loopback host: refused unless True
    "concurrency": 8,
    "timeout": 60.0,
    "max_retries": 3,
    "backoff": 0.5,
    **_SAMPLING,
}


def _checkpoint_dir(options: Mapping[str, Any]) -> str | None:
    """The directory of a ``checkpoint:DIR`` baseline; None for a scripted one."""
    name = str(options["name"])
    return name.removeprefix(CHECKPOINT_PREFIX) if name.startswith(CHECKPOINT_PREFIX) else None


register_agent_kind(
    AgentKind(
        "baseline",
        "name",
        {},
        "",
        BaselineAgent,
        resolve=_resolve_checkpoint,
        model=_checkpoint_dir,
    )
)
register_agent_kind(
    AgentKind(
        "openai",
        "model",
        _OPENAI_DEFAULTS,
        "openai:",
        "teamgym.adapters.agents.openai_agent:build",
        resolve=_resolve_base_url,
        from_string=_openai_string,
        reach=frozenset(_OPENAI_DEFAULTS) - set(_SAMPLING),
    )
)
register_agent_kind(
    AgentKind(
        "transformers",
        "path",
        {"device": "auto", **_SAMPLING, "max_prompt_tokens": DEFAULT_MAX_PROMPT_TOKENS},
        "transformers:",
        "teamgym.adapters.agents.transformers_agent:build",
        resolve=_resolve_path,
        model=lambda options: str(options["path"]),
    )
)


_HUMAN_DEFAULTS: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": 8765,
    "seats": None,  # the order seats go to the people (default: the order they are asked)
    "journal": None,
    "replay": None,
}


def _resolve_human(options: dict[str, Any]) -> None:
    """Check the names (``alice`` or ``alice+bob``) and the port; make paths absolute."""
    names = str(options["name"]).split("+")
    if not all(_NAME.fullmatch(n) for n in names):
        raise ValueError(
            f"human names are letters, digits, '_', '.' or '-' (at most 32, the first a letter "
            f"or digit), joined by '+': "
            f"got {options['name']!r}"
        )
    port = options.get("port", 8765)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError(f"human port must be an integer from 0 to 65535, got {port!r}")
    for key in ("journal", "replay"):
        if options.get(key) is not None:
            options[key] = str(Path(options[key]).expanduser().resolve())


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")

register_agent_kind(
    AgentKind(
        "human",
        "name",
        _HUMAN_DEFAULTS,
        "human:",
        "teamgym.web.agent:build",
        resolve=_resolve_human,
        reach=frozenset(_HUMAN_DEFAULTS),
    )
)
