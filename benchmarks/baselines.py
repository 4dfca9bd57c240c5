"""Run every registered environment with its baselines and summarise the episodes.

``teamgym baselines`` prints one row per
(env, baseline) with success and collaboration metrics, from seeds that are the same on every
machine, and a fingerprint that a rerun reproduces byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamgym.benchmarks.choices import Choices
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode
from teamgym.envs.metrics import EpisodeMetrics
from teamgym.envs.registration import make, spec
from teamgym.envs.seeds import episode_seeds
from teamgym.names import EVAL_SEED_BASE

__all__ = ["BaselineResult", "run_baselines"]


@dataclass(frozen=True)
class BaselineResult:
    """Aggregated metrics of one baseline on one env."""

    env_id: str
    baseline: str
    episodes: int
    success_rate: float
    mean_score: float
    mean_team_return: float
    mean_length: float
    """Mean episode length in env steps."""
    collaboration_index: float | None
    communication_frequency: float
    invalid_action_rate: float
    contribution_gini: float | None
    fingerprint: str
    """SHA-256 of the per-episode metrics: equal across reruns with the same seeds."""
    summary: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The same episodes as ``bench run``'s summary row (means with 95% intervals), which
    ``teamgym baselines`` prints in ``bench run``'s table."""

    def row(self) -> dict[str, Any]:
        """A JSON-ready dict (without :attr:`summary`)."""
        return {k: v for k, v in self.__dict__.items() if k != "summary"}


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def summarise(
    env_id: str,
    baseline: str,
    metrics: Sequence[EpisodeMetrics],
    seeds: Sequence[int] = (),
    env_kwargs: dict[str, Any] | None = None,
) -> BaselineResult:
    """Aggregate episode metrics into one result row (``seeds``: the episodes' seeds, for the
    summary row ``bench run`` would write)."""
    from teamgym.benchmarks.report import summarise as summary_rows

    blob = json.dumps([m.to_dict() for m in metrics], sort_keys=True).encode()
    records = {
        str(i): {
            "config_hash": f"{env_id}/{baseline}",
            "group": env_id,
            "env_id": env_id,
            "kwargs": env_kwargs or {},
            "agent": baseline,
            "seed": seed,
            "status": "ok",
            "metrics": m.to_dict(),
            "trajectory_hash": "",
        }
        for i, (m, seed) in enumerate(zip(metrics, seeds or range(len(metrics)), strict=True))
    }
    (summary,) = summary_rows(records)
    return BaselineResult(
        env_id=env_id,
        baseline=baseline,
        episodes=len(metrics),
        success_rate=statistics.fmean(float(m.success) for m in metrics),
        mean_score=statistics.fmean(m.score for m in metrics),
        mean_team_return=statistics.fmean(m.team_return for m in metrics),
        mean_length=statistics.fmean(m.episode_length for m in metrics),
        collaboration_index=_mean(m.collaboration_index for m in metrics),
        communication_frequency=statistics.fmean(m.communication_frequency for m in metrics),
        invalid_action_rate=statistics.fmean(m.invalid_action_rate for m in metrics),
        contribution_gini=_mean(m.contribution_gini for m in metrics),
        fingerprint=hashlib.sha256(blob).hexdigest()[:16],
        summary=summary,
    )


def _events(infos: dict[str, Any]) -> dict[str, Any]:
    """Each agent's events of one step, as ``bench run`` keeps them in its trajectories."""
    return {a: i.get("events", []) for a, i in infos.items()}


def run_baselines(
    env_ids: Sequence[str],
    episodes: int = 50,
    seed: int = EVAL_SEED_BASE,
    env_kwargs: dict[str, Any] | None = None,
    on_episode: Callable[[], None] | None = None,
) -> list[BaselineResult]:
    """Every baseline of every env in ``env_ids`` on seeds ``seed .. seed + episodes - 1``,
    with what each chose (the ``actions`` of ``bench run``'s table, from the same steps)."""
    results = []
    for env_id in env_ids:
        names = ["random", *spec(env_id).baselines]
        for name in names:
            env = make(env_id, **(env_kwargs or {}))
            policy = make_baseline(env_id, name, seed=seed)
            metrics, seeds = [], episode_seeds(seed, episodes)
            choices, hashes = Choices(), set()
            for episode_seed in seeds:
                steps: list[dict[str, Any]] = []

                def keep(actions: dict[str, Any], infos: dict[str, Any], steps=steps) -> None:
                    steps.append({"actions": actions, "events": _events(infos)})

                metrics.append(run_episode(env, policy, seed=episode_seed, on_step=keep))
                choices.add(steps, frozenset(env.possible_agents))
                hashes.add(hashlib.sha256(json.dumps(steps, default=str).encode()).hexdigest())
                if on_episode is not None:
                    on_episode()
            env.close()
            result = summarise(env_id, name, metrics, list(seeds), env_kwargs)
            result.summary["actions"] = choices.summary(hashes)
            results.append(result)
    return results
