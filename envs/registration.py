"""The environment registry: versioned ids (``name-vN``) mapped to lazy entry points.

Registering is cheap and safe to repeat with ``force=True``: it stores strings, imports
nothing. Third-party packages add environments through the ``teamgym.envs`` entry-point group
(the entry point's name is the id, its value the ``"module:attr"`` factory), read the first time
:func:`make`, :func:`spec` or :func:`registry` needs them. ``make("pkg.module:attr")`` builds any
ParallelEnv factory without registering it, e.g. a PettingZoo env from another package.

Every registered id is mirrored into Gymnasium's own registry as ``teamgym/<id>`` (a namespaced
id ``ns/name-vN`` keeps its own namespace), with the string entry point
:data:`GYMNASIUM_ENTRY_POINT`: ``gymnasium.make("teamgym/foraging-v0", obs_mode="vector")``
works after ``import teamgym.envs`` and imports the Gymnasium adapter only then.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium
from gymnasium.envs.registration import parse_env_id
from pettingzoo import ParallelEnv

__all__ = [
    "ENTRY_POINT_GROUP",
    "GYMNASIUM_ENTRY_POINT",
    "GYMNASIUM_NAMESPACE",
    "EnvSpec",
    "gymnasium_id",
    "latest_versions",
    "load_entry_point",
    "make",
    "register",
    "register_gymnasium",
    "registry",
    "spec",
]

#: Entry-point group through which installed packages register environments.
ENTRY_POINT_GROUP = "teamgym.envs"
_ID = re.compile(r"^(?:[A-Za-z0-9_.]+/)?[A-Za-z0-9][A-Za-z0-9_.-]*-v\d+$")
#: Gymnasium namespace of the ids that have none of their own (``teamgym/foraging-v0``).
GYMNASIUM_NAMESPACE = "teamgym"
#: What Gymnasium builds for a mirrored id (a string: registering imports nothing).
GYMNASIUM_ENTRY_POINT = "teamgym.adapters.rl.gymnasium:TeamGymEnv"


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered environment."""

    id: str
    """Versioned id, ``name-vN`` (optionally ``namespace/name-vN``); bump N when behaviour changes."""
    entry_point: str | Callable[..., Any]
    """``"module:attr"`` (imported on first use) or the factory itself."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Default keyword arguments, overridden by those given to :func:`make`."""
    description: str | None = None
    """One line for :func:`registry`; the factory's first docstring line when None."""
    baselines: Mapping[str, str] = field(default_factory=dict)
    """Name -> ``"module:attr"`` of scripted policies for this env (``random`` is always there)."""

    def load(self) -> Callable[..., Any]:
        """The factory (class or function) behind this id."""
        return load_entry_point(self.entry_point)

    def summary(self) -> str:
        """The one-line description."""
        if self.description:
            return self.description
        doc = inspect.getdoc(self.load()) or ""
        return doc.strip().split("\n", 1)[0] if doc else ""


_REGISTRY: dict[str, EnvSpec] = {}
_plugins_loaded = False


def load_entry_point(entry_point: str | Callable[..., Any]) -> Callable[..., Any]:
    """Resolve ``"module:attr"`` (or ``"module.attr"``) to the object it names."""
    if callable(entry_point):
        return entry_point
    if not isinstance(entry_point, str) or not entry_point:
        raise TypeError(
            f"an entry point is a 'module:attr' string or a callable, got {entry_point!r}"
        )
    module_name, sep, attr = entry_point.partition(":")
    if not sep:
        module_name, _, attr = entry_point.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"entry point {entry_point!r} must look like 'package.module:Attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"cannot import {module_name!r} for entry point {entry_point!r}: {exc}. "
            "Is the package that provides it installed (with its extras)?"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(
                f"{module_name!r} has no attribute {attr!r} (entry point {entry_point!r})"
            ) from None
    return obj


def register(
    id: str,
    entry_point: str | Callable[..., Any],
    *,
    description: str | None = None,
    baselines: Mapping[str, str] | None = None,
    force: bool = False,
    **default_kwargs: Any,
) -> EnvSpec:
    """Register ``id`` -> ``entry_point`` with default constructor kwargs.

    Re-registering an id raises unless ``force=True`` (which replaces it).
    """
    if not isinstance(id, str) or not _ID.match(id):
        raise ValueError(
            f"environment id {id!r} must be versioned like 'name-v0' (optionally 'namespace/name-v0')"
        )
    if id in _REGISTRY and not force:
        raise ValueError(
            f"environment id {id!r} is already registered (to {_REGISTRY[id].entry_point!r}); "
            "pass force=True to replace it, or register a new version 'name-vN+1'"
        )
    env_spec = EnvSpec(id, entry_point, dict(default_kwargs), description, dict(baselines or {}))
    _REGISTRY[id] = env_spec
    register_gymnasium(id)
    return env_spec


def gymnasium_id(id: str, namespace: str = GYMNASIUM_NAMESPACE) -> str:
    """The Gymnasium id of a teamgym id: ``<namespace>/<id>``, or ``id`` when it has a namespace."""
    return id if "/" in id else f"{namespace}/{id}"


def register_gymnasium(id: str, namespace: str = GYMNASIUM_NAMESPACE) -> str | None:
    """Mirror teamgym ``id`` into Gymnasium's registry (single-agent view, teammates scripted,
    see :mod:`teamgym.adapters.rl.gymnasium`); returns the Gymnasium id, or None for an id that
    Gymnasium cannot spell (its namespaces allow no ``.``).

    Cheap and safe to repeat: it stores strings and keeps an id Gymnasium already has. The
    Gymnasium spec names the teamgym id, so a later ``register(id, ..., force=True)`` is what
    ``gymnasium.make`` builds.
    """
    gym_id = gymnasium_id(id, namespace)
    if gym_id in gymnasium.registry:
        return gym_id
    try:
        parse_env_id(gym_id)
    except gymnasium.error.Error:
        return None
    gymnasium.register(id=gym_id, entry_point=GYMNASIUM_ENTRY_POINT, kwargs={"env_id": id})
    return gym_id


def _load_plugins() -> None:
    """Register the environments that installed packages declare (once; broken ones warn)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue  # explicit registrations win over plugins of the same id
        try:
            register(ep.name, ep.value)
        except ValueError as exc:
            dist = getattr(ep.dist, "name", "?")
            warnings.warn(
                f"skipping environment plugin {ep.name!r} from {dist}: {exc}", stacklevel=2
            )


def spec(id: str) -> EnvSpec:
    """The :class:`EnvSpec` of a registered id; unknown ids raise naming close matches."""
    _load_plugins()
    try:
        return _REGISTRY[id]
    except KeyError:
        pass
    close = _close_ids(id, list(_REGISTRY))
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise KeyError(
        f"unknown environment id {id!r}.{hint} Registered: {', '.join(sorted(_REGISTRY)) or 'none'}. "
        "See teamgym.envs.registry() or `teamgym envs`."
    ) from None


def _close_ids(id: str, known: list[str]) -> list[str]:
    """Registered ids whose name (the part before ``-vN``) is close to ``id``'s: a typo or a
    wrong version, never an unrelated env (``nosuch-v0`` offers nothing)."""

    def parts(env_id: str) -> tuple[str, str]:
        name, sep, version = env_id.rpartition("-v")
        return (name, version) if sep and version.isdigit() else (env_id, "")

    name, version = parts(id)
    by_name: dict[str, list[str]] = {}
    for k in sorted(known):
        by_name.setdefault(parts(k)[0], []).append(k)
    out: list[str] = []
    for close in difflib.get_close_matches(name, list(by_name), n=3, cutoff=0.7):
        ids = by_name[close]
        same = [k for k in ids if parts(k)[1] == version and version]
        out += same or ids
    return out


def registry() -> dict[str, str]:
    """Every registered id with its one-line description, sorted by id."""
    _load_plugins()
    out = {}
    for env_id in sorted(_REGISTRY):
        try:
            out[env_id] = _REGISTRY[env_id].summary()
        except (ImportError, AttributeError) as exc:
            out[env_id] = f"(unavailable: {exc})"
    return out


def latest_versions(ids: Iterable[str]) -> list[str]:
    """The newest version of each env among ``ids`` (``signal-v1`` supersedes ``signal-v0``),
    in the order given: what "every env" means for benchmarks and tables."""
    ids = list(ids)
    newest: dict[str, tuple[int, str]] = {}
    for env_id in ids:
        name, _, version = env_id.rpartition("-v")
        key, number = (name, int(version)) if name and version.isdigit() else (env_id, 0)
        if key not in newest or number > newest[key][0]:
            newest[key] = (number, env_id)
    keep = {env_id for _, env_id in newest.values()}
    return [env_id for env_id in ids if env_id in keep]


def _accepted_kwargs(factory: Callable[..., Any]) -> set[str] | None:
    """Keyword names ``factory`` accepts, following ``**kwargs`` up the parent ``__init__``s of
    a class; None when it accepts anything (or has no readable signature)."""
    if inspect.isclass(factory):
        chain = [
            vars(c)["__init__"]
            for c in inspect.getmro(factory)
            if c is not object and "__init__" in vars(c)
        ]
    else:
        chain = [factory]
    accepted: set[str] = set()
    for fn in chain:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return None
        accepted |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return accepted - {"self"}
    return None


def _check_kwargs(factory: Callable[..., Any], kwargs: Mapping[str, Any], what: str) -> None:
    """Raise a TypeError naming the accepted keywords when ``kwargs`` has unknown ones."""
    accepted = _accepted_kwargs(factory)
    unknown = sorted(set(kwargs) - accepted) if accepted is not None else []
    if unknown:
        raise TypeError(
            f"{what} got unknown argument(s) {', '.join(map(repr, unknown))}; "
            f"accepted: {', '.join(sorted(accepted or ()))}"
        )


def make(id: str, **overrides: Any) -> Any:
    """Build a registered environment (``make("signal-v1", num_agents=3)``) or, for an id of the
    form ``"module:attr"``, any ParallelEnv factory, e.g. ``make("mpe2.simple_spread_v3:parallel_env")``.
    """
    if ":" in id and not _ID.match(id) and id not in _REGISTRY:
        factory, kwargs, what = load_entry_point(id), dict(overrides), id
    else:
        env_spec = spec(id)
        factory, kwargs, what = env_spec.load(), {**env_spec.kwargs, **overrides}, id
    _check_kwargs(factory, kwargs, what)
    env = factory(**kwargs)
    if not isinstance(env, ParallelEnv):
        raise TypeError(
            f"{what} built a {type(env).__name__}, not a pettingzoo.ParallelEnv; "
            "for an AEC env, wrap it with pettingzoo.utils.conversions.aec_to_parallel"
        )
    return env
