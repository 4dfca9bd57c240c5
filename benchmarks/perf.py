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
* **observation share**: one more run with the env's ``_observe`` (the view that builds one
  agent's observation; in text mode :meth:`~teamgym.envs.views.TextView.observe` with the game's
  ``_game_observation`` inside it) wrapped in a timer: time inside it over the time inside
  ``step`` and ``reset``. In text mode this is the share spent building text observations. The
  timer's own call (about 0.3 us per observation) counts in the total, not in the share, so the
  share is at most a few percent low. Envs not built on ``TextParallelEnv`` get none.

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
entry with the reason, not an error. These are figures, not timed tests: a shared machine varies
by +-30 %.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from teamgym.envs.registration import latest_versions, make, registry

__all__ = [
    "FLAT",
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
    "measure_mpe",
    "measure_tokens",
    "measure_verl",
    "ratios",
    "run",
]

#: Observations are "flat" when their fitted growth over an episode is at most this share.
FLAT = 0.25
#: Reference packages and the team sizes they are timed at.
LBFORAGING, MPE = "lbforaging", "mpe2 simple_spread_v3"
REFERENCES: tuple[tuple[str, int], ...] = ((LBFORAGING, 2), (MPE, 3), (MPE, 8))
#: The one env a reference is compared with; references not listed are compared with every env.
COMPARED_WITH = {LBFORAGING: "foraging-v0"}
#: Agent-steps per timed run by default (every env, both modes, references and tokens: under 2
#: minutes on a shared 2-core machine).
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
    out: str = "perf.json"
    """JSON file the results are written to."""


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


# ------------------------------------------------------------------ timing
def _reply(env: Any, agent: str, obs: Any, info: dict[str, Any], k: int) -> str:
    """Text mode: the k-th legal action (cycling), with a message."""
    valid = info["valid_actions"]
    choice = valid[k % len(valid)] if valid else "wait"
    return f"<say>red circle</say><action>{choice}</action>"


def _index(env: Any, agent: str, obs: Any, info: dict[str, Any], k: int) -> int:
    """Vector mode: the slot of the action text mode takes (the k-th legal one, cycling), so
    both modes play the same game and their times differ by the views alone; the k-th legal
    index of the mask for an env without a slot index."""
    valid = info["valid_actions"]
    index = getattr(env.unwrapped, "_slot_index", None)
    if valid and index is not None:
        slots = index(agent)[1].get(valid[k % len(valid)])
        if slots:
            return slots[0]
    legal = np.flatnonzero(obs["action_mask"])
    return int(legal[k % len(legal)]) if len(legal) else 0


def _timed_run(env: Any, choose: Chooser, agent_steps: int) -> tuple[float, int, float, int]:
    """One run of at least ``agent_steps`` agent-steps: (seconds inside ``step``, agent-steps,
    seconds inside ``reset``, resets)."""
    clock = time.perf_counter
    step_s = reset_s = 0.0
    steps = resets = k = 0
    while steps < agent_steps:
        start = clock()
        obs, infos = env.reset(seed=resets)
        reset_s += clock() - start
        resets += 1
        while env.agents and steps < agent_steps:
            actions = {}
            for agent in env.agents:
                k += 1
                actions[agent] = choose(env, agent, obs[agent], infos[agent], k)
            start = clock()
            obs, _, _, _, infos = env.step(actions)
            step_s += clock() - start
            steps += len(actions)
    return step_s, steps, reset_s, resets


def _best(env: Any, choose: Chooser, agent_steps: int, repeats: int) -> tuple[float, float]:
    """(us per agent-step, us per reset), each the best of ``repeats`` runs."""
    runs = [_timed_run(env, choose, agent_steps) for _ in range(repeats)]
    return (
        min(step_s / steps for step_s, steps, _, _ in runs) * 1e6,
        min(reset_s / resets for _, _, reset_s, resets in runs) * 1e6,
    )


def _obs_share(env: Any, choose: Chooser, agent_steps: int) -> float | None:
    """Share of ``step`` and ``reset`` time inside the env's ``_observe``, from one run."""
    base = env.unwrapped
    inner = getattr(base, "_observe", None)
    if inner is None:
        return None
    inside = 0.0
    clock = time.perf_counter

    def timed_observe(agent: str, valid: list[str]) -> Any:
        nonlocal inside
        start = clock()
        try:
            return inner(agent, valid)
        finally:
            inside += clock() - start

    base._observe = timed_observe  # an instance attribute shadows the method for this run
    try:
        step_s, _, reset_s, _ = _timed_run(env, choose, agent_steps)
    finally:
        del base._observe
    return inside / (step_s + reset_s)


def measure(
    env_id: str,
    num_agents: int = 2,
    obs_mode: str = "text",
    agent_steps: int = AGENT_STEPS,
    repeats: int = 3,
) -> PerfResult:
    """Best of ``repeats`` timed runs of one env, then one run for the observation share."""
    env = make(env_id, num_agents=num_agents, obs_mode=obs_mode)
    choose = _reply if obs_mode == "text" else _index
    us_step, us_reset = _best(env, choose, agent_steps, repeats)
    share = _obs_share(env, choose, agent_steps)
    env.close()
    return PerfResult(env_id, num_agents, obs_mode, agent_steps, us_step, us_reset, share)


def measure_modes(
    env_id: str, num_agents: int = 2, agent_steps: int = AGENT_STEPS, repeats: int = 3
) -> list[PerfResult]:
    """Text and vector mode of one env, their timed runs interleaved (text, vector, text, ...)
    so that a machine whose speed drifts over minutes weighs on both alike; best of
    ``repeats`` each, then one run each for the observation share. Both play the same game
    (see :func:`_index`)."""
    modes = ("text", "vector")
    envs = {m: make(env_id, num_agents=num_agents, obs_mode=m) for m in modes}
    choose: dict[str, Chooser] = {"text": _reply, "vector": _index}
    runs: dict[str, list[tuple[float, int, float, int]]] = {m: [] for m in modes}
    for _ in range(repeats):
        for m in modes:
            runs[m].append(_timed_run(envs[m], choose[m], agent_steps))
    results = []
    for m in modes:
        us_step = min(step_s / steps for step_s, steps, _, _ in runs[m]) * 1e6
        us_reset = min(reset_s / resets for _, _, reset_s, resets in runs[m]) * 1e6
        share = _obs_share(envs[m], choose[m], agent_steps)
        envs[m].close()
        results.append(PerfResult(env_id, num_agents, m, agent_steps, us_step, us_reset, share))
    return results


def measure_mpe(
    num_agents: int = 3, agent_steps: int = AGENT_STEPS, repeats: int = 3
) -> PerfResult:
    """PettingZoo MPE ``simple_spread`` (package ``mpe2``; discrete actions, its default 25
    cycles) with random actions; ImportError when ``mpe2`` is not installed."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=num_agents)
    rng = np.random.default_rng(0)

    def random_action(env: Any, agent: str, obs: Any, info: dict[str, Any], k: int) -> int:
        return int(rng.integers(env.action_space(agent).n))

    us_step, us_reset = _best(env, random_action, agent_steps, repeats)
    env.close()
    return PerfResult(MPE, num_agents, "vector", agent_steps, us_step, us_reset)


def measure_lbforaging(
    num_agents: int = 2, agent_steps: int = AGENT_STEPS, repeats: int = 3
) -> PerfResult:
    """The ``lbforaging`` package on foraging-v0's default field (8x8, 3 items, levels up to 3)
    with random actions, its observations included; ImportError when it is not installed."""
    from lbforaging.foraging.environment import ForagingEnv

    env = ForagingEnv(
        players=num_agents, min_player_level=1, max_player_level=3, min_food_level=1,
        max_food_level=None, field_size=(8, 8), max_num_food=3, sight=3,
        max_episode_steps=80, force_coop=False,
    )  # fmt: skip
    rng, clock = np.random.default_rng(0), time.perf_counter
    best_step = best_reset = float("inf")
    for _ in range(repeats):
        step_s = reset_s = 0.0
        steps = resets = 0
        while steps < agent_steps:
            start = clock()
            env.reset(seed=resets)
            reset_s += clock() - start
            resets, done = resets + 1, False
            while not done and steps < agent_steps:
                actions = [int(a) for a in rng.integers(6, size=num_agents)]
                start = clock()
                _, _, done, truncated, _ = env.step(actions)
                step_s += clock() - start
                steps, done = steps + num_agents, done or truncated
        best_step = min(best_step, step_s / steps * 1e6)
        best_reset = min(best_reset, reset_s / resets * 1e6)
    return PerfResult(LBFORAGING, num_agents, "vector", agent_steps, best_step, best_reset)


def ratios(speed: Sequence[PerfResult], references: Sequence[PerfResult]) -> list[Ratio]:
    """Each env's microseconds per agent-step over each reference's at the same team size."""
    out = []
    for ref in references:
        for env_id in dict.fromkeys(r.env_id for r in speed):
            if COMPARED_WITH.get(ref.env_id, env_id) != env_id:
                continue
            us = {
                r.obs_mode: r.us_per_agent_step / ref.us_per_agent_step
                for r in speed
                if r.env_id == env_id and r.num_agents == ref.num_agents
            }
            if us:
                out.append(
                    Ratio(
                        env_id,
                        ref.num_agents,
                        ref.env_id,
                        ref.us_per_agent_step,
                        us.get("text"),
                        us.get("vector"),
                    )
                )
    return out


# ------------------------------------------------------------------ tokens
def load_tokenizer(path: str | None = None, small: bool = False) -> tuple[Any, str]:
    """(tokenizer, description): the one at ``path`` (a Hugging Face directory), or the local
    model's, trained in memory (``small``: on 2 episodes per env); ImportError without
    transformers."""
    if path:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path), f"the tokenizer in {path}"
    from teamgym.adapters.agents.local_model import LocalModelConfig, build_tokenizer

    config = LocalModelConfig(episodes_per_env=2) if small else LocalModelConfig()
    shown = "the local model's tokenizer" + (", trained on 2 episodes per env" if small else "")
    return build_tokenizer(config), shown


def measure_tokens(env_id: str, num_agents: int, tokenizer: Any, episodes: int = 3) -> TokenResult:
    """Tokens per text observation over ``episodes`` episodes of cycling legal replies."""
    env = make(env_id, num_agents=num_agents, obs_mode="text")

    def count(texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    every: list[int] = []  # every observation's tokens, resets included
    steps: list[tuple[int, int]] = []  # (step number, tokens) from the first step on
    first: list[int] = []
    last: list[int] = []
    instructions: list[int] = []
    lengths: list[int] = []
    k = 0
    for episode in range(episodes):
        obs, infos = env.reset(seed=episode)
        instructions += count([info["instructions"] for info in infos.values()])
        every += count(list(obs.values()))
        per_step = []
        while env.agents:
            actions = {}
            for agent in env.agents:
                k += 1
                actions[agent] = _reply(env, agent, obs[agent], infos[agent], k)
            obs, _, _, _, infos = env.step(actions)
            per_step.append(count(list(obs.values())))
        first += per_step[0]
        last += per_step[-1]
        lengths.append(len(per_step))
        steps += [(t, c) for t, counts in enumerate(per_step) for c in counts]
    env.close()
    every += [c for _, c in steps]
    mean = float(np.mean(every))
    x, y = np.array(steps, dtype=float).T
    slope = float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else 0.0
    growth = slope * (float(np.mean(lengths)) - 1) / mean
    return TokenResult(
        env_id,
        num_agents,
        episodes,
        observations=len(every),
        mean=mean,
        max=max(every),
        first=float(np.mean(first)),
        last=float(np.mean(last)),
        growth=growth,
        flat=growth <= FLAT,
        instructions=float(np.mean(instructions)),
    )


# ------------------------------------------------------------------ VERL
def measure_verl(model_dir: str | None = None, small: bool = False) -> VerlOverhead:
    """The VERL adapter on signal-v0 against a scripted server that waits a fixed latency
    (:func:`~teamgym.benchmarks.verl_throughput.measure_throughput`); ImportError without verl."""
    from teamgym.benchmarks.verl_throughput import measure_throughput

    size = {"episodes": 2, "num_agents": 2, "num_rounds": 1, "latency": 0.01} if small else {}
    (r,) = measure_throughput(**size, model_dir=model_dir, servers=("latency",))
    overhead = r.seconds - r.turns * r.latency
    return VerlOverhead(
        r.episodes,
        r.num_agents,
        r.turns,
        r.latency,
        r.seconds,
        overhead_s=overhead,
        overhead_per_turn_ms=overhead / r.turns * 1e3,
        ratio=r.seconds / (r.turns * r.latency),
    )


# ------------------------------------------------------------------ the run
def _refusal(env_id: str, num_agents: int) -> str | None:
    """Why the env cannot be built with ``num_agents`` agents (None: it can)."""
    try:
        make(env_id, num_agents=num_agents).close()
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def _missing(what: str, exc: ImportError, extra: str) -> Skipped:
    package = exc.name.partition(".")[0] if exc.name else str(exc)
    return Skipped(what, f"{package} is not installed ({extra})")


def run(args: PerfArgs, progress: Callable[[str], None] = lambda _: None) -> PerfReport:
    """Measure what ``args`` asks for; ``progress`` hears what is being measured."""
    if args.quick:
        args = dataclasses.replace(args, agent_steps=QUICK_AGENT_STEPS, repeats=1, token_episodes=1)
    env_ids = args.env or latest_versions(registry())
    refusals = {(e, n): _refusal(e, n) for e in env_ids for n in args.agents}
    pairs = [pair for pair, refusal in refusals.items() if refusal is None]
    skipped = [Skipped(f"{e} ({n} agents)", why) for (e, n), why in refusals.items() if why]
    speed, references = [], []
    for env_id, n in pairs:
        progress(f"{env_id}, {n} agents, text and vector")
        speed += measure_modes(env_id, n, args.agent_steps, args.repeats)
    timers = {LBFORAGING: measure_lbforaging, MPE: measure_mpe}
    for name, n in REFERENCES:
        progress(f"{name}, {n} agents")
        try:
            references.append(timers[name](n, args.agent_steps, args.repeats))
        except ImportError as exc:
            skipped.append(_missing(f"{name} ({n} agents)", exc, "pip install -e '.[dev]'"))
    tokens, shown = [], None
    try:
        progress("tokenizer")
        tokenizer, shown = load_tokenizer(args.tokenizer, small=args.quick)
    except ImportError as exc:
        skipped.append(_missing("tokens per observation", exc, "pip install -e '.[train]'"))
    else:
        for env_id, n in pairs:
            progress(f"tokens: {env_id}, {n} agents")
            tokens.append(measure_tokens(env_id, n, tokenizer, args.token_episodes))
    verl = None
    if args.verl:
        progress("VERL adapter")
        try:
            verl = measure_verl(args.tokenizer, small=args.quick)
        except ImportError as exc:
            skipped.append(_missing("VERL adapter overhead", exc, "pip install -e '.[verl]'"))
    return PerfReport(
        dataclasses.asdict(args),
        speed,
        references,
        ratios(speed, references),
        shown,
        tokens,
        verl,
        skipped,
    )
