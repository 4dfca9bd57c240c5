"""Run a command and print the peak memory of its whole process tree (Ray workers and vLLM
processes included), with its wall and CPU time.

``python scripts/peak_memory.py [--every S] -- COMMAND [ARGS...]``

Every ``--every`` seconds (default 1) it sums, over the command and all its descendants, the
proportional set size (PSS: each shared page split among the processes that map it, so shared
libraries and shared memory are counted once) and the resident set size (RSS, which counts
shared pages in every process and so over-states a many-process job). Prints both peaks and
the command's exit code, which it returns. ``--by-process`` also prints, at the PSS peak, each
process's share (its name, Ray's process title when it has one), largest first.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

import psutil


def _tree_memory(root: psutil.Process) -> tuple[int, int, list[tuple[int, str]]]:
    """(PSS, RSS) in bytes summed over ``root`` and its descendants that are still alive, and
    each process's (PSS, name)."""
    pss = rss = 0
    each = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
            title = " ".join(proc.cmdline())[:70] or proc.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        own = getattr(info, "pss", info.rss)
        pss += own
        rss += info.rss
        each.append((own, f"{proc.pid} {title}"))
    return pss, rss, each


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the command's exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument(
        "--by-process", action="store_true", help="print each process's PSS at the peak"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    start = time.perf_counter()
    proc = subprocess.Popen(command)
    root = psutil.Process(proc.pid)
    peak = [0, 0]
    at_peak: list[tuple[int, str]] = []
    done = threading.Event()
    cpu = [0.0]

    def sample() -> None:
        while not done.is_set():
            try:
                pss, rss, each = _tree_memory(root)
                times = [p.cpu_times() for p in [root, *root.children(recursive=True)]]
                cpu[0] = max(cpu[0], sum(t.user + t.system for t in times))
            except psutil.NoSuchProcess:
                break
            if pss > peak[0]:
                at_peak[:] = sorted(each, reverse=True)
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            done.wait(args.every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    rc = proc.wait()
    done.set()
    thread.join()
    wall = time.perf_counter() - start
    children = psutil.Process().cpu_times()
    cpu_s = max(cpu[0], children.children_user + children.children_system)
    print(
        f"peak_memory: peak PSS {peak[0] / 2**30:.2f} GiB, peak RSS (summed) "
        f"{peak[1] / 2**30:.2f} GiB, wall {wall:.0f} s, CPU {cpu_s:.0f} s, exit {rc}",
        file=sys.stderr,
    )
    if args.by_process:
        for own, title in at_peak:
            print(f"peak_memory:   {own / 2**30:6.2f} GiB  {title}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
