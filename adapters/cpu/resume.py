"""Resuming a CPU training run: which settings of a run directory's ``args.json`` a new
command may change, and how a difference is said (:class:`RunSettingsError`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.cpu.seats import LORA_PREFIX
from teamgym.envs.lineup import resolve_spec

__all__ = [
    "FREE_ON_RESUME",
    "RunSettingsError",
    "changed_settings",
    "describe_changes",
    "settings_diff",
]


class RunSettingsError(ValueError):
    """A run directory holds a run (or a model) made with other settings than those asked
    for: resuming it would mix two experiments under one name."""


#: Settings a resumed run may change: how far it goes, where it reports, and where its
#: directory is (a run moved or copied elsewhere is the same run).
FREE_ON_RESUME = ("steps", "resume", "metrics_port", "out")
_NOT_SET = "(not set)"


def settings_diff(saved: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (saved, now)}`` for every key whose value differs once both are as JSON holds
    them (tuples as lists); a key one side lacks reads ``"(not set)"`` there."""
    old, new = json.loads(json.dumps(dict(saved))), json.loads(json.dumps(dict(now)))
    keys = sorted(old.keys() | new.keys())
    pairs = {k: (old.get(k, _NOT_SET), new.get(k, _NOT_SET)) for k in keys}
    return {k: pair for k, pair in pairs.items() if pair[0] != pair[1]}


def describe_changes(changed: Mapping[str, tuple[Any, Any]]) -> str:
    """``changed`` (from :func:`settings_diff` or :func:`changed_settings`) as one line for an
    error message: ``lr: 0.001 -> 0.0003; seed: 0 -> 1``."""
    return "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())


def changed_settings(
    saved: Mapping[str, Any], now: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """The settings of ``now`` (a ``TrainArgs`` as a dict) that differ from a run's
    ``args.json`` (``saved``), as ``{name: (saved, now)}``, :data:`FREE_ON_RESUME` left out.

    A field ``saved`` lacks (a run from an older release) counts as its default, a field
    ``TrainArgs`` no longer has is skipped, and paths (``model``, ``checkpoint:`` teachers and
    teammates) are compared where they point: relative to the run directory's parent when they
    lie under it (a stage's phases point at each other), so a moved run is the same run
    (``policy_model`` directories too)."""
    defaults = asdict(TrainArgs(model="", out=""))
    old = {k: saved.get(k, defaults.get(k, _NOT_SET)) for k in now}
    changed = settings_diff(_placed(old), _placed(now))
    return {k: (old[k], now[k]) for k in changed if k not in FREE_ON_RESUME}


def _placed(args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` with its paths as :func:`changed_settings` compares them."""
    base = Path(str(args.get("out") or ".")).resolve().parent

    def place(path: str) -> str:
        resolved = Path(path).resolve()
        return (
            f"<run>/{resolved.relative_to(base).as_posix()}"
            if resolved.is_relative_to(base)
            else str(resolved)
        )

    def policy(name: Any) -> Any:
        return resolve_spec(name, place) if isinstance(name, str) else name

    placed = dict(args)
    if placed.get("model"):
        placed["model"] = place(str(placed["model"]))
    placed["warmup_policy"] = policy(placed.get("warmup_policy"))
    if isinstance(placed.get("policy_model"), Mapping):  # directories, or lora:RANK
        placed["policy_model"] = {
            name: spec if spec.startswith(LORA_PREFIX) else place(spec)
            for name, spec in placed["policy_model"].items()
        }
    for key in ("teammates", "warmup_teachers"):
        if isinstance(placed.get(key), Mapping):
            placed[key] = {a: policy(v) for a, v in placed[key].items()}
    return placed
