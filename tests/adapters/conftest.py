"""Fixtures for the VERL adapter tests: a local model built by our code (no download), a
dataset from our builder, VERL's own config composed with our overlay, and batches made the
way VERL's trainer makes them."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl")


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory) -> Path:
    from teamgym.adapters.verl.dataset import build_dataset

    out = tmp_path_factory.mktemp("data")
    build_dataset(
        "signal-v0",
        out,
        train_episodes=6,
        val_episodes=2,
        env_kwargs={"num_rounds": 2},
    )
    return out


@pytest.fixture(scope="session")
def episode_dataset_dir(dataset_dir) -> Path:
    """``dataset_dir`` (one row per episode), by the name the main_ppo tests use."""
    return dataset_dir


#: The loop-mechanics tests' settings: the model answers every turn (a forced move is a turn
#: too), so each scripted reply reaches the loop; the tests of forced moves set ``auto`` (the
#: shipped default).
MECHANICS = {"forced_moves": "model"}


def write_agent_loop_yaml(path: Path, **settings) -> Path:
    """Our agent-loop registry file with test-sized settings (and ``settings``) changed."""
    from teamgym.adapters.verl.config import write_agent_loop_yaml as write

    sizes = {"max_reply_tokens": 24, "turn_timeout": 120}
    return write(path, **{**sizes, **MECHANICS, **settings})


@pytest.fixture
def make_cfg(model_dir, dataset_dir, tmp_path):
    """Compose our overlay on VERL's ppo_trainer with CPU-sized overrides."""
    from teamgym.adapters.verl.train import compose_config

    def make(response_length: int = 256, prompt_length: int = 1024, **loop_settings):
        loop_yaml = write_agent_loop_yaml(
            tmp_path / f"loop-{uuid.uuid4().hex}.yaml", **loop_settings
        )
        return compose_config(
            [
                f"teamgym.dataset_dir={dataset_dir}",
                f"actor_rollout_ref.model.path={model_dir}",
                f"actor_rollout_ref.rollout.prompt_length={prompt_length}",
                f"actor_rollout_ref.rollout.response_length={response_length}",
                f"data.max_prompt_length={prompt_length}",
                f"data.max_response_length={response_length}",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
                "data.train_batch_size=4",
                "actor_rollout_ref.rollout.n=2",
                "actor_rollout_ref.rollout.agent.num_workers=1",
            ]
        )

    return make


@pytest.fixture
def make_batch(dataset_dir, tokenizer):
    """Rows read by VERL's RLHFDataset, uid'd and repeated n times interleaved as copies
    (``session_id``), as the v1 worker plays a row's ``rollout.n`` sessions."""
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    def make(cfg, rows: list[int] | None = None, n: int = 2, permute_seed: int | None = None):
        ds = RLHFDataset(
            data_files=[str(dataset_dir / "train.parquet")], tokenizer=tokenizer, config=cfg.data
        )
        picked = rows if rows is not None else list(range(len(ds)))
        batch = DataProto.from_single_dict(collate_fn([ds[i] for i in picked]))
        batch.non_tensor_batch["uid"] = np.array(
            [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
        )
        batch = batch.repeat(repeat_times=n, interleave=True)
        batch.non_tensor_batch["session_id"] = np.tile(np.arange(n), len(picked))  # the copies
        if permute_seed is not None:  # what a shuffled sampler / chunking could do to row order
            order = np.random.default_rng(permute_seed).permutation(len(batch))
            batch = batch.select_idxs(order)
        return batch

    return make


@pytest.fixture(scope="session")
def loop_yaml_writer():
    """``write(path, **settings)``: an agent-loop registry file with some settings changed."""
    return write_agent_loop_yaml


#: Qwen2.5-Instruct's chat template without its tool branches: a default system message when
#: none is given, whitespace control, ChatML turns (the layout of the model the recipe trains).
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(params=["local", "qwen2.5"])
def templated(request, model_dir, tmp_path):
    """The local model, or a copy of it whose tokenizer carries Qwen2.5's chat template."""
    import shutil

    from transformers import AutoTokenizer

    if request.param == "local":
        return model_dir, AutoTokenizer.from_pretrained(model_dir)
    copy = tmp_path / "qwen25-template"
    shutil.copytree(model_dir, copy)
    (copy / "chat_template.jinja").write_text(QWEN25_TEMPLATE)
    tok = AutoTokenizer.from_pretrained(copy)
    assert "Alibaba" in tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    return copy, tok
