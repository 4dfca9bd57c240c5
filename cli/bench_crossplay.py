"""``teamgym bench crossplay``: every ordered pairing of a set of agents on the same seeds, the
matrix, the partner-overfitting gap and a heatmap per env (see
:mod:`teamgym.benchmarks.crossplay`); resumable like ``bench run``, whose run directory it
writes."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.cli.common import (
    add_env_arg,
    bad_input,
    env_kwargs,
    non_negative_int,
    positive_int,
)
from teamgym.cli.playing import RUN_EPILOG, add_play_options, play_suite

__all__ = ["add_parser"]

#: The seeds the command plays by default: the smoke suite's (so the diagonal's fingerprints
#: are the README's).
SMOKE = "smoke"


def add_parser(inner: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``bench crossplay``."""
    p = inner.add_parser(
        "crossplay",
        help="play every ordered pairing of agents on the same seeds (cross-play matrix)",
        description="For each env, play every ordered pairing (A, B) of the agents on the same "
        "seeds: A in the seats B does not take (--partner-seats, default every seat but "
        "robot_0), and each agent alone (the diagonal, self-play). Prints the matrix and the "
        "gap between self-play and cross-play; writes RUN_DIR/crossplay.md, crossplay.json and "
        "a heatmap per env beside bench run's files. The same command after a kill resumes.",
        epilog=RUN_EPILOG,
    )
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="SPEC",
        help="an agent of the matrix (repeatable; default: baselines): random, expert, "
        "baselines (random and the env's scripted ones), checkpoint:DIR, transformers:DIR, "
        "openai:MODEL@BASE_URL, or a YAML mapping",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        help="an env id (repeatable; default: every env of the smoke suite)",
    )
    p.add_argument(
        "--partner-seats",
        metavar="AGENTS",
        help="comma-separated seats the partner B plays, e.g. robot_1,robot_2 "
        "(default: every seat but robot_0)",
    )
    p.add_argument(
        "--episodes", type=positive_int, help="episodes per pairing (default: the smoke suite's)"
    )
    p.add_argument(
        "--seed", type=non_negative_int, help="first episode seed (default: the smoke suite's)"
    )
    add_env_arg(p)
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default: runs/crossplay)")
    add_play_options(p)
    p.set_defaults(run=_run)
    return p


def _run(args: argparse.Namespace, console: Console) -> int:
    """Build the pairings' suite, play it like ``bench run``, then print and write the matrix."""
    from teamgym.benchmarks.crossplay import (
        CROSSPLAY_MD,
        crossplay_matrix,
        crossplay_source,
        matrix_lines,
        write_crossplay,
    )
    from teamgym.benchmarks.report import load_run, summarise
    from teamgym.benchmarks.runner import check_agents
    from teamgym.benchmarks.suites import SuiteError, inline_agent, load_suite, parse_suite

    with bad_input(SuiteError, ValueError, KeyError):
        smoke = load_suite(SMOKE)
        envs = args.env or list(dict.fromkeys(s.env_id for s in smoke.settings))
        seats = [s.strip() for s in args.partner_seats.split(",")] if args.partner_seats else None
        source = crossplay_source(
            envs,
            [inline_agent(a) for a in args.agent] or ["baselines"],
            episodes=args.episodes or len(smoke.settings[0].seeds),
            seed=args.seed if args.seed is not None else smoke.settings[0].seeds[0],
            partner_seats=seats,
            kwargs=env_kwargs(args),
        )
        suite = parse_suite(source, where="bench crossplay")
        check_agents(suite)
    status = play_suite(suite, args, console)
    if status == 130:
        return status
    run_dir = args.out or f"runs/{suite.name}"
    meta_order = [s.config_hash for s in suite.settings]
    matrices = crossplay_matrix(suite, summarise(load_run(run_dir), meta_order))
    plots = write_crossplay(run_dir, matrices)
    for matrix in matrices:
        console.print("\n".join(matrix_lines(matrix)), markup=False, soft_wrap=True)
    shown = f" and {', '.join(plots)}" if plots else ""
    console.print(f"cross-play matrices in {run_dir}/{CROSSPLAY_MD}{shown}", markup=False)
    return status
