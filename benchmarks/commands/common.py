"""What several commands share: bad-input errors, the ``KEY=VALUE`` flags, up-front checks."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from teamgym.names import CHECKPOINT_PREFIX

__all__ = [
    "CommandError",
    "add_env_arg",
    "add_teammate_arg",
    "bad_input",
    "check_baselines",
    "check_env",
    "check_teammates",
    "env_kwargs",
    "parse_pairs",
    "teammates",
]


class CommandError(Exception):
    """Bad input to a command: ``main`` prints ``error: <message>`` and exits with status 2."""


@contextmanager
def bad_input(*errors: type[Exception]) -> Iterator[None]:
    """Report ``errors`` raised in the block as bad input (a :class:`CommandError`), for calls
    whose exceptions of these types mean the user's input was wrong, not the code."""
    try:
        yield
    except errors as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise CommandError(str(message)) from exc


def parse_pairs(
    items: Sequence[str], flag: str, metavar: str = "KEY=VALUE", allow_empty: bool = False
) -> dict[str, str]:
    """The ``KEY=VALUE`` items of a repeatable flag as a dict (a later key wins); a malformed
    item exits with a message, as argparse does."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not (value or allow_empty):
            raise SystemExit(f"error: {flag} expects {metavar}, got {item!r}")
        out[key] = value
    return out


def add_env_arg(parser: argparse.ArgumentParser) -> None:
    """``--env-arg KEY=VALUE`` (repeatable), read by :func:`env_kwargs`."""
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor argument, e.g. num_agents=3 (repeatable)",
    )


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``--env-arg`` pairs, values read as YAML scalars (``3``, ``true``, ``text``)."""
    import yaml

    pairs = parse_pairs(args.env_arg, "--env-arg", allow_empty=True)
    return {key: yaml.safe_load(value) for key, value in pairs.items()}


def add_teammate_arg(parser: argparse.ArgumentParser) -> None:
    """``--teammate AGENT=BASELINE`` (repeatable), read by :func:`teammates`."""
    parser.add_argument(
        "--teammate",
        action="append",
        default=[],
        metavar="AGENT=BASELINE",
        help="an agent played by a baseline, not trained (repeatable): robot_0=expert, "
        f"robot_0=random, or robot_0={CHECKPOINT_PREFIX}DIR for a frozen model directory",
    )


def teammates(args: argparse.Namespace) -> dict[str, str]:
    """``--teammate`` pairs; checkpoint paths made absolute (rows may be read elsewhere)."""
    out = parse_pairs(args.teammate, "--teammate", metavar="AGENT=BASELINE")
    for agent, name in out.items():
        if name.startswith(CHECKPOINT_PREFIX):
            path = Path(name.removeprefix(CHECKPOINT_PREFIX)).resolve()
            out[agent] = f"{CHECKPOINT_PREFIX}{path}"
    return out


def check_env(env_id: str, kwargs: Mapping[str, Any] | None = None) -> None:
    """Build the env once, so an unknown id or argument is reported before any work."""
    from teamgym.envs import make

    with bad_input(KeyError, TypeError, ValueError):
        make(env_id, **(kwargs or {})).close()


def check_teammates(env_id: str, kwargs: Mapping[str, Any], names: Mapping[str, str]) -> None:
    """Refuse teammates that are not some (not all) of the env's agents."""
    from teamgym.adapters.verl.dataset import episode_rows

    with bad_input(ValueError):
        episode_rows(env_id, dict(kwargs), [0], "check", teammates=dict(names))


def check_baselines(env_id: str, names: Iterable[str]) -> None:
    """Build each named baseline once: an unknown name is reported, a checkpoint loaded."""
    from teamgym.envs.baselines import make_baseline

    with bad_input(KeyError, ValueError):
        for name in names:
            make_baseline(env_id, name)
