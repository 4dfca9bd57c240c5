"""The turn-level estimators on the CPU trainer: VERL's legacy worker runs the per-agent loop,
whose trajectories carry ``turn_scores`` and anchor keys; the trainer turns them into what the
estimators read (as teamgym's v1 worker does), and ``teamgym train --adv-estimator`` runs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("verl")

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.credit import turn_runs

MULTI = {"num_rounds": 2, "speaker": "fixed", "num_candidates": 3}


@pytest.fixture(scope="module")
def batch(model_dir, tmp_path_factory):
    """Six episodes of two-round signalling, both agents played by the random policy through
    the scripted server (so replies and returns vary), three copies each."""
    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker
    from teamgym.envs.baselines import RandomPolicy

    run = tmp_path_factory.mktemp("turns")
    args = TrainArgs(model=str(model_dir), out=str(run), env_kwargs=MULTI, max_reply_tokens=16)
    cfg = compose_config(args.rollout, run, args.update)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    worker = AgentLoopWorker(cfg, ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=5))))
    return asyncio.run(
        worker.generate_sequences(build_batch(args.rollout, list(range(6)), "train", 3))
    )


def test_trajectories_carry_one_reward_and_anchor_per_generated_turn(batch) -> None:
    mask, scores = batch.batch["response_mask"], batch.batch["rm_scores"]
    extra = batch.non_tensor_batch
    several = 0
    for i in range(len(batch)):
        runs = turn_runs(mask[i])
        assert len(extra["turn_scores"][i]) == len(extra["teamgym_turn_anchors"][i]) == len(runs)
        assert sum(extra["turn_scores"][i]) == pytest.approx(float(scores[i].sum()), abs=1e-6)
        several += len(runs) > 1
    assert several, "no agent generated more than one turn: the check above is vacuous"


@pytest.mark.parametrize("estimator", ["at_grpo", "team_at_grpo", "gigpo", "team_gigpo"])
def test_the_cpu_trainer_feeds_the_estimators_what_the_v1_worker_writes(batch, estimator) -> None:
    from verl.trainer.ppo import core_algos

    from teamgym.adapters.verl.estimators import split_anchors, turn_level_inputs

    mask = batch.batch["response_mask"]
    rewards, index = turn_level_inputs(
        estimator,
        batch.batch["rm_scores"],
        mask,
        batch.non_tensor_batch["uid"],
        batch.non_tensor_batch["turn_scores"],
        batch.non_tensor_batch["teamgym_turn_anchors"],
    )
    torch.testing.assert_close(rewards.sum(-1), batch.batch["rm_scores"].sum(-1))
    for i in range(len(batch)):
        ends = {end - 1 for _, end in turn_runs(mask[i])}
        assert set(torch.nonzero(rewards[i]).flatten().tolist()) <= ends
    uids, anchors = split_anchors(index)
    assert list(uids) == [str(u) for u in batch.non_tensor_batch["uid"]]
    if "gigpo" in estimator:
        assert anchors == [list(a) for a in batch.non_tensor_batch["teamgym_turn_anchors"]]
    adv, _ = core_algos.get_adv_estimator_fn(estimator)(
        token_level_rewards=rewards, response_mask=mask, index=index
    )
    assert torch.all(adv[mask == 0] == 0) and torch.isfinite(adv).all()
    assert torch.any(adv != 0)


def test_teamgym_train_takes_a_turn_level_estimator(model_dir, tmp_path) -> None:
    out = tmp_path / "run"
    cmd = [
        *(sys.executable, "-m", "teamgym", "train", "--model", str(model_dir), "--out", str(out)),
        *("--steps", "2", "--episodes-per-step", "2", "--group-size", "2"),
        *("--adv-estimator", "team_gigpo", "--gamma", "0.9"),
        *("--eval-every", "0", "--warmup-steps", "0", "--max-reply-tokens", "8", "--quiet"),
        *[a for k, v in MULTI.items() for a in ("--env-arg", f"{k}={v}")],
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    saved = json.loads((out / "args.json").read_text())
    assert (saved["adv_estimator"], saved["gamma"]) == ("team_gigpo", 0.9)
    bad = subprocess.run([*cmd[:4], "--help"], capture_output=True, text=True, timeout=120)
    assert "team_gigpo" in bad.stdout


def test_an_unknown_estimator_is_refused_with_the_choices(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "teamgym", "train", "--model", str(tmp_path), "--out",
         str(tmp_path / "r"), "--adv-estimator", "gae"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "at_grpo" in done.stderr


@pytest.mark.parametrize("gamma", ["0", "1.5", "-0.1", "nan", "x"])
def test_a_discount_outside_0_1_is_a_usage_error(tmp_path: Path, gamma: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "teamgym", "train", "--model", str(tmp_path), "--out",
         str(tmp_path / "r"), "--gamma", gamma],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "--gamma" in done.stderr and "(0, 1]" in done.stderr
