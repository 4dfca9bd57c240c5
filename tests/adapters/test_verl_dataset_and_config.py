"""Dataset builder, start-up validation, the GPU recipe's CI path, the KL monitor."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("verl")

from teamgym.adapters.verl.config import TeamConfigError, validate_config
from teamgym.adapters.verl.dataset import build_dataset
from teamgym.adapters.verl.monitor import kl_alerts
from teamgym.adapters.verl.train import compose_config
from teamgym.envs import make

REPO = Path(__file__).resolve().parents[2]


def test_rows_hold_the_first_turn_and_seeds_are_disjoint(tmp_path: Path) -> None:
    m = build_dataset(
        "signal-v0", tmp_path, train_episodes=30, val_episodes=10, env_kwargs={"num_agents": 3}
    )
    train, val = (
        pd.read_parquet(tmp_path / "train.parquet"),
        pd.read_parquet(tmp_path / "val.parquet"),
    )
    assert (m.train_rows, m.val_rows, m.num_agents) == (90, 30, 3)
    train_seeds = {int(x["seed"]) for x in train["extra_info"]}
    val_seeds = {int(x["seed"]) for x in val["extra_info"]}
    assert len(train_seeds) == 30 and len(val_seeds) == 10 and not train_seeds & val_seeds
    # the agents of one episode are adjacent, in agent order
    agents = [x["agent"] for x in train["extra_info"]]
    assert agents == ["robot_0", "robot_1", "robot_2"] * 30
    # each row's prompt is exactly what the env shows that agent at reset
    row = train.iloc[4]
    info = row["extra_info"]
    env = make("signal-v0", **json.loads(info["env_kwargs"]))
    obs, infos = env.reset(seed=int(info["seed"]))
    assert row["prompt"][0]["content"] == infos[info["agent"]]["instructions"]
    assert row["prompt"][1]["content"] == obs[info["agent"]]
    assert len({x["index"] for x in list(train["extra_info"]) + list(val["extra_info"])}) == 120
    # same arguments, same bytes
    build_dataset(
        "signal-v0",
        tmp_path / "again",
        train_episodes=30,
        val_episodes=10,
        env_kwargs={"num_agents": 3},
    )
    assert (tmp_path / "again" / "train.parquet").read_bytes() == (
        tmp_path / "train.parquet"
    ).read_bytes()


def test_verl_rlhf_dataset_reads_our_parquet(tmp_path: Path, tokenizer) -> None:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    build_dataset("signal-v0", tmp_path, train_episodes=3, val_episodes=1)
    cfg = compose_config([f"teamgym.dataset_dir={tmp_path}", "data.max_prompt_length=1024"])
    ds = RLHFDataset(
        data_files=[str(tmp_path / "train.parquet")], tokenizer=tokenizer, config=cfg.data
    )
    item = ds[1]
    assert item["agent_name"] == "teamgym_agent" and item["extra_info"]["agent"] == "robot_1"
    assert [m["role"] for m in item["raw_prompt"]] == ["system", "user"]


def _cfg(dataset_dir, *overrides):
    return compose_config([f"teamgym.dataset_dir={dataset_dir}", *overrides])


def test_validation_refuses_what_would_split_episodes(dataset_dir) -> None:
    assert (
        validate_config(
            _cfg(
                dataset_dir,
                "data.train_batch_size=8",
                "actor_rollout_ref.rollout.agent.num_workers=2",
            )
        )
        == []
    )
    with pytest.raises(TeamConfigError, match="data.shuffle=False"):
        validate_config(_cfg(dataset_dir, "data.shuffle=true"), dataset_dir)
    with pytest.raises(TeamConfigError, match="not a multiple of the 2 agents"):
        validate_config(_cfg(dataset_dir, "data.train_batch_size=7"), dataset_dir)
    with pytest.raises(TeamConfigError, match="whole episodes.*hub: ray"):
        validate_config(
            _cfg(
                dataset_dir,
                "data.train_batch_size=6",
                "actor_rollout_ref.rollout.agent.num_workers=2",
            ),
            dataset_dir,
        )
    with pytest.raises(TeamConfigError, match="agent_loop_config_path"):
        validate_config(
            _cfg(dataset_dir, "actor_rollout_ref.rollout.agent.agent_loop_config_path=null"),
            dataset_dir,
        )
    with pytest.warns(UserWarning, match="n >= 2"):
        validate_config(_cfg(dataset_dir, "actor_rollout_ref.rollout.n=1"), dataset_dir)


def test_overlay_defaults_are_the_documented_recipe(dataset_dir) -> None:
    cfg = _cfg(dataset_dir)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.rollout.n == 8 and cfg.data.train_batch_size == 64
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-5)
    assert cfg.actor_rollout_ref.actor.use_kl_loss and cfg.actor_rollout_ref.actor.entropy_coeff > 0
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-7B-Instruct"
    assert cfg.teamgym.kl_target == pytest.approx(0.02)
    assert cfg.data.train_files == f"{dataset_dir}/train.parquet"


def test_gpu_recipe_builds_its_dataset_and_validates_in_ci(tmp_path: Path) -> None:
    bin_dir = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"
    env = {
        **os.environ,
        "CHECK_ONLY": "1",
        "TRAIN_EPISODES": "32",
        "VAL_EPISODES": "8",
        "DATA": str(tmp_path / "data"),
        "TEAMGYM": str(bin_dir / "teamgym") if (bin_dir / "teamgym").exists() else "teamgym",
        "PYTHON": str(bin_dir / "python") if (bin_dir / "python").exists() else "python",
    }
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_verl_grpo.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "configuration valid" in proc.stdout
    assert json.loads((tmp_path / "data" / "manifest.json").read_text())["num_agents"] == 4
    bad = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_verl_grpo.sh"), "data.train_batch_size=63"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bad.returncode == 2 and "not a multiple of the 4 agents" in bad.stderr


def test_kl_watch_flags_steps_above_target(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    log.write_text(
        "\n".join(
            json.dumps({"step": s, "data": {"actor/kl_loss": kl}})
            for s, kl in [(1, 0.001), (2, 0.03), (3, 0.019), (4, 0.5)]
        )
        + "\n{partial"
    )
    alerts = list(kl_alerts(log, target=0.02))
    assert [a.split(":")[0] for a in alerts] == ["step 2", "step 4"]
