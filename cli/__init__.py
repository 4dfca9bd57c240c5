"""The ``teamgym`` command line.

``teamgym envs [ID]``  list the registered environments (or one env's arguments);
``teamgym play ENV``   play one agent yourself in the terminal; baselines play the rest;
``teamgym bench run SUITE``  play a benchmark suite (resumable); ``bench report|compare|perf``;
``teamgym serve DIR``  an OpenAI-compatible chat server over a local model directory;
``teamgym baselines``  every env with its baselines, one table (``bench run smoke`` does more);
``teamgym perf``       env speed next to lbforaging and MPE, observation cost, tokens (= ``bench perf``);
``teamgym verl-data``  parquet datasets for VERL (a row per episode);
``teamgym verl-bench`` throughput and concurrency of the VERL adapter;
``teamgym verl-kl-watch FILE``  warn when a VERL run's KL passes its target;
``teamgym train``     shared-reward GRPO on CPU (VERL's algorithms, a local model);
``teamgym learn-bench STAGE``  a learning benchmark: local model, warm-up, GRPO to a target;
``teamgym model init`` a small local model (tokenizer trained on the envs' text), no download.

Each command is a module of this package: ``add_parser(subparsers)`` declares its flags,
``run(args, console)`` does the work; :data:`COMMANDS` lists them in help order. The modules
they share: ``common`` (bad-input errors, argument types, up-front checks), ``tables`` (every
table they print), ``dataclass_args`` (flags from a dataclass's fields), ``playing`` (a suite
played from the command line, for ``bench run``, ``bench crossplay`` and ``play --web``).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.markup import escape

from teamgym.cli import (
    baselines,
    bench,
    envs,
    learn_bench,
    model,
    perf,
    play,
    serve,
    train,
    verl_alternate,
    verl_bench,
    verl_data,
    verl_kl_watch,
)
from teamgym.cli.common import CommandError
from teamgym.cli.tables import console as make_console

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
    verl_alternate,
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
    """Every (sub)command's ``--help`` shows the defaults; an unknown option is named with the
    closest known one (``--agnet``: did you mean ``--agent``?), by the command that got it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[Any, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        for arg in extras:
            if _is_option(arg):
                self.error(_unknown_option(self, arg))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        """A missing (sub)command after an unknown option (``teamgym --agnet``): the option is
        the news, the missing command second."""
        if message.startswith("the following arguments are required"):
            unknown = [
                a
                for a in self._given
                if _is_option(a) and a.split("=", 1)[0] not in self._option_string_actions
            ]
            if unknown:
                message = f"{_unknown_option(self, unknown[0])} ({message})"
        super().error(message)


def _is_option(arg: str) -> bool:
    """Whether a command-line word is meant as an option (not ``-``, ``--`` or ``-1``)."""
    return arg.startswith("-") and arg not in ("-", "--") and not arg[1:2].isdigit()


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every subcommand's parser under ``parser``, nested ones included (``bench run``)."""
    out: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                out += [sub, *_subcommands(sub)]
    return out


def _unknown_option(parser: argparse.ArgumentParser, arg: str) -> str:
    """``unknown option --agnet; did you mean --agent?``: the closest of ``parser``'s options,
    else of its subcommands' (naming them), else where the options are listed."""
    flag = arg.split("=", 1)[0]
    own = list(parser._option_string_actions)
    close = difflib.get_close_matches(flag, own, n=1, cutoff=0.6)
    if close:
        return f"unknown option {flag}; did you mean {close[0]}?"
    takers: dict[str, list[str]] = {}
    for sub in _subcommands(parser):
        for option in sub._option_string_actions:
            takers.setdefault(option, []).append(sub.prog)
    close = difflib.get_close_matches(flag, list(takers), n=1, cutoff=0.6)
    if close:
        return (
            f"unknown option {flag}; did you mean {close[0]} "
            f"(an option of {', '.join(takers[close[0]])})?"
        )
    return f"unknown option {flag}; {parser.prog} --help lists the options"


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
