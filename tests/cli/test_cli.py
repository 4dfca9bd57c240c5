"""The ``teamgym`` command line, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teamgym.benchmarks.baselines import run_baselines


def _teamgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args], capture_output=True, text=True, timeout=600
    )


def test_baselines_prints_a_results_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "res.json"
    proc = _teamgym("baselines", "--episodes", "20", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "signal-v1" in proc.stdout and "expert" in proc.stdout and "random" in proc.stdout
    rows = {r["baseline"]: r for r in json.loads(out.read_text())}
    assert rows["expert"]["success_rate"] == 1.0
    assert rows["random"]["success_rate"] < 0.5
    # a rerun reproduces the numbers exactly
    again = _teamgym("baselines", "--episodes", "20", "--quiet", "--out", str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text()) == json.loads(out.read_text()), (
        again.stderr
    )


def test_baselines_prints_bench_runs_table(tmp_path: Path) -> None:
    """``teamgym baselines`` prints the table of ``bench run smoke`` on the same seeds: the
    same columns, intervals, rows and order (issue 39: it had other column names, no intervals
    and another order), only the title differs."""
    envs = ("--env", "hanabi-v0", "--env", "foraging-v1")  # the smoke suite's order: foraging first
    base = _teamgym("baselines", *envs, "--episodes", "8", "--quiet")
    run = _teamgym(
        "bench", "run", "smoke", *envs, "--episodes", "8", "--quiet", "--out", str(tmp_path / "r")
    )
    assert base.returncode == 0 and run.returncode == 0, base.stdout + run.stdout

    def rows(out: str) -> list[str]:
        lines = out.splitlines()
        head = next(i for i, line in enumerate(lines) if "success (95% CI)" in line)
        out_dir = str(tmp_path / "r")  # printed after the table; a long one wraps alone
        return [
            line.rstrip()
            for line in lines[head:]
            if not line.startswith("results,") and not (line.strip() and line.strip() in out_dir)
        ]

    assert rows(base.stdout) == rows(run.stdout)
    first = [line.split()[0] for line in rows(base.stdout)[2:] if line.strip()]
    assert first[:3] == ["foraging-v1", "foraging-v1", "hanabi-v0"]


def test_baselines_env_args_and_errors() -> None:
    proc = _teamgym(
        "baselines", "--env", "signal-v0", "--episodes", "3", "--env-arg", "num_agents=4", "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    proc = _teamgym("baselines", "--env", "signl-v0", "--episodes", "1")
    assert proc.returncode == 2 and "Did you mean 'signal-v0'" in proc.stdout
    proc = _teamgym("baselines", "--episodes", "1", "--env-arg", "num_agent=4")
    assert proc.returncode == 2 and "accepted:" in proc.stdout


def test_envs_lists_the_registry() -> None:
    proc = _teamgym("envs")
    assert proc.returncode == 0 and "signal-v0" in proc.stdout


def test_results_are_deterministic_in_process() -> None:
    a = run_baselines(["signal-v0"], episodes=5, seed=3)
    b = run_baselines(["signal-v0"], episodes=5, seed=3)
    assert a == b
    assert run_baselines(["signal-v0"], episodes=5, seed=4)[0].fingerprint != a[0].fingerprint


def test_teammate_checkpoint_paths_become_absolute(tmp_path: Path, monkeypatch) -> None:
    """Rows name their teammates; a relative checkpoint path must not depend on the reader's cwd."""
    from teamgym.cli import build_parser
    from teamgym.cli.common import teammates

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(
        [
            "verl-data",
            "--env",
            "signal-v0",
            "--out",
            "d",
            "--train-episodes",
            "1",
            "--teammate",
            "robot_0=checkpoint:models/speaker",
            "--teammate",
            "robot_2=expert",
        ]
    )
    assert teammates(args) == {
        "robot_0": f"checkpoint:{tmp_path / 'models' / 'speaker'}",
        "robot_2": "expert",
    }


def test_train_flags_are_the_train_args_fields() -> None:
    """``teamgym train`` flags come from ``TrainArgs``: no flags give its defaults, each field
    has its flag, and ``--stop ''`` means no stop strings."""
    import dataclasses

    from teamgym.adapters.cpu.args import TrainArgs
    from teamgym.cli import build_parser
    from teamgym.cli.dataclass_args import dataclass_from_args
    from teamgym.cli.train import CUSTOM

    parser = build_parser()

    def parsed(*flags: str) -> TrainArgs:
        args = parser.parse_args(["train", "--model", "m", "--out", "o", *flags])
        return dataclass_from_args(TrainArgs, args, CUSTOM)

    assert parsed() == TrainArgs(model="m", out="o")
    assert parsed("--stop", "").stop == []
    assert parsed("--stop", "a", "--stop", "b").stop == ["a", "b"]
    got = parsed(
        *("--env-arg", "num_rounds=1", "--teammate", "robot_0=expert", "--kl-limit", "10"),
        *("--forced-moves", "model", "--resume", "--metrics-port", "9", "--prompt-length", "64"),
        *("--warmup-teacher", "robot_0=babbler"),
    )
    assert dataclasses.replace(
        got,
        env_kwargs={},
        teammates={},
        warmup_teachers={},
        kl_limit=0.2,
        forced_moves="auto",
        resume=False,
    ) == TrainArgs(model="m", out="o", metrics_port=9, prompt_length=64)
    assert got.env_kwargs == {"num_rounds": 1} and got.teammates == {"robot_0": "expert"}
    assert got.warmup_teachers == {"robot_0": "babbler"}
    train_flags = {a.dest for a in parser._subparsers._group_actions[0].choices["train"]._actions}
    custom = {"env_kwargs", "teammates", "warmup_teachers", "partners", "partner_seats"}
    custom |= {"eval_partners"}
    fields = {f.name for f in dataclasses.fields(TrainArgs)} - custom
    flags = {"env_arg", "teammate", "warmup_teacher", "partner", "partner_seat", "eval_partner"}
    assert fields | flags | {"quiet", "help"} == train_flags
    pool = parsed(
        *("--partner", "expert", "--partner", "checkpoint:rel/dir=2", "--partner-seat", "robot_0"),
        *("--eval-partner", "babbler"),
    )
    assert pool.partners[0] == "expert" and pool.partners[1].endswith("/rel/dir=2")
    assert pool.partners[1].startswith("checkpoint:/")  # made absolute, the weight kept
    assert (pool.partner_seats, pool.eval_partners) == (["robot_0"], ["babbler"])


def test_bad_input_is_an_error_line_and_a_bug_a_traceback(monkeypatch, capsys) -> None:
    from teamgym import cli
    from teamgym.cli import common, envs

    def bad_input(args, console) -> int:
        with common.bad_input(KeyError):
            raise KeyError("unknown thing 'x'")

    monkeypatch.setattr(envs, "run", bad_input)
    assert cli.main(["envs"]) == 2
    assert "error: unknown thing 'x'" in capsys.readouterr().out

    def bug(args, console) -> int:
        return {}["missing"]

    monkeypatch.setattr(envs, "run", bug)
    with pytest.raises(KeyError):
        cli.main(["envs"])


def test_malformed_pairs_are_bad_input() -> None:
    from teamgym.cli.common import CommandError, parse_pairs

    assert parse_pairs(["a=1", "b=", "a=2"], "--env-arg", allow_empty=True) == {"a": "2", "b": ""}
    for bad in (["a"], ["=1"], ["b="]):
        with pytest.raises(CommandError, match="--teammate expects AGENT=BASELINE"):
            parse_pairs(bad, "--teammate", metavar="AGENT=BASELINE")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["play", "signal-v1", "--agnet", "robot_1"],
            "unknown option --agnet; did you mean --agent?",
        ),
        (["bench", "run", "smoke", "--episdoes=2"], "did you mean --episodes?"),
        (["--agnet"], "did you mean --agent (an option of teamgym play, teamgym bench run"),
        (["play", "signal-v1", "--zzzzzz"], "unknown option --zzzzzz; teamgym play --help lists"),
    ],
)
def test_an_unknown_option_names_the_closest_known_one(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 60: ``--agnet`` printed the top-level usage alone; the command that got it names
    the option meant (a subcommand's, when the option is not the command's own)."""
    from teamgym.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = " ".join(capsys.readouterr().err.split())
    assert exit_.value.code == 2 and expected in err, err


def test_train_as_typed_prints_what_a_user_can_act_on(model_dir: Path, tmp_path: Path) -> None:
    """``teamgym train`` with a policy per seat, as typed: none of verl's CPU-irrelevant warnings
    (no accelerator, engines not installed, the dataset class per worker) reach the terminal,
    the token-builder fallback shows at most once, and the report names each warm-up model."""
    out = tmp_path / "r"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "teamgym",
            "train",
            "--model",
            str(model_dir),
            "--out",
            str(out),
            *("--env", "signal-v0"),
            *(
                "--env-arg",
                "num_rounds=1",
                "--env-arg",
                "speaker=fixed",
                "--env-arg",
                "pick_by=name",
            ),
            *("--policy", "speaker=robot_0", "--policy", "listener=robot_1"),
            *("--warmup-steps", "2", "--warmup-episodes", "4", "--steps", "1"),
            *("--episodes-per-step", "2", "--group-size", "2", "--eval-episodes", "2", "--quiet"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    for noise in (
        "engine is not available",
        "No supported accelerator detected",
        "is registered but not available",
        "Using dataset class",
    ):
        assert noise not in said, noise
    assert said.count("No model-specific Continuous Token builder") <= 1
    flat = " ".join(said.split())  # the report's lines wrap at 150 columns off a terminal
    assert f"{out}/warmup_models/listener, {out}/warmup_models/speaker" in flat
    assert "warmup_models/NAME" not in said
