"""A model per seat on stock verl: the policies take turns, one trained while the others play.

verl trains one actor model per job. ``teamgym verl-alternate`` trains several policies (each a
model directory playing its own seats) with no verl patch: in each round, each policy in turn
is trained by ``main_ppo`` while every other policy plays its seats as a frozen partner
(``transformers:DIR``, :mod:`~teamgym.adapters.verl.llm_partners`: its replies never enter a
trajectory, so only the trained policy's seats' tokens reach its update). Each run starts from
that policy's latest weights, which verl saves as a Hugging Face model (``hf_model``), and the
next run seats them. Its validation plays every partner policy as it was after each round so
far, one partner per episode, so verl logs, per partner (``val-core/<env>/with:<label>/...``),
the cross-play of every round's pair. ``alternation.json`` says which run made which weights;
a run whose weights are on disk is not made again (an interrupted alternation resumes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ALTERNATION_JSON", "Alternation", "Launch", "hf_weights", "run_command"]

#: What the alternation writes after each run (see :meth:`Alternation.record`).
ALTERNATION_JSON = "alternation.json"
#: The validation figures :func:`crossplay_table` reads per run and partner.
CROSSPLAY_METRICS = ("success", "score", "team_return")
#: A run's launcher: ``launch(model_dir, dataset_dir, run_dir, overrides)``, an exit code.
Launch = Callable[[Path, Path, Path, list[str]], int]


def hf_weights(checkpoints: Path, steps: int) -> Path:
    """Where verl 0.9.1 saves the actor's Hugging Face model after ``steps`` steps
    (``trainer_base._save_checkpoint`` and ``FSDPCheckpointManager``: ``hf_model``)."""
    return checkpoints / f"global_step_{steps}" / "actor" / "huggingface"


def run_command(cpu: bool, check_only: bool = False) -> Launch:
    """The launcher users run: ``python -m teamgym.adapters.verl.train`` (``--cpu``: the laptop
    recipe; ``check_only``: its ``--check-only``) with the run's dataset and model, in a process
    of its own (its own Ray), its output in the run's ``main_ppo.log``."""
    flags = ["--cpu"] * cpu + ["--check-only"] * check_only

    def launch(model: Path, data: Path, run: Path, overrides: list[str]) -> int:
        cmd = [sys.executable, "-m", "teamgym.adapters.verl.train", *flags]
        cmd += [f"teamgym.dataset_dir={data}", f"actor_rollout_ref.model.path={model}"]
        env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(run / "metrics.jsonl")}
        with open(run / "main_ppo.log", "w") as log:
            return subprocess.run(
                [*cmd, *overrides], stdout=log, stderr=subprocess.STDOUT, env=env
            ).returncode

    return launch


@dataclass
class Alternation:
    """``policies`` (name -> its seats) take turns for ``rounds``, each run ``steps`` steps of
    ``main_ppo`` on ``train_episodes`` fresh episodes, starting from ``models`` (name -> model
    directory); ``overrides`` (Hydra) go to every run."""

    env_id: str
    policies: dict[str, tuple[str, ...]]
    models: dict[str, Path]
    out: Path
    rounds: int = 2
    steps: int = 10
    train_episodes: int = 64
    val_episodes: int = 32
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    """One record per run made or found: round, policy, the weights it started from and made."""

    def __post_init__(self) -> None:
        if len(self.policies) < 2:
            raise ValueError("alternating needs two policies or more (--policy NAME=SEAT,...)")
        seats = [s for group in self.policies.values() for s in group]
        if len(seats) != len(set(seats)):
            raise ValueError(f"a seat is in two policies: {self.policies}")
        missing = set(self.policies) - set(self.models)
        if missing:
            raise ValueError(f"no model for policy {', '.join(sorted(missing))}")

    def latest(self) -> dict[str, Path]:
        """Each policy's weights after the runs so far."""
        current = dict(self.models)
        for record in self.runs:
            current[record["policy"]] = Path(record["weights"])
        return current

    def partner_history(self, name: str) -> list[tuple[str, Path]]:
        """Policy ``name``'s weights after each round so far, labelled (``listener@0``: the
        start)."""
        history = [(f"{name}@0", self.models[name])]
        history += [
            (f"{name}@{r['round']}", Path(r["weights"])) for r in self.runs if r["policy"] == name
        ]
        return history

    def run(self, launch: Launch, on_run: Callable[[dict[str, Any]], None] | None = None) -> None:
        """Every run in order: build its data, launch it (unless its weights exist), record it."""
        self.out.mkdir(parents=True, exist_ok=True)
        for r in range(1, self.rounds + 1):
            for name in self.policies:
                record = self._run_one(r, name, launch)
                self.runs.append(record)
                self.record()
                if on_run is not None:
                    on_run(record)

    def _run_one(self, r: int, name: str, launch: Launch) -> dict[str, Any]:
        run = self.out / f"round-{r}" / name
        weights = hf_weights(run / "checkpoints", self.steps)
        start = self.latest()[name]
        record = {"round": r, "policy": name, "seats": list(self.policies[name])}
        record |= {"start": str(start), "weights": str(weights), "run_dir": str(run)}
        if (weights / "config.json").is_file():
            return record | {"resumed": True}
        code = self._launch(r, name, run, launch)
        if code != 0 or not (weights / "config.json").is_file():
            raise RuntimeError(
                f"round {r}, policy {name}: main_ppo exited with {code} and "
                f"{'saved' if weights.is_dir() else 'did not save'} {weights}; its log is in {run}"
            )
        return record

    def check(self, launch: Launch) -> tuple[int, Path]:
        """Build the first run's data and launch it once with ``launch`` (a launcher that only
        checks: ``run_command(cpu, check_only=True)``); returns its exit code and folder."""
        name = next(iter(self.policies))
        run = self.out / "round-1" / name
        return self._launch(1, name, run, launch), run

    def _launch(self, r: int, name: str, run: Path, launch: Launch) -> int:
        """Run (``r``, ``name``): its data, then ``launch`` from the policy's latest weights."""
        run.mkdir(parents=True, exist_ok=True)
        data, val_files = self._dataset(r, name, run / "data")
        overrides = [
            "data.val_files=[" + ",".join(f"'{f}'" for f in val_files) + "]",
            f"trainer.total_training_steps={self.steps}",
            f"trainer.save_freq={self.steps}",
            f"trainer.default_local_dir={run / 'checkpoints'}",
            "actor_rollout_ref.actor.checkpoint.save_contents=[hf_model]",  # the weights, no shards
            f"trainer.experiment_name=round-{r}-{name}",
            *self.overrides,
        ]
        return launch(self.latest()[name], data, run, overrides)

    def _dataset(self, r: int, name: str, out: Path) -> tuple[Path, list[Path]]:
        """Run (``r``, ``name``)'s rows: its seats trained, the other policies' seats played by
        their latest weights (training: fresh episodes each round); and its validation files:
        the same episodes every run, once with each version of the other policy (two
        policies), or with the others' latest weights (more)."""
        from teamgym.adapters.verl.dataset import build_dataset
        from teamgym.envs.partners import PartnerPool

        others = [p for p in self.policies if p != name]
        seats = [s for p in others for s in self.policies[p]]
        latest = self.latest()
        if len(others) == 1:  # every partner seat is the other policy's
            history = self.partner_history(others[0])
            partners = {f"{others[0]}@latest": latest[others[0]], **dict(history)}
        else:  # three policies or more: one partner per seat is no pool: fixed teammates
            partners = {"latest": latest[others[0]]}
        teammates = {
            s: _partner(f"{p}@latest", latest[p]) for p in others for s in self.policies[p]
        }
        made: dict[str, Path] = {}
        for label, path in partners.items():
            is_train = label.endswith("latest")
            rows = out / ("train" if is_train else f"val-{label}")
            pool: PartnerPool | None = None
            mates: dict[str, str] | None = teammates
            if len(others) == 1:
                pool, mates = PartnerPool.parse([_partner(label, path)], seats), None
            build_dataset(
                self.env_id,
                rows,
                self.train_episodes if is_train else 1,
                0 if is_train else self.val_episodes,
                self.env_kwargs,
                self.seed + 1_000_000 * r if is_train else self.seed,
                mates,
                partners=pool,
            )
            made[label] = rows
        train = made.pop(next(label for label in made if label.endswith("latest")))
        if not made:  # more than two policies: validate with the latest partners
            build_dataset(
                self.env_id, out / "val", 1, self.val_episodes, self.env_kwargs, self.seed,
                teammates,
            )  # fmt: skip
            made["latest"] = out / "val"
        return train, [rows / "val.parquet" for rows in made.values()]

    def record(self) -> Path:
        """Write ``alternation.json``: the settings and every run so far."""
        path = self.out / ALTERNATION_JSON
        body = {
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "policies": {k: list(v) for k, v in self.policies.items()},
            "models": {k: str(v) for k, v in self.models.items()},
            "rounds": self.rounds,
            "steps": self.steps,
            "runs": self.runs,
        }
        path.write_text(json.dumps(body, indent=2) + "\n")
        return path


def _partner(label: str, path: Path) -> str:
    """A frozen partner spec for a model directory, labelled (its data source names it)."""
    return json.dumps({"kind": "transformers", "path": str(path), "label": label})


def crossplay_table(out: Path, env_id: str) -> list[tuple[str, str, dict[str, float]]]:
    """``(run, partner, figures)`` from each run's last validation: its ``success``,
    ``score`` and ``team_return`` with each partner policy's version, as verl logged them."""
    from teamgym.adapters.verl.monitor import crossplay_figures, log_records

    runs = json.loads((out / ALTERNATION_JSON).read_text())["runs"]
    rows = []
    for record in runs:
        metrics = Path(record["run_dir"]) / "metrics.jsonl"
        logged = [r.get("data", {}) for r in log_records(metrics)] if metrics.is_file() else []
        last: dict[str, Any] = next((d for d in reversed(logged) if crossplay_figures(d)), {})
        figures: dict[str, dict[str, float]] = {}
        for metric in CROSSPLAY_METRICS:
            partners = crossplay_figures(last, metric).get(env_id, {}).get("partners", {})
            for partner, value in partners.items():
                figures.setdefault(partner, {})[metric] = value
        name = f"{record['policy']}@{record['round']}"
        rows += [(name, partner, shown) for partner, shown in figures.items()]
    return rows


def parse_policies(items: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``NAME=SEAT[,SEAT]`` items as ``{name: seats}``."""
    policies: dict[str, tuple[str, ...]] = {}
    for item in items:
        name, sep, seats = item.partition("=")
        if not sep or not name or not seats or name in policies:
            raise ValueError(f"--policy {item!r}: expected NAME=SEAT[,SEAT], each name once")
        policies[name] = tuple(s.strip() for s in seats.split(",") if s.strip())
    return policies
