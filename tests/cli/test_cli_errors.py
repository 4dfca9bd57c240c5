"""What a newcomer's mistakes at the command line show: an ``error:`` line that says what to
change, and status 2, never a traceback or a failure deep in the run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from teamgym import cli
from teamgym.cli.common import CommandError, check_envs
from teamgym.envs import make, registry, spec


def _teamgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args], capture_output=True, text=True, timeout=600
    )


VERL_DATA = ["verl-data", "--env", "signal-v0", "--out", "d", "--train-episodes", "1"]


def _one_line(text: str) -> str:
    """``text`` with rich's line wrapping undone."""
    return " ".join(text.split())


def test_zero_episodes_is_a_usage_error_not_a_statistics_error() -> None:
    proc = _teamgym("baselines", "--episodes", "0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "argument --episodes: must be at least 1, got 0" in proc.stderr
    assert "fmean" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["baselines", "--episodes", "-3"], "argument --episodes: must be at least 1, got -3"),
        (["baselines", "--episodes", "many"], "argument --episodes: expected a whole number"),
        (["verl-bench", "--episodes", "0"], "argument --episodes: must be at least 1"),
        (["verl-bench", "--n", "0"], "argument --n: must be at least 1"),
        (
            ["verl-data", "--env", "signal-v0", "--out", "d", "--train-episodes", "0"],
            "argument --train-episodes: must be at least 1",
        ),
        (
            [*VERL_DATA, "--val-episodes", "-1"],
            "argument --val-episodes: must be at least 0, got -1",
        ),
        (["learn-bench", "listener", "--steps", "0"], "argument --steps: must be at least 1"),
        (["model", "init", "--out", "d", "--layers", "0"], "argument --layers: must be at least 1"),
    ],
)
def test_count_flags_refuse_non_positive_values(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_zero_validation_episodes_are_allowed() -> None:
    args = cli.build_parser().parse_args([*VERL_DATA, "--val-episodes", "0"])
    assert (args.train_episodes, args.val_episodes) == (1, 0)


def test_env_arg_without_env_names_the_env_that_refused_and_the_ones_that_take_it() -> None:
    proc = _teamgym("baselines", "--episodes", "1", "--quiet", "--env-arg", "pick_by=name")
    out = _one_line(proc.stdout)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "error: foraging-v1 got unknown argument(s) 'pick_by'; accepted: communication," in out
    assert (
        "Without --env, --env-arg applies to every env and foraging-v1, keydoor-v0, "
        "publicgoods-v0, thor-assembly-v0, hanabi-v0 and kitchen-v0 refused pick_by; signal-v1 "
        "takes them: "
        "--env signal-v1" in out
    ), out


def test_env_arg_refusals_in_process() -> None:
    every = list(registry())
    # a value one env refuses: its message gains the env id
    with pytest.raises(CommandError, match=r"^(\S+-v\d): .*num_agents.*\n.*refused num_agents"):
        check_envs(every, {"num_agents": 1}, chosen=False)
    # no env takes the pair: say how to pick one
    with pytest.raises(CommandError, match="pick the env they are meant for with --env ENV"):
        check_envs(every, {"no_such_option": 1}, chosen=False)
    # with --env given, the env's own message, as before
    with pytest.raises(CommandError) as refused:
        check_envs(["foraging-v0"], {"pick_by": "name"}, chosen=True)
    assert "Without --env" not in str(refused.value) and "accepted:" in str(refused.value)
    check_envs(every, {"num_agents": 2}, chosen=False)  # every env takes it: no error


@pytest.mark.parametrize(
    "argv",
    [
        ["baselines", "--episodes", "1", "--env-arg", "pick_by"],
        [*VERL_DATA, "--env-arg", "pick_by"],
        [*VERL_DATA, "--teammate", "robot_0"],
        ["train", "--model", "m", "--out", "o", "--env-arg", "pick_by"],
        ["play", "signal-v0", "--env-arg", "pick_by"],
    ],
    ids=["baselines", "verl-data", "verl-data-teammate", "train", "play"],
)
def test_malformed_pairs_are_usage_errors(argv: list[str], capsys) -> None:
    """``--env-arg KEY`` (no ``=``) exits 2 with ``error:``, like every other usage error."""
    assert cli.main(argv) == 2
    out = _one_line(capsys.readouterr().out)
    assert "error: --env-arg expects KEY=VALUE, got 'pick_by'" in out or (
        "error: --teammate expects AGENT=BASELINE, got 'robot_0'" in out
    ), out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--warmup-teacher", "robot_9=babbler"],
            "warm-up teacher for 'robot_9': the env's agents",
        ),
        (
            ["--teammate", "robot_0=expert", "--warmup-teacher", "robot_0=babbler"],
            "warm-up teacher for 'robot_0': 'expert' plays it as a teammate",
        ),
        (["--warmup-teacher", "robot_1=no_such_baseline"], "no_such_baseline"),
    ],
    ids=["unknown-agent", "teammate", "unknown-teacher"],
)
def test_a_warmup_teacher_the_run_cannot_use_is_a_usage_error(
    flags: list[str], message: str, capsys, tmp_path
) -> None:
    """A ``--warmup-teacher`` for an agent the env lacks, one a teammate plays, or a teacher
    that does not exist is refused before any model loads, and nothing is written."""
    argv = ["train", "--model", str(tmp_path / "m"), "--out", str(tmp_path / "o"), *flags]
    assert cli.main(argv) == 2
    assert message in _one_line(capsys.readouterr().out)
    assert not (tmp_path / "o").exists()


def test_a_delivered_message_is_never_nothing_happened() -> None:
    """The README's first steps: the listener's next observation says a message arrived."""
    env = make("signal-v1", num_agents=3)
    obs, infos = env.reset(seed=0)
    replies = {agent: "<action>wait</action>" for agent in env.agents}
    replies[env.speaker] = "<say>small blue circle</say><action>say</action>"
    obs, _, _, _, infos = env.step(replies)
    for listener in ("robot_1", "robot_2"):
        assert obs[listener].startswith("Step 1/4. You received a message from robot_0.\n")
        assert "- robot_0: small blue circle" in obs[listener]
        assert "Nothing happened" not in obs[listener]
    # a step with no news at all still reads so
    env.reset(seed=0)
    quiet = {a: "<action>wait</action>" for a in env.agents} | {"robot_0": "<action>pass</action>"}
    _, _, _, _, infos = env.step(quiet)
    assert infos["robot_1"]["feedback"] == "Nothing happened."


@pytest.mark.parametrize(
    "env_id", [e for e in sorted(registry()) if spec(e).kwargs.get("message_feedback", True)]
)
def test_every_env_tells_a_quiet_recipient_about_the_message(env_id: str) -> None:
    """The wording lives in the base class: in every env, an agent whose step brought no other
    news but a teammate's message reads that it received one (in an env where nobody may talk,
    hanabi's, nobody receives it)."""
    env = make(env_id)
    obs, infos = env.reset(seed=0)
    first = env.possible_agents[0]
    talks = env.unwrapped.can_speak(first)
    valid = infos[first]["valid_actions"]
    replies = {a: f"<action>{infos[a]['valid_actions'][0]}</action>" for a in env.agents}
    replies[first] = (
        f"<say>hello team</say><action>{'say' if 'say' in valid else valid[0]}</action>"
    )
    obs, _, _, _, infos = env.step(replies)
    told = [a for a in env.possible_agents[1:] if "Messages:\n- robot_0: hello team" in obs[a]]
    assert bool(told) == talks, f"{env_id}: received by {told}, robot_0 may talk: {talks}"
    for agent in told:
        assert "Nothing happened" not in obs[agent], obs[agent]


def test_a_missing_extra_names_the_extra_to_install(capsys, monkeypatch, tmp_path) -> None:
    import builtins

    from teamgym.cli import main

    real_import = builtins.__import__

    def no_httpx(name, *args, **kwargs):
        if name == "httpx" or name.startswith("httpx."):
            raise ModuleNotFoundError("No module named 'httpx'", name="httpx")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_httpx)
    monkeypatch.delitem(sys.modules, "teamgym.adapters.agents.openai_agent", raising=False)
    monkeypatch.delitem(sys.modules, "httpx", raising=False)
    code = main(
        [
            "bench",
            "run",
            "smoke",
            "--env",
            "signal-v1",
            "--episodes",
            "1",
            "--agent",
            "openai:m@http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 2 and "[llm]" in out and "verl" not in out, out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--partner", "expert"], "--partner needs --partner-seat AGENT"),
        (["--partner-seat", "robot_0"], "--partner-seat needs at least one --partner"),
        (["--val-partner", "expert", "--partner-seat", "robot_0"], "needs a training pool too"),
        (["--partner", "expertt", "--partner-seat", "robot_0"], "no baseline 'expertt'"),
        (["--partner", "expert=0", "--partner-seat", "robot_0"], "must be > 0"),
        (["--partner", "expert", "--partner-seat", "robot_9"], "'robot_9' is not an agent"),
        (["--partner", '{"kind": "openai"}', "--partner-seat", "robot_0"], "needs 'model'"),
    ],
    ids=["no-seat", "no-partner", "val-only", "unknown", "weight", "seat", "json"],
)
def test_verl_data_partner_mistakes_are_usage_errors(flags, message, capsys, tmp_path) -> None:
    """A bad partner pool exits 2 with what to change, before anything is written."""
    out_dir = tmp_path / "d"
    argv = ["verl-data", "--env", "signal-v0", "--out", str(out_dir), "--train-episodes", "2"]
    assert cli.main([*argv, *flags]) == 2
    assert message in _one_line(capsys.readouterr().out)
    assert not (out_dir / "train.parquet").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "a=robot_0", "--model", "m"], "must seat every agent of signal-v1 once"),
        (["--policy", "a=robot_0", "--policy", "b=robot_9", "--model", "m"], "robot_9"),
        (["--policy", "a=robot_0", "--policy", "a=robot_1", "--model", "m"], "each name once"),
        (["--policy", "a=robot_0", "--policy", "b=robot_1"], "no model for a, b"),
        (
            ["--policy", "a=robot_0", "--policy", "b=robot_1", "--policy-model", "c=m"],
            "--policy-model names no --policy: c",
        ),
    ],
)
def test_verl_alternate_refuses_policies_that_do_not_seat_the_team(
    extra: list[str], message: str, tmp_path
) -> None:
    """``teamgym verl-alternate`` checks its policies before any run: one error line, exit 2,
    nothing written."""
    out = tmp_path / "alt"
    proc = _teamgym("verl-alternate", "--env", "signal-v1", "--out", str(out), *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in _one_line(proc.stdout + proc.stderr) and "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["learn-bench", "team", "--model", "m"], "--model applies to sharing"),
        (["learn-bench", "sharing", "--model", "nowhere"], "teamgym model import smollm2"),
    ],
    ids=["other-stage", "no-model"],
)
def test_learn_bench_model_mistakes_are_usage_errors(argv, message, capsys, tmp_path) -> None:
    """``--model`` names a model directory for the sharing stage: elsewhere, or a directory
    with no model, exits 2 with what to do, before a run directory is made."""
    out_dir = tmp_path / "run"
    assert cli.main([*argv, "--out", str(out_dir)]) == 2
    assert message in _one_line(capsys.readouterr().out)
    assert not out_dir.exists()
