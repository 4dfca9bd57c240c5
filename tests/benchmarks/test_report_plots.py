"""The report's plots, read from the matplotlib figures :func:`figures` builds (never from
pixels): a legend for the agents' colours, zeros and undefined values labelled apart, and
intervals that stay inside each metric's range (issue 27)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

import matplotlib.pyplot as plt
from matplotlib.collections import LineCollection
from matplotlib.container import ErrorbarContainer

from teamgym.benchmarks.plots import UNDEFINED_LABEL, ZERO_LABEL, figures
from teamgym.benchmarks.report import (
    MEANS,
    RANGES,
    mean_ci,
    summarise,
    write_report,
)

ZEROS = {"success": False, "collaboration_index": 0.0, "contribution_gini": 0.0}
"""An agent that never succeeds, never completes a subtask it tries, shares credit evenly."""


def record(agent: str, seed: int, **metrics: Any) -> dict[str, Any]:
    """An ok episode of ``signal-v1`` by ``agent`` with ``metrics`` (the rest 0.5)."""
    return {
        "config_hash": f"h-{agent}",
        "group": f"signal-v1 {agent}",
        "env_id": "signal-v1",
        "kwargs": {},
        "agent": agent,
        "seed": seed,
        "status": "ok",
        "error": None,
        "trajectory_hash": f"{agent}{seed}",
        "metrics": {"success": True, **dict.fromkeys(MEANS, 0.5), **metrics},
    }


def rows_of(*episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary rows of the given agents' episodes."""
    return summarise({f"{r['agent']}/{r['seed']}": r for eps in episodes for r in eps})


def labels_at(ax: Any) -> dict[int, str]:
    """Row -> the text written on that row of a panel (the y of each annotation)."""
    return {round(text.xy[1]): text.get_text() for text in ax.texts}


@pytest.fixture
def three_agents() -> list[dict[str, Any]]:
    """``full`` (every metric 0.5), ``zero`` (0 where a metric can be), ``none`` (collaboration
    and Gini undefined: no subtask attempted), 4 episodes each."""
    return rows_of(
        [record("full", s) for s in range(4)],
        [record("zero", s, **ZEROS) for s in range(4)],
        [record("none", s, collaboration_index=None, contribution_gini=None) for s in range(4)],
    )


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


def test_every_plot_has_a_legend_naming_the_agents_colours(three_agents) -> None:
    made = figures(three_agents)
    assert set(made) == {"success.png", "collaboration.png"}
    for name, fig in made.items():
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert len(legends) == 1, f"{name}: {len(legends)} legends"
        [legend] = legends
        assert [t.get_text() for t in legend.get_texts()] == ["full", "zero", "none"], name
        bars = fig.axes[0].patches
        for handle, bar in zip(legend.legend_handles, bars, strict=True):
            assert handle.get_facecolor() == bar.get_facecolor(), f"{name}: colours differ"


def test_zero_and_undefined_are_labelled_apart(three_agents) -> None:
    made = figures(three_agents)
    success = made["success.png"].axes[0]
    assert labels_at(success) == {1: ZERO_LABEL}, "success 0 of agent 'zero' not labelled"
    collaboration, frequency, gini = made["collaboration.png"].axes
    for ax in (collaboration, gini):
        assert labels_at(ax) == {1: ZERO_LABEL, 2: UNDEFINED_LABEL}, ax.get_title()
        markers = [
            (x, y)
            for line in ax.lines
            if line.get_gid() == "zeros" and line.get_markersize() > 0
            for x, y in line.get_xydata()
        ]
        assert markers == [(0.0, 1.0)], f"{ax.get_title()}: no marker on the zero bar"
    assert labels_at(frequency) == {}, "0.5 everywhere: nothing to label"
    assert ZERO_LABEL != UNDEFINED_LABEL


def errorbar_extent(ax: Any) -> tuple[float, float]:
    """The least and greatest x any interval of a panel reaches."""
    xs = [
        x
        for container in ax.containers
        if isinstance(container, ErrorbarContainer)
        for part in container.lines[2]
        if isinstance(part, LineCollection)
        for segment in part.get_segments()
        for x, _ in segment
    ]
    return min(xs), max(xs)


def test_intervals_are_clipped_to_the_metrics_range() -> None:
    gini = [0.0, 0.0, 0.0, 0.9]  # mean 0.225, the t interval reaches -0.49 and 0.94
    near_one = [1.0, 1.0, 1.0, 0.2]
    unclipped = mean_ci(gini)
    assert unclipped["lo"] < 0, "the example no longer shows the bug"
    [row] = rows_of(
        [
            record("a", s, contribution_gini=g, collaboration_index=c, invalid_action_rate=g)
            for s, (g, c) in enumerate(zip(gini, near_one, strict=True))
        ]
    )
    assert row["contribution_gini"]["lo"] == 0.0
    assert row["contribution_gini"]["hi"] == unclipped["hi"]
    assert row["collaboration_index"]["hi"] == 1.0
    assert row["invalid_action_rate"]["lo"] == 0.0
    for key, (least, greatest) in RANGES.items():
        stat = row[key]
        assert least is None or stat["lo"] >= least, (key, stat)
        assert greatest is None or stat["hi"] <= greatest, (key, stat)
    collaboration, _, gini_ax = figures([row])["collaboration.png"].axes
    assert errorbar_extent(gini_ax)[0] == pytest.approx(0.0)
    assert errorbar_extent(collaboration)[1] == pytest.approx(1.0)


def test_unbounded_metrics_keep_their_interval() -> None:
    assert mean_ci([-1.0, 1.0]) == mean_ci([-1.0, 1.0], (None, None))
    assert mean_ci([-1.0, 1.0], (0.0, None))["lo"] == 0.0


def test_the_report_writes_the_plots_it_names(tmp_path: Path) -> None:
    episodes = [record("full", s) for s in range(2)] + [record("zero", s, **ZEROS) for s in (0, 1)]
    with (tmp_path / "results.jsonl").open("w") as out:
        for r in episodes:
            out.write(_line(r))
    rows = write_report(tmp_path).rows
    assert [r["agent"] for r in rows] == ["full", "zero"]
    for name in ("success.png", "collaboration.png"):
        assert (tmp_path / name).stat().st_size > 0
        assert f"![{name}]({name})" in (tmp_path / "report.md").read_text()


def _line(r: Mapping[str, Any]) -> str:
    """``r`` as a ``results.jsonl`` line."""
    return json.dumps({"key": f"{r['agent']}/{r['seed']}", **r}) + "\n"
