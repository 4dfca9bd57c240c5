"""Why ``babbler`` and ``palette-babbler`` print the same row and fingerprint in the smoke
table (docs/envs/signal.md, the palette babbler's docstring): playing every seat, their
metrics are equal seed by seed though what they say differs; with the expert listening they
part."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode
from teamgym.envs.seeds import episode_seeds
from teamgym.names import EVAL_SEED_BASE

SEEDS = episode_seeds(EVAL_SEED_BASE, 30)
"""The first 30 of the smoke suite's seeds."""


class Said:
    """A policy that keeps every reply of the policy it wraps (``bind`` and ``reset`` go
    through)."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.replies = policy, []

    def bind(self, env: Any) -> None:
        if hasattr(self.policy, "bind"):
            self.policy.bind(env)

    def reset(self, seed: int | None = None) -> None:
        self.policy.reset(seed)

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        reply = self.policy.act(agent, observation, info)
        self.replies.append(reply)
        return reply


def play(name: str, listener: str | None = None) -> tuple[list[dict], list[list[str]]]:
    """``name`` on ``signal-v1`` (defaults) over :data:`SEEDS`, in every seat or with
    ``listener`` in ``robot_1``: each episode's metrics and the speakers' messages."""
    env = make("signal-v1")
    metrics, said = [], []
    for seed in SEEDS:
        babbler = Said(make_baseline("signal-v1", name, seed=EVAL_SEED_BASE))
        seats: Any = babbler
        if listener is not None:
            seats = {"robot_0": babbler, "robot_1": make_baseline("signal-v1", listener)}
        metrics.append(run_episode(env, seats, seed).to_dict())
        said.append([r for r in babbler.replies if "<say>" in r])
    return metrics, said


def test_in_every_seat_the_babblers_metrics_are_equal_but_not_their_words() -> None:
    babbler, palette = play("babbler"), play("palette-babbler")
    assert babbler[0] == palette[0], "the metrics (so the fingerprints) differ"
    assert all(a != b for a, b in zip(babbler[1], palette[1], strict=True)), "same words"


def test_with_the_expert_listening_the_babblers_part() -> None:
    babbler, palette = play("babbler", "expert"), play("palette-babbler", "expert")
    assert [m["success"] for m in babbler[0]] != [m["success"] for m in palette[0]]
