"""Test-only verl plugin for verl 0.9.1's real ``main_ppo`` (v1 trainer) on the CPU, with verl's real
vLLM engine (vLLM's CPU build).

Loaded in every process with ``VERL_USE_EXTERNAL_MODULES=teamgym_verl_cpu`` (this folder on
``PYTHONPATH``): ``verl/__init__.py`` imports it while verl itself is being imported. It imports
:mod:`teamgym.adapters.verl.cpu_host` (what users get with ``--cpu``: the CPU platform, gloo, the
vLLM CPU build's patches) and adds, without touching a verl file on disk, records and switches
around verl's own vLLM methods: every request vLLM served, the ids of every trajectory trained
on, a server failing mid-episode, and a weight sync skipped (the control).
"""

from __future__ import annotations

import os
import types
from typing import Any

from teamgym.adapters.verl import cpu_host

# --------------------------------------------------------------------------------------------
# the real vLLM engine (``rollout.name=vllm``, the CPU build): what the tests read off it
# --------------------------------------------------------------------------------------------
# Each switch is an environment variable the driver ships to every process; each hook wraps one
# verl method, in the process that imports its module, and calls verl's own method.

VLLM_SERVER = "verl.workers.rollout.vllm_rollout.vllm_async_server"
VLLM_ADAPTER = "verl.workers.rollout.vllm_rollout.vllm_rollout"
V1_TRAINER = "verl.trainer.ppo.v1.trainer_base"


def _append(path: str, line: dict[str, Any]) -> None:
    import json

    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


def _later_turn(tokenizer: Any, prompt_ids: list[int]) -> bool:
    """Whether the prompt already holds a reply (not the first turn of its trajectory)."""
    return tokenizer.decode(prompt_ids).count("<|im_start|>assistant") >= 2


def _hook_vllm_server(module: types.ModuleType) -> None:
    """``vLLMHttpServer.generate``: ``TEAMGYM_VLLM_LOG`` records every request (ids sent, ids and
    log-probs returned, sampling parameters, the weight version); ``TEAMGYM_CPU_ROLLOUT_CRASH_STEP=S``
    makes replica 0 fail once, on the first later-turn request of training step S."""
    server = module.vLLMHttpServer
    generate = server.generate
    state = {"crashed": False}

    async def recorded(self, prompt_ids, sampling_params, request_id, *args, **kwargs):
        sent = dict(sampling_params)
        step = os.environ.get("TEAMGYM_CPU_ROLLOUT_CRASH_STEP")
        if (
            step
            and not state["crashed"]
            and self.replica_rank == 0
            and self.global_steps == int(step) - 1
            and _later_turn(self.model_config.tokenizer, list(prompt_ids))
        ):
            state["crashed"] = True
            if os.environ.get("TEAMGYM_VLLM_LOG"):
                _append(
                    os.environ["TEAMGYM_VLLM_LOG"], {"event": "crash", "step": self.global_steps}
                )
            raise RuntimeError(f"teamgym test: injected vLLM server crash on {request_id}")
        out = await generate(self, prompt_ids, sampling_params, request_id, *args, **kwargs)
        if os.environ.get("TEAMGYM_VLLM_LOG"):
            _append(
                os.environ["TEAMGYM_VLLM_LOG"],
                {
                    "event": "generate",
                    "replica": self.replica_rank,
                    "global_steps": self.global_steps,
                    "request_id": request_id,
                    "prompt_ids": [int(t) for t in prompt_ids],
                    "token_ids": [int(t) for t in out.token_ids],
                    "log_probs": None
                    if out.log_probs is None
                    else [float(x) for x in out.log_probs],
                    "stop_reason": out.stop_reason,
                    "sampling": {
                        k: v
                        for k, v in sent.items()
                        if isinstance(v, int | float | str | list | bool)
                    },
                },
            )
        return out

    server.generate = recorded


def _hook_vllm_adapter(module: types.ModuleType) -> None:
    """``TEAMGYM_VLLM_SKIP_SYNC=1`` (the negative control of the weight-sync test): after a
    training step, the hybrid worker's vLLM adapter drains the actor's weights (every FSDP rank
    must) and tags the server with the step, but sends vLLM nothing, so vLLM keeps serving the
    weights of the first sync (verl starts vLLM on dummy weights and syncs before step 1)."""
    if os.environ.get("TEAMGYM_VLLM_SKIP_SYNC") != "1":
        return
    adapter = module.ServerAdapter
    sync = adapter.update_weights

    async def update_weights(self, weights, global_steps=None, **kwargs):
        if not global_steps:  # the first sync: vLLM's weights are dummies until then
            return await sync(self, weights, global_steps=global_steps, **kwargs)
        for _name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor.full_tensor()
        if self._ensure_server_handle() and global_steps is not None:
            await self.server_handle.set_global_steps.remote(global_steps)

    adapter.update_weights = update_weights


def _hook_v1_trainer(module: types.ModuleType) -> None:
    """``TEAMGYM_BATCH_LOG``: verl's rollout dump (``trainer.rollout_data_dir``) also writes the
    token ids of every trajectory the step trains on, read from TransferQueue as verl reads them."""
    trainer = module.PPOTrainer
    log_rollout_data = trainer._log_rollout_data

    def logged(self, batch, timing_raw, rollout_data_dir):
        path = os.environ.get("TEAMGYM_BATCH_LOG")
        if path:
            fields = ["prompts", "responses", "response_mask", "rm_scores", "advantages", "uid"]
            data = module.tq.kv_batch_get(
                keys=batch.keys, partition_id=batch.partition_id, select_fields=fields
            )
            real = [k for k in batch.keys if not k.startswith("pad")]  # verl's padding: no extras
            extras = (
                module.tq.kv_batch_get(
                    keys=real, partition_id=batch.partition_id, select_fields=["extra_fields"]
                )["extra_fields"]
                if real
                else []
            )
            info = {
                k: e.get("reward_extra_info", {}) for k, e in zip(real, list(extras), strict=True)
            }
            turns = {
                k: (e.get("turn_scores"), e.get("teamgym_turn_anchors"))
                for k, e in zip(real, list(extras), strict=True)
            }
            team = {k: i.get("team_return") for k, i in info.items()}
            partner = {k: i.get("partner_replies") for k, i in info.items()}
            for i, key in enumerate(batch.keys):
                _append(
                    path,
                    {
                        "step": self.global_steps,
                        "key": key,
                        "prompt_ids": data["prompts"][i].tolist(),
                        "response_ids": data["responses"][i].tolist(),
                        "response_mask": data["response_mask"][i].tolist(),
                        "score": float(data["rm_scores"][i].sum()),
                        "rm_scores": data["rm_scores"][i].tolist(),
                        "advantages": data["advantages"][i].tolist(),
                        "uid": str(data["uid"][i]),
                        "turn_scores": turns.get(key, (None, None))[0],
                        "anchors": turns.get(key, (None, None))[1],
                        "team_return": team.get(key),
                        "partner_replies": partner.get(key),
                    },
                )
        return log_rollout_data(self, batch, timing_raw, rollout_data_dir)

    trainer._log_rollout_data = logged


cpu_host.after_import(VLLM_SERVER, _hook_vllm_server)
cpu_host.after_import(VLLM_ADAPTER, _hook_vllm_adapter)
cpu_host.after_import(V1_TRAINER, _hook_v1_trainer)
