"""The local model: a standard Hugging Face directory, built offline, same seed same bytes."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from teamgym.adapters.agents.local_model import LocalModelConfig, build_local_model, directory_hash


def test_model_directory_loads_and_renders_chat(model_dir, tokenizer) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert model.config.model_type == "qwen2"
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "Valid actions: wait"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text.endswith("<|im_start|>assistant\n") and "<|im_end|>" in text
    assert (
        len(tokenizer.encode("\n", add_special_tokens=False)) == 1
    )  # VERL's Qwen builder needs this
    ids = tokenizer.encode("<action>pick 2</action>", add_special_tokens=False)
    assert tokenizer.decode(ids) == "<action>pick 2</action>"
    assert len(ids) < 12, "the tokenizer was trained on the envs' own text"


def test_same_seed_same_bytes_across_processes(tmp_path, model_dir, run_python) -> None:
    code = f"from teamgym.adapters.agents.local_model import build_local_model, directory_hash; print(directory_hash(build_local_model({str(tmp_path / 'a')!r})))"
    assert run_python(code).stdout.strip() == directory_hash(model_dir)
    other = build_local_model(tmp_path / "b", LocalModelConfig(seed=1))
    assert directory_hash(other) != directory_hash(model_dir)


def test_sliding_window_model_ignores_tokens_beyond_its_reach(tmp_path) -> None:
    """With a window of W tokens and L layers, the last position cannot see the first tokens
    of a sequence longer than L*W; with full attention it can."""
    import torch
    from transformers import AutoModelForCausalLM

    windowed = build_local_model(
        tmp_path / "w", LocalModelConfig(sliding_window=16, episodes_per_env=2)
    )
    full = build_local_model(tmp_path / "f", LocalModelConfig(episodes_per_env=2))
    ids = torch.randint(10, 500, (1, 80))
    changed = ids.clone()
    changed[0, :8] = torch.randint(10, 500, (8,))
    for path, reaches in ((windowed, False), (full, True)):
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        assert set(model.config.layer_types) == {
            "full_attention" if reaches else "sliding_attention"
        }
        with torch.no_grad():
            a, b = model(input_ids=ids).logits[0, -1], model(input_ids=changed).logits[0, -1]
        assert (not torch.allclose(a, b, atol=1e-6)) == reaches
