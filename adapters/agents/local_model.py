"""A small local causal LM for CPU training and tests, built with no download.

``build_local_model(out_dir)`` trains a byte-level BPE tokenizer on the registered environments'
own text (instructions, observations and baseline replies), gives it a ChatML chat template
(the Qwen2 one: ``<|im_start|>role\\n…<|im_end|>``), builds a randomly initialised
``Qwen2ForCausalLM`` of a few layers, and saves both as a normal Hugging Face directory that
``AutoTokenizer``/``AutoModelForCausalLM``, VERL and vLLM can load. Same seed, same bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "LocalModelConfig",
    "build_local_model",
    "build_model",
    "build_tokenizer",
    "directory_hash",
    "env_corpus",
]

#: ChatML, as Qwen2 renders it (VERL's Qwen continuous-token builder expects this layout).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True)
class LocalModelConfig:
    """Size of the local model and of its tokenizer."""

    vocab_size: int = 1024
    """Target BPE vocabulary (the corpus may yield fewer)."""
    hidden_size: int = 64
    """Width of the transformer."""
    intermediate_size: int = 128
    """Width of the MLP."""
    num_hidden_layers: int = 2
    """Transformer blocks."""
    num_attention_heads: int = 4
    """Attention heads (``num_key_value_heads`` is half of it)."""
    max_position_embeddings: int = 4096
    """Longest sequence the model accepts."""
    sliding_window: int | None = None
    """Attention window of every layer (Qwen2's sliding-window attention), or None for full
    attention. A short window keeps a small model's attention on the recent turn."""
    episodes_per_env: int = 20
    """Baseline episodes per registered env whose text trains the tokenizer."""
    corpus_envs: tuple[str, ...] = ("signal-v0", "thor-assembly-v0")
    """Envs whose episodes make the corpus: a fixed list, so registering a new env does not
    change the models this builds (a stage that trains on another env names it here)."""
    corpus_baselines: tuple[str, ...] = ("random", "expert")
    """Baselines whose episodes make the corpus (those an env lacks are skipped): a fixed list,
    so registering a new baseline does not change the models this builds (learning results
    depend on the tokenizer)."""
    seed: int = 0
    """Seeds the corpus episodes and the weight initialisation."""


def env_corpus(
    env_ids: Sequence[str] | None = None,
    episodes: int = 20,
    seed: int = 0,
    max_steps: int = 30,
    baselines: Sequence[str] = ("random", "expert"),
) -> Iterator[str]:
    """Text of the registered environments: instructions, observations and the replies of
    ``baselines`` (those the env has; the first ``max_steps`` steps of each episode)."""
    from teamgym.envs import make, registry, spec
    from teamgym.envs.lineup import Lineup
    from teamgym.envs.seeds import episode_seeds

    for env_id in env_ids or list(registry()):
        known = {"random", *spec(env_id).baselines}
        for name in [b for b in baselines if b in known]:
            env = make(env_id)
            seats = dict.fromkeys(env.possible_agents, name)  # one policy, the training rule
            policy = Lineup.build(env_id, seats, seed=seed, share=True, first_stream=None)
            policy.bind(env)
            for episode_seed in episode_seeds(seed, episodes):
                obs, infos = env.reset(seed=episode_seed)
                policy.reset(episode_seed)
                yield from (info["instructions"] for info in infos.values())
                for _ in range(max_steps):
                    if not env.agents:
                        break
                    replies = {a: policy.act(a, obs[a], infos[a]) for a in env.agents}
                    yield from obs.values()
                    yield from replies.values()
                    obs, _, _, _, new = env.step(replies)
                    infos.update(new)
            env.close()


def build_local_model(out_dir: str | Path, config: LocalModelConfig | None = None) -> Path:
    """Build and save the tokenizer and a randomly initialised Qwen2 model into ``out_dir``."""
    config = config or LocalModelConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(config)
    tokenizer.save_pretrained(out)
    model = build_model(config, tokenizer)
    model.save_pretrained(out, safe_serialization=True)
    (out / "teamgym_model.json").write_text(
        json.dumps(
            {"builder": "teamgym.adapters.agents.local_model", **asdict(config)},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    return out


def build_tokenizer(config: LocalModelConfig) -> Any:
    """A byte-level BPE tokenizer trained on the environments' own text (so "\\n" is one
    token), with the ChatML chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = sorted(
        set(
            env_corpus(
                config.corpus_envs,
                episodes=config.episodes_per_env,
                seed=config.seed,
                baselines=config.corpus_baselines,
            )
        )
    )
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
        model_max_length=config.max_position_embeddings,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(config: LocalModelConfig, tokenizer: Any) -> Any:
    """A standard ``Qwen2ForCausalLM`` for ``tokenizer``, randomly initialised from the seed."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=max(1, config.num_attention_heads // 2),
        max_position_embeddings=config.max_position_embeddings,
        use_sliding_window=config.sliding_window is not None,
        sliding_window=config.sliding_window,
        max_window_layers=0,  # with a window, every layer uses it
        layer_types=["full_attention" if config.sliding_window is None else "sliding_attention"]
        * config.num_hidden_layers,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(config.seed)
    model = Qwen2ForCausalLM(model_config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def directory_hash(path: str | Path) -> str:
    """SHA-256 over the files of a model directory (names and bytes), for reproducibility checks."""
    digest = hashlib.sha256()
    for file in sorted(Path(path).rglob("*")):
        if file.is_file():
            digest.update(file.relative_to(path).as_posix().encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()
