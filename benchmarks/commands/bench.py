"""``teamgym bench run|report|compare|perf``: reproducible, resumable benchmark runs.

``bench run SUITE`` plays a suite (shipped name or YAML path) into ``--out RUN_DIR`` and
prints the results table; the same command after a kill resumes. ``bench report RUN_DIR``
rewrites ``summary.json``, ``report.md`` and the plots; ``bench compare A B`` says whether two
runs reproduced each other, episode by episode (exit 1 when not), and with ``--paired`` whether
agent A beats agent B on the same seeds; ``bench perf`` times the envs.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
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
from rich.table import Table

from teamgym.benchmarks.commands import bench_compare, perf
from teamgym.benchmarks.commands.common import (
    CommandError,
    bad_input,
    non_negative_int,
    port,
    positive_int,
)
from teamgym.benchmarks.results import CorruptRunError

if TYPE_CHECKING:
    from teamgym.benchmarks.runner import RunProgress

NAME = "bench"

#: ``bench run``'s exit status when episodes errored (``bench compare`` uses 1, usage errors 2)
EXIT_ERRORED = 3

_RUN_EPILOG = (
    "exit status: 0 when every episode finished; "
    f"{EXIT_ERRORED} when episodes errored (the reasons are in RUN_DIR/report.md and "
    "results.jsonl; --allow-errors makes it 0); 2 for bad input; 130 when interrupted"
)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``bench`` and its subcommands."""
    p = sub.add_parser(NAME, help="benchmark runs: run a suite, report, compare, perf")
    inner = p.add_subparsers(dest="bench_command", required=True, metavar="SUBCOMMAND")
    _add_run(inner).set_defaults(run=_run)
    r = inner.add_parser("report", help="rewrite summary.json, report.md and plots of a run")
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.set_defaults(run=_report)
    f = inner.add_parser(
        "repair",
        help="set aside the lines of a run's results that are not episode records",
        description="Move every line of RUN_DIR/results.jsonl that is not an episode record "
        "(an edit, another writer) into results.rejected.jsonl, nothing lost; the next "
        "`bench run` into RUN_DIR plays those episodes again.",
    )
    f.add_argument("run_dir", metavar="RUN_DIR")
    f.set_defaults(run=_repair)
    bench_compare.add_parser(inner)
    perf.add_parser(inner).set_defaults(run=perf.run)
    return p


def _add_run(inner: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from teamgym.benchmarks.suites import shipped_suites

    p = inner.add_parser(
        "run",
        help="play a suite; write results.jsonl, summary.json, report.md and plots",
        description="Play a suite into RUN_DIR and print the results table; the same command "
        "after a kill resumes.",
        epilog=_RUN_EPILOG,
    )
    p.add_argument(
        "suite",
        metavar="SUITE",
        help=f"a shipped suite ({', '.join(sorted(shipped_suites()))}) or a YAML file",
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default: runs/SUITE)")
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="SPEC",
        help="replace the suite's agents (repeatable): random, expert, baselines, "
        "checkpoint:DIR, transformers:DIR, openai:MODEL@BASE_URL, or a YAML mapping such as "
        "'{kind: openai, model: M, base_url: URL, max_tokens: 64}'",
    )
    p.add_argument("--env", action="append", default=[], help="only these env ids of the suite")
    p.add_argument(
        "--episodes", type=positive_int, help="episodes per setting (replaces the suite's)"
    )
    p.add_argument(
        "--seed", type=non_negative_int, help="first episode seed (replaces the suite's)"
    )
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
    p.add_argument("--metrics-port", type=port, help="serve Prometheus gauges on this port")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress (a bar on a terminal, else a line every "
        f"{_Live.EVERY_S:g} s or {_Live.LINES} times a run)",
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
    return p


class _Live:
    """The progress of a run and its live figures (this session's episodes): a bar on a
    terminal; elsewhere (a CI log, a pipe) a plain line every :attr:`EVERY_S` seconds or
    :attr:`LINES` times a run, whichever comes first."""

    EVERY_S = 10.0
    """Seconds between plain progress lines at most (checked as episodes finish)."""
    LINES = 20
    """Plain progress lines per run at least (one per 5% of the episodes to play)."""

    def __init__(self, console: Console, name: str, total: int, quiet: bool, export: Any) -> None:
        self.console, self.export, self.name = console, export, name
        self.plain = not quiet and not console.is_terminal
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
            console=console,
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
                f"{run_dir} is complete: all {todo.total} episodes done; nothing to play",
                markup=False,
            )
        elif todo.done:
            self.console.print(
                f"resuming {run_dir}: {todo.done} of {todo.total} episodes done", markup=False
            )

    def finished(self, result: dict) -> None:
        """One more episode: advance, show the success rate so far, export the gauges."""
        t = self.tally
        if result["status"] == "ok":
            t["ok"] += 1
            t["success"] += bool(result["metrics"]["success"])
        else:
            t["errored"] += 1
        rate = t["success"] / t["ok"] if t["ok"] else 0.0
        errored = f", {t['errored']} errored" if t["errored"] else ""
        self.progress.update(self.task, advance=1, live=f"success {rate:.0%}{errored}")
        self.done += 1
        if self.plain:
            self._line(f"success {rate:.0%}{errored}")
        self.export({**(result["metrics"] or {}), "success": rate})

    def _line(self, live: str) -> None:
        """A plain progress line, when one is due."""
        now, played = time.monotonic(), self.tally["ok"] + self.tally["errored"]
        step = max(1, self.todo // self.LINES)
        if played % step and now - self.last < self.EVERY_S and played < self.todo:
            return
        self.last = now
        speed = played / max(now - self.start, 1e-6)
        self.console.print(
            f"{self.name}: {self.done}/{self.total} episodes, {speed:.1f} episodes/s, {live}",
            markup=False,
        )


def _run(args: argparse.Namespace, console: Console) -> int:
    """Load and check the suite and its agents, play what is missing, then report."""
    from teamgym.adapters.prometheus import EPISODE_GAUGES, record_exporter
    from teamgym.benchmarks.runner import RunDirError, check_agents, preflight, run_suite
    from teamgym.benchmarks.suites import SuiteError, load_suite

    with bad_input(SuiteError, ValueError):
        suite = load_suite(
            args.suite,
            agents=args.agent or None,
            envs=args.env or None,
            episodes=args.episodes,
            seed=args.seed,
        )
        check_agents(suite)
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
    live = _Live(console, suite.name, len(suite), args.quiet, export)
    try:
        with live.progress, bad_input(RunDirError, CorruptRunError), warnings.catch_warnings():
            warnings.simplefilter("always")
            run_suite(
                suite,
                run_dir,
                concurrency=args.concurrency,
                ray_address=args.ray,
                save_observations=args.save_observations,
                on_result=live.finished,
                on_plan=lambda todo: live.planned(todo, run_dir),
            )
    except KeyboardInterrupt:
        done = live.tally["ok"] + live.tally["errored"]
        console.print(
            f"interrupted: the {done} episodes finished in this session are saved in {run_dir}; "
            "run the same command to resume",
            markup=False,
        )
        return 130
    errored = _print_report(run_dir, console)
    if errored and not args.allow_errors:
        console.print(
            f"[red]error:[/red] {errored} of {len(suite)} episodes errored; the reasons are in "
            f"{escape(str(run_dir / 'report.md'))} and {escape(str(run_dir / 'results.jsonl'))} "
            f"(exit status {EXIT_ERRORED}; --allow-errors exits 0)",
            soft_wrap=True,
        )
        return EXIT_ERRORED
    return 0


def _print_report(run_dir: Path, console: Console) -> int:
    """Write and print the run's report; returns how many episodes errored."""
    from teamgym.benchmarks.report import columns_and_rows, write_report

    report = write_report(run_dir)
    rows, plots = report.rows, report.plots
    table = Table(title=escape(str(run_dir)), box=box.SIMPLE_HEAD, pad_edge=False)
    columns, cells = columns_and_rows(rows)
    for col in columns:
        left = col in ("env", "args", "agent", "fingerprint")
        table.add_column(col, justify="left" if left else "right", no_wrap=col != "args")
    for row in cells:
        table.add_row(*map(escape, row))
    if not console.is_terminal:  # a log or a pipe: whole rows, however wide
        wide = console.options.update(max_width=1000)
        console.width = max(console.width, console.measure(table, options=wide).maximum)
    console.print(table)
    errored = sum(r["errored"] for r in rows)
    if errored:
        console.print(
            f"[yellow]{errored} episodes errored[/yellow] (reasons in "
            f"{escape(str(run_dir / 'report.md'))}); "
            "run the same command again to retry them"
        )
    written = f"report.md and plots ({', '.join(plots)})" if plots else "report.md (no plots)"
    console.print(f"results, summary.json, {written} in {run_dir}", markup=False)
    return errored


def _repair(args: argparse.Namespace, console: Console) -> int:
    """Set the bad lines of a run's results aside, holding the run's lock."""
    from teamgym.benchmarks.results import JsonLines
    from teamgym.benchmarks.runner import RESULTS, RunDirError, locked

    run_dir = Path(args.run_dir)
    if not (run_dir / RESULTS).is_file():
        raise CommandError(f"{run_dir} holds no {RESULTS}: not a run directory")
    results = JsonLines(run_dir / RESULTS)
    with bad_input(RunDirError), locked(run_dir):
        moved = results.set_aside()
    if moved:
        console.print(
            f"set {moved} line(s) aside in {results.rejected}; `teamgym bench run` into "
            f"{run_dir} plays those episodes again",
            markup=False,
        )
    else:
        console.print(f"{results.path}: every line is an episode record", markup=False)
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
    with bad_input(FileNotFoundError, CorruptRunError):
        _print_report(Path(args.run_dir), console)
    return 0


def run(args: argparse.Namespace, console: Console) -> int:
    """Dispatched to the subcommand's ``run``."""
    return int(args.run(args, console))
