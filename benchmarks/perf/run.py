"""One ``bench perf`` run: every env and team size, the references, tokens and (on request)
the VERL adapter; a package that is missing makes a skipped row."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from teamgym.benchmarks.perf.envs import measure_modes
from teamgym.benchmarks.perf.references import measure_lbforaging, measure_mpe, ratios
from teamgym.benchmarks.perf.report import (
    LBFORAGING,
    MPE,
    QUICK_AGENT_STEPS,
    REFERENCES,
    PerfArgs,
    PerfReport,
    Skipped,
    VerlOverhead,
)
from teamgym.benchmarks.perf.tokens import load_tokenizer, measure_tokens
from teamgym.envs.registration import latest_versions, make, registry


def measure_verl(model_dir: str | None = None, small: bool = False) -> VerlOverhead:
    """The VERL adapter on signal-v0 against a scripted server that waits a fixed latency
    (:func:`~teamgym.benchmarks.verl_throughput.measure_throughput`); ImportError without verl."""
    from teamgym.benchmarks.verl_throughput import measure_throughput

    size: dict[str, Any] = (
        {"episodes": 2, "num_agents": 2, "num_rounds": 1, "latency": 0.01} if small else {}
    )
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
