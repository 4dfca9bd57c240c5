"""What a multi-node run needs from the driver reaches every Ray worker through the job's
``runtime_env``, whatever started the cluster: the agent-loop settings (no node reads the
driver's install path), the file-logger path of the KL monitor; and forced moves end with the
chat template's end-of-turn token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("verl")

import ray
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from teamgym.adapters.verl.episode_loop import end_of_turn_ids
from teamgym.adapters.verl.train import AGENT_LOOP_ENV, compose_config, runtime_config


@ray.remote
def _what_a_worker_sees() -> dict:
    import os

    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    entry = _agent_loop_registry["teamgym_episode"]
    return {
        "logger": os.environ.get("VERL_FILE_LOGGER_PATH"),
        "entry": OmegaConf.to_container(entry) if not isinstance(entry, dict) else entry,
    }


def test_runtime_env_carries_the_loop_settings_and_logger_path(
    dataset_dir, tmp_path, loop_yaml_writer, monkeypatch
) -> None:
    loop = loop_yaml_writer(tmp_path / "loop.yaml", sharing={"weight": 0.25, "mode": "mixed"})
    cfg = compose_config(
        [
            f"teamgym.dataset_dir={dataset_dir}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop}",
        ]
    )
    log = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    run = runtime_config(cfg)
    assert run.actor_rollout_ref.rollout.agent.agent_loop_config_path is None
    assert "teamgym" not in run
    env = run.ray_kwargs.ray_init.runtime_env
    assert json.loads(env.env_vars[AGENT_LOOP_ENV])["sharing"]["weight"] == 0.25
    # the driver's own environment no longer has it: only the runtime_env can carry it
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH")
    loop.unlink()  # and no worker can read the YAML the driver was given
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=OmegaConf.to_container(env),
    )
    try:
        seen = ray.get(_what_a_worker_sees.remote(), timeout=300)
    finally:
        ray.shutdown()
    assert seen["logger"] == str(log)
    assert seen["entry"]["_target_"] == "teamgym.adapters.verl.episode_loop.TeamEpisodeLoop"
    assert seen["entry"]["sharing"]["weight"] == 0.25 and seen["entry"]["max_reply_tokens"] == 24


def test_end_of_turn_comes_from_the_chat_template(model_dir: Path) -> None:
    plain = AutoTokenizer.from_pretrained(model_dir)
    im_end = plain.convert_tokens_to_ids("<|im_end|>")
    assert end_of_turn_ids(plain) == [im_end]
    # a chat model whose eos_token is not its end-of-turn token (as some Llama and Qwen base
    # tokenizers ship): forced moves still end the way the model's replies end
    other = AutoTokenizer.from_pretrained(model_dir, eos_token="<|endoftext|>")
    assert other.eos_token_id != im_end and end_of_turn_ids(other) == [im_end]
    other.chat_template = None  # no template at all: the tokenizer's end of sequence
    assert end_of_turn_ids(other) == [other.eos_token_id]
