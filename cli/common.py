"""What several commands share: bad-input errors, count and ``KEY=VALUE`` flags, up-front checks."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from teamgym.names import CHECKPOINT_PREFIX

__all__ = [
    "CommandError",
    "add_env_arg",
    "add_teammate_arg",
    "add_warmup_teacher_arg",
    "bad_input",
    "check_baselines",
    "check_env",
    "check_envs",
    "check_teammates",
    "check_warmup_teachers",
    "env_kwargs",
    "non_negative_int",
    "parse_pairs",
    "port",
    "positive_int",
    "teammates",
    "warmup_teachers",
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


def _int_at_least(least: int, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def positive_int(text: str) -> int:
    """``type=`` of a count flag that must be 1 or more: ``--episodes 0`` is a usage error
    (argparse's ``error:`` line, status 2), not a failure deep in the run."""
    return _int_at_least(1, text)


def non_negative_int(text: str) -> int:
    """``type=`` of a count flag that may be 0."""
    return _int_at_least(0, text)


def unit_float(text: str) -> float:
    """``type=`` of a weight flag in [0, 1], else a usage error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value}")
    return value


def port(text: str) -> int:
    """``type=`` of a TCP port flag: 0 (a free port) to 65535, else a usage error."""
    value = _int_at_least(0, text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def parse_pairs(
    items: Sequence[str], flag: str, metavar: str = "KEY=VALUE", allow_empty: bool = False
) -> dict[str, str]:
    """The ``KEY=VALUE`` items of a repeatable flag as a dict (a later key wins); a malformed
    item is bad input (a :class:`CommandError`: ``error:`` and status 2, as argparse does)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not (value or allow_empty):
            raise CommandError(f"{flag} expects {metavar}, got {item!r}")
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
    return _agent_baselines(args.teammate, "--teammate")


def add_partner_arg(flag: str, help_text: str) -> Callable[[argparse.ArgumentParser], None]:
    """A ``flag SPEC[=WEIGHT]`` declaration (repeatable), read by :func:`partners_of`."""

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            flag, action="append", default=[], metavar="SPEC[=WEIGHT]", help=help_text
        )

    return add


def partners_of(flag: str) -> Callable[[argparse.Namespace], list[str]]:
    """The reader of ``flag``'s ``SPEC[=WEIGHT]`` values, ``checkpoint:`` paths made absolute
    (rows may be read elsewhere) and each checked (a bad weight is a usage error)."""
    attr = flag.removeprefix("--").replace("-", "_")

    def read(args: argparse.Namespace) -> list[str]:
        from teamgym.envs.lineup import resolve_spec
        from teamgym.envs.partners import parse_weighted

        out = []
        for text in getattr(args, attr):
            with bad_input(ValueError):
                spec, weight = parse_weighted(text)
            out.append(resolve_spec(spec) + ("" if text.strip() == spec else f"={weight:g}"))
        return out

    return read


def add_warmup_teacher_arg(parser: argparse.ArgumentParser) -> None:
    """``--warmup-teacher AGENT=BASELINE`` (repeatable), read by :func:`warmup_teachers`."""
    parser.add_argument(
        "--warmup-teacher",
        action="append",
        default=[],
        metavar="AGENT=BASELINE",
        help="the warm-up teacher of one agent, instead of --warmup-policy (repeatable): "
        f"robot_0=babbler, or robot_1={CHECKPOINT_PREFIX}DIR to replay a model's own replies",
    )


def warmup_teachers(args: argparse.Namespace) -> dict[str, str]:
    """``--warmup-teacher`` pairs; checkpoint paths made absolute, as for ``--teammate``."""
    return _agent_baselines(args.warmup_teacher, "--warmup-teacher")


def _agent_baselines(items: Sequence[str], flag: str) -> dict[str, str]:
    """``AGENT=BASELINE`` pairs of ``flag``, checkpoint paths made absolute."""
    from teamgym.envs.lineup import resolve_spec

    pairs = parse_pairs(items, flag, metavar="AGENT=BASELINE")
    return {agent: resolve_spec(name) for agent, name in pairs.items()}


def check_env(env_id: str, kwargs: Mapping[str, Any] | None = None) -> None:
    """Build the env once, so an unknown id or argument is reported before any work."""
    from teamgym.envs import make

    with bad_input(KeyError, TypeError, ValueError):
        make(env_id, **(kwargs or {})).close()


def check_envs(env_ids: Sequence[str], kwargs: Mapping[str, Any], chosen: bool) -> None:
    """:func:`check_env` for each env; when the envs were not ``chosen`` (no ``--env``: every
    registered env), a refusal says so and names the ``--env`` flags of the envs that accept
    ``kwargs``, since ``--env-arg`` then applies to every env."""
    refusals = {}
    for env_id in env_ids:
        try:
            check_env(env_id, kwargs)
        except CommandError as exc:
            if chosen or not kwargs:
                raise
            refusals[env_id] = str(exc) if env_id in str(exc) else f"{env_id}: {exc}"
    if refusals:
        first = next(iter(refusals.values()))
        takers = [e for e in env_ids if e not in refusals]
        hint = (
            f"{_and(takers)} {'takes' if len(takers) == 1 else 'take'} them: "
            + " ".join(f"--env {e}" for e in takers)
            if takers
            else "pick the env they are meant for with --env ENV"
        )
        raise CommandError(
            f"{first}\nWithout --env, --env-arg applies to every env and {_and(list(refusals))} "
            f"refused {', '.join(kwargs)}; {hint}"
        )


def _and(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def check_teammates(env_id: str, kwargs: Mapping[str, Any], names: Mapping[str, str]) -> None:
    """Refuse teammates that are not some (not all) of the env's agents."""
    from teamgym.adapters.verl.dataset import episode_rows

    with bad_input(ValueError):
        episode_rows(env_id, dict(kwargs), [0], "check", teammates=dict(names))


def check_warmup_teachers(settings: Any) -> None:
    """Refuse ``--warmup-teacher`` for an agent the env lacks or a ``--teammate`` plays: the
    command-line face of the one rule, :func:`teamgym.adapters.cpu.args.check_warmup_teachers`
    (this builds the env for its agents and makes a refusal a usage error)."""
    from teamgym.adapters.cpu.args import check_warmup_teachers as check
    from teamgym.envs import make

    env = make(settings.env, **settings.env_kwargs)
    try:
        with bad_input(ValueError):
            check(settings, list(env.possible_agents))
    finally:
        env.close()


def check_baselines(env_id: str, names: Iterable[str]) -> None:
    """Build each named baseline once: an unknown name is reported, a checkpoint loaded."""
    from teamgym.envs.baselines import make_baseline

    with bad_input(KeyError, ValueError):
        for name in names:
            make_baseline(env_id, name)
