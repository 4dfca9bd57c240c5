"""Episode metrics: one definition, computed from ``infos[agent]["events"]`` and rewards.

The benchmark runner, the trainers, the recorder and the Prometheus exporter all use
:class:`EpisodeTracker`, so a number means the same thing everywhere:

* ``success`` / ``score``: from the env's ``outcome`` event (False / 0.0 when none came);
* ``team_return``: the sum of the agents' *individual* rewards (before sharing), so it can be
  compared across reward-sharing settings; ``returns``: what each agent received;
* ``collaboration_index``: completed / attempted subtasks (``None`` when none were attempted);
* ``communication_frequency``: messages sent / agent-steps; ``mean_message_tokens``;
* ``invalid_action_rate``: invalid replies / agent-steps;
* ``contribution_gini``: Gini coefficient of completed-subtask credit over agents (0 = evenly
  shared, towards 1 = one agent did everything; free-riding shows here);
* ``plan_coverage`` / ``plan_adherence``: when a ``plan`` event was issued.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from teamgym.envs.events import add_subtask_credit

__all__ = ["EpisodeMetrics", "EpisodeTracker", "IdleCount", "gini", "metrics_from_records"]


def gini(values: Sequence[float]) -> float:
    """Gini coefficient of non-negative values (0 when all equal or all zero)."""
    n = len(values)
    total = float(sum(values))
    if n == 0 or total <= 0.0:
        return 0.0
    diff = sum(abs(a - b) for a in values for b in values)
    return diff / (2.0 * n * total)


@dataclass(frozen=True)
class EpisodeMetrics:
    """The metrics of one finished (or cut) episode; JSON-ready through :meth:`to_dict`."""

    success: bool
    """The env's verdict on the episode (its ``outcome`` event)."""
    score: float
    """The env's graded result in [0, 1] (its ``outcome`` event)."""
    team_return: float
    """Sum over agents and steps of the individual (unshared) rewards."""
    episode_length: int
    """Number of env steps."""
    returns: dict[str, float]
    """Per-agent sum of the rewards the agents received (after any sharing)."""
    individual_returns: dict[str, float]
    """Per-agent sum of ``infos[agent]["individual_reward"]``."""
    collaboration_index: float | None
    """Completed / attempted subtasks; ``None`` when nothing was attempted."""
    communication_frequency: float
    """Messages sent per agent-step."""
    mean_message_tokens: float
    """Mean length of delivered messages, in the env's tokens (0 when none)."""
    invalid_action_rate: float
    """Invalid replies per agent-step."""
    contribution_gini: float | None
    """Gini of completed-subtask credit across agents; ``None`` when nothing was completed."""
    plan_coverage: float | None = None
    """Share of the required subtasks that the last plan assigned; ``None`` without a plan."""
    plan_adherence: float | None = None
    """Share of completed subtasks done by an agent the plan assigned; ``None`` without a plan."""
    counts: dict[str, int] = field(default_factory=dict)
    """Raw counts: agent_steps, messages, subtasks_attempted, subtasks_completed, invalid."""
    extras: dict[str, float] = field(default_factory=dict)
    """Game-specific figures from the ``outcome`` event (e.g. MAP-THOR's transport rate)."""

    def to_dict(self) -> dict[str, Any]:
        """A plain dict for JSON."""
        return asdict(self)


class EpisodeTracker:
    """Accumulates one episode's steps and returns its :class:`EpisodeMetrics`.

    >>> t = EpisodeTracker(["a", "b"])
    >>> ev = [{"type": "subtask_attempted", "subtask": "s", "agents": ["a"]},
    ...       {"type": "subtask_completed", "subtask": "s", "agents": ["a"]},
    ...       {"type": "outcome", "success": True, "score": 1.0}]
    >>> t.step({"a": 1.0, "b": 0.0}, {"a": {"events": ev}, "b": {"events": ev}})
    >>> m = t.metrics()
    >>> (m.success, m.collaboration_index, m.contribution_gini)
    (True, 1.0, 0.5)
    """

    def __init__(self, agents: Iterable[str]) -> None:
        self.agents = list(agents)
        self.returns = dict.fromkeys(self.agents, 0.0)
        self.individual = dict.fromkeys(self.agents, 0.0)
        self.credit = dict.fromkeys(self.agents, 0.0)
        self.length = 0
        self.agent_steps = 0
        self.messages = 0
        self.message_tokens = 0
        self.attempted = 0
        self.completed = 0
        self.invalid = 0
        self.success = False
        self.score = 0.0
        self.extras: dict[str, float] = {}
        self.plan: dict[str, Any] | None = None
        self.completed_by: list[tuple[str, list[str]]] = []

    def step(self, rewards: Mapping[str, float], infos: Mapping[str, Mapping[str, Any]]) -> None:
        """Add one env step: the rewards dict and the infos dict that ``step`` returned."""
        self.length += 1
        self.agent_steps += len(rewards)
        for agent, reward in rewards.items():
            self.returns[agent] = self.returns.get(agent, 0.0) + float(reward)
            info = infos.get(agent, {})
            own = info.get("individual_reward", reward)
            self.individual[agent] = self.individual.get(agent, 0.0) + float(own)
        events: list[dict[str, Any]] = []
        for info in infos.values():  # the same team-level list for every agent: take one
            if isinstance(info, Mapping) and "events" in info:
                events = info["events"]
                break
        for event in events:
            self._event(event)

    def _event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "subtask_attempted":
            self.attempted += 1
        elif kind == "subtask_completed":
            self.completed += 1
            agents = list(event.get("agents", []))
            self.completed_by.append((str(event.get("subtask")), agents))
            add_subtask_credit(self.credit, event)
        elif kind == "message":
            self.messages += 1
            self.message_tokens += int(event.get("tokens", 0))
        elif kind == "invalid_action":
            self.invalid += 1
        elif kind == "plan":
            self.plan = dict(event)
        elif kind == "outcome":
            self.success = bool(event.get("success", False))
            self.score = float(event.get("score", 0.0))
            self.extras = {k: float(v) for k, v in event.get("extras", {}).items()}

    def _plan_metrics(self) -> tuple[float | None, float | None]:
        if self.plan is None:
            return None, None
        assignments: dict[str, list[str]] = self.plan.get("assignments", {})
        required = set(self.plan.get("required", [])) or set(assignments)
        coverage = len(required & set(assignments)) / len(required) if required else 1.0
        if not self.completed_by:
            return coverage, None
        kept = sum(
            1
            for subtask, agents in self.completed_by
            if set(agents) & set(assignments.get(subtask, []))
        )
        return coverage, kept / len(self.completed_by)

    def metrics(self) -> EpisodeMetrics:
        """The metrics of the steps seen so far."""
        steps = max(self.agent_steps, 1)
        coverage, adherence = self._plan_metrics()
        return EpisodeMetrics(
            success=self.success,
            score=self.score,
            team_return=sum(self.individual.values()),
            episode_length=self.length,
            returns=dict(self.returns),
            individual_returns=dict(self.individual),
            collaboration_index=self.completed / self.attempted if self.attempted else None,
            communication_frequency=self.messages / steps,
            mean_message_tokens=self.message_tokens / self.messages if self.messages else 0.0,
            invalid_action_rate=self.invalid / steps,
            contribution_gini=gini(list(self.credit.values())) if self.completed else None,
            plan_coverage=coverage,
            plan_adherence=adherence,
            counts={
                "agent_steps": self.agent_steps,
                "messages": self.messages,
                "subtasks_attempted": self.attempted,
                "subtasks_completed": self.completed,
                "invalid": self.invalid,
            },
            extras=dict(self.extras),
        )


def metrics_from_records(
    agents: Iterable[str], records: Iterable[Mapping[str, Any]]
) -> EpisodeMetrics:
    """Recompute an episode's metrics from :class:`~teamgym.envs.wrappers.Recorder` step lines
    (dicts with ``rewards`` and ``infos``), e.g. to re-score a saved trajectory."""
    tracker = EpisodeTracker(agents)
    for record in records:
        tracker.step(record["rewards"], record["infos"])
    return tracker.metrics()


class IdleCount:
    """The degenerate-policy guard: per agent, its steps and its idle steps (an invalid reply,
    or an action of the env's ``idle_actions``, such as ``wait``), read from the env's
    ``last_actions`` after each step. An agent that only ever idled did nothing useful, whatever
    its reward (a policy can win reward by doing nothing: free-riding in a public-goods game).
    Kept apart from :class:`EpisodeMetrics`, whose fields the runs' fingerprints hash.

    >>> class Env: idle_actions, last_actions = frozenset({"wait"}), {"a": "wait", "b": "go"}
    >>> count = IdleCount()
    >>> count.step(Env(), ["a", "b"])
    >>> (count.all_idle(["a"]), count.all_idle(["a", "b"]))
    (1.0, 0.0)
    """

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}
        self.idle: dict[str, int] = {}
        self.known = True

    def step(self, env: Any, agents: Iterable[str]) -> None:
        """Count ``agents``' actions of the step ``env`` (unwrapped) just took."""
        chosen = getattr(env, "last_actions", None)
        idle_actions = getattr(env, "idle_actions", None)
        if chosen is None or idle_actions is None:
            self.known = False  # a user's env without the guard's attributes
            return
        for agent in agents:
            if agent not in chosen:
                continue
            action = chosen[agent]
            self.steps[agent] = self.steps.get(agent, 0) + 1
            idle = action is None or action in idle_actions
            self.idle[agent] = self.idle.get(agent, 0) + int(idle)

    def all_idle(self, agents: Iterable[str]) -> float:
        """1.0 when every one of ``agents`` that acted only idled, 0.0 otherwise; NaN when the
        env does not say which actions are idle, or none of them acted."""
        acted = [a for a in agents if self.steps.get(a)]
        if not self.known or not acted:
            return float("nan")
        return float(all(self.idle[a] == self.steps[a] for a in acted))
