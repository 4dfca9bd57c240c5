"""Learning benchmarks: the CPU GRPO trainer on fixed presets that must learn to collaborate.

A stage builds its local model (no download), runs the format warm-up and GRPO through
``teamgym.adapters.cpu.trainer.train``, and summarises the run against its target: held-out
success before and after, the first evaluation at or above the target and the training time it
took (model build, warm-up and update steps; evaluations excluded, they only measure). A stage
killed half-way continues from its checkpoint when run again with the same ``out``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamgym.benchmarks.learn import sharing, team
from teamgym.benchmarks.learn.base import (
    BENCHMARK,
    LEARNER,
    LISTENER,
    LISTENER_MODEL,
    SIGNAL_NAMES,
    Stage,
    build_stage_model,
    machine,
    summarize,
    two_proportion_z,
)
from teamgym.benchmarks.learn.single import STAGES, run_stage
from teamgym.envs.seeds import run_seeds

__all__ = [
    "ALL_STAGES",
    "BENCHMARK",
    "LEARNER",
    "LISTENER",
    "LISTENER_MODEL",
    "REGISTRY",
    "SIGNAL_NAMES",
    "STAGES",
    "LearnStage",
    "Stage",
    "build_stage_model",
    "machine",
    "markdown_table",
    "run_all",
    "run_stage",
    "summarize",
    "summary_rows",
    "two_proportion_z",
]


@dataclass(frozen=True)
class LearnStage:
    """One entry of the registry: what ``teamgym learn-bench NAME`` and ``all`` run."""

    name: str
    description: str
    run: Callable[[Path, int, int | None, bool], dict[str, Any]]
    """(out, seed, steps or None for the stage's own, progress) -> the run's summary."""
    rows: Callable[[dict[str, Any]], list[dict[str, Any]]]
    """The summary's rows in the table of ``learn-bench all``."""


def _single(name: str) -> LearnStage:
    def run(out: Path, seed: int, steps: int | None, progress: bool) -> dict[str, Any]:
        return run_stage(name, out, seed=seed, steps=steps, progress=progress)

    return LearnStage(name, STAGES[name].description, run, _target_rows)


def _run_sharing(out: Path, seed: int, steps: int | None, progress: bool) -> dict[str, Any]:
    return sharing.run_sharing(out, seeds=run_seeds(seed), steps=steps, progress=progress)


def _run_team(out: Path, seed: int, steps: int | None, progress: bool) -> dict[str, Any]:
    return team.run_team(out, seed=seed, steps=steps, progress=progress)


def _target_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """A stage with a target: its held-out success, start to end, and when it got there."""
    reached = s["reached_target"]
    return [
        {
            "stage": s["stage"],
            "seed": s["seed"],
            "measure": "held-out success",
            "start": s["warmup_success"],
            "end": s["final_success"],
            "target": s["target"],
            "reached": f"step {reached['step']}, {reached['train_seconds']:.0f} s"
            if reached
            else "no",
            "train_seconds": s["train_seconds"],
        }
    ]


def _sharing_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The sharing stage: one row per weight, P(contribute) from the warm-up's to the run's."""
    start = next((r for r in s["table"] if r["run"] == "warm-up"), None)
    return [
        {
            "stage": f"sharing {r['run']}",
            "seed": ",".join(str(x) for x in s["seeds"]),
            "measure": "P(contribute)",
            "start": start["p_contribute"] if start else None,
            "end": r["p_contribute"],
            "target": None,
            "reached": f"team return {r['team_return']:.2f}",
            "train_seconds": r["train_seconds"],
        }
        for r in s["table"]
        if r["run"] != "warm-up"
    ]


#: Every learning stage, in the order ``teamgym learn-bench all`` runs them.
REGISTRY: dict[str, LearnStage] = {
    stage.name: stage
    for stage in (
        _single("listener"),
        _single("guard"),
        LearnStage("sharing", sharing.DESCRIPTION, _run_sharing, _sharing_rows),
        LearnStage("team", team.DESCRIPTION, _run_team, _target_rows),
    )
}
ALL_STAGES = tuple(REGISTRY)


def run_all(out: str | Path, seed: int = 0, progress: bool = True) -> list[dict[str, Any]]:
    """Every stage of :data:`REGISTRY` under ``out/STAGE`` with ``seed`` (``sharing`` on
    :func:`~teamgym.envs.seeds.run_seeds`); writes ``out/summary.json`` and ``out/summary.md``
    (one table) and returns the rows."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for stage in REGISTRY.values():
        rows += stage.rows(stage.run(root / stage.name, seed, None, progress))
    (root / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    (root / "summary.md").write_text(markdown_table(rows))
    return rows


def summary_rows(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table rows of stage summaries (each read by its stage's ``rows``): what was measured
    held-out, and the training time (model build, warm-up and updates; evaluations excluded)."""
    return [row for s in summaries for row in REGISTRY[s["stage"]].rows(s)]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`summary_rows` as one Markdown table."""

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)

    head = "| stage | seed | measure | start | end | target | reached | training s |\n"
    head += "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
    keys = ("stage", "seed", "measure", "start", "end", "target", "reached", "train_seconds")
    return head + "".join("| " + " | ".join(fmt(r[k]) for k in keys) + " |\n" for r in rows)
