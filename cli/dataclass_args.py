"""Command-line flags generated from a frozen dataclass: one ``--field-name`` per field, its
docstring the help, its default the default, so the settings are written once.

Scalars (``str``, ``int``, ``float``, ``X | None``, ``Literal[...]`` as choices) take one value,
``bool`` fields (default False) are switches, ``list[str]`` fields are repeatable flags whose
values replace the default (``''`` adds nothing, so ``--stop ''`` means none). Other fields need
a :class:`Custom` reading.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from teamgym.docstrings import field_docs

__all__ = ["Custom", "add_dataclass_args", "dataclass_from_args", "field_docs"]


@dataclasses.dataclass(frozen=True)
class Custom:
    """A field read from flags of its own: ``add`` declares them, ``read`` gives the value."""

    add: Callable[[argparse.ArgumentParser], None]
    read: Callable[[argparse.Namespace], Any]


def add_dataclass_args(
    parser: argparse.ArgumentParser, cls: type, custom: Mapping[str, Custom] | None = None
) -> None:
    """Add one flag per field of ``cls`` (in field order) to ``parser``."""
    custom = custom or {}
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for field in dataclasses.fields(cls):
        if field.name in custom:
            custom[field.name].add(parser)
        else:
            _add_field(parser, field, hints[field.name], docs.get(field.name, ""))


def _add_field(
    parser: argparse.ArgumentParser, field: dataclasses.Field, hint: Any, doc: str
) -> None:
    flag = "--" + field.name.replace("_", "-")
    doc = _help_text(doc)
    default = _default(field)
    if hint is bool:
        if default is not False:
            raise TypeError(f"{field.name}: a bool flag is a switch, so its default must be False")
        parser.add_argument(flag, action="store_true", help=doc)
    elif typing.get_origin(hint) is list:
        # an empty default needs no word: the field's docstring says what none means
        shown = f"; default: {' '.join(default)}; '' for none" if default else ""
        help = f"{doc} (repeatable{shown})"
        parser.add_argument(flag, action="append", default=None, help=help)
    else:
        kind, choices = _scalar(field.name, hint)
        required = default is dataclasses.MISSING
        # "%(default)s" (not the value): argparse fills it in, and a formatter that shows
        # defaults (the CLI's) sees it there and does not add a second one.
        help = doc if required or default is None else f"{doc} (default: %(default)s)"
        parser.add_argument(
            flag,
            type=kind,
            choices=choices,
            required=required,
            default=None if required else default,
            help=help,
        )


def _help_text(doc: str) -> str:
    """A docstring as argparse help: lower-case start (unless an acronym or a CamelCase name),
    no final full stop, ``%`` escaped."""
    first = doc.split(" ", 1)[0]
    if first[1:].islower():
        doc = doc[0].lower() + doc[1:]
    return doc.removesuffix(".").replace("%", "%%")


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _scalar(name: str, hint: Any) -> tuple[Callable[[str], Any], list[Any] | None]:
    """The argparse type (and choices) of a one-value field."""
    origin, parts = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return type(parts[0]), list(parts)
    if origin in (typing.Union, types.UnionType) and len(parts) == 2 and type(None) in parts:
        return _scalar(name, next(p for p in parts if p is not type(None)))
    if hint in (str, int, float):
        return hint, None
    raise TypeError(f"{name}: no flag for a field of type {hint}; give it a Custom reading")


def dataclass_from_args(
    cls: type, args: argparse.Namespace, custom: Mapping[str, Custom] | None = None
) -> Any:
    """The ``cls`` instance the flags of :func:`add_dataclass_args` describe."""
    custom = custom or {}
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in custom:
            values[field.name] = custom[field.name].read(args)
        elif typing.get_origin(hints[field.name]) is list:
            given = getattr(args, field.name)
            if given is not None:
                values[field.name] = [v for v in given if v]
        else:
            values[field.name] = getattr(args, field.name)
    return cls(**values)
