"""``teamgym bench crossplay``: every ordered pairing on the same seeds, the partner in its
seats, the diagonal equal to ``bench run``'s episodes, the matrix and gap, a checkpoint as a
partner, and a resume after SIGKILL like ``bench run``'s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teamgym.benchmarks.crossplay import crossplay_matrix, crossplay_source
from teamgym.benchmarks.report import load_run, summarise
from teamgym.benchmarks.results import JsonLines
from teamgym.benchmarks.runner import run_suite
from teamgym.benchmarks.suites import SuiteError, load_suite, parse_suite

SMOKE_SEED = load_suite("smoke").settings[0].seeds[0]


def _teamgym(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args], capture_output=True, text=True, timeout=timeout
    )


def test_every_ordered_pairing_plays_with_the_partner_in_its_seats(tmp_path: Path) -> None:
    source = crossplay_source(
        ["signal-v1"], ["baselines"], episodes=3, seed=SMOKE_SEED, kwargs={"num_agents": 3}
    )
    suite = parse_suite(source)
    labels = [s.label for s in suite.settings]
    # 5 agents: 5 self-play settings and 20 ordered pairings, the partner in robot_1 and robot_2
    assert len(labels) == 25 and "expert+robot_1,robot_2=random" in labels
    assert "random+robot_1,robot_2=expert" in labels and "expert" in labels
    run_suite(suite, tmp_path / "run")
    rows = summarise(load_run(tmp_path / "run"), [s.config_hash for s in suite.settings])
    (matrix,) = crossplay_matrix(suite, rows)
    assert matrix.agents == [
        "random",
        "expert",
        "babbler",
        "palette-babbler",
        "any-order-babbler",
    ] and matrix.seats == [
        "robot_1",
        "robot_2",
    ]
    assert matrix.cells["expert"]["expert"]["success"]["mean"] == 1.0
    gap = matrix.gap("success")
    off = [
        matrix.cells[a][b]["success"]["mean"]
        for a in matrix.agents
        for b in matrix.agents
        if a != b
    ]
    assert gap["cross_play"] == pytest.approx(sum(off) / len(off))
    assert gap["gap"] == pytest.approx(gap["self_play"] - gap["cross_play"])


def test_the_reports_plots_read_at_every_pairing_of_signals_baselines(tmp_path: Path) -> None:
    """Issue 39: the run's success and collaboration plots over 25 pairings of signal's five
    baselines: one colour per agent A, one hatch per partner B (the summary rows carry the
    partner, as results.jsonl does), the legend below the panels, Gini on its range [0, 1]
    though every pairing's is 0 (or undefined)."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from teamgym.benchmarks.plots import figures

    suite = parse_suite(crossplay_source(["signal-v1"], ["baselines"], episodes=2, seed=SMOKE_SEED))
    run_suite(suite, tmp_path / "run", write_trajectories=False)
    rows = summarise(load_run(tmp_path / "run"), [s.config_hash for s in suite.settings])
    assert {r.get("partner") for r in rows} == {
        None,
        "random",
        "expert",
        "babbler",
        "palette-babbler",
        "any-order-babbler",
    }
    assert {r["contribution_gini"]["mean"] for r in rows} == {0.0, None}  # 0 where defined
    made = figures(rows)
    try:
        bars = made["success.png"].axes[0].patches
        assert len({(b.get_facecolor(), b.get_hatch()) for b in bars}) == len(bars) == 25
        assert len({b.get_facecolor() for b in bars}) == 5
        for name, fig in made.items():
            fig.canvas.draw()
            [legend] = fig.legends
            box = legend.get_window_extent()
            assert all(not box.overlaps(ax.get_window_extent()) for ax in fig.axes), name
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, f"{name}: legend cut off"
        gini = made["collaboration.png"].axes[2]
        assert gini.get_xlim()[0] <= 0.0 and gini.get_xlim()[1] >= 1.0, gini.get_xlim()
    finally:
        plt.close("all")


def test_the_partner_plays_its_seats_and_the_agent_the_others(tmp_path: Path) -> None:
    """A free-rider with a contributing partner in robot_1 and robot_3: every contribution
    in the trajectories says who played which seat."""
    source = crossplay_source(
        ["publicgoods-v0"],
        ["freerider", "expert"],
        episodes=2,
        seed=SMOKE_SEED,
        partner_seats=["robot_1", "robot_3"],
        kwargs={"num_agents": 4, "communication": False},
    )
    run_suite(parse_suite(source), tmp_path / "run")
    trajectories = {t["key"]: t for t in JsonLines(tmp_path / "run/trajectories.jsonl").load()}
    records = [r for r in load_run(tmp_path / "run").values() if r.get("partner") == "expert"]
    assert len(records) == 2 and all(
        r["agent"] == "freerider+robot_1,robot_3=expert" for r in records
    )
    for record in records:
        assert record["partner_seats"] == ["robot_1", "robot_3"]
        for step in trajectories[record["key"]]["steps"]:
            acts = step["actions"]
            assert acts["robot_0"] == acts["robot_2"] == "<action>contribute 0</action>"
            assert acts["robot_1"] == acts["robot_3"] == "<action>contribute 10</action>"


def test_a_scripted_partner_has_its_own_random_stream(tmp_path: Path) -> None:
    """The partner is seated in slot 1, as teammates are: random with a random partner do not
    draw the same numbers (with one stream, both would contribute alike every round: checked on the
    code that seated the partner in slot 0)."""
    suite = parse_suite(
        {
            "episodes": 3,
            "agents": ["random"],
            "envs": [
                {
                    "id": "publicgoods-v0",
                    "kwargs": {"num_agents": 2, "communication": False},
                    "partner": "random",
                }
            ],
        }
    )
    run_suite(suite, tmp_path / "run")
    steps = [s for t in JsonLines(tmp_path / "run/trajectories.jsonl").load() for s in t["steps"]]
    assert len(steps) == 15  # 3 episodes of 5 rounds
    assert any(s["actions"]["robot_0"] != s["actions"]["robot_1"] for s in steps)


def test_the_diagonal_is_bench_runs_episodes(tmp_path: Path) -> None:
    """Self-play is A in every seat: the same episodes, so the same fingerprints, as a plain
    ``bench run`` of A on the same seeds (the README's smoke table, on its first seeds)."""
    source = crossplay_source(["keydoor-v0"], ["random", "expert"], episodes=4, seed=SMOKE_SEED)
    suite = parse_suite(source)
    run_suite(suite, tmp_path / "xp")
    rows = summarise(load_run(tmp_path / "xp"), [s.config_hash for s in suite.settings])
    (matrix,) = crossplay_matrix(suite, rows)
    plain = load_suite("smoke", envs=["keydoor-v0"], episodes=4)
    run_suite(plain, tmp_path / "plain")
    for row in summarise(load_run(tmp_path / "plain")):
        assert matrix.cells[row["agent"]][row["agent"]]["fingerprint"] == row["fingerprint"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"partner": "expert", "partner_seats": ["robot_9"]}, "no agent(s) robot_9"),
        ({"partner": "expert", "partner_seats": ["robot_0", "robot_1"]}, "takes every seat"),
        ({"partner": "expert", "teammates": {"robot_1": "random"}}, "not both"),
        ({"partner": "baselines"}, "name one agent"),
        ({"partner": "oracle"}, "has no baseline 'oracle'"),
        ({"partner_seats": ["robot_1"]}, "needs a 'partner'"),
    ],
)
def test_bad_partners_are_refused(entry: dict, message: str) -> None:
    suite = {"episodes": 1, "agents": ["random"], "envs": [{"id": "keydoor-v0", **entry}]}
    with pytest.raises(SuiteError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_suite(suite)


def test_a_setting_without_a_partner_hashes_as_before() -> None:
    """Run directories name episodes by config hash: partners must not change old ones."""
    suite = parse_suite({"episodes": 1, "agents": ["expert"], "envs": [{"id": "keydoor-v0"}]})
    assert "partner" not in suite.settings[0].config
    assert suite.settings[0].config_hash == "80421d860b41"  # recorded before partners existed


def test_crossplay_cli_with_a_checkpoint_partner(tmp_path: Path, model_dir: Path) -> None:
    """The command as typed, on the smoke seeds, with the baselines and a checkpoint: the
    matrix, the gap and the heatmap; run again, it finds the run complete."""
    out = tmp_path / "xp"
    args = ["bench", "crossplay", "--env", "signal-v1", "--agent", "expert"]
    args += ["--agent", f"checkpoint:{model_dir}", "--episodes", "3", "--out", str(out)]
    first = _teamgym(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    checkpoint = f"checkpoint:{model_dir.name}"  # labelled by its name, not its path
    assert f"expert+robot_1={checkpoint}" in first.stdout
    assert "gap" in first.stdout and "crossplay-signal-v1.png" in first.stdout
    saved = json.loads((out / "crossplay.json").read_text())
    assert saved[0]["agents"] == ["expert", checkpoint]
    assert set(saved[0]["cells"]["expert"]) == set(saved[0]["agents"])
    assert (out / "crossplay-signal-v1.png").stat().st_size > 1000
    again = _teamgym(*args)
    assert again.returncode == 0 and "is complete" in again.stdout
    assert (out / "crossplay.json").read_text() == json.dumps(
        saved, indent=2, sort_keys=True
    ) + "\n"


def test_sigkill_then_the_same_command_resumes_to_the_same_matrix(
    tmp_path: Path, sigkill_after
) -> None:
    cmd = [sys.executable, "-m", "teamgym", "bench", "crossplay", "--env", "thor-assembly-v0"]
    cmd += ["--env-arg", "num_agents=2", "--episodes", "10", "--quiet"]
    whole = subprocess.run([*cmd, "--out", str(tmp_path / "whole")], capture_output=True, text=True)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    killed = tmp_path / "killed"
    results = killed / "results.jsonl"
    done = sigkill_after([*cmd, "--out", str(killed)], results, 8)
    assert 8 <= done < 40, f"the kill came too late to test a resume ({done} of 40 done)"
    again = subprocess.run([*cmd, "--out", str(killed)], capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resuming {killed}" in again.stdout and "of 40 episodes done" in again.stdout
    assert len(JsonLines(results).load()) == 40  # no episode written twice
    for name in ("crossplay.json", "summary.json"):
        assert (killed / name).read_text() == (tmp_path / "whole" / name).read_text()
