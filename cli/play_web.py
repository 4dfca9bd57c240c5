"""``teamgym play ENV --web``: people play seats through a page in the browser; any agent spec
plays the others; every finished episode goes into a run directory as ``bench run`` writes it.

The session is an ordinary suite: the agent under test is ``human:NAME`` (``human:alice+bob``
for several people, each with a link of their own), each ``--teammates SPEC`` is its partner in
the other seats, ``--episodes`` seeds each. So the run directory, the resume after a stop
(``human/`` keeps the replies of an unfinished episode), ``bench report`` and ``bench
compare`` are ``bench run``'s. ``--replay RUN_DIR`` plays a recorded session again from its
replies, without the page, and says whether every trajectory hash came out the same.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from teamgym.cli.common import CommandError, bad_input, env_kwargs

__all__ = ["run_web", "web_source"]


def web_source(
    env_id: str,
    agents: list[str],
    people: list[str],
    seats: list[str],
    teammates: list[Any],
    *,
    episodes: int,
    seed: int,
    kwargs: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    """The suite of a web session: ``people`` in ``seats`` of the env's ``agents``, each
    teammate spec in the rest."""
    unknown = [s for s in seats if s not in agents]
    if unknown:
        raise ValueError(f"{env_id} has no agent {', '.join(unknown)}; agents: {', '.join(agents)}")
    human = {"kind": "human", "name": "+".join(people), **options}
    others = [a for a in agents if a not in seats]
    base: dict[str, Any] = {
        "id": env_id,
        "agents": [human],
        **({"kwargs": kwargs} if kwargs else {}),
    }
    entries = (
        [{**base, "partner": t, "partner_seats": others} for t in teammates] if others else [base]
    )
    return {
        "name": "play",
        "description": f"people ({', '.join(people)}) in {', '.join(seats)} of {env_id}",
        "seed": seed,
        "episodes": episodes,
        "envs": entries,
    }


def run_web(args: argparse.Namespace, console: Console) -> int:
    """Serve the page, play the session's episodes, print the results table."""
    from teamgym.benchmarks.runner import check_agents
    from teamgym.benchmarks.suites import SuiteError, inline_agent, parse_suite
    from teamgym.cli.playing import play_suite
    from teamgym.envs import make, spec

    people = args.name or ["player"]
    default_out = Path("runs") / f"play-{'+'.join(people)}"
    if args.replay:
        default_out = Path(f"{Path(args.replay).as_posix().rstrip('/')}-replay")
    out = Path(args.out or default_out)
    if args.replay and out.resolve() == Path(args.replay).resolve():
        raise CommandError("--replay needs another --out than the run it replays")
    with bad_input(KeyError, TypeError, ValueError, SuiteError):
        kwargs = env_kwargs(args)
        env = make(args.env, **kwargs)
        first, agents = env.possible_agents[0], list(env.possible_agents)
        env.close()
        seats = [s.strip() for s in (args.agent or first).split(",") if s.strip()]
        if len(people) > len(seats):
            raise ValueError(
                f"{len(people)} people for {len(seats)} seat(s): give each person a seat, "
                f"e.g. --agent {','.join(agents[: len(people)])}"
            )
        teammates = [inline_agent(t) for t in args.teammates] or [
            "expert" if "expert" in spec(args.env).baselines else "random"
        ]
        options: dict[str, Any] = {
            "host": args.host,
            "port": args.port,
            "seats": seats,
            "journal": str(out / "human"),
        }
        if args.replay:
            options["replay"] = str(Path(args.replay))
        source = web_source(
            args.env,
            agents,
            people,
            seats,
            teammates,
            episodes=args.episodes,
            seed=args.seed,
            kwargs=kwargs,
            options=options,
        )
        suite = parse_suite(source, where="teamgym play --web")
        check_agents(suite)  # also says to install teamgym[web] when FastAPI is missing
    if not args.replay:
        from teamgym.web.server import bind

        try:  # a taken port is said now, not at the first person's turn
            bind(args.host, args.port).close()
        except OSError as exc:
            raise CommandError(str(exc)) from None
    play_args = argparse.Namespace(
        out=str(out),
        no_preflight=False,
        metrics_port=None,
        quiet=args.replay is None,
        concurrency=1,
        ray=None,
        save_observations=True,
        no_trajectories=False,
        allow_errors=False,
    )
    status = play_suite(suite, play_args, console)
    if args.replay and status == 0:
        return _compare_hashes(Path(args.replay), out, console)
    return status


def _hashes(run_dir: Path) -> dict[str, str]:
    """Each ok episode's trajectory hash in ``run_dir``, by key."""
    path = run_dir / "results.jsonl"
    out = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        result = json.loads(line)
        if result.get("status") == "ok":
            out[result["key"]] = result["trajectory_hash"]
    return out


def _compare_hashes(old: Path, new: Path, console: Console) -> int:
    """Say whether the replay reproduced every recorded trajectory hash: the same episodes,
    at least one, each with its hash (exit 1 if not)."""
    before, after = _hashes(old), _hashes(new)
    same = [k for k in after if before.get(k) == after[k]]
    console.print(
        f"replay: {len(same)} of {len(before)} recorded episodes reproduce their trajectory "
        f"hash ({old} -> {new})",
        markup=False,
    )
    return 0 if before and set(before) == set(after) == set(same) else 1
