"""``bench perf --compare``: two perf reports' figures side by side.

**Comparison** (``--compare OLD.json``): :func:`compare_reports` matches two reports' figures by
section, row key (:data:`COMPARED`: env id, team size, observation mode...) and field, and gives
each one's ratio new/old, or says it is only in the new report or only in the old one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COMPARED",
    "FigureChange",
    "check_report",
    "compare_reports",
    "load_report",
    "setting_differences",
]

#: Per report section: the fields that key its rows (the same in every run) and the figures
#: compared. Settings (agent-steps, episodes, turns) and signed trends (growth) are not compared.
COMPARED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "speed": (
        ("env_id", "num_agents", "obs_mode"),
        ("us_per_agent_step", "us_per_reset", "obs_share"),
    ),
    "references": (("env_id", "num_agents"), ("us_per_agent_step", "us_per_reset")),
    "ratios": (("env_id", "reference", "num_agents"), ("text", "vector")),
    "tokens": (("env_id", "num_agents"), ("mean", "max", "first", "last", "instructions")),
    "verl": (
        ("episodes", "num_agents", "latency_s"),
        ("seconds", "overhead_per_turn_ms", "ratio"),
    ),
}


@dataclass(frozen=True)
class FigureChange:
    """One figure of two reports side by side (``bench perf --compare``)."""

    section: str
    """The report's section: speed, references, ratios, tokens or verl."""
    key: tuple[Any, ...]
    """The row's key (the values of ``COMPARED[section][0]``), e.g. ``("signal-v1", 2, "text")``."""
    figure: str
    """The field, e.g. ``us_per_agent_step``."""
    old: float | None
    """None: only in the new report."""
    new: float | None
    """None: only in the old report (gone)."""

    @property
    def ratio(self) -> float | None:
        """``new / old`` (above 1: slower, or more tokens); None unless both are there and old
        is not 0."""
        if self.old is None or self.new is None or self.old == 0:
            return None
        return self.new / self.old


def compare_reports(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FigureChange]:
    """Every figure of two reports (the JSON of :class:`PerfReport`s) matched by section, row key
    and field: in both, only in the new one (``old`` None) or only in the old one (``new``
    None). In the new report's order, rows only in the old one last in their section; a
    ValueError when either is not a perf report."""
    check_report(old)
    check_report(new)
    out = []
    for section, (_, figures) in COMPARED.items():
        before, after = _rows(old, section), _rows(new, section)
        for key in dict.fromkeys([*after, *before]):
            a, b = before.get(key, {}), after.get(key, {})
            out += [
                FigureChange(section, key, f, a.get(f), b.get(f))
                for f in figures
                if a.get(f) is not None or b.get(f) is not None
            ]
    return out


def check_report(report: Any) -> None:
    """ValueError, saying what is wrong, unless ``report`` is a perf report's JSON (a section an
    older report lacks counts as empty, but ``speed`` must be there)."""
    if not isinstance(report, dict) or not isinstance(report.get("speed"), list):
        raise ValueError("no 'speed' list")
    if not isinstance(report.get("settings", {}), dict):
        raise ValueError("'settings' is not a mapping")
    for section in COMPARED:
        _rows(report, section)


def _rows(report: Mapping[str, Any], section: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A section's rows by key; ValueError when they are not rows with the key and numbers."""
    keys, figures = COMPARED[section]
    rows = report.get(section) or []
    rows = [rows] if isinstance(rows, dict) else rows  # verl: one row or None
    if not isinstance(rows, list) or not all(_is_row(r, keys, figures) for r in rows):
        raise ValueError(f"'{section}' is not a list of rows with {', '.join(keys)} and numbers")
    return {tuple(r[k] for k in keys): r for r in rows}


def _is_row(row: Any, keys: Sequence[str], figures: Sequence[str]) -> bool:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    return (
        isinstance(row, dict)
        and all(isinstance(row.get(k), (str, int, float)) for k in keys)
        and all(row.get(f) is None or number(row[f]) for f in figures)
    )


def load_report(path: str | Path) -> dict[str, Any]:
    """The report a ``bench perf --out`` wrote at ``path``; a ValueError naming the file when it
    cannot be read, is not JSON or is not a perf report."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not JSON: not UTF-8 text") from None
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    try:
        check_report(report)
    except ValueError as exc:
        raise ValueError(f"{path} is not a bench perf report: {exc}") from None
    return report


def setting_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The settings two reports were measured with that differ (``name: old -> new``): their
    figures are less comparable (fewer agent-steps are noisier, another tokenizer counts
    differently)."""
    a, b = old.get("settings") or {}, new.get("settings") or {}
    out = [
        f"{name}: {a.get(name)} -> {b.get(name)}"
        for name in ("agent_steps", "repeats", "token_episodes")
        if a.get(name) != b.get(name)
    ]
    if old.get("tokens") and new.get("tokens") and old.get("tokenizer") != new.get("tokenizer"):
        out.append(f"tokenizer: {old.get('tokenizer')} -> {new.get('tokenizer')}")
    return out
