"""The model the vLLM and ``main_ppo`` tests serve (``vllm_model_dir``, tests/conftest.py): built
here first, on the worker that does not run the engines, so theirs finds it ready."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")


def test_the_served_test_model_fits_vllms_cpu_attention_and_gives_grpo_a_signal(
    vllm_model_dir,
) -> None:
    """Head size 32 (vLLM's CPU attention refuses 16), and after the warm-up its held-out greedy
    replies are valid in some turns and not in others, so copies of an episode can score
    differently (an untrained model is invalid every turn: every GRPO advantage would be 0)."""
    config = json.loads((vllm_model_dir / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] == 32
    held_out = json.loads((vllm_model_dir.parent / "warmup.json").read_text())["eval"]
    assert 0.0 < held_out["invalid_action_rate"] < 1.0, held_out
    assert held_out["team_return"] != 0.0, held_out
