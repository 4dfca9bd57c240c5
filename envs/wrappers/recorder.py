"""``Recorder``: write a trajectory as JSON lines, one per step plus a summary per episode.

This is the trajectory format the benchmark runner and the trainer adapters reuse. Lines, in
order, each a JSON object with a ``kind``:

* ``reset``: ``episode``, ``seed``, ``observations``, ``infos``;
* ``step``: ``episode``, ``step``, ``actions``, ``observations``, ``rewards``,
  ``terminations``, ``truncations``, ``infos``;
* ``episode``: ``episode``, ``seed``, ``metrics`` (:class:`~teamgym.envs.metrics.EpisodeMetrics`)
  and ``trajectory_hash``, the SHA-256 of the episode's reset and step lines: the same seed and
  actions give the same hash in any process.

Every line is flushed when written, so a run killed half-way keeps every finished step.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import IO, Any

import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

from teamgym.envs.metrics import EpisodeMetrics, EpisodeTracker

__all__ = ["Recorder", "to_json_line"]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot record a {type(obj).__name__} as JSON")


def to_json_line(record: dict[str, Any]) -> str:
    """Canonical JSON (sorted keys, no spaces): the bytes that hashes are taken of."""
    return json.dumps(
        record, sort_keys=True, separators=(",", ":"), default=_jsonable, ensure_ascii=True
    )


class Recorder(BaseParallelWrapper):
    """Records every reset and step to ``path`` (JSON lines, appended) and keeps each finished
    episode's metrics in ``self.episodes``.

    Args:
        env: any ParallelEnv.
        path: file to append to; None keeps summaries in memory only.
        observations: also record observations (they dominate the file size).
    """

    def __init__(
        self, env: ParallelEnv, path: str | Path | None = None, *, observations: bool = True
    ) -> None:
        super().__init__(env)
        self.path = Path(path) if path is not None else None
        self.record_observations = observations
        self.episodes: list[dict[str, Any]] = []
        self._file: IO[str] | None = None
        self._episode = -1
        self._seed: int | None = None
        self._hash = hashlib.sha256()
        self._tracker: EpisodeTracker | None = None
        self._open = False

    def _write(self, record: dict[str, Any], hashed: bool = True) -> None:
        line = to_json_line(record)
        if hashed:
            self._hash.update(line.encode())
            self._hash.update(b"\n")
        if self.path is not None:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(line + "\n")
            self._file.flush()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset and start a new episode record."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self._episode += 1
        self._seed = seed
        self._hash = hashlib.sha256()
        self._tracker = EpisodeTracker(self.env.possible_agents)
        self._open = True
        record = {"kind": "reset", "episode": self._episode, "seed": seed, "infos": infos}
        if self.record_observations:
            record["observations"] = obs
        self._write(record)
        return obs, infos

    def step(self, actions: dict[str, Any]) -> Any:
        """Step, record, and write the summary when the episode ends."""
        if self._tracker is None:
            raise RuntimeError("call reset() before step()")
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        record = {
            "kind": "step",
            "episode": self._episode,
            "step": self._tracker.length,
            "actions": actions,
            "rewards": rewards,
            "terminations": terminations,
            "truncations": truncations,
            "infos": infos,
        }
        if self.record_observations:
            record["observations"] = obs
        self._write(record)
        self._tracker.step(rewards, infos)
        if self._open and not self.env.agents:
            self._finish()
        return obs, rewards, terminations, truncations, infos

    def _finish(self) -> None:
        assert self._tracker is not None
        self._open = False
        summary = {
            "kind": "episode",
            "episode": self._episode,
            "seed": self._seed,
            "metrics": self._tracker.metrics().to_dict(),
            "trajectory_hash": self._hash.hexdigest(),
        }
        self.episodes.append(summary)
        self._write(summary, hashed=False)

    @property
    def last_metrics(self) -> EpisodeMetrics | None:
        """Metrics of the episode in progress or just finished."""
        return self._tracker.metrics() if self._tracker is not None else None

    def close(self) -> None:
        """Close the file and the env."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self.env.close()
