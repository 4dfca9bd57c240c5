"""Append-only JSON-lines files that survive a kill: ``results.jsonl`` and ``trajectories.jsonl``.

Each record is written with one ``os.write`` on a file opened ``O_APPEND`` and then
``fsync``'d, so a finished episode is on disk before the next starts. A process killed in the
middle of a write leaves at most one partial last line: :meth:`JsonLines.load` cuts it off
(and says so), and the episode it belonged to is played again.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

from teamgym.envs.wrappers.recorder import to_json_line

__all__ = ["CorruptRunError", "JsonLines", "latest_by_key"]


class CorruptRunError(ValueError):
    """A results file holds a line that is not a JSON record (edited, or another writer)."""


class JsonLines:
    """One JSON object per line, appended atomically (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def repair(self) -> int:
        """Cut a partial last line (from a killed writer); returns the bytes removed."""
        if not self.path.exists():
            return 0
        with self.path.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return 0
            f.seek(max(0, size - 1))
            if f.read(1) == b"\n":
                return 0
            data = self.path.read_bytes()
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        warnings.warn(
            f"{self.path}: dropped a partial last line ({size - keep} bytes) left by an "
            "interrupted run; that episode is played again",
            stacklevel=2,
        )
        return size - keep

    def load(self, repair: bool = True) -> list[dict[str, Any]]:
        """Every complete record, in file order. A partial last line is cut off the file
        (``repair``: the writer, holding the run's lock) or only skipped (readers)."""
        if repair:
            self.repair()
        if not self.path.exists():
            return []
        out = []
        with self.path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip() or not line.endswith("\n"):
                    continue  # blank, or a line still being written
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise CorruptRunError(
                        f"{self.path}:{n}: not a JSON record ({exc}); the file was edited or "
                        "written by something else: `teamgym bench repair "
                        f"{self.path.parent}` sets such lines aside (kept in "
                        f"{self.rejected.name}) and the next run plays those episodes again"
                    ) from None
        return out

    @property
    def rejected(self) -> Path:
        """Where :meth:`set_aside` keeps the lines it takes out."""
        return self.path.with_name(self.path.stem + ".rejected" + self.path.suffix)

    def set_aside(self) -> int:
        """Move every line that is not a JSON record with a ``key`` out of the file, into
        :attr:`rejected` (appended, nothing lost); the rest is rewritten in order, whole or not
        at all. Returns how many lines were set aside."""
        if not self.path.exists():
            return 0
        keep, bad = [], []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines(True):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if isinstance(record, dict) and "key" in record and line.endswith("\n"):
                keep.append(line)
            elif line.strip():
                bad.append(line if line.endswith("\n") else line + "\n")
        if bad:
            with self.rejected.open("a", encoding="utf-8") as out:
                out.writelines(bad)
                out.flush()
                os.fsync(out.fileno())
            tmp = self.path.with_suffix(".tmp")
            with tmp.open("w", encoding="utf-8") as out:
                out.writelines(keep)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        return len(bad)

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line and fsync it."""
        data = (to_json_line(record) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, data)
            while written < len(data):  # regular files take it whole; be safe anyway
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)


def latest_by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last record of each ``key`` (a rerun of an errored episode supersedes it)."""
    for record in records:
        if not isinstance(record, dict) or "key" not in record:
            raise CorruptRunError(
                f"a results line is not an episode record: {str(record)[:80]}; "
                "`teamgym bench repair RUN_DIR` sets such lines aside"
            )
    return {r["key"]: r for r in records}
