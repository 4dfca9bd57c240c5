"""``teamgym verl-alternate``'s bookkeeping (:mod:`teamgym.adapters.verl.alternate`): which run
seats which weights, the datasets each run gets, resuming, a failed run. The runs themselves,
through verl's real ``main_ppo`` and vLLM: ``test_verl_main_ppo.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pandas")

import pandas as pd

from teamgym.adapters.verl.alternate import Alternation, hf_weights


def _alternation(tmp_path: Path, rounds: int = 2) -> Alternation:
    start = tmp_path / "start"
    start.mkdir(exist_ok=True)
    return Alternation(
        "signal-v0",
        {"speaker": ("robot_0",), "listener": ("robot_1",)},
        {"speaker": start, "listener": start},
        tmp_path / "alt",
        rounds=rounds,
        steps=3,
        train_episodes=2,
        val_episodes=3,
    )


class Recorder:
    """A launcher that saves what verl would (``config.json`` in the Hugging Face folder) and
    keeps what each run got."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[Path, Path, Path, list[str]]] = []
        self.fail_at = fail_at

    def __call__(self, model: Path, data: Path, run: Path, overrides: list[str]) -> int:
        self.calls.append((model, data, run, overrides))
        if len(self.calls) == self.fail_at:
            return 1
        weights = hf_weights(run / "checkpoints", 3)
        weights.mkdir(parents=True)
        (weights / "config.json").write_text("{}")
        return 0


def _partners(parquet: Path) -> list[str]:
    return [json.loads(i["partner"])["label"] for i in pd.read_parquet(parquet)["extra_info"]]


def test_each_run_starts_from_its_policys_latest_weights_beside_the_others(tmp_path) -> None:
    """Round by round, each policy trains from its last weights with the other's latest as its
    partner, and validates with every version of the other on the same seeds."""
    alt = _alternation(tmp_path)
    launch = Recorder()
    alt.run(launch)
    starts = [str(model) for model, *_ in launch.calls]
    weights = [r["weights"] for r in alt.runs]
    start = str(tmp_path / "start")
    # speaker r1, listener r1, speaker r2 (from its r1 weights), listener r2
    assert starts == [start, start, weights[0], weights[1]]
    assert [(r["round"], r["policy"]) for r in alt.runs] == [
        (1, "speaker"), (1, "listener"), (2, "speaker"), (2, "listener"),
    ]  # fmt: skip
    _, data, _, overrides = launch.calls[3]  # the listener in round 2
    assert set(_partners(data / "train.parquet")) == {"speaker@latest"}
    train = pd.read_parquet(data / "train.parquet")["extra_info"]
    assert {json.loads(i["partner"])["path"] for i in train} == {weights[2]}
    val_files = next(o for o in overrides if o.startswith("data.val_files="))
    vals = [Path(p.strip("'")) for p in val_files.split("=", 1)[1].strip("[]").split(",")]
    assert [_partners(v) for v in vals] == [[f"speaker@{r}"] * 3 for r in (0, 1, 2)]
    seeds = [list(pd.read_parquet(v)["extra_info"].map(lambda i: i["seed"])) for v in vals]
    assert seeds[0] == seeds[1] == seeds[2], "every partner plays the same validation episodes"
    first_round = pd.read_parquet(launch.calls[0][1] / "train.parquet")["extra_info"]
    assert {i["seed"] for i in train}.isdisjoint({i["seed"] for i in first_round})
    assert "trainer.total_training_steps=3" in overrides and "trainer.save_freq=3" in overrides
    record = json.loads((alt.out / "alternation.json").read_text())
    assert record["runs"] == alt.runs and record["policies"]["listener"] == ["robot_1"]


def test_a_rerun_skips_the_runs_whose_weights_are_saved_and_a_failed_run_stops(tmp_path) -> None:
    """The third run fails: the error names it and its folder, and the two made stay; the same
    alternation again makes only the runs left."""
    failing = Recorder(fail_at=3)
    with pytest.raises(RuntimeError, match=r"round 2, policy speaker: main_ppo exited with 1"):
        _alternation(tmp_path).run(failing)
    again = _alternation(tmp_path)
    launch = Recorder()
    again.run(launch)
    assert [r.get("resumed", False) for r in again.runs] == [True, True, False, False]
    assert [run.name for _, _, run, _ in launch.calls] == ["speaker", "listener"]
    assert str(launch.calls[0][0]) == again.runs[0]["weights"]


def test_one_policy_or_a_seat_in_two_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="two policies or more"):
        Alternation("signal-v0", {"a": ("robot_0", "robot_1")}, {"a": tmp_path}, tmp_path)
    with pytest.raises(ValueError, match="a seat is in two policies"):
        Alternation(
            "signal-v0", {"a": ("robot_0",), "b": ("robot_0",)}, {"a": tmp_path, "b": tmp_path},
            tmp_path,
        )  # fmt: skip


def test_the_command_as_typed_checks_its_first_run_with_teamgyms_and_verls_checks(
    model_dir, tmp_path
) -> None:
    """``teamgym verl-alternate ... --cpu --check-only``: the launcher users run
    (``python -m teamgym.adapters.verl.train --cpu --check-only``) on the first run's data and
    overrides, which both teamgym's and verl's checks accept; a bad override is refused with
    the train entry's own line, nothing trained."""
    import subprocess
    import sys

    pytest.importorskip("verl")
    out = tmp_path / "alt"
    base = [sys.executable, "-m", "teamgym", "verl-alternate", "--env", "signal-v0"]
    base += ["--env-arg", "num_rounds=2", "--policy", "speaker=robot_0"]
    base += ["--policy", "listener=robot_1", "--model", str(model_dir), "--out", str(out)]
    base += ["--train-episodes", "4", "--val-episodes", "2", "--cpu", "--check-only", "--"]
    sizes = ["data.train_batch_size=2", "actor_rollout_ref.rollout.agent.num_workers=1"]
    proc = subprocess.run([*base, *sizes], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "teamgym: configuration valid" in said and "round 1, speaker" in said, said
    log = (out / "round-1" / "speaker" / "main_ppo.log").read_text()
    assert "All configuration checks passed" in log  # verl's own validator ran
    assert not (out / "round-1" / "speaker" / "checkpoints").exists()
    val = pd.read_parquet(out / "round-1" / "speaker" / "data" / "val-listener@0" / "val.parquet")
    assert len(val) == 2
    bad = subprocess.run(
        [*base, *sizes, "actor_rollout_ref.actor.ppo_mini_batch_size=64"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "teamgym: invalid configuration" in " ".join((bad.stdout + bad.stderr).split())
