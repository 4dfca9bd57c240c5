"""The ``${teamgym.*}`` resolvers the config overlays use, registered on import (by
:mod:`teamgym.adapters.verl.config`): sizes derived from the run's sequence lengths, its
dataset and its model, so an override of one setting carries to the settings that follow it."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

__all__ = ["VERL_WEIGHT_BUCKET_MB", "cpu_dtype", "dataset_manifest", "weight_bucket_mb"]

# ``${teamgym.tokens:P,R,K}`` = K * (P + R): token budgets derived from the sequence lengths.
OmegaConf.register_new_resolver(
    "teamgym.tokens", lambda p, r, k=1: int(k) * (int(p) + int(r)), replace=True
)


def dataset_manifest(dataset_dir: Any) -> Any:
    """The ``manifest.json`` of a dataset directory (None when there is none, or no directory)."""
    import json
    from pathlib import Path

    from teamgym.adapters.verl.dataset import DatasetManifest

    path = Path(str(dataset_dir)) / "manifest.json" if dataset_dir else None
    if path is None or not path.is_file():
        return None
    return DatasetManifest(**json.loads(path.read_text()))


def _trajectories_per_row(batch: Any, dataset_dir: Any) -> int:
    """``${teamgym.per_row:B,DIR}``: B rows in trajectories per copy (B x the trained agents of
    the dataset, else B): the overlay's mini-batch, one optimizer step a batch."""
    manifest = dataset_manifest(dataset_dir)
    return int(batch) * (manifest.agents_per_row if manifest is not None else 1)


OmegaConf.register_new_resolver("teamgym.per_row", _trajectories_per_row, replace=True)

#: verl's ``update_weights_bucket_megabytes`` default, kept for a model it cannot read here.
VERL_WEIGHT_BUCKET_MB = 2048


def weight_bucket_mb(model_path: Any, floor: int = 128) -> int:
    """``${teamgym.weight_bucket:PATH}``: the smallest weight-sync bucket, in MiB and at least
    ``floor``, that holds the largest tensor of the model directory ``PATH`` in float32 (the
    embedding or an MLP matrix, from ``config.json``): on CPU verl copies the weights to vLLM
    through a shared-memory bucket, refuses a tensor larger than it, and a bucket that holds the
    whole model adds it to the job's peak at every sync. verl's 2048 for a Hub name."""
    import json
    from pathlib import Path

    config = Path(str(model_path)).expanduser() / "config.json"
    if not config.is_file():
        return VERL_WEIGHT_BUCKET_MB
    spec = json.loads(config.read_text())
    spec = spec.get("text_config", spec)
    hidden = int(spec.get("hidden_size") or 0)
    rows = max(int(spec.get("vocab_size") or 0), int(spec.get("intermediate_size") or 0))
    if not hidden or not rows:
        return VERL_WEIGHT_BUCKET_MB
    return max(floor, -(-rows * hidden * 4 // 2**20) + 1)


OmegaConf.register_new_resolver("teamgym.weight_bucket", weight_bucket_mb, replace=True)


#: The CPU feature flags (``/proc/cpuinfo``) of bfloat16 arithmetic: x86's AVX-512 BF16 and AMX,
#: Arm's BF16 extension. Without one, PyTorch converts every bfloat16 operand to float32 and back.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_dtype(choice: Any = "auto", cpuinfo: str = "/proc/cpuinfo") -> str:
    """``${teamgym.dtype:CHOICE}``: the number format the CPU host computes in. ``auto``:
    ``bfloat16`` where the CPU has bfloat16 instructions, else ``float32`` (on an AVX2-only
    CPU a SmolLM2 forward pass took 23.5 s in bfloat16 and 4.6 s in float32); ``bfloat16`` or
    ``float32`` as given (to reproduce a run made on the other kind of CPU)."""
    from pathlib import Path

    choice = str(choice)
    if choice in ("bfloat16", "float32"):
        return choice
    if choice != "auto":
        raise ValueError(f"teamgym.cpu_dtype={choice!r}: use auto, bfloat16 or float32")
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return "float32"
    flags = {
        flag
        for line in text.splitlines()
        if line.split(":", 1)[0].strip() in ("flags", "Features")
        for flag in line.split(":", 1)[-1].split()
    }
    return "bfloat16" if flags & BF16_CPU_FLAGS else "float32"


OmegaConf.register_new_resolver("teamgym.dtype", cpu_dtype, replace=True)
