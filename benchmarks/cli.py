"""The ``teamgym`` command line.

``teamgym envs [ID]``  list the registered environments (or one env's arguments);
``teamgym play ENV``   play one agent yourself in the terminal; baselines play the rest;
``teamgym bench run SUITE``  play a benchmark suite (resumable); ``bench report|compare|perf``;
``teamgym serve DIR``  an OpenAI-compatible chat server over a local model directory;
``teamgym baselines``  every env with its baselines, one table (``bench run smoke`` does more);
``teamgym perf``       env speed next to lbforaging and MPE, observation cost, tokens (= ``bench perf``);
``teamgym verl-data``  parquet datasets for VERL (a row per episode; ``--layout row``: per agent);
``teamgym verl-bench`` throughput and concurrency of the VERL adapter;
``teamgym verl-kl-watch FILE``  warn when a VERL run's KL passes its target;
``teamgym train``     shared-reward GRPO on CPU (VERL's algorithms, a local model);
``teamgym learn-bench STAGE``  a learning benchmark: local model, warm-up, GRPO to a target;
``teamgym model init`` a small local model (tokenizer trained on the envs' text), no download.

Each command is a module of :mod:`teamgym.benchmarks.commands` (``add_parser`` + ``run``).
"""

from __future__ import annotations

import argparse
import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from rich.markup import escape

from teamgym.benchmarks.commands import (
    baselines,
    bench,
    envs,
    learn_bench,
    model,
    perf,
    play,
    serve,
    train,
    verl_bench,
    verl_data,
    verl_kl_watch,
)
from teamgym.benchmarks.commands.common import CommandError
from teamgym.benchmarks.commands.tables import console as make_console

__all__ = ["COMMANDS", "build_parser", "main"]

#: The subcommands, in the order ``teamgym --help`` lists them.
COMMANDS = (
    envs,
    play,
    bench,
    baselines,
    perf,
    serve,
    verl_data,
    verl_bench,
    verl_kl_watch,
    train,
    learn_bench,
    model,
)


#: top-level module -> the extra that installs it, for the "install the extra" hint
_EXTRAS = {
    "httpx": "llm",
    "torch": "train",
    "transformers": "train",
    "tokenizers": "train",
    "prometheus_client": "train",
    "ai2thor": "thor",
    "supersuit": "rl",
}


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default when it has one worth reading (not None, False or empty)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default = action.default
        if (
            default is None
            or default is False
            or default == argparse.SUPPRESS
            or default in ([], ())
        ):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's ``--help`` shows the defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from teamgym import __version__

    parser = _Parser(prog="teamgym", description=__doc__.split("\n", 1)[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=f"teamgym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(run=command.run)
    return parser


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
    *,
    others: Callable[..., None],
) -> None:
    """teamgym's own warnings as one ``warning:`` line on stderr (they say what to do; the
    source line Python adds says nothing to a user); other packages' warnings to ``others``,
    the handler that was in place."""
    if category.__module__.split(".")[0] == "teamgym":
        print(f"warning: {message}", file=sys.stderr if file is None else file)
    else:
        others(message, category, filename, lineno, file, line)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``teamgym`` command: bad input is an ``error:`` line and status 2, a
    missing extra says what to install, teamgym's warnings are ``warning:`` lines on stderr,
    anything else is a bug and shows its traceback."""
    args = build_parser().parse_args(argv)
    console = make_console()
    shown = warnings.showwarning
    warnings.showwarning = functools.partial(_show_warning, others=shown)
    try:
        return args.run(args, console)
    except ImportError as exc:
        extra = _EXTRAS.get((exc.name or "").split(".")[0], "verl")
        hint = (
            f"Install the extra: pip install 'teamgym[{extra}]' "
            f"(or pip install -e '.[{extra}]' in a clone)"
            + ("; torch==2.13.0 first on CPU" if extra in ("train", "verl") else "")
        )
        message = str(exc) if "pip install" in str(exc) else f"{exc}. {hint}"
        console.print(f"[red]error:[/red] {escape(message)}")
        return 2
    except CommandError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())
