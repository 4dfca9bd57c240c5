"""The agent loop's settings type: the shipped YAML is its rendering, one dict form serves the
YAML file and the GPU path's JSON, the reward-sharing default is written once."""

from __future__ import annotations

import dataclasses
import pickle
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from teamgym.adapters.cpu.args import TrainArgs
from teamgym.adapters.verl.settings import (
    AGENT_LOOP_CONFIG,
    LOOP_TARGET,
    AgentLoopSettings,
    render_yaml,
    write_agent_loop_yaml,
)
from teamgym.envs.sharing import RewardSharing
from teamgym.names import DEFAULT_SHARING_WEIGHT, EPISODE_LOOP_NAME

VERL_DIR = Path(__file__).resolve().parents[2] / "adapters" / "verl"
CHANGED = AgentLoopSettings(
    sharing=RewardSharing(weight=0.25, team="mean", mode="proportional"),
    max_reply_tokens=24,
    turn_timeout=30,
    forced_moves="model",
    stop=("</action>",),
    mask_stop=False,
)


def test_both_trainers_play_forced_moves_by_default() -> None:
    """The CPU trainer and the verl loop share one default (teamgym.names): under
    ``forced_moves: model`` a real chat model writes a listener's lone ``wait`` itself, and
    SmolLM2's off-format replies there made every main_ppo reply invalid (issue 57)."""
    from teamgym.adapters.cpu.args import TrainArgs

    loop, cpu = AgentLoopSettings(), TrainArgs(model="unused", out="unused")
    assert loop.forced_moves == cpu.forced_moves == "auto"


def test_the_shipped_yaml_is_the_rendering_of_the_defaults() -> None:
    assert AGENT_LOOP_CONFIG.read_text() == render_yaml(), (
        "adapters/verl/config/agent_loop.yaml differs from AgentLoopSettings' rendering: "
        "run `python -m teamgym.adapters.verl.settings`"
    )
    (entry,) = OmegaConf.to_container(OmegaConf.load(AGENT_LOOP_CONFIG))  # one loop, one entry
    assert entry == AgentLoopSettings().entry()
    assert entry["name"] == EPISODE_LOOP_NAME and entry["_target_"] == LOOP_TARGET


@pytest.mark.parametrize("settings", [AgentLoopSettings(), CHANGED], ids=["defaults", "changed"])
def test_every_form_reads_back_to_the_same_settings(settings, tmp_path: Path) -> None:
    assert AgentLoopSettings.from_dict(settings.to_dict()) == settings
    assert AgentLoopSettings.from_json(settings.to_json()) == (settings, LOOP_TARGET)  # GPU path
    assert pickle.loads(pickle.dumps(settings)) == settings  # a Ray actor call
    path = write_agent_loop_yaml(tmp_path / "loop.yaml", settings)
    (entry,) = OmegaConf.load(path)  # as VERL reads it: Hydra nodes
    assert AgentLoopSettings.from_entry(entry) == settings


def test_the_reward_sharing_default_is_written_once() -> None:
    assert AgentLoopSettings().sharing == RewardSharing()
    cpu_default = {f.name: f.default for f in dataclasses.fields(TrainArgs)}["sharing_weight"]
    assert RewardSharing().weight == DEFAULT_SHARING_WEIGHT == cpu_default
    literal = re.compile(rf"(?<![\d.]){re.escape(str(DEFAULT_SHARING_WEIGHT))}(?![\d])")
    copies = [p.name for p in sorted(VERL_DIR.glob("*.py")) if literal.search(p.read_text())]
    assert not copies, f"a literal {DEFAULT_SHARING_WEIGHT} in {copies}: use RewardSharing()"


def test_changes_apply_over_the_defaults_and_typos_raise(tmp_path: Path) -> None:
    path = write_agent_loop_yaml(tmp_path / "a.yaml", sharing={"weight": 0.5}, stop=["", "</a>"])
    (entry,) = OmegaConf.load(path)
    got = AgentLoopSettings.from_entry(entry)
    assert got == AgentLoopSettings(sharing=RewardSharing(weight=0.5), stop=("</a>",))
    with pytest.raises(TypeError, match=r"unknown agent-loop settings \['max_reply'\]"):
        write_agent_loop_yaml(tmp_path / "b.yaml", max_reply=3)
    with pytest.raises(TypeError, match="unknown agent-loop settings"):
        AgentLoopSettings.from_dict({"sharing": {"weight": 0.5}, "hubb": "ray"})
    # the retired per-agent loop's settings: refused with what to do
    with pytest.raises(TypeError, match=r"\['hub', 'join_timeout'\] are gone.*delete them"):
        AgentLoopSettings.from_dict({"hub": "local", "join_timeout": 60})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"forced_moves": "always"}, "forced_moves must be 'model' or 'auto'"),
        ({"sharing": {"weight": 2.0}}, r"weight must be in \[0, 1\]"),
    ],
)
def test_bad_values_are_refused(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        AgentLoopSettings.from_dict(changes)


def test_the_target_is_the_loop_class() -> None:
    pytest.importorskip("verl")
    from hydra.utils import get_class

    from teamgym.adapters.verl.episode_loop import TeamEpisodeLoop

    assert get_class(LOOP_TARGET) is TeamEpisodeLoop


def test_a_users_loop_class_reaches_the_gpu_workers(tmp_path: Path) -> None:
    """A YAML naming a subclass of the loop keeps it on the GPU path: the JSON the workers
    read names the class the user's file names, with the settings checked on the driver."""
    from teamgym.adapters.verl.train import AGENT_LOOP_ENV, compose_config, runtime_config

    path = write_agent_loop_yaml(tmp_path / "loop.yaml", CHANGED)
    (entry,) = OmegaConf.to_container(OmegaConf.load(path))
    entry["_target_"] = "my_lab.loops.MyTeamLoop"
    path.write_text(OmegaConf.to_yaml([entry]))
    loop_path = f"actor_rollout_ref.rollout.agent.agent_loop_config_path={path}"
    cfg = compose_config([f"teamgym.dataset_dir={tmp_path}", loop_path])
    env_vars = runtime_config(cfg).ray_kwargs.ray_init.runtime_env.env_vars
    shipped = env_vars[AGENT_LOOP_ENV]
    assert AgentLoopSettings.from_json(shipped) == (CHANGED, "my_lab.loops.MyTeamLoop")


def test_the_ray_worker_hook_registers_every_estimator_and_the_loop() -> None:
    """``setup_worker`` (Ray's ``worker_process_setup_hook``) alone, in a fresh interpreter,
    registers what a worker needs: a user's own agent-loop manager imports nothing of ours."""
    import json
    import subprocess
    import sys

    pytest.importorskip("verl")
    code = (
        "from teamgym.adapters.verl.train import setup_worker; setup_worker()\n"
        "from verl.trainer.ppo import core_algos\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "import json; print(json.dumps([sorted(core_algos.ADV_ESTIMATOR_REGISTRY), "
        "sorted(_agent_loop_registry)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    estimators, loops = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("team_grpo", "at_grpo", "team_at_grpo", "gigpo", "team_gigpo"):
        assert name in estimators, name
    assert EPISODE_LOOP_NAME in loops and "teamgym_agent" not in loops
