"""What ``bench perf`` is asked to measure and what it reports: settings, one result type
per figure, the report ``perf.json`` holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Observations are "flat" when their fitted growth over an episode is at most this share.
FLAT = 0.25
#: Reference packages and the team sizes they are timed at.
LBFORAGING, MPE = "lbforaging", "mpe2 simple_spread_v3"
REFERENCES: tuple[tuple[str, int], ...] = ((LBFORAGING, 2), (MPE, 3), (MPE, 8))
#: The one env a reference is compared with; references not listed are compared with every env.
COMPARED_WITH = {LBFORAGING: "foraging-v0"}
#: Agent-steps per timed run by default: enough for a stable best-of-repeats figure, few enough
#: that a default run (every env, both modes, references and tokens) takes minutes on a laptop.
AGENT_STEPS = 5_000
#: ``--quick``: agent-steps per run (one run, one token episode, a small tokenizer).
QUICK_AGENT_STEPS = 300

# (env, agent, observation, info, counter) -> the agent's action or reply
Chooser = Callable[[Any, str, Any, dict[str, Any], int], Any]


@dataclass(frozen=True)
class PerfArgs:
    """What one ``bench perf`` run measures."""

    env: list[str] = dataclasses.field(default_factory=list)
    """An env id to time; every registered env when none is given."""
    agents: tuple[int, ...] = (2, 4, 8)
    """Team sizes; those an env does not take are skipped."""
    agent_steps: int = AGENT_STEPS
    """Agent-steps per timed run."""
    repeats: int = 3
    """Timed runs per figure (the best is kept)."""
    quick: bool = False
    """Smoke run: 300 agent-steps, one repeat, one token episode, a tokenizer trained on less text."""
    tokenizer: str | None = None
    """Directory of the tokenizer that counts tokens (a Hugging Face tokenizer or model);
    default: the local model's tokenizer, trained in memory (needs transformers)."""
    token_episodes: int = 3
    """Text-mode episodes per env and team size whose observations are tokenized."""
    verl: bool = False
    """Also time the VERL adapter's overhead over a scripted server's latency (needs verl; builds
    a local model unless --tokenizer names a model directory)."""
    out: str = "runs/perf.json"
    """JSON file the results are written to (its directory is created)."""


@dataclass(frozen=True)
class PerfResult:
    """Speed of one env (or reference package) at one team size and observation mode."""

    env_id: str
    num_agents: int
    obs_mode: str
    agent_steps: int
    """Agent-steps per timed run."""
    us_per_agent_step: float
    """Microseconds inside ``step`` per agent-step, best run."""
    us_per_reset: float = 0.0
    """Microseconds per ``reset``, best run."""
    obs_share: float | None = None
    """Share of ``step`` and ``reset`` time spent building observations (None: not measured)."""


@dataclass(frozen=True)
class Ratio:
    """An env's cost over a reference package's at the same team size."""

    env_id: str
    num_agents: int
    reference: str
    reference_us: float
    """The reference's microseconds per agent-step."""
    text: float | None
    """Text mode's microseconds per agent-step over the reference's."""
    vector: float | None
    """Vector mode's microseconds per agent-step over the reference's."""


@dataclass(frozen=True)
class TokenResult:
    """Tokens per text observation of one env and team size."""

    env_id: str
    num_agents: int
    episodes: int
    observations: int
    """Observations tokenized (every agent's, reset included)."""
    mean: float
    max: int
    first: float
    """Mean over the observations returned by each episode's first step."""
    last: float
    """Mean over the observations returned by each episode's last step."""
    growth: float
    """Change over a mean episode of the line fitted to tokens by step, over the mean."""
    flat: bool
    """``growth <= FLAT``."""
    instructions: float
    """Mean tokens of the instructions (the system prompt, sent once)."""


@dataclass(frozen=True)
class VerlOverhead:
    """The VERL adapter's wall time over the model's latency (a scripted server that waits)."""

    episodes: int
    num_agents: int
    turns: int
    latency_s: float
    """Seconds the scripted server waits per call."""
    seconds: float
    """Wall time of the batch (every agent of every episode in flight at once)."""
    overhead_s: float
    """``seconds - turns * latency_s``: what the adapter and VERL add."""
    overhead_per_turn_ms: float
    ratio: float
    """``seconds / (turns * latency_s)``; 1.0 is no overhead."""


@dataclass(frozen=True)
class Skipped:
    """A measurement not made, and why."""

    what: str
    reason: str


@dataclass(frozen=True)
class PerfReport:
    """Everything one run measured (``dataclasses.asdict`` gives the JSON)."""

    settings: dict[str, Any]
    speed: list[PerfResult]
    references: list[PerfResult]
    ratios: list[Ratio]
    tokenizer: str | None
    """Which tokenizer counted the tokens (None: none was available)."""
    tokens: list[TokenResult]
    verl: VerlOverhead | None
    skipped: list[Skipped]
