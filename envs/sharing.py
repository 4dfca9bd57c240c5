"""Reward sharing: how individual rewards become what each agent is trained on.

Environments return individual rewards; :class:`RewardSharing` mixes them into shared ones, and
:class:`~teamgym.envs.wrappers.SharedReward` applies it to any ParallelEnv. With ``n`` agents,
individual rewards ``r_j`` and team score ``T = sharing_factor * sum_j r_j`` (``team="mean"``:
the mean):

* ``mixed``: ``r_i' = (1 - weight) * r_i + weight * T``;
* ``proportional``: ``T`` split by each agent's share of the subtasks completed so far (equal
  shares before any), i.e. credit by contribution;
* ``difference``: ``r_i' = T - T_without_i``, where the env computes the team score had agent
  ``i`` done nothing (``counterfactual_rewards(agent)``); an error for envs that cannot.

``weight`` applies to ``mixed`` only. New modes register with :func:`register_sharing_mode`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from teamgym.names import DEFAULT_SHARING_WEIGHT

__all__ = [
    "RewardSharing",
    "SharingContext",
    "get_sharing_mode",
    "register_sharing_mode",
    "sharing_modes",
]


@dataclass(frozen=True)
class SharingContext:
    """What some modes need beyond the step's rewards."""

    contributions: Mapping[str, float] | None = None
    """Agent -> credit for subtasks completed so far in the episode (``proportional``)."""
    counterfactual: Callable[[str], Mapping[str, float]] | None = None
    """Agent -> the step's individual rewards had that agent done nothing (``difference``)."""


SharingMode = Callable[["RewardSharing", Mapping[str, float], SharingContext], dict[str, float]]
_MODES: dict[str, SharingMode] = {}


def register_sharing_mode(name: str) -> Callable[[SharingMode], SharingMode]:
    """Decorator adding a sharing mode under ``name``; a taken name raises."""

    def add(fn: SharingMode) -> SharingMode:
        if name in _MODES:
            raise ValueError(f"reward-sharing mode {name!r} is already registered")
        _MODES[name] = fn
        return fn

    return add


def get_sharing_mode(name: str) -> SharingMode:
    """The mode registered as ``name``; an unknown name lists the valid ones."""
    try:
        return _MODES[name]
    except KeyError:
        raise ValueError(
            f"unknown reward-sharing mode {name!r}; valid: {', '.join(sorted(_MODES))}"
        ) from None


def sharing_modes() -> list[str]:
    """Names of the registered modes."""
    return sorted(_MODES)


@dataclass(frozen=True)
class RewardSharing:
    """A reward-sharing rule; call it on a step's individual rewards.

    >>> RewardSharing(weight=0.5)({"a": 1.0, "b": 0.0})
    {'a': 1.0, 'b': 0.5}
    """

    weight: float = DEFAULT_SHARING_WEIGHT
    """Share of the team score in each agent's reward (``mixed`` mode), in [0, 1]."""
    team: Literal["sum", "mean"] = "sum"
    """How individual rewards combine into the team score."""
    sharing_factor: float = 1.0
    """Scale of the team score."""
    mode: str = "mixed"
    """``mixed``, ``proportional``, ``difference`` or a registered mode."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"weight must be in [0, 1], got {self.weight!r}")
        if self.team not in ("sum", "mean"):
            raise ValueError(f"team must be 'sum' or 'mean', got {self.team!r}")
        get_sharing_mode(self.mode)

    def team_score(self, rewards: Mapping[str, float]) -> float:
        """``T``: the scaled sum (or mean) of the individual rewards."""
        if not rewards:
            return 0.0
        total = float(sum(rewards.values()))
        if self.team == "mean":
            total /= len(rewards)
        return self.sharing_factor * total

    def __call__(
        self,
        rewards: Mapping[str, float],
        context: SharingContext | None = None,
    ) -> dict[str, float]:
        """Shared rewards for one step's individual ``rewards``."""
        return get_sharing_mode(self.mode)(self, rewards, context or SharingContext())


@register_sharing_mode("mixed")
def _mixed(
    rule: RewardSharing, rewards: Mapping[str, float], ctx: SharingContext
) -> dict[str, float]:
    t = rule.team_score(rewards)
    return {a: (1.0 - rule.weight) * float(r) + rule.weight * t for a, r in rewards.items()}


@register_sharing_mode("proportional")
def _proportional(
    rule: RewardSharing, rewards: Mapping[str, float], ctx: SharingContext
) -> dict[str, float]:
    t = rule.team_score(rewards)
    credit = {a: max(0.0, float((ctx.contributions or {}).get(a, 0.0))) for a in rewards}
    total = sum(credit.values())
    if total <= 0.0:
        return {a: t / len(rewards) for a in rewards}
    return {a: t * (c / total) for a, c in credit.items()}  # share first: no denormal underflow


@register_sharing_mode("difference")
def _difference(
    rule: RewardSharing, rewards: Mapping[str, float], ctx: SharingContext
) -> dict[str, float]:
    if ctx.counterfactual is None:
        raise ValueError(
            "mode='difference' needs counterfactual rewards, and this env does not provide them "
            "(it has no counterfactual_rewards(agent) method); use mode='mixed' or 'proportional'"
        )
    t = rule.team_score(rewards)
    return {a: t - rule.team_score(ctx.counterfactual(a)) for a in rewards}
