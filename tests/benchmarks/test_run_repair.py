"""A damaged results file is repaired without losing the run; a directory of another suite says
what differs."""

from __future__ import annotations

import json
from pathlib import Path

from teamgym.benchmarks.runner import suite_differences
from teamgym.cli import main

RUN = ["bench", "run", "smoke", "--env", "signal-v1", "--agent", "expert", "--quiet"]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_a_garbage_line_is_set_aside_and_its_episode_played_again(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main([*RUN, "--episodes", "3", "--out", str(out)]) == 0
    results = out / "results.jsonl"
    good = _lines(results)
    lines = [*good[:1], "this is not json", *good[2:]]  # episode 2's record lost to an edit
    results.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main([*RUN, "--episodes", "3", "--out", str(out)]) == 2
    said = " ".join(capsys.readouterr().out.split())
    assert "not a JSON record" in said and "teamgym bench repair" in said
    assert main(["bench", "repair", str(out)]) == 0
    assert _lines(out / "results.rejected.jsonl") == ["this is not json"]
    assert len(_lines(results)) == 2
    assert main([*RUN, "--episodes", "3", "--out", str(out)]) == 0  # plays the lost episode
    keys = [json.loads(line)["key"] for line in _lines(results)]
    assert len(keys) == 3 and sorted(keys) == sorted({json.loads(g)["key"] for g in good})
    assert main(["bench", "repair", str(out)]) == 0
    assert "every line is an episode record" in capsys.readouterr().out


def test_repair_refuses_a_directory_that_is_not_a_run(tmp_path: Path, capsys) -> None:
    assert main(["bench", "repair", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().out


def test_another_suites_directory_says_what_differs(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main([*RUN, "--episodes", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main([*RUN, "--episodes", "3", "--out", str(out)]) == 2
    said = " ".join(capsys.readouterr().out.split())
    assert "with other settings" in said and "episodes: 2 -> 3" in said


def test_suite_differences_walks_mappings_and_lists() -> None:
    old = {"episodes": 2, "envs": [{"id": "a", "kwargs": {"n": 2}}], "name": "x"}
    new = {"episodes": 2, "envs": [{"id": "a", "kwargs": {"n": 4}}], "seed": 5, "name": "x"}
    assert suite_differences(old, new) == ["envs[0].kwargs.n: 2 -> 4", 'seed: "(none)" -> 5']
