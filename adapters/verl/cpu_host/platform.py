"""verl's platform ``cpu`` (patch 1 of :mod:`teamgym.adapters.verl.cpu_host`, selected by
``VERL_PLATFORM=cpu``, registered when imported): tensors on ``cpu``, process groups on gloo,
and a ``torch.cuda``-like device module whose calls do nothing.
"""

from __future__ import annotations

import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

__all__ = ["DEVICE_MODULE", "PlatformCPU"]


class _Event:
    """``torch.cuda.Event`` on the CPU: wall-clock marks, so verl's timers still read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._t = 0.0

    def record(self, *args: Any, **kwargs: Any) -> None:
        self._t = time.perf_counter()

    def elapsed_time(self, other: _Event) -> float:
        return (other._t - self._t) * 1000.0

    def synchronize(self) -> None:
        pass

    def wait(self, *args: Any, **kwargs: Any) -> None:
        pass

    def query(self) -> bool:
        return True


class _Stream:
    """``torch.cuda.Stream`` on the CPU: every operation is already done."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_event(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record_event(self, *args: Any, **kwargs: Any) -> _Event:
        return _Event()


@contextmanager
def _null_context(*args: Any, **kwargs: Any) -> Iterator[None]:
    yield


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


DEVICE_MODULE = types.SimpleNamespace(
    current_device=lambda: "cpu",
    device_count=lambda: 1,
    set_device=_noop,
    synchronize=_noop,
    empty_cache=_noop,
    is_available=lambda: True,
    manual_seed=torch.manual_seed,
    manual_seed_all=torch.manual_seed,
    memory_allocated=_zero,
    memory_reserved=_zero,
    max_memory_allocated=_zero,
    max_memory_reserved=_zero,
    mem_get_info=lambda *a, **k: (1 << 34, 1 << 34),
    reset_peak_memory_stats=_noop,
    get_rng_state=lambda *a, **k: torch.get_rng_state(),
    set_rng_state=lambda state, *a, **k: torch.set_rng_state(state),
    is_initialized=lambda: True,
    is_bf16_supported=lambda *a, **k: True,
    Event=_Event,
    Stream=_Stream,
    stream=_null_context,
    current_stream=lambda *a, **k: _Stream(),
    default_stream=lambda *a, **k: _Stream(),
    memory_stats=lambda *a, **k: {},
    get_device_name=lambda *a, **k: "cpu",
    get_device_properties=lambda *a, **k: types.SimpleNamespace(
        name="cpu", total_memory=1 << 34, major=0, minor=0
    ),
)
"""What verl calls on ``torch.cuda`` through the platform, answered for a CPU."""


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform for a host without an accelerator: tensors on ``cpu``, gloo groups."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> Any:  # verl types a module; a namespace of the same calls
        return DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # never auto-detected: only VERL_PLATFORM=cpu selects it

    def current_device(self) -> Any:  # verl types an index; torch takes "cpu" where it goes
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: Any) -> None:
        pass

    def synchronize(self, device_index: Any = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None
