"""``teamgym bench``: suites, resumable runs, reports, comparisons, Ray scale-out."""

from __future__ import annotations

import asyncio
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from teamgym.benchmarks.baselines import run_baselines
from teamgym.benchmarks.report import load_run, summarise, wilson
from teamgym.benchmarks.reproduce import compare_runs
from teamgym.benchmarks.results import JsonLines
from teamgym.benchmarks.runner import RunDirError, run_suite
from teamgym.benchmarks.suites import SuiteError, load_suite, parse_suite, shipped_suites


def _teamgym(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args], capture_output=True, text=True, timeout=timeout
    )


def _suite_file(tmp_path: Path, suite: dict, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(suite))
    return path


SMALL = {
    "name": "small",
    "episodes": 4,
    "agents": ["baselines"],
    "envs": [
        {"id": "signal-v1", "sweep": {"num_agents": [2, 3]}},
        {"id": "foraging-v0", "kwargs": {"difficulty": "easy"}},
    ],
}


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        ({**SMALL, "episode": 3}, "unknown key(s) 'episode'; allowed: name, description"),
        ({**SMALL, "envs": []}, "'envs' must be a non-empty list"),
        ({**SMALL, "envs": [{"id": "signl-v0"}]}, "Did you mean 'signal-v"),
        ({**SMALL, "envs": [{"id": "signal-v1", "kwarg": {}}]}, "unknown key(s) 'kwarg'"),
        ({**SMALL, "envs": [{"id": "signal-v1", "kwargs": {"n": 2}}]}, "unknown argument(s) 'n'"),
        ({**SMALL, "envs": [{"id": "signal-v1", "sweep": {"num_agents": 2}}]}, "non-empty list"),
        ({**SMALL, "agents": ["oracle"]}, "has no baseline 'oracle'"),
        ({**SMALL, "agents": [{"kind": "gpt"}]}, "unknown agent kind 'gpt'"),
        ({**SMALL, "agents": [{"kind": "openai", "model": "m", "temp": 0}]}, "no option(s) temp"),
        ({**SMALL, "agents": [{"kind": "openai"}]}, "needs 'model'"),
        ({**SMALL, "episodes": 0}, "episodes must be a positive integer"),
        ({**SMALL, "agents": ["random", "random"]}, "appears twice"),
        (
            {**SMALL, "envs": [{"id": "signal-v1", "teammates": {"robot_0": "x", "robot_1": "y"}}]},
            "has no baseline 'x'",
        ),
        (
            {
                **SMALL,
                "envs": [
                    {"id": "signal-v1", "teammates": {"robot_0": "expert", "robot_1": "expert"}}
                ],
            },
            "some, not all",
        ),
    ],
)
def test_bad_suites_are_refused_with_the_allowed_values(suite: dict, message: str) -> None:
    with pytest.raises(SuiteError) as err:
        parse_suite(suite, where="s.yaml")
    assert message in str(err.value), str(err.value)


def test_shipped_suites_load_and_expand() -> None:
    assert {"smoke", "default", "full"} <= set(shipped_suites())
    smoke = load_suite("smoke")
    # every registered env, random plus its baselines, the `teamgym baselines` seeds
    from teamgym.envs import registry, spec
    from teamgym.envs.registration import latest_versions

    assert {s.env_id for s in smoke.settings} == set(latest_versions(registry()))
    expected = sum(1 + len(spec(e).baselines) for e in latest_versions(registry()))
    assert len(smoke.settings) == expected and len(smoke) == 100 * expected
    default = load_suite("default")
    assert {s.kwargs.get("num_agents") for s in default.settings if s.env_id == "signal-v1"} == {
        2,
        3,
        4,
    }
    load_suite("full")
    with pytest.raises(SuiteError, match="not in suite"):
        load_suite("smoke", envs=["nope-v0"])
    with pytest.raises(SuiteError, match="not a shipped suite"):
        load_suite("smokey")


@pytest.mark.parametrize(
    ("name", "hint"), [("smok", "Did you mean 'smoke'"), ("defualt", "Did you mean 'default'?")]
)
def test_an_unknown_suite_name_offers_the_close_ones(name: str, hint: str) -> None:
    """Issue 60: ``bench run smok`` offered nothing; a name far from every suite offers none."""
    with pytest.raises(SuiteError, match=hint):
        load_suite(name)
    with pytest.raises(SuiteError) as err:
        load_suite("nosuch")
    assert "Did you mean" not in str(err.value) and "smoke" in str(err.value)


def test_the_llm_smoke_suite_plays_every_env_easy_and_default_beside_random_and_expert() -> None:
    """``llm-smoke`` (issue 43): every registered env, at its ``easy`` setting and its defaults
    where it has a difficulty; each setting played by random, the expert and SmolLM2 (imported
    to models/smollm2) with the small-model options, on the same seeds."""
    from teamgym.envs import registry
    from teamgym.envs.registration import latest_versions

    suite = load_suite("llm-smoke")
    assert {s.env_id for s in suite.settings} == set(latest_versions(registry()))
    labels = {s.group.rsplit(" ", 1)[0]: set() for s in suite.settings}
    for s in suite.settings:
        labels[s.group.rsplit(" ", 1)[0]].add(s.agent.kind)
    assert all(kinds == {"baseline", "transformers"} for kinds in labels.values()), labels
    llm = next(s.agent for s in suite.settings if s.agent.kind == "transformers")
    assert str(llm.options["path"]).endswith("models/smollm2") and llm.options["history"] == 1
    assert llm.options["example"] is True and llm.options["stop"] == ["</action>"]
    for env_id in ("foraging-v1", "keydoor-v0", "publicgoods-v0", "hanabi-v0"):
        levels = {s.kwargs.get("difficulty") for s in suite.settings if s.env_id == env_id}
        assert "easy" in levels and levels & {None, "medium"}, (env_id, levels)
    seeds = {s.group: s.seeds for s in suite.settings}
    for group in labels:  # the three agents of a setting play the same seeds
        assert len({tuple(v) for k, v in seeds.items() if k.startswith(group + " ")}) == 1


def test_overrides_replace_the_suite_values_and_change_its_hash() -> None:
    base = load_suite("smoke", envs=["signal-v1"], episodes=3)
    assert len(base) == 5 * 3  # random, expert and three babblers; 3 episodes each
    only_random = load_suite("smoke", envs=["signal-v1"], episodes=3, agents=["random"])
    assert [s.label for s in only_random.settings] == ["random"]
    assert only_random.hash != base.hash
    assert load_suite("smoke", envs=["signal-v1"], episodes=3).hash == base.hash


def test_bench_episodes_reproduce_the_baselines_fingerprints(tmp_path: Path) -> None:
    suite = load_suite("smoke", envs=["signal-v1", "publicgoods-v0"], episodes=6)
    run_suite(suite, tmp_path / "run")
    rows = {(r["env_id"], r["agent"]): r for r in summarise(load_run(tmp_path / "run"))}
    expected = run_baselines(["signal-v1", "publicgoods-v0"], episodes=6)
    assert len(rows) == len(expected)
    for result in expected:
        row = rows[(result.env_id, result.baseline)]
        assert row["fingerprint"] == result.fingerprint, (result.env_id, result.baseline)
        assert row["success"]["mean"] == result.success_rate


def test_results_lines_carry_the_fingerprint_fields(tmp_path: Path) -> None:
    suite = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "agents": ["expert"]})
    run_suite(suite, tmp_path / "run")
    lines = JsonLines(tmp_path / "run" / "results.jsonl").load()
    assert len(lines) == 4
    for line in lines:
        assert line["status"] == "ok" and line["error"] is None
        assert line["env_id"] == "signal-v1" and line["env_version"] == 1
        assert line["package_version"] and len(line["trajectory_hash"]) == 16
        assert line["config_hash"] == suite.settings[0].config_hash
        assert line["metrics"]["success"] is True
    trajectories = JsonLines(tmp_path / "run" / "trajectories.jsonl").load()
    assert [t["key"] for t in trajectories] == [line["key"] for line in lines]
    assert all(
        "<action>" in a for step in trajectories[0]["steps"] for a in step["actions"].values()
    )


def test_a_run_dir_holds_one_suite(tmp_path: Path) -> None:
    run_suite(parse_suite({**SMALL, "envs": [{"id": "signal-v1"}]}), tmp_path / "run")
    other = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "episodes": 5})
    with pytest.raises(RunDirError, match="pass --out NEW_DIR"):
        run_suite(other, tmp_path / "run")


def test_a_partial_last_line_is_cut_and_its_episode_replayed(tmp_path: Path) -> None:
    suite = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "agents": ["random"]})
    run_suite(suite, tmp_path / "a")
    run_suite(suite, tmp_path / "b")
    results = tmp_path / "b" / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:2]) + lines[2][:40])  # killed while writing line 3
    with pytest.warns(UserWarning, match="partial last line"):
        run_suite(suite, tmp_path / "b")
    assert compare_runs(tmp_path / "a", tmp_path / "b").reproduced
    assert len(JsonLines(results).load()) == 4


def test_sigkill_then_the_same_command_resumes_to_the_same_summary(
    tmp_path: Path, sigkill_after
) -> None:
    suite = _suite_file(
        tmp_path,
        {
            "name": "kill",
            "episodes": 30,
            "agents": ["random", "expert"],
            "envs": [{"id": "thor-assembly-v0", "kwargs": {"num_agents": 2}}],
        },
    )
    cmd = [sys.executable, "-m", "teamgym", "bench", "run", str(suite), "--quiet"]
    whole = subprocess.run([*cmd, "--out", str(tmp_path / "whole")], capture_output=True, text=True)
    assert whole.returncode == 0, whole.stdout + whole.stderr

    killed = tmp_path / "killed"
    results = killed / "results.jsonl"
    done = sigkill_after([*cmd, "--out", str(killed)], results, 8)
    assert 8 <= done < 60, f"the kill came too late to test a resume ({done} of 60 done)"
    again = subprocess.run([*cmd, "--out", str(killed)], capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resuming {killed}" in again.stdout and "of 60 episodes done" in again.stdout

    def rows(run: Path) -> list[dict]:
        return json.loads((run / "summary.json").read_text())["rows"]

    assert rows(killed) == rows(tmp_path / "whole")
    assert len(JsonLines(results).load()) == 60  # no episode written twice
    cmp = _teamgym("bench", "compare", str(tmp_path / "whole"), str(killed))
    assert (
        cmp.returncode == 0 and "reproduced" in cmp.stdout and "60 episodes identical" in cmp.stdout
    )


def test_compare_reports_differences_and_exits_1(tmp_path: Path) -> None:
    suite = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "agents": ["random"]})
    run_suite(suite, tmp_path / "a")
    run_suite(suite, tmp_path / "b")
    results = tmp_path / "b" / "results.jsonl"
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    lines[1]["trajectory_hash"] = "0" * 16
    results.write_text("".join(json.dumps(x) + "\n" for x in lines[:3]))
    cmp = compare_runs(tmp_path / "a", tmp_path / "b")
    assert not cmp.reproduced and len(cmp.different) == 1 and len(cmp.only_a) == 1
    proc = _teamgym("bench", "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert proc.returncode == 1 and "not reproduced" in proc.stdout
    assert "trajectory_hash" in proc.stdout and "only in" in proc.stdout


def test_bench_run_cli_writes_report_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _teamgym(
        "bench",
        "run",
        "smoke",
        "--env",
        "signal-v1",
        "--episodes",
        "5",
        "--out",
        str(out),
        "--quiet",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "signal-v1" in proc.stdout and "expert" in proc.stdout and "100% (" in proc.stdout
    for name in ("run.json", "results.jsonl", "trajectories.jsonl", "summary.json", "report.md"):
        assert (out / name).is_file(), name
    assert (out / "success.png").stat().st_size > 1000
    report = (out / "report.md").read_text()
    assert "| signal-v1 | expert | 5 |" in report and "![success.png](success.png)" in report
    again = _teamgym("bench", "report", str(out))
    assert again.returncode == 0 and "signal-v1" in again.stdout


def test_no_trajectories_writes_the_results_alone(tmp_path: Path) -> None:
    """``--no-trajectories`` (issue 39: the smoke run wrote a 34 MB file the README did not
    name) writes no ``trajectories.jsonl``; the results and their hashes are those of a full run
    (whose summary adds what each agent chose, read from the trajectories)."""
    runs = {}
    for name, extra in (("full", ()), ("lean", ("--no-trajectories",))):
        out = tmp_path / name
        args = ("bench", "run", "smoke", "--env", "signal-v1", "--episodes", "3", "--quiet")
        proc = _teamgym(*args, "--out", str(out), *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[name] = json.loads((out / "summary.json").read_text())
    assert not (tmp_path / "lean" / "trajectories.jsonl").exists()
    assert (tmp_path / "full" / "trajectories.jsonl").stat().st_size > 0
    chosen = [row.pop("actions") for row in runs["full"]["rows"]]
    assert all(c["distinct"] > 0 for c in chosen) and len(chosen) == 5
    assert runs["lean"]["rows"] == runs["full"]["rows"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bench", "run", "nosuch"), "not a shipped suite"),
        (("bench", "run", "smoke", "--env", "x-v0"), "not in suite"),
        (("bench", "report", "/nonexistent"), "has no results.jsonl"),
        (("bench", "run", "smoke", "--agent", "oracle", "--env", "signal-v1"), "has no baseline"),
    ],
)
def test_bench_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = _teamgym(*args)
    assert proc.returncode == 2 and message in proc.stdout, proc.stdout + proc.stderr


def test_bench_episodes_zero_is_a_usage_error() -> None:
    proc = _teamgym("bench", "run", "smoke", "--episodes", "0")
    assert proc.returncode == 2 and "must be at least 1" in proc.stderr


def test_wilson_interval() -> None:
    lo, hi = wilson(0, 100)
    assert lo == 0.0 and 0.03 < hi < 0.04
    lo, hi = wilson(50, 100)
    assert 0.39 < lo < 0.41 and 0.59 < hi < 0.61


@pytest.mark.slow
def test_ray_run_equals_the_serial_run(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    suite = parse_suite(
        {
            "name": "ray",
            "episodes": 6,
            "agents": ["baselines"],
            "envs": [{"id": "signal-v1"}, {"id": "keydoor-v0", "kwargs": {"difficulty": "easy"}}],
        }
    )
    run_suite(suite, tmp_path / "serial")
    run_suite(suite, tmp_path / "ray", ray_address="local")
    cmp = compare_runs(tmp_path / "serial", tmp_path / "ray")
    assert cmp.reproduced and len(cmp.same) == len(suite)
    serial, distributed = load_run(tmp_path / "serial"), load_run(tmp_path / "ray")
    for key, record in serial.items():
        assert {**record, "wall_s": 0} == {**distributed[key], "wall_s": 0}, key


def test_envs_lists_baselines_and_one_envs_arguments() -> None:
    listing = _teamgym("envs")
    assert listing.returncode == 0 and "freerider" in listing.stdout
    one = _teamgym("envs", "foraging-v0")
    assert one.returncode == 0, one.stdout
    assert "difficulty" in one.stdout and "Literal['easy', 'medium', 'hard']" in one.stdout
    assert "message_max_tokens" in one.stdout  # the options every text env shares
    unknown = _teamgym("envs", "forage-v0")
    assert unknown.returncode == 2 and "Did you mean 'foraging-v0'" in unknown.stdout


def test_metrics_port_serves_the_live_figures(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    import socket
    import urllib.request

    from teamgym.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["bench", "run", "smoke", "--env", "signal-v1", "--agent", "expert", "--episodes", "3"]
    assert (
        main([*args, "--out", str(tmp_path / "run"), "--quiet", "--metrics-port", str(port)]) == 0
    )
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "teamgym_success 1.0" in text and "teamgym_team_reward 4.0" in text
    assert "teamgym_kl" not in text and "teamgym_loss" not in text  # no training gauges at 0


def test_agent_flags_take_inline_yaml_mappings() -> None:
    suite = load_suite(
        "smoke", envs=["signal-v1"], agents=["{kind: openai, model: m, max_tokens: 8}", "expert"]
    )
    assert [s.agent.kind for s in suite.settings] == ["openai", "baseline"]
    assert suite.settings[0].agent.options["max_tokens"] == 8
    with pytest.raises(SuiteError, match="not a YAML mapping"):
        load_suite("smoke", envs=["signal-v1"], agents=["{kind: openai, model"])
    with pytest.raises(SuiteError, match="no option"):
        load_suite("smoke", envs=["signal-v1"], agents=["{kind: openai, model: m, temp: 1}"])


def test_ctrl_c_saves_what_finished_and_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "teamgym", "bench", "run", "smoke", "--env", "thor-assembly-v0"]
    proc = subprocess.Popen(
        [*cmd, "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE,
        text=True,
        # Ctrl-C as for a program a person starts, even from a background job (whose shell
        # leaves SIGINT ignored, and a child inherits that)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        results.exists() and results.read_bytes().count(b"\n") >= 3
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout
    assert "interrupted" in stdout and "run the same command to resume" in " ".join(stdout.split())
    assert len(JsonLines(results).load()) >= 3


def test_an_edited_results_file_is_a_clear_error(tmp_path: Path) -> None:
    suite = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "agents": ["random"]})
    run_suite(suite, tmp_path / "run")
    results = tmp_path / "run" / "results.jsonl"
    results.write_text("not json\n" + results.read_text())
    proc = _teamgym("bench", "report", str(tmp_path / "run"))
    assert proc.returncode == 2 and "results.jsonl:1: not a JSON record" in proc.stdout


@pytest.mark.parametrize(
    ("teammates", "message"),
    [
        ({"robot_1": "openai:m@http://127.0.0.1:9/v1"}, "teammates: robot_1="),
        ({"robot_1": "baselines"}, "name one baseline"),
    ],
)
def test_teammates_must_be_one_scripted_baseline(teammates: dict, message: str) -> None:
    with pytest.raises(SuiteError, match=message):
        parse_suite({**SMALL, "envs": [{"id": "signal-v1", "teammates": teammates}]})


def test_bad_seeds_are_refused() -> None:
    with pytest.raises(SuiteError, match="non-negative integer"):
        parse_suite({**SMALL, "seed": -1})
    with pytest.raises(SuiteError, match="non-negative integer"):
        parse_suite({**SMALL, "envs": [{"id": "signal-v1", "seed": "5"}]})
    proc = _teamgym("bench", "run", "smoke", "--seed", "-1")
    assert proc.returncode == 2 and "must be at least 0" in proc.stderr


def test_llm_agents_are_checked_before_any_episode(tmp_path: Path) -> None:
    out = tmp_path / "run"
    bad = "{kind: openai, model: m, base_url: 'http://host:80x/v1'}"
    proc = _teamgym(
        "bench", "run", "smoke", "--env", "signal-v1", "--agent", bad, "--out", str(out)
    )
    assert proc.returncode == 2 and "is not a URL" in proc.stdout, proc.stdout + proc.stderr
    assert not (out / "results.jsonl").exists()
    proc = _teamgym(
        "bench", "run", "smoke", "--agent", f"transformers:{tmp_path}/none", "--env", "signal-v1"
    )
    assert proc.returncode == 2 and "not a model directory" in proc.stdout, proc.stdout


def test_labels_with_brackets_are_printed_whole(tmp_path: Path) -> None:
    agent = "{kind: baseline, name: random, label: '[team] rnd'}"
    proc = _teamgym(
        "bench",
        "run",
        "smoke",
        "--env",
        "signal-v1",
        "--episodes",
        "2",
        "--agent",
        agent,
        "--out",
        str(tmp_path / "[exp]"),
        "--quiet",
    )
    assert proc.returncode == 0 and "[team] rnd" in proc.stdout and "[exp]" in proc.stdout


def test_summary_rows_follow_the_suite_not_the_finishing_order(tmp_path: Path) -> None:
    suite = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "agents": ["random", "expert"]})
    run_suite(suite, tmp_path / "run", concurrency=8)
    results = tmp_path / "run" / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(reversed(lines)) + "\n")  # as if the expert finished first
    from teamgym.benchmarks.report import write_report

    assert [r["agent"] for r in write_report(tmp_path / "run").rows] == ["random", "expert"]


def test_mean_intervals_use_students_t() -> None:
    from teamgym.benchmarks.report import mean_ci

    ci = mean_ci([0.0, 1.0, 0.0, 1.0, 1.0])  # n = 5: t(4) = 2.776
    half = 2.776 * statistics.stdev([0.0, 1.0, 0.0, 1.0, 1.0]) / 5**0.5
    assert ci["hi"] - ci["mean"] == pytest.approx(half)
    assert mean_ci([0.5])["lo"] is None


def test_one_failing_agent_cancels_its_teammates_requests() -> None:
    from teamgym.adapters.agents import AgentError
    from teamgym.benchmarks.episodes import _ask_all

    cancelled = []

    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    async def failing() -> str:
        await asyncio.sleep(0.01)
        raise AgentError("server down")

    start = time.monotonic()
    with pytest.raises(AgentError):
        asyncio.run(_ask_all([slow(), failing()]))
    assert time.monotonic() - start < 5 and cancelled == [True]


def test_readers_skip_a_line_being_written_without_touching_the_file(tmp_path: Path) -> None:
    suite = parse_suite({**SMALL, "envs": [{"id": "signal-v1"}], "agents": ["random"]})
    run_suite(suite, tmp_path / "run")
    results = tmp_path / "run" / "results.jsonl"
    data = results.read_bytes() + b'{"key": "half'
    results.write_bytes(data)
    assert len(load_run(tmp_path / "run")) == 4
    assert results.read_bytes() == data  # only the writer (holding the lock) repairs
