"""What Ray must reserve for a teamgym run with VERL's v1 trainer, against what the cluster has.

VERL's placement groups hold ``CPUS_PER_GPU_BUNDLE`` CPUs per GPU bundle, TransferQueue one per
storage unit (round-robin over the nodes) and one for its controller; a node short of them
makes a placement group wait forever, with no error. :func:`check_resources` counts them node
by node, against :func:`cluster_nodes` (the running cluster) when there is one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig

from teamgym.adapters.verl.errors import TeamConfigError

__all__ = ["CPUS_PER_GPU_BUNDLE", "check_resources", "cluster_nodes", "local_ray_cpus"]

#: CPUs verl's v1 trainer puts in each GPU bundle of its placement groups (``ResourcePoolManager``'s
#: default ``max_colocate_count``, ``single_controller/ray/base.py``).
CPUS_PER_GPU_BUNDLE = 3


def cluster_nodes(cfg: DictConfig) -> list[dict[str, Any]] | None:
    """The alive nodes' CPUs and GPUs of the Ray cluster the run joins (Ray up in this process,
    or ``ray_kwargs.ray_init.address`` / ``RAY_ADDRESS``); None when ``main_ppo`` starts one."""
    import ray

    address = cfg.ray_kwargs.get("ray_init", {}).get("address") or os.environ.get("RAY_ADDRESS")
    started = False
    if not ray.is_initialized():
        if not address or address == "local":
            return None
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # Ray raises several types for an address that does not answer
            raise ConnectionError(
                f"cannot reach the Ray cluster at {address} (RAY_ADDRESS or "
                f"ray_kwargs.ray_init.address) to count its CPUs: {exc}"
            ) from exc
        started = True
    try:
        return [  # total resources: another job holding some of them is not counted
            {
                "CPU": float(n["Resources"].get("CPU", 0)),
                "GPU": float(n["Resources"].get("GPU", 0)),
                "NodeID": str(n["NodeID"]),
            }
            for n in ray.nodes()
            if n.get("Alive")
        ]
    finally:
        if started:
            ray.shutdown()


def _held_cpus(cfg: DictConfig, nodes: Sequence[dict[str, Any]]) -> list[float]:
    """CPUs Ray holds on each node: verl's GPU bundles (``CPUS_PER_GPU_BUNDLE`` each, on the GPU
    nodes: the trainer's, a reward model's and a distillation teacher's pools), TransferQueue's
    storage units (one each, round-robin over the nodes in node-id order) and its controller."""
    held = [0.0] * len(nodes)
    gpus = [int(cfg.trainer.n_gpus_per_node)] * int(cfg.trainer.nnodes)
    rm = cfg.get("reward", {}).get("reward_model", {})
    if rm.get("enable_resource_pool"):
        gpus += [int(rm.n_gpus_per_node)] * int(rm.nnodes)
    teacher: Any = cfg.get("distillation") or {}
    if teacher.get("enabled"):
        gpus += [int(teacher["n_gpus_per_node"])] * int(teacher["nnodes"])
    gpu_nodes = sorted(range(len(nodes)), key=lambda i: -float(nodes[i].get("GPU", 0)))
    if len(gpus) > len(gpu_nodes):
        raise TeamConfigError(
            f"the run places GPU bundles on {len(gpus)} nodes (trainer.nnodes and any reward or "
            f"teacher pool), the Ray cluster has {len(nodes)}: start more nodes or lower nnodes"
        )
    for i, count in zip(gpu_nodes, gpus, strict=False):
        held[i] += CPUS_PER_GPU_BUNDLE * count
    queue = cfg.get("transfer_queue", {}).get("backend", {})
    if queue.get("storage_backend", "SimpleStorage") == "SimpleStorage":
        order = sorted(range(len(nodes)), key=lambda i: str(nodes[i].get("NodeID", i)))
        for unit in range(int(queue.SimpleStorage.num_data_storage_units)):
            held[order[unit % len(nodes)]] += 1
    held[0] += 1  # TransferQueueController
    return held


def local_ray_cpus(cfg: DictConfig) -> int:
    """Logical CPUs (Ray's scheduling counts) for the one-node Ray instance ``main_ppo`` starts:
    this machine's cores, or, where they are fewer, what the run reserves (:func:`_held_cpus`)
    plus one spare, the fewest it starts with (on 2 cores a one-rank run is told 6: 3 for the GPU
    bundle, 1 per TransferQueue storage unit, 1 for its controller, 1 spare)."""
    cores = os.cpu_count() or 1
    node = {"CPU": float(cores), "GPU": float(cfg.trainer.n_gpus_per_node)}
    return max(cores, int(sum(_held_cpus(cfg, [node]))) + 1)


def check_resources(cfg: DictConfig, nodes: Sequence[dict[str, Any]] | None = None) -> list[str]:
    """Whether Ray's CPUs hold every reservation of the run (:func:`_held_cpus`) with one to spare
    for verl's unreserved actors (task runner, agent-loop and reward workers). ``nodes``: the
    cluster's (:func:`cluster_nodes`) when connected; else one node of ``ray_init.num_cpus`` CPUs
    (the local instance ``main_ppo`` starts: refused) or of this machine's (a warning: the GPU
    nodes may be larger); a multi-node run is only counted against its cluster."""
    fix = (
        "lower transfer_queue.backend.SimpleStorage.num_data_storage_units, or give Ray more "
        "(logical) CPUs (ray_kwargs.ray_init.num_cpus, or `ray start --num-cpus N` on each node)"
    )
    cpus = cfg.ray_kwargs.get("ray_init", {}).get("num_cpus")
    measured = nodes is not None or cpus is not None
    if nodes is None:
        if int(cfg.trainer.nnodes) > 1:
            return [
                f"trainer.nnodes={cfg.trainer.nnodes}: Ray's CPUs per node can only be counted "
                "against the running cluster; run --check-only with RAY_ADDRESS set to check them"
            ]
        per_node = float(cpus if cpus is not None else os.cpu_count() or 1)
        nodes = [{"CPU": per_node, "GPU": float(cfg.trainer.n_gpus_per_node)}]
    nodes = list(nodes)
    held = _held_cpus(cfg, nodes)
    total = sum(float(n.get("CPU", 0)) for n in nodes)
    short = [
        f"node {i}: {h:g} of {float(n.get('CPU', 0)):g} CPUs"
        for i, (h, n) in enumerate(zip(held, nodes, strict=True))
        if h > float(n.get("CPU", 0))
    ]
    if short or sum(held) + 1 > total:
        detail = "; ".join(short) or f"{sum(held):g} of {total:g} CPUs, none spare"
        message = (
            f"Ray would hold {detail} ({CPUS_PER_GPU_BUNDLE} per GPU bundle of verl's placement "
            "groups, 1 per TransferQueue storage unit, 1 for its controller), and the trainer "
            f"needs one more to start: its placement group would wait forever; {fix}"
        )
        if measured:
            raise TeamConfigError(message)
        return [f"on a node of {total:g} CPUs (this machine's): {message}"]
    return []
