"""What the agent under test chose in a run: how many distinct legal actions, and which of its
seats did the same thing in every episode whatever they saw.

A success rate alone does not say whether an agent did anything with what it observed: a
prompted model whose listener answers ``pick 4`` every time wins the signal game as often as
the target happens to be fourth. :func:`setting_choices` reads a run's ``trajectories.jsonl``
(every agent's reply at every step, and each step's events) and gives each setting:

* ``distinct``: the distinct legal actions the agent under test chose, over all its steps (every
  seat it plays, ``seats``: all but the scripted ``teammates`` and the cross-play partner's
  ``partner_seats``) in all its ok episodes. A reply is a legal action when its step has no
  ``invalid_action`` event for that seat; two replies are the same action when the env reads
  them as the same one (:func:`~teamgym.envs.parsing.parse_reply`, then
  :func:`~teamgym.envs.parsing.normalize_action`: case, spacing, quotes, end punctuation).
* ``fixed``: the seats that replied alike at each step in every ok episode: the same legal
  action (or an invalid reply, a no-op, every time) and the same message (``<say>`` text, or
  none), though the episodes differed (two trajectory hashes or more). Nothing such a seat
  observed changed what it did: it played as a constant policy does. Empty for fewer than two
  episodes, and for a setting whose episodes were all one game (one trajectory hash: a
  deterministic agent in a game without randomness), where every deterministic agent would be.
* ``chosen``: how many legal actions it chose; ``top``: its three most chosen, with counts.

A setting with an ok episode missing from ``trajectories.jsonl`` (a run with
``--no-trajectories``) gets nothing, never a guess. Only the last line of an episode counts (an
errored episode played again writes a second one).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from teamgym.envs.parsing import normalize_action, parse_reply

__all__ = ["Choices", "replies", "setting_choices"]

_TOP = 3


@lru_cache(maxsize=1 << 16)
def _reading(reply: str) -> tuple[str | None, str | None]:
    """The action a reply names, as the env compares it (None: it names none), and its
    message."""
    parsed = parse_reply(reply)
    action = None if parsed.action is None else normalize_action(parsed.action)
    return action, parsed.message


def replies(
    step: Mapping[str, Any], seats: frozenset[str] | set[str]
) -> Iterator[tuple[str, str | None, str | None]]:
    """``(seat, action, message)`` for each of ``seats`` that replied at this trajectory step:
    ``action`` is None for an invalid reply (the step's ``invalid_action`` event names the
    seat)."""
    invalid = {
        e.get("agent")
        for events in step.get("events", {}).values()
        for e in events
        if isinstance(e, Mapping) and e.get("type") == "invalid_action"
    }
    for seat, reply in step.get("actions", {}).items():
        if seat not in seats:
            continue
        if isinstance(reply, str):
            action, message = _reading(reply)
        else:  # vector mode: an action index names the action and its message
            action, message = str(reply), None
        yield seat, None if seat in invalid else action, message


@dataclass
class Choices:
    """One setting's choices, accumulated episode by episode (:meth:`add`), then summarised
    (:meth:`summary`: the ``actions`` field of its summary row)."""

    counts: Counter[str] = field(default_factory=Counter)
    """Legal actions chosen, by action."""
    seats: set[str] = field(default_factory=set)
    at: dict[tuple[str, int], tuple[str | None, str | None]] = field(default_factory=dict)
    """(seat, step) -> the (action, message) of that reply in every episode so far."""
    varied: set[str] = field(default_factory=set)
    """Seats that replied differently at some step in two episodes."""
    episodes: int = 0

    def add(self, steps: Sequence[Mapping[str, Any]], seats: frozenset[str]) -> None:
        """One episode's steps (each with its ``actions`` and ``events``); ``seats``: those the
        agent under test played."""
        self.episodes += 1
        self.seats |= seats
        for t, step in enumerate(steps):
            for seat, action, message in replies(step, seats):
                if action is not None:
                    self.counts[action] += 1
                if seat in self.varied:
                    continue
                if self.at.setdefault((seat, t), (action, message)) != (action, message):
                    self.varied.add(seat)

    def summary(self, hashes: set[str]) -> dict[str, Any]:
        """The summary; ``hashes``: the episodes' trajectory hashes (``fixed`` needs two)."""
        differed = self.episodes >= 2 and len(hashes) >= 2
        return {
            "distinct": len(self.counts),
            "seats": sorted(self.seats),
            "fixed": sorted(self.seats - self.varied) if differed else [],
            "chosen": sum(self.counts.values()),
            "top": [[a, n] for a, n in sorted(self.counts.items(), key=_most)[:_TOP]],
        }


def _most(item: tuple[str, int]) -> tuple[int, str]:
    """Most chosen first; ties in the actions' order."""
    return -item[1], item[0]


def _last_lines(path: Path) -> Iterator[bytes]:
    """The file's complete lines, last first (so the first line of a key met is its newest)."""
    with path.open("rb") as f:
        starts, pos = [], 0
        for line in f:
            if line.endswith(b"\n"):
                starts.append(pos)
            pos += len(line)
        for start in reversed(starts):
            f.seek(start)
            yield f.readline()


def setting_choices(
    run_dir: str | Path, results: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per config hash, what the agent under test chose (see the module docstring) over the ok
    episodes of ``results`` (:func:`~teamgym.benchmarks.report.load_run`'s); settings without a
    trajectory for each ok episode are left out, and so is every setting when the run wrote no
    ``trajectories.jsonl``."""
    path = Path(run_dir) / "trajectories.jsonl"
    ok = {key: r for key, r in results.items() if r.get("status") == "ok"}
    if not ok or not path.is_file():
        return {}
    settings: dict[str, Choices] = {}
    seen: set[str] = set()
    for line in _last_lines(path):
        try:
            trajectory = json.loads(line)
        except json.JSONDecodeError:
            continue  # the run's own checks report a damaged file; these figures skip the line
        key = trajectory.get("key") if isinstance(trajectory, dict) else None
        if key not in ok or key in seen:
            continue
        seen.add(key)
        record = ok[key]
        others = set(record.get("teammates") or ()) | set(record.get("partner_seats") or ())
        steps = trajectory.get("steps") or []
        seats = frozenset(a for step in steps for a in step.get("actions", {}) if a not in others)
        settings.setdefault(record["config_hash"], Choices()).add(steps, seats)
    by_setting: dict[str, list[Mapping[str, Any]]] = {}
    for record in ok.values():
        by_setting.setdefault(record["config_hash"], []).append(record)
    return {
        config_hash: setting.summary({r["trajectory_hash"] for r in by_setting[config_hash]})
        for config_hash, setting in settings.items()
        if all(r["key"] in seen for r in by_setting[config_hash])
    }
