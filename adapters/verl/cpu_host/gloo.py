"""Patch 2: plain ``gloo`` process groups. verl's ``initialize_global_process_group_ray``
builds the backend string ``"cpu:gloo,{device}:{backend}"`` (``verl/utils/distributed.py:89``),
``"cpu:gloo,cpu:gloo"`` on a CPU host, which torch rejects; with no backend, or a non-CUDA one,
it is given plain ``gloo``. A CUDA backend string is left alone."""

from __future__ import annotations

from typing import Any

__all__ = ["plain_gloo_groups"]


def plain_gloo_groups() -> None:
    """Wrap verl's ``initialize_global_process_group_ray`` (once) to pass plain ``gloo``."""
    import verl.utils.distributed as dist

    original = dist.initialize_global_process_group_ray
    if getattr(original, "_teamgym_gloo", False):
        return

    def initialize(timeout_second: Any = None, backend: Any = None) -> Any:
        if backend is None or "cuda" not in str(backend):
            backend = "gloo"
        return original(timeout_second=timeout_second, backend=backend)

    initialize._teamgym_gloo = True  # type: ignore[attr-defined]
    dist.initialize_global_process_group_ray = initialize
