"""What the agent under test chose: a run's ``actions`` column (distinct legal actions, and
``fixed`` when it played one sequence whatever it saw), and model agents labelled by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from teamgym.adapters.agents import distinct_labels, parse_agent_spec
from teamgym.benchmarks.choices import setting_choices
from teamgym.benchmarks.report import load_run, summarise, write_report
from teamgym.benchmarks.runner import run_suite
from teamgym.benchmarks.suites import parse_suite

ONE_ROUND = {"id": "signal-v1", "kwargs": {"num_rounds": 1}}


def _run(tmp_path: Path, agents: list, envs: list, episodes: int = 4) -> dict[str, dict]:
    """Play a suite in this process and write its report; its summary rows by agent label."""
    suite = parse_suite({"name": "t", "episodes": episodes, "agents": agents, "envs": envs})
    run_suite(suite, tmp_path / "run")
    return {r["agent"]: r for r in write_report(tmp_path / "run").rows}


def test_a_constant_reply_is_fixed_and_a_policy_that_looks_is_not(
    tmp_path: Path, chat_server
) -> None:
    """A model double that always answers ``pick 4`` (legal only on the listener's turn) chose
    one action, and both its seats replied alike at every step of every episode: fixed 2/2.
    The expert and random see the episodes differ and answer differently (the expert's speaker
    names the target); the freerider's constant ``contribute 0`` is fixed in all four seats
    (publicgoods' last turn is a forced ``wait``: 2 actions)."""
    chat_server.script = lambda n, body: chat_server.Reply(
        chat_server.completion("<action>pick 4</action>")
    )
    constant = {"kind": "openai", "model": "m", "base_url": chat_server.url, "label": "pick4"}
    rows = _run(tmp_path, [constant, "expert", "random"], [ONE_ROUND])
    both = ["robot_0", "robot_1"]
    assert rows["pick4"]["actions"] == {
        "distinct": 1,
        "seats": both,
        "fixed": both,
        "chosen": 4,
        "top": [["pick 4", 4]],
    }
    assert rows["pick4"]["invalid_action_rate"]["mean"] == 0.75  # 3 of its 4 replies a turn
    assert rows["expert"]["actions"]["fixed"] == [] and rows["expert"]["actions"]["distinct"] > 3
    assert rows["random"]["actions"]["fixed"] == [] and rows["random"]["actions"]["seats"] == both
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| actions |" in report and "| 1 fixed 2/2 |" in report
    assert (
        "- signal-v1 num_rounds=1, pick4: fixed robot_0, robot_1 (of 2 seats); most chosen "
        "`pick 4` (4 of 4)"
    ) in report
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {r["agent"]: r["actions"]["fixed"] for r in summary["rows"]} == {
        "pick4": both,
        "expert": [],
        "random": [],
    }
    rows = _run(tmp_path / "pg", ["freerider", "random"], [{"id": "publicgoods-v0"}], 2)
    freerider = rows["freerider"]["actions"]
    assert freerider["fixed"] == freerider["seats"] and len(freerider["seats"]) == 4
    assert freerider["distinct"] == 2 and rows["random"]["actions"]["fixed"] == []


def test_bench_report_prints_the_column_and_says_what_it_means(tmp_path: Path) -> None:
    _run(tmp_path, ["freerider", "expert"], [{"id": "publicgoods-v0"}], 2)
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "bench", "report", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "fingerprint" in line)
    assert header.split()[-3:] == ["actions", "gini", "fingerprint"]
    freerider = next(line for line in proc.stdout.splitlines() if " freerider " in line)
    assert "2 fixed 4/4" in freerider
    text = " ".join(proc.stdout.split())
    assert "fixed k/n: k of the n seats it played replied alike at each step" in text


def _write(run: Path, results: list[dict], trajectories: list[dict]) -> dict[str, dict]:
    run.mkdir(parents=True, exist_ok=True)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    (run / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trajectories))
    return load_run(run)


def _result(seed: int, trajectory: str, **over) -> dict:
    return {
        "key": f"e/h/{seed}",
        "status": "ok",
        "config_hash": "h",
        "teammates": {},
        "seed": seed,
        "trajectory_hash": trajectory,
        **over,
    }


def _steps(*actions: dict[str, str], invalid: str | None = None) -> list[dict]:
    events = [{"type": "invalid_action", "agent": invalid, "reason": "no"}] if invalid else []
    return [{"actions": a, "events": {s: events for s in a}} for a in actions]


def test_choices_read_the_agents_seats_replies_and_the_newest_line(tmp_path: Path) -> None:
    """The env's reading of a reply (case, punctuation, tags) names the action; an invalid
    reply is no action; a teammate's reply is not the agent's; a later line of an episode
    replaces an earlier one. A seat is fixed when it replied alike (action, or invalid, and
    message) at each step of every episode; never when all the episodes were one game."""
    results = [
        _result(0, "a", teammates={"robot_1": "expert"}),
        _result(1, "b", teammates={"robot_1": "expert"}),
    ]
    first = _steps({"robot_0": "<action>Pick 4.</action>", "robot_1": "<action>pick 2</action>"})
    invalid = _steps({"robot_0": "<action>jump</action>", "robot_1": "x"}, invalid="robot_0")
    trajectories = [
        {"key": "e/h/0", "steps": _steps({"robot_0": "<action>pick 1</action>"})},  # replaced
        {"key": "e/h/0", "steps": first + invalid},
        {"key": "e/h/1", "steps": _steps({"robot_0": "pick 4"})},
    ]
    choices = setting_choices(tmp_path, _write(tmp_path, results, trajectories))
    assert choices == {
        "h": {
            "distinct": 1,
            "seats": ["robot_0"],
            "fixed": ["robot_0"],
            "chosen": 2,
            "top": [["pick 4", 2]],
        }
    }
    same_game = [_result(0, "a"), _result(1, "a")]
    trajectories = [{"key": f"e/h/{s}", "steps": _steps({"robot_0": "wait"})} for s in (0, 1)]
    choices = setting_choices(tmp_path, _write(tmp_path, same_game, trajectories))
    assert choices["h"]["distinct"] == 1 and choices["h"]["fixed"] == []
    two = [_result(0, "a"), _result(1, "b")]
    for ep0, ep1, distinct in [
        (("pick 1", "pick 2"), ("pick 2", "pick 1"), 2),  # the picks follow the episode
        (("<say>red</say>wait",), ("<say>blue</say>wait",), 1),  # one action, two messages
        (("pick 1",), ("nonsense",), 1),  # a legal action once, an invalid reply once
    ]:
        trajectories = [
            {"key": "e/h/0", "steps": _steps(*({"robot_0": r} for r in ep0))},
            {
                "key": "e/h/1",
                "steps": [
                    {"actions": {"robot_0": r}, "events": {"robot_0": _invalid(r)}} for r in ep1
                ],
            },
        ]
        choices = setting_choices(tmp_path, _write(tmp_path, two, trajectories))
        assert choices["h"]["distinct"] == distinct and choices["h"]["fixed"] == [], ep1


def _invalid(reply: str) -> list[dict]:
    """The events of a step where ``robot_0`` replied ``reply``: invalid when it is nonsense."""
    if reply != "nonsense":
        return []
    return [{"type": "invalid_action", "agent": "robot_0", "reason": "no"}]


def test_a_run_without_every_trajectory_has_no_actions_column(tmp_path: Path) -> None:
    results = _write(tmp_path, [_result(0, "a"), _result(1, "b")], [{"key": "e/h/0", "steps": []}])
    assert setting_choices(tmp_path, results) == {}
    (tmp_path / "trajectories.jsonl").unlink()
    assert setting_choices(tmp_path, results) == {}
    suite = parse_suite({"name": "t", "episodes": 2, "agents": ["random"], "envs": [ONE_ROUND]})
    run_suite(suite, tmp_path / "run", write_trajectories=False)
    (row,) = write_report(tmp_path / "run").rows
    assert "actions" not in row
    assert "| actions |" not in (tmp_path / "run" / "report.md").read_text()


def _model(path: Path, name: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if name is not None:
        (path / "teamgym_model.json").write_text(json.dumps({"name": name}))
    return path


def test_a_model_agent_is_labelled_by_its_name_not_its_path(tmp_path: Path) -> None:
    imported = _model(tmp_path / "models" / "smol", "smollm2")
    plain = _model(tmp_path / "runs" / "policy")
    assert parse_agent_spec(f"transformers:{imported}").label == "transformers:smollm2"
    assert parse_agent_spec(f"transformers:{plain}").label == "transformers:policy"
    assert parse_agent_spec(f"checkpoint:{imported}").label == "checkpoint:smollm2"
    assert parse_agent_spec(f"checkpoint:{tmp_path / 'gone'}").label == "checkpoint:gone"
    given = {"kind": "transformers", "path": str(imported), "label": "mine"}
    assert parse_agent_spec(given).label == "mine"
    spec = parse_agent_spec(f"transformers:{imported}")
    assert spec.options["path"] == str(imported)  # the path still names the model


def test_two_models_of_one_name_are_told_apart_by_their_paths(tmp_path: Path) -> None:
    a = _model(tmp_path / "a" / "model")
    b = _model(tmp_path / "b" / "model")
    f32 = _model(tmp_path / "smollm2-f32", "smollm2")
    bf16 = _model(tmp_path / "smollm2-bf16", "smollm2")
    specs = [parse_agent_spec(f"transformers:{p}") for p in (a, b, a, f32, bf16)]
    assert [s.label for s in distinct_labels(specs)] == [
        "transformers:a/model",
        "transformers:b/model",
        "transformers:a/model",
        "transformers:smollm2-f32",
        "transformers:smollm2-bf16",
    ]
    suite = parse_suite(
        {
            "name": "t",
            "agents": [f"transformers:{a}", f"transformers:{b}", "random"],
            "envs": [{"id": "signal-v1", "partner": f"transformers:{f32}"}],
        }
    )
    assert [s.label for s in suite.settings] == [  # one smollm2 here: named as it is
        "transformers:a/model+robot_1=transformers:smollm2",
        "transformers:b/model+robot_1=transformers:smollm2",
        "random+robot_1=transformers:smollm2",
    ]


@pytest.mark.slow
def test_a_run_of_a_local_model_shows_its_name(tmp_path: Path, model_dir: Path) -> None:
    """A real run of the tests' small model: every line, row and report names it
    ``transformers:<its directory's name>`` (its manifest names none), never its path, which
    stays in each line's ``agent_config`` (what identifies the model)."""
    agent = {"kind": "transformers", "path": str(model_dir), "max_tokens": 8}
    suite = parse_suite({"name": "t", "episodes": 2, "agents": [agent], "envs": [ONE_ROUND]})
    run_suite(suite, tmp_path / "run")
    label = f"transformers:{model_dir.name}"
    results = load_run(tmp_path / "run").values()
    assert {(r["agent"], r["agent_config"]["path"]) for r in results} == {(label, str(model_dir))}
    (row,) = write_report(tmp_path / "run").rows
    assert row["agent"] == label and row["actions"]["distinct"] >= 0
    for written in ("report.md", "summary.json"):
        assert str(model_dir) not in (tmp_path / "run" / written).read_text(), written


def test_a_run_resumed_after_its_labels_changed_reads_as_one_agent(tmp_path: Path) -> None:
    """Lines written with an older label (an absolute path) and newer lines of the same setting
    are one row under the newest label (``bench compare --paired`` picks episodes by it)."""
    suite = parse_suite({"name": "t", "episodes": 4, "agents": ["random"], "envs": [ONE_ROUND]})
    run = run_suite(suite, tmp_path / "run")
    lines = (run / "results.jsonl").read_text().splitlines()
    old = [
        json.dumps({**r, "agent": "transformers:/abs/model", "group": "signal-v1 /abs"})
        for r in map(json.loads, lines[:2])
    ]
    (run / "results.jsonl").write_text("\n".join(old + lines[2:]) + "\n")
    results = load_run(run)
    assert {(r["agent"], r["group"]) for r in results.values()} == {
        ("random", "signal-v1[num_rounds=1] random")
    }
    (row,) = summarise(results)
    assert row["agent"] == "random" and row["episodes"] == 4
    write_report(run)
    assert "/abs" not in (run / "report.md").read_text()


def test_the_llm_smoke_suite_names_its_model() -> None:
    """The shipped suite's model (``models/smollm2``) is labelled by name, imported or not."""
    raw = yaml.safe_load(
        (Path(__file__).parents[2] / "benchmarks" / "suites" / "llm-smoke.yaml").read_text()
    )
    (model,) = [a for a in raw["agents"] if isinstance(a, dict)]
    assert parse_agent_spec(model).label == "transformers:smollm2"
