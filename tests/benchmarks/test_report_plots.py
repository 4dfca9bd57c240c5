"""The report's plots, read from the matplotlib figures :func:`figures` builds (never from
pixels): a legend for the agents' colours, zeros and undefined values labelled apart, and
intervals that stay inside each metric's range (issue 27); the legend outside the data, axes
labelled, the error bars named in the caption, a bounded metric's whole range, readable at 16
settings (issue 39); report.md and the printed table say what success means in each env."""

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

from teamgym.benchmarks.plots import UNDEFINED_LABEL, ZERO_LABEL, colours, figures
from teamgym.benchmarks.report import (
    MEANS,
    RANGES,
    episodes,
    mean_ci,
    summarise,
    write_report,
)
from teamgym.envs.describe import UNSTATED, success_criteria

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


def row_ys(ax: Any) -> dict[str, float]:
    """A panel's rows: tick label (an agent, or the env heading its settings) -> y; the panels
    share their rows, labelled on the first."""
    first = ax.figure.axes[0]
    ticks, labels = first.get_yticks(), first.get_yticklabels()
    return {t.get_text(): y for y, t in zip(ticks, labels, strict=True)}


def labels_at(ax: Any) -> dict[str, str]:
    """Row (its tick label: the agent) -> the text written on that row of a panel."""
    rows = {round(y): label for label, y in row_ys(ax).items()}
    return {
        rows[round(text.xy[1])]: text.get_text()
        for text in ax.texts
        if text.get_gid() != "criterion"  # what success means, on an env's row
    }


def legends(fig: Any) -> list[Any]:
    """Every legend of a figure, its own and its panels'."""
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


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
    """One legend per plot, naming the agents whose colour it shows: ``zero`` never succeeds
    (no bar in success.png) but talks (a bar in collaboration.png's communication)."""
    made = figures(three_agents)
    assert set(made) == {"success.png", "collaboration.png"}
    named = {"success.png": ["full", "none"], "collaboration.png": ["full", "zero", "none"]}
    for name, fig in made.items():
        found = legends(fig)
        assert len(found) == 1, f"{name}: {len(found)} legends"
        [legend] = found
        assert [t.get_text() for t in legend.get_texts()] == named[name], name
        colour = {label: bar.get_facecolor() for label, bar in bars_by_row(fig).items()}
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            assert handle.get_facecolor() == colour[text.get_text()], f"{name}: colours differ"


def bars_by_row(fig: Any) -> dict[str, Any]:
    """Row (its tick label: the agent) -> its bar in the figure's first panel."""
    rows = {round(y): label for label, y in row_ys(fig.axes[0]).items()}
    return {rows[round(bar.get_y() + bar.get_height() / 2)]: bar for bar in fig.axes[0].patches}


def drawn_agents(fig: Any) -> set[str]:
    """The rows of a figure with a visible bar in some panel (neither 0 nor undefined)."""
    rows = {round(y): label for label, y in row_ys(fig.axes[0]).items()}
    return {
        rows[round(bar.get_y() + bar.get_height() / 2)]
        for ax in fig.axes
        for bar in ax.patches
        if bar.get_width() == bar.get_width() and bar.get_width() != 0  # not NaN, not 0
    }


def test_a_legend_names_only_the_agents_its_plot_draws() -> None:
    """Issue (newcomer round): the smoke plots' legends named ``freerider``, whose bars are all
    0 or undefined (publicgoods' free rider never succeeds, collaborates, talks, and has no
    Gini): nothing in its colour is drawn, so the legend no longer names it."""
    never = {**ZEROS, "communication_frequency": 0.0, "contribution_gini": None}
    rows = rows_of(
        [record("expert", s) for s in range(3)],
        [record("random", s, success=False) for s in range(3)],
        [record("freerider", s, **never) for s in range(3)],
    )
    made = figures(rows)
    for name, fig in made.items():
        [legend] = legends(fig)
        texts = [t.get_text() for t in legend.get_texts()]
        assert set(texts) == drawn_agents(fig), name
        assert "freerider" not in texts, name
    assert [t.get_text() for t in legends(made["success.png"])[0].get_texts()] == ["expert"]
    collaboration = [t.get_text() for t in legends(made["collaboration.png"])[0].get_texts()]
    assert collaboration == ["expert", "random"]
    only_zeros = figures(rows_of([record("freerider", s, **never) for s in range(3)]))
    for name, fig in only_zeros.items():
        assert legends(fig) == [], f"{name}: a legend for nothing drawn"


def test_the_success_panel_says_what_success_means_in_each_env() -> None:
    """Hanabi's expert scores 0.68 at 0% success: the success panel writes on Hanabi's row
    that success there is a perfect score (25 points), from the env's ``success_criterion``."""
    episodes = [record("expert", s, success=False, score=0.68) for s in range(3)]
    for r in episodes:
        r.update(env_id="hanabi-v0", config_hash="h-hanabi", group="hanabi-v0 expert")
    rows = summarise(
        {
            **{f"hanabi/{r['seed']}": r for r in episodes},
            **{f"signal/{s}": record("expert", s) for s in range(3)},
        }
    )
    fig = figures(rows)["success.png"]
    [ax] = fig.axes
    notes = {
        round(text.xy[1]): text.get_text() for text in ax.texts if text.get_gid() == "criterion"
    }
    ys = row_ys(ax)
    criteria = success_criteria(["hanabi-v0", "signal-v1"])
    assert notes == {
        round(ys["hanabi-v0"]): f"success: {criteria['hanabi-v0']}",
        round(ys["signal-v1"]): f"success: {criteria['signal-v1']}",
    }
    assert "25 points" in notes[round(ys["hanabi-v0"])]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for text in ax.texts:
        box, inside = text.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1, f"{text.get_text()!r} leaves the panel"


def test_zero_and_undefined_are_labelled_apart(three_agents) -> None:
    made = figures(three_agents)
    success = made["success.png"].axes[0]
    assert labels_at(success) == {"zero": ZERO_LABEL}, "success 0 of agent 'zero' not labelled"
    collaboration, frequency, gini = made["collaboration.png"].axes
    zero_row = row_ys(gini)["zero"]
    for ax in (collaboration, gini):
        assert labels_at(ax) == {"zero": ZERO_LABEL, "none": UNDEFINED_LABEL}, ax.get_title()
        markers = [
            (x, y)
            for line in ax.lines
            if line.get_gid() == "zeros" and line.get_markersize() > 0
            for x, y in line.get_xydata()
        ]
        assert markers == [(0.0, zero_row)], f"{ax.get_title()}: no marker on the zero bar"
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
    return json.dumps({"key": f"{r['config_hash']}/{r['seed']}", **r}) + "\n"


def crossplay_record(env: str, agent: str, partner: str | None, seed: int) -> dict[str, Any]:
    """An ok episode of a cross-play pairing (``partner`` None: self-play), as ``bench
    crossplay`` writes it: the label ``AGENT+robot_1=PARTNER``, success when both are expert,
    every Gini 0 (signal's two seats share the credit evenly)."""
    label = agent if partner is None else f"{agent}+robot_1={partner}"
    both = {agent, partner or agent} == {"expert"}
    out = record(label, seed, success=both, contribution_gini=0.0)
    out.update(config_hash=f"h-{env}-{label}", group=f"{env} {label}", env_id=env)
    out["trajectory_hash"] = f"{env}{label}{seed}"
    if partner is not None:
        out.update(partner=partner, partner_seats=["robot_1"])
    return out


AGENTS = ["random", "expert", "babbler", "palette-babbler"]


@pytest.fixture
def sixteen_pairings() -> list[dict[str, Any]]:
    """Every ordered pairing of four agents on ``signal-v1[num_agents=2]``, 3 episodes each."""
    episodes = [
        crossplay_record("signal-v1", a, None if a == b else b, s)
        for a in AGENTS
        for b in AGENTS
        for s in range(3)
    ]
    for r in episodes:
        r["kwargs"] = {"num_agents": 2}
    return summarise({f"{r['agent']}/{r['seed']}": r for r in episodes})


def extent(fig: Any, artist: Any) -> Any:
    """An artist's box on the drawn figure, in pixels."""
    return artist.get_window_extent(fig.canvas.get_renderer())


def test_the_legend_is_outside_every_panel_and_inside_the_figure(
    three_agents, sixteen_pairings
) -> None:
    """Issue 39: the legend covered the last bar (smoke) and, over 16 pairings, the bars and
    the figure's right edge."""
    for rows in (three_agents, sixteen_pairings):
        for name, fig in figures(rows).items():
            fig.canvas.draw()
            [legend] = legends(fig)
            box = extent(fig, legend)
            for ax in fig.axes:
                assert not box.overlaps(extent(fig, ax)), f"{name}: legend over {ax.get_title()}"
            page = fig.bbox
            assert page.x0 <= box.x0 and box.x1 <= page.x1, f"{name}: legend cut off at a side"
            assert page.y0 <= box.y0 and box.y1 <= page.y1, f"{name}: legend cut off below"


def test_sixteen_pairings_leave_the_panels_room(sixteen_pairings) -> None:
    """Long labels wrap and the figure grows with its rows: no panel squeezed into a strip."""
    for name, fig in figures(sixteen_pairings).items():
        fig.canvas.draw()
        rows = len(fig.axes[0].get_yticks())
        for ax in fig.axes:
            box = extent(fig, ax)
            assert box.width / fig.dpi >= 3.0, f"{name}: {ax.get_title()} {box.width} px wide"
            assert box.height / fig.dpi / rows >= 0.25, f"{name}: rows {box.height / rows} px"
        for label in fig.axes[0].get_yticklabels():
            assert extent(fig, label).x0 >= fig.bbox.x0, f"{name}: {label.get_text()!r} cut off"
            assert max(map(len, label.get_text().split("\n"))) <= 32, label.get_text()


def test_every_pairing_is_drawn_apart(sixteen_pairings) -> None:
    """16 pairings of 4 agents: one colour per agent, one hatch per partner, so no two bars
    alike (tab10 drew the 11th agent as the 1st); the legend names both where they are drawn
    (every pairing in collaboration.png; in success.png only the expert's self-play, the one
    pairing that succeeds)."""
    made = figures(sixteen_pairings)
    fig = made["collaboration.png"]
    bars = fig.axes[0].patches
    styles = {(bar.get_facecolor(), bar.get_hatch()) for bar in bars}
    assert len(bars) == len(styles) == 16
    assert len({bar.get_facecolor() for bar in bars}) == 4
    assert len({bar.get_hatch() for bar in bars}) == 5  # four partners and self-play's none
    texts = {t.get_text() for t in legends(fig)[0].get_texts()} - {""}
    assert texts == {*AGENTS, *(f"with {a}" for a in AGENTS)}, texts
    [success] = legends(made["success.png"])
    assert [t.get_text() for t in success.get_texts()] == ["expert"]
    assert success.get_title().get_text() == "agent"
    for n in (10, 16, 20, 25):
        assert len(set(colours(n))) == n, f"{n} agents share colours"
    assert colours(10) == [plt.get_cmap("tab10")(i) for i in range(10)]


def test_a_bounded_metric_keeps_its_whole_range(sixteen_pairings) -> None:
    """A Gini of 0 everywhere was drawn on [-0.04, 0.04]: now on its range, [0, 1]."""
    collaboration, _, gini = figures(sixteen_pairings)["collaboration.png"].axes
    for ax in (collaboration, gini):
        low, high = ax.get_xlim()
        assert -0.05 <= low <= 0.0 and 1.0 <= high <= 1.05, (ax.get_title(), low, high)


def test_axes_are_labelled_and_the_caption_names_the_error_bars(three_agents) -> None:
    made = figures(three_agents)
    for name, fig in made.items():
        for ax in fig.axes:
            assert ax.get_xlabel(), f"{name}: {ax.get_title()} has no x label"
    success = made["success.png"].get_suptitle().replace("\n", " ")
    assert "error bars: 95% Wilson score interval over n = 4 episodes per bar" in success
    collaboration = made["collaboration.png"].get_suptitle().replace("\n", " ")
    assert "95% Student-t interval" in collaboration and "n = 4 episodes" in collaboration


def test_one_episode_is_counted_in_the_singular(tmp_path: Path) -> None:
    """Issue (newcomer round): "1 episodes ok" in report.md, "n = 1 episodes per bar" in the
    plots' captions."""
    with (tmp_path / "results.jsonl").open("w") as out:
        out.write(_line(record("expert", 0)))
    write_report(tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "1 episode ok, 0 errored." in report and "1 episodes" not in report
    assert "over n = 1 episode per bar." in report
    assert episodes(1) == "1 episode" and episodes(0) == "0 episodes"
    assert episodes(2) == "2 episodes"


def test_report_names_the_error_bars_and_what_success_means(tmp_path: Path) -> None:
    """Hanabi's success is a perfect score: the report says so beside the rate, generated
    from each env's ``success_criterion``."""
    with (tmp_path / "results.jsonl").open("w") as out:
        for s in range(3):
            out.write(_line(record("expert", s)))
            hanabi = record("expert", s, success=False, score=0.68)
            hanabi.update(env_id="hanabi-v0", config_hash="h-hanabi", group="hanabi-v0 expert")
            out.write(_line({**hanabi, "trajectory_hash": f"hanabi{s}"}))
    write_report(tmp_path)
    report = (tmp_path / "report.md").read_text()
    caption = "bars: share of episodes that succeeded; error bars: 95% Wilson score interval"
    assert f"success.png: {caption} over n = 3 episodes per bar." in report
    assert "95% Student-t interval" in report
    assert "| signal-v1 | every pick of the episode right |" in report
    assert "| hanabi-v0 | a perfect score: every firework complete" in report


class _Stated:
    success_criterion = "every crate delivered"


class _Unstated:
    pass


def test_success_criteria_come_from_the_env_or_say_none_is_stated(monkeypatch) -> None:
    from teamgym.envs import registration

    for env_id, factory in (("stated-v0", _Stated), ("unstated-v0", _Unstated)):
        spec = registration.EnvSpec(env_id, factory)
        monkeypatch.setitem(registration._REGISTRY, env_id, spec)
    got = success_criteria(["stated-v0", "unstated-v0", "gone-v0", "stated-v0"])
    assert got == {
        "stated-v0": "every crate delivered",
        "unstated-v0": UNSTATED,
        "gone-v0": UNSTATED,
    }
    from teamgym.envs import registry

    for env_id in registry():  # every shipped env states one
        if env_id in ("stated-v0", "unstated-v0"):
            continue
        assert success_criteria([env_id])[env_id] != UNSTATED, env_id


def test_the_printed_table_says_what_success_means(tmp_path: Path) -> None:
    from rich.console import Console

    from teamgym.cli.playing import print_report

    with (tmp_path / "results.jsonl").open("w") as out:
        out.write(_line(record("expert", 0)))
    console = Console(record=True, width=150)
    print_report(tmp_path, console)
    printed = console.export_text()
    assert "success means" in printed and "every pick of the episode right" in printed
