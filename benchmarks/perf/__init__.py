"""Speed of the environments next to reference packages, and the size of their observations.

``teamgym bench perf`` (alias ``teamgym perf``) measures, for every registered env, every team
size it takes and both observation modes:

* **microseconds per agent-step**: the wall time spent inside ``env.step`` over the agent-steps
  it served, best of ``repeats`` runs of ``agent_steps`` agent-steps. Agents cycle through their
  legal actions (text mode: a reply with a ``<say>`` message and the action; vector mode: the
  legal indices of the action mask), chosen outside the timer. ``step`` builds the observations
  and infos, so they are included.
* **microseconds per reset**: the mean ``env.reset`` time of the same runs (episodes end by the
  game's rules or its step limit), best of the runs.
* **observation share**: one more run with the env's ``view.observe`` (what builds one agent's
  observation; in text mode :meth:`~teamgym.envs.views.TextView.observe` with the game's
  ``_game_observation`` inside it) wrapped in a timer: time inside it over the time inside
  ``step`` and ``reset``. In text mode this is the share spent building text observations. The
  timer's own call (a fraction of a microsecond per observation) counts in the total, not in
  the share, so the share is at most a few percent low. Envs not built on ``TextParallelEnv`` get none.

References, timed the same way in the same run with random actions and their own vector
observations: the ``lbforaging`` package on foraging-v0's default field (2 players) and
PettingZoo's MPE ``simple_spread`` from ``mpe2`` (3 and 8 agents). :func:`ratios` divides each
env's figures by a reference's at the same team size (foraging-v0 by lbforaging, every env by
simple_spread).

**Tokens per observation**: text-mode episodes under the same cycling replies, each observation
encoded by a real tokenizer (a Hugging Face directory, or the local model's, trained in memory on
the envs' text by :func:`~teamgym.adapters.agents.local_model.build_tokenizer`): the mean and max over
every observation, the means after each episode's first step and after its last (the reset's
observation has no messages yet, so the first step is the fair start), and the trend: a straight
line fitted to tokens against step number (first step on) gives ``growth``, the change it predicts
over a mean episode as a share of the mean observation; ``flat`` when it is at most :data:`FLAT`.
A single step is a poor witness (observations differ by phase and role: signal-v0's alternate),
the fitted trend is not; an observation that kept a history would grow by 100 % or more.

A package that is not installed (mpe2, lbforaging, transformers, verl) makes a :class:`Skipped`
entry with the reason, not an error. These are figures, not timed tests: on a shared machine
they vary by tens of percent.
"""

from teamgym.benchmarks.perf.envs import measure, measure_modes
from teamgym.benchmarks.perf.references import measure_lbforaging, measure_mpe, ratios
from teamgym.benchmarks.perf.report import (
    FLAT,
    LBFORAGING,
    MPE,
    REFERENCES,
    PerfArgs,
    PerfReport,
    PerfResult,
    Ratio,
    Skipped,
    TokenResult,
    VerlOverhead,
)
from teamgym.benchmarks.perf.run import measure_verl, run
from teamgym.benchmarks.perf.tokens import load_tokenizer, measure_tokens

__all__ = [
    "FLAT",
    "LBFORAGING",
    "MPE",
    "REFERENCES",
    "PerfArgs",
    "PerfReport",
    "PerfResult",
    "Ratio",
    "Skipped",
    "TokenResult",
    "VerlOverhead",
    "load_tokenizer",
    "measure",
    "measure_lbforaging",
    "measure_modes",
    "measure_mpe",
    "measure_tokens",
    "measure_verl",
    "ratios",
    "run",
]
