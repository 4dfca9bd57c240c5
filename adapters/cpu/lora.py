"""LoRA policies of a CPU run (``--policy-model NAME=lora:RANK``): adapters over one frozen base.

The LoRA policies of a run share one copy of ``--model`` wrapped by PEFT, with one adapter per
policy (rank RANK, ``lora_alpha`` 2 x RANK, no dropout, on PEFT's default modules for the
architecture: the attention's query and value projections for Qwen2 and Llama).
:class:`LoraPolicy` shows the trainer one adapter as a model: calling it runs the base with that
adapter switched on (under a lock of the base: each seat's server samples on its own thread, and
every forward pass sets its adapter first, so two policies' batches may interleave without
mixing), and its parameters, state dict and optimiser are the adapter's alone. Its frozen
reference is the base with every adapter off (:class:`AdaptersOff`): LoRA's second matrix starts
at zero, so a LoRA policy starts equal to its reference, as a full policy does, with no second
copy of the model. Its final directory is a full model, the adapter merged, so it plays as
``checkpoint:DIR`` anywhere; the adapter alone is in ``adapter/``.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["AdaptersOff", "LoraPolicy", "load_lora_policies"]


class LoraPolicy:
    """One adapter of a PEFT model as the trainer's policy model (see the module docstring)."""

    def __init__(self, peft: Any, name: str, lock: threading.Lock) -> None:
        self.peft = peft
        """The PEFT model every LoRA policy of the run shares."""
        self.name = name
        """The adapter's name: the policy's."""
        self.lock = lock
        """Held by each forward pass of the shared model (one per base)."""
        self._params = [p for n, p in peft.named_parameters() if f".{name}." in n]

    @property
    def config(self) -> Any:
        """The base model's config."""
        return self.peft.get_base_model().config

    @property
    def device(self) -> torch.device:
        """Where the base model sits."""
        return self.peft.get_base_model().device

    def forward(self, *args: Any, logits_to_keep: int = 0, **kwargs: Any) -> Any:
        """The base model's forward pass with this adapter on (``logits_to_keep``: the
        transformers argument, passed on)."""
        with self.lock:
            if self.peft.active_adapter != self.name:
                self.peft.set_adapter(self.name)
            return self.peft(*args, logits_to_keep=logits_to_keep, **kwargs)

    __call__ = forward

    def eval(self) -> LoraPolicy:
        self.peft.eval()
        return self

    def train(self, mode: bool = True) -> LoraPolicy:
        self.peft.train(mode)
        return self

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The adapter's parameters (what its optimiser steps and the update clips)."""
        return iter(self._params)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The adapter's weights (PEFT's names, without the adapter's)."""
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(self.peft, adapter_name=self.name)

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore the adapter's weights from :meth:`state_dict`."""
        from peft import set_peft_model_state_dict

        with torch.no_grad():
            set_peft_model_state_dict(self.peft, state, adapter_name=self.name)

    def save_pretrained(self, path: str | Path, safe_serialization: bool = True) -> None:
        """``path``: the base with this adapter merged, a full model directory; the adapter
        alone in ``path/adapter`` (PEFT's layout)."""
        with self.lock:
            self.peft.save_pretrained(str(Path(path) / "adapter"), selected_adapters=[self.name])
            merged = copy.deepcopy(self.peft).merge_and_unload(adapter_names=[self.name])
        merged.save_pretrained(path, safe_serialization=safe_serialization)


class AdaptersOff:
    """The base of a run's LoRA policies with every adapter off: their frozen reference."""

    def __init__(self, policy: LoraPolicy) -> None:
        self.policy = policy

    @property
    def config(self) -> Any:
        """The base model's config."""
        return self.policy.config

    def forward(self, *args: Any, logits_to_keep: int = 0, **kwargs: Any) -> Any:
        """The base model's forward pass, no adapter on."""
        with self.policy.lock, self.policy.peft.disable_adapter():
            return self.policy.peft(*args, logits_to_keep=logits_to_keep, **kwargs)

    __call__ = forward


def load_lora_policies(model_dir: str, ranks: dict[str, int], seed: int) -> dict[str, LoraPolicy]:
    """One :class:`LoraPolicy` per name of ``ranks`` (its rank), all over one copy of the model
    in ``model_dir``, its weights frozen; the adapters initialised from torch seeded with
    ``seed``, in the order of ``ranks``."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    peft: Any = None
    for name, rank in ranks.items():
        config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM")
        if peft is None:
            peft = get_peft_model(base, config, adapter_name=name)
        else:
            peft.add_adapter(name, config)
    lock = threading.Lock()
    return {name: LoraPolicy(peft, name, lock) for name in ranks}
