"""What an env takes: its constructor arguments with their effective defaults, types, meanings
and preset values, read from the code itself. ``teamgym envs ID`` prints it and the docs' env
pages render it, so neither can drift from the constructors.

Meanings come from the ``Args:`` section of each class's or ``__init__``'s docstring (the
env's own, then :class:`~teamgym.envs.text_env.TextParallelEnv`'s for the options every text
env shares); preset
values from the game's ``DIFFICULTIES`` table (see :mod:`teamgym.envs.presets`).
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from teamgym.docstrings import args_section
from teamgym.envs.presets import DEFAULT_DIFFICULTY
from teamgym.envs.registration import spec

__all__ = ["UNSTATED", "EnvArgument", "env_arguments", "success_criteria"]


@dataclass(frozen=True)
class EnvArgument:
    """One constructor argument of a registered env."""

    name: str
    default: str
    """The effective default as Python source: the registered id's own value when it sets one,
    the preset's (``medium``) when a preset fills it (``difficulty``: ``'medium'``, which None
    picks), else the constructor's."""
    type: str
    """The annotation, readable (``Literal['text', 'vector']``, not an alias name)."""
    meaning: str
    """The docstring's words for it ('' when it has none)."""
    owner: str
    """The class that declares it."""
    presets: dict[str, str] = field(default_factory=dict)
    """Difficulty name -> the value that preset gives (empty: not a preset argument)."""


def env_arguments(env_id: str) -> list[EnvArgument]:
    """Every constructor argument of ``env_id``: the env's own first, then the shared options.
    Raises ``KeyError`` for an unknown id (the registry's message)."""
    env_spec = spec(env_id)
    factory = env_spec.load()
    presets: Mapping[str, Mapping[str, Any]] = getattr(
        inspect.getmodule(factory), "DIFFICULTIES", {}
    )
    out, seen = [], set()
    for owner, fn, cls in _constructors(factory):
        meanings = args_section(inspect.getdoc(cls) or "") if cls is not None else {}
        meanings |= args_section(inspect.getdoc(fn) or "")
        hints = _hints(fn)
        for p in inspect.signature(fn).parameters.values():
            if p.name in seen or p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            seen.add(p.name)
            by_preset = {d: repr(v[p.name]) for d, v in presets.items() if p.name in v}
            default = env_spec.kwargs.get(p.name, p.default)
            if p.name not in env_spec.kwargs and by_preset and default in (None, "preset"):
                shown = f"{by_preset[DEFAULT_DIFFICULTY]} (preset)"
            elif p.name == "difficulty" and presets and default is None:
                shown = repr(DEFAULT_DIFFICULTY)  # None picks it: show what the game plays
            else:
                shown = "(required)" if default is inspect.Parameter.empty else repr(default)
            typed = _type_name(p.annotation, hints.get(p.name))
            meaning = meanings.get(p.name, "")
            out.append(EnvArgument(p.name, shown, typed, meaning, owner, by_preset))
    return out


def _constructors(factory: Any) -> list[tuple[str, Callable[..., Any], type | None]]:
    """(class name, ``__init__``, class) down the class chain, the env's own first; a factory
    function is its own constructor (and has no class)."""
    if not inspect.isclass(factory):
        return [(factory.__name__, factory, None)]
    return [
        (c.__name__, vars(c)["__init__"], c)
        for c in inspect.getmro(factory)
        if c is not object and "__init__" in vars(c)
    ]


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of ``fn`` (aliases expanded), or none when they cannot be."""
    try:
        return typing.get_type_hints(fn)
    except (NameError, TypeError):
        return {}


def _type_name(annotation: Any, resolved: Any) -> str:
    """The annotation as written (``int | None``), or its resolved form where it names a
    private alias (``_ObsMode`` -> ``Literal['text', 'vector']``)."""
    if annotation is inspect.Parameter.empty:
        return ""
    written = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if written and not re.search(r"\b_\w+", written):
        return written
    shown = str(resolved if resolved is not None else annotation)
    return re.sub(r"\btyping\.|\bcollections\.abc\.|\bteamgym\.[\w.]+\.", "", shown)


UNSTATED = "not stated by the env (its `outcome` event decides)"
"""What :func:`success_criteria` says for an env whose class has no ``success_criterion``."""


def success_criteria(env_ids: Iterable[str]) -> dict[str, str]:
    """Each env's one-line success criterion, its class's ``success_criterion``
    (:class:`~teamgym.envs.text_env.TextParallelEnv`), in first-seen order; :data:`UNSTATED`
    for an env that states none or that cannot be loaded here (a run read elsewhere)."""
    from teamgym.envs.registration import load_entry_point

    out = {}
    for env_id in dict.fromkeys(env_ids):
        try:
            try:
                factory = spec(env_id).load()
            except KeyError:
                factory = load_entry_point(env_id)  # an unregistered "module:attr" id
            stated = getattr(factory, "success_criterion", None)
        except (KeyError, ImportError, AttributeError, ValueError, TypeError):
            stated = None
        out[env_id] = stated if isinstance(stated, str) and stated else UNSTATED
    return out
