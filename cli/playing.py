"""Play a suite from the command line: the progress, the run, the printed results table and
the exit status, shared by ``bench run`` and ``bench crossplay``."""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from teamgym.benchmarks.results import CorruptRunError
from teamgym.cli.common import CommandError, bad_input, port, positive_int
from teamgym.cli.tables import console as make_console
from teamgym.cli.tables import print_summary

if TYPE_CHECKING:
    from teamgym.benchmarks.runner import RunProgress
    from teamgym.benchmarks.suites import Suite

__all__ = ["EXIT_ERRORED", "RUN_EPILOG", "add_play_options", "pace", "play_suite", "print_report"]

#: ``bench run``'s exit status when episodes errored (``bench compare`` uses 1, usage errors 2)
EXIT_ERRORED = 3

RUN_EPILOG = (
    "exit status: 0 when every episode finished; "
    f"{EXIT_ERRORED} when episodes errored (the reasons are in RUN_DIR/report.md and "
    "results.jsonl; --allow-errors makes it 0); 2 for bad input; 130 when interrupted"
)


class Live:
    """The progress of a run (this session's episodes), on stderr so that a redirected stdout
    holds the results table alone: a bar on a terminal; elsewhere (a CI log, a pipe) a plain
    line every :attr:`EVERY_S` seconds or :attr:`LINES` times a run, whichever comes first.
    The line counts finished and errored episodes; success rates are per env and agent, so they
    are the table's, not a run-wide average's."""

    EVERY_S = 10.0
    """Seconds between plain progress lines at most (checked as episodes finish)."""
    LINES = 20
    """Plain progress lines per run at least (one per 5% of the episodes to play)."""

    def __init__(self, console: Console, name: str, total: int, quiet: bool, export: Any) -> None:
        self.console, self.export, self.name = console, export, name
        self.err = make_console(stderr=True)
        self.plain = not quiet and not self.err.is_terminal
        self.tally = {"ok": 0, "success": 0, "errored": 0}
        self.done, self.total, self.todo = 0, total, total
        self.start = self.last = time.monotonic()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[live]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.err,
            transient=True,
            disable=quiet or self.plain,
        )
        self.task = self.progress.add_task(escape(name), total=total, live="")

    def planned(self, todo: RunProgress, run_dir: Path) -> None:
        """Start the bar where a resumed run stands."""
        self.progress.update(self.task, completed=todo.done)
        self.done, self.todo = todo.done, len(todo.todo)
        self.start = self.last = time.monotonic()
        if todo.done and not todo.todo:
            self.console.print(
                f"{run_dir} is complete: {'all ' * (todo.total > 1)}{_episodes(todo.total)} "
                "done; nothing to play",
                markup=False,
            )
        elif todo.done:
            self.console.print(
                f"resuming {run_dir}: {todo.done} of {todo.total} episodes done", markup=False
            )

    def finished(self, result: dict) -> None:
        """One more episode: advance, count it, export the gauges."""
        t = self.tally
        if result["status"] == "ok":
            t["ok"] += 1
            t["success"] += bool(result["metrics"]["success"])
        else:
            t["errored"] += 1
        rate = t["success"] / t["ok"] if t["ok"] else 0.0
        errored = f"{t['errored']} errored" if t["errored"] else ""
        self.progress.update(self.task, advance=1, live=errored)
        self.done += 1
        if self.plain:
            self._line(errored)
        self.export({**(result["metrics"] or {}), "success": rate})

    def _line(self, live: str) -> None:
        """A plain progress line, when one is due."""
        now, played = time.monotonic(), self.tally["ok"] + self.tally["errored"]
        step = max(1, self.todo // self.LINES)
        if played % step and now - self.last < self.EVERY_S and played < self.todo:
            return
        self.last = now
        self.err.print(
            f"{self.name}: {self.done}/{self.total} episodes, {pace(played, now - self.start)}"
            + (f", {live}" if live else ""),
            markup=False,
        )


def pace(episodes: int, seconds: float) -> str:
    """Episodes per second, or seconds per episode when that is under 1 (an LLM's pace)."""
    if episodes and seconds / episodes > 1:
        return f"{seconds / episodes:.0f} s/episode"
    return f"{episodes / max(seconds, 1e-6):.1f} episodes/s"


def add_play_options(p: argparse.ArgumentParser) -> None:
    """The options of how a suite is played (concurrency, Ray, outputs, checks)."""
    p.add_argument(
        "--concurrency", type=positive_int, default=4, help="episodes in flight (LLM agents)"
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="spread episodes over Ray: a local instance, or the cluster at ADDRESS",
    )
    p.add_argument(
        "--save-observations", action="store_true", help="keep observations in trajectories.jsonl"
    )
    p.add_argument(
        "--no-trajectories",
        action="store_true",
        help="write no trajectories.jsonl (every reply, reward and event: ~34 MB for the smoke "
        "suite); results.jsonl keeps each episode's trajectory hash",
    )
    p.add_argument("--metrics-port", type=port, help="serve Prometheus gauges on this port")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress (a bar on a terminal, else a line every "
        f"{Live.EVERY_S:g} s or {Live.LINES} times a run)",
    )
    p.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the request to each LLM server (GET BASE_URL/models) made before the first "
        "episode",
    )
    p.add_argument(
        "--allow-errors",
        action="store_true",
        help=f"exit 0 even when episodes errored (default: exit {EXIT_ERRORED})",
    )


def play_suite(suite: Suite, args: argparse.Namespace, console: Console) -> int:
    """Play what is missing of a checked ``suite`` into ``args.out`` (default
    ``runs/SUITE``), then print the results table; returns the exit status."""
    from teamgym.adapters.prometheus import EPISODE_GAUGES, record_exporter
    from teamgym.benchmarks.runner import RunDirError, preflight, run_suite

    if args.ray is not None:
        from teamgym.benchmarks.ray_runner import require_ray

        require_ray()
    run_dir = Path(args.out or Path("runs") / suite.name)
    if not args.no_preflight:
        try:
            preflight(suite, run_dir)
        except ValueError as exc:
            raise CommandError(f"{exc} (--no-preflight skips this check)") from None
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(
            f"cannot create the run directory {run_dir} ({exc.strerror}); pass another --out"
        ) from None
    try:
        export = record_exporter(args.metrics_port, EPISODE_GAUGES)
    except OSError as exc:  # the port is taken, or not ours to take
        raise CommandError(
            f"cannot serve metrics on port {args.metrics_port} ({exc.strerror or exc}); "
            "pick another --metrics-port"
        ) from None
    live = Live(console, suite.name, len(suite), args.quiet, export)
    try:
        with live.progress, bad_input(RunDirError, CorruptRunError), warnings.catch_warnings():
            warnings.simplefilter("always")
            run_suite(
                suite,
                run_dir,
                concurrency=args.concurrency,
                ray_address=args.ray,
                save_observations=args.save_observations,
                write_trajectories=not args.no_trajectories,
                on_result=live.finished,
                on_plan=lambda todo: live.planned(todo, run_dir),
                on_people=_people_journal,
            )
    except KeyboardInterrupt:
        done = live.tally["ok"] + live.tally["errored"]
        console.print(_interrupted(done, run_dir), markup=False)
        return 130
    errored = print_report(run_dir, console)
    if errored and not args.allow_errors:
        console.print(
            f"[red]error:[/red] {errored} of {len(suite)} episodes errored; the reasons are in "
            f"{escape(str(run_dir / 'report.md'))} and {escape(str(run_dir / 'results.jsonl'))} "
            f"(exit status {EXIT_ERRORED}; --allow-errors exits 0)",
            soft_wrap=True,
        )
        return EXIT_ERRORED
    return 0


def _people_journal(run_dir: Path) -> None:
    """A run that seats people keeps their unfinished episodes' replies in ``RUN_DIR/human``
    (the web agent is imported only then: the page is an extra)."""
    from teamgym.web.agent import use_run_journal

    use_run_journal(run_dir)


def _episodes(n: int) -> str:
    """``1 episode``, ``2 episodes``: a count of episodes as a sentence says it."""
    return f"{n} episode" if n == 1 else f"{n} episodes"


def _interrupted(done: int, run_dir: Path) -> str:
    """What an interrupted run says: this session's finished episodes are kept (resumable)."""
    if not done:
        return "interrupted: no episode finished in this session; run the same command to resume"
    saved = "is saved" if done == 1 else "are saved"
    return (
        f"interrupted: the {_episodes(done)} finished in this session {saved} in {run_dir}; "
        "run the same command to resume"
    )


def print_report(run_dir: Path, console: Console) -> int:
    """Write and print the run's report; returns how many episodes errored."""
    from teamgym.benchmarks.report import write_report

    report = write_report(run_dir)
    rows, plots = report.rows, report.plots
    print_summary(console, rows, str(run_dir))
    errored = sum(r["errored"] for r in rows)
    if errored:
        console.print(
            f"[yellow]{_episodes(errored)} errored[/yellow] (reasons in "
            f"{escape(str(run_dir / 'report.md'))}); "
            "run the same command again to retry them"
        )
    written = f"report.md and plots ({', '.join(plots)})" if plots else "report.md (no plots)"
    console.print(f"results, summary.json, {written} in {run_dir}", markup=False)
    return errored
