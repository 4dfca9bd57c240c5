"""Scripted policies: the baselines every env is benchmarked with, and teammates for training.

A policy answers like a model would: ``act(agent, observation, info)`` returns a reply string
in the env's reply format. ``random`` (uniform over ``info["valid_actions"]``) works on every
text env; envs list their own (e.g. an ``expert``) in their registration. Who plays which agent
in an episode, and with which seed, is :mod:`teamgym.envs.lineup`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from teamgym.envs.registration import load_entry_point, spec

__all__ = [
    "Policy",
    "PrivilegedPolicy",
    "RandomPolicy",
    "make_baseline",
    "register_policy_prefix",
]

_WORD = re.compile(r"[a-z]+")


@runtime_checkable
class Policy(Protocol):
    """Anything that turns an observation into a reply."""

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (re-seed any randomness)."""

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """The reply of ``agent`` to its current observation and info."""
        ...


class RandomPolicy:
    """Uniform over the legal actions; a ``say`` action carries 1-3 words from the observation."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        """Re-seed."""
        self.rng = np.random.default_rng(seed)

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """A random legal action."""
        valid = list(info.get("valid_actions", []))
        if not valid:
            return "<action>wait</action>"
        action = valid[int(self.rng.integers(len(valid)))]
        if action != "say":
            return f"<action>{action}</action>"
        words = _WORD.findall(observation.lower()) or ["hello"]
        chosen = [
            words[int(i)] for i in self.rng.integers(len(words), size=int(self.rng.integers(1, 4)))
        ]
        return f"<say>{' '.join(chosen)}</say><action>say</action>"


class PrivilegedPolicy:
    """Base of scripted experts that read the true state: ``bind(env)`` keeps the unwrapped
    env (:class:`~teamgym.envs.lineup.Lineup` calls it); they hold no state between steps."""

    def __init__(self, seed: int | None = None) -> None:
        self.env: Any = None

    def bind(self, env: Any) -> None:
        """Read the true state of ``env`` (unwrapped)."""
        self.env = getattr(env, "unwrapped", env)

    def reset(self, seed: int | None = None) -> None:
        """Stateless between steps: nothing to reset."""


PolicyFactory = Callable[..., "Policy"]
"""``factory(argument, seed, **options)``: a prefixed family's policy."""
_PREFIXED: dict[str, PolicyFactory] = {}
"""Policy families named ``PREFIX + argument`` (e.g. ``checkpoint:DIR``), registered by the
layers that implement them (``teamgym.adapters`` registers ``checkpoint:`` when imported)."""


def register_policy_prefix(prefix: str, factory: PolicyFactory) -> None:
    """Let :func:`make_baseline` build names ``prefix + arg`` as ``factory(arg, seed,
    **options)``; the same
    factory may register again (a re-import), another one under a taken prefix raises."""
    known = _PREFIXED.get(prefix)
    if known is not None and (known.__module__, known.__qualname__) != (
        factory.__module__,
        factory.__qualname__,
    ):
        raise ValueError(
            f"policy prefix {prefix!r} is taken by {known.__module__}.{known.__qualname__}"
        )
    _PREFIXED[prefix] = factory


def make_baseline(env_id: str, name: str, seed: int | None = None, **options: Any) -> Policy:
    """Build baseline ``name`` for ``env_id``: ``random``, one the env registered, or a
    registered prefix such as ``checkpoint:PATH`` (a frozen model directory answering greedily;
    registered by ``import teamgym.adapters``, needs the ``train`` extra). ``options`` go to a
    prefixed family's factory only (a checkpoint's ``max_reply_tokens``, ``stop``, ...): the
    scripted baselines take none, so one set of options serves a mix of both."""
    if name == "random":
        return RandomPolicy(seed)
    for prefix, factory in _PREFIXED.items():
        if name.startswith(prefix):
            return factory(name.removeprefix(prefix), seed, **options)
    known = dict(spec(env_id).baselines)
    if name not in known:
        prefixes = ", ".join(
            [f"{p}..." for p in _PREFIXED]
            + (
                []
                if "checkpoint:" in _PREFIXED
                else ["checkpoint:PATH after `import teamgym.adapters`"]
            )
        )
        raise KeyError(
            f"{env_id} has no baseline {name!r}; available: {', '.join(['random', *known])}, "
            f"or {prefixes} (checkpoint:PATH is a model directory)"
        )
    return load_entry_point(known[name])(seed=seed)


def _convention_speaker(style: str, seed: int | None = None, **_: Any) -> Policy:
    """``convention:STYLE``: signal's expert speaking with a convention (see
    :class:`teamgym.envs.signal.baselines.ConventionSpeaker`)."""
    # by name: envs.signal imports this module, so a static import here would be a cycle
    speaker: Policy = load_entry_point("teamgym.envs.signal.baselines:ConventionSpeaker")(
        style, seed
    )
    return speaker


register_policy_prefix("convention:", _convention_speaker)
