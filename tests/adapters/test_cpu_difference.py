"""Difference rewards on the CPU trainer (``teamgym train --sharing-mode difference``): the mode
reaches the env through VERL's legacy worker, so what an agent is trained on is the team's gain
from its own moves: zero for free-riders, whatever they kept, and not under ``mixed``."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")

from teamgym.adapters.cpu.args import TrainArgs


def _returns(model_dir, tmp_path, mode: str, baseline: str) -> list[float]:
    """Each row's return: four episodes of publicgoods, every agent the ``baseline``."""
    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker
    from teamgym.envs.baselines import make_baseline

    run = tmp_path / f"{mode}-{baseline}"
    run.mkdir()
    args = TrainArgs(
        model=str(model_dir),
        out=str(run),
        env="publicgoods-v0",
        sharing_mode=mode,
        max_reply_tokens=64,
        prompt_length=1024,
        response_length=8192,  # ten steps of four agents, with room to spare
    )
    cfg = compose_config(args.rollout, run, args.update)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    policy = make_baseline("publicgoods-v0", baseline, seed=0)
    worker = AgentLoopWorker(cfg, ScriptedServer(tokenizer, policy_reply(policy)))
    out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [0, 1], "train", 1)))
    return [float(x) for x in out.batch["rm_scores"].sum(-1)]


def test_free_riders_earn_nothing_under_difference_rewards(model_dir, tmp_path) -> None:
    free = _returns(model_dir, tmp_path, "difference", "freerider")
    assert len(free) == 8 and all(r == pytest.approx(0.0, abs=1e-6) for r in free)
    assert all(r > 0 for r in _returns(model_dir, tmp_path, "mixed", "freerider"))
    assert all(r > 0 for r in _returns(model_dir, tmp_path, "difference", "expert"))


def test_an_unknown_sharing_mode_is_a_usage_error(tmp_path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "teamgym",
            "train",
            "--model",
            "m",
            "--out",
            str(tmp_path),
            "--sharing-mode",
            "karma",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "mixed, proportional, difference" in done.stderr.replace(
        "'", ""
    )
