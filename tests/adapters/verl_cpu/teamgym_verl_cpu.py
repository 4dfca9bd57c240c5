"""Test-only verl plugin for verl 0.9.1's real ``main_ppo`` (v1 trainer) on the CPU.

Loaded in every process with ``VERL_USE_EXTERNAL_MODULES=teamgym_verl_cpu`` (this folder on
``PYTHONPATH``): ``verl/__init__.py`` imports it while verl itself is being imported. It imports
:mod:`teamgym.adapters.verl.cpu_host` (what users get with ``--cpu``: the CPU platform, gloo, the
vLLM CPU build's patches) and adds, without touching a verl file on disk:

2. A rollout backend ``teamgym_cpu`` (verl's ``RolloutReplicaRegistry`` and ``_ROLLOUT_REGISTRY``):
   :class:`CPUReplica` starts one :class:`CPUServer` Ray actor per replica serving ``generate()``
   with teamgym's :class:`~teamgym.adapters.verl.server.LocalModelServer`, and
   :class:`CPUServerAdapter` ships it the actor's weights after every step. It predates the
   real engine here; the config checks use it as a registered backend that is not vLLM.
4. Records and switches around verl's own vLLM methods, for the tests of the real engine
   (section 4 below): every request vLLM served, the ids of every trajectory trained on, a
   server failing mid-episode, and a weight sync skipped (the control).
"""

from __future__ import annotations

import asyncio
import logging
import os
import types
import zlib
from typing import Any

import torch

from teamgym.adapters.verl import cpu_host

logger = logging.getLogger(__name__)

ROLLOUT_NAME = "teamgym_cpu"


# --------------------------------------------------------------------------------------------
# 2. rollout backend: server actor, replica, hybrid-worker adapter
# --------------------------------------------------------------------------------------------


def _server_name(replica_rank: int) -> str:
    return f"teamgym_cpu_server_{replica_rank}"


class CPUServer:
    """Ray actor serving ``generate()`` for one replica with teamgym's ``LocalModelServer``.

    Holds its own copy of the model (loaded from ``model_config.local_path``); the hybrid worker's
    :class:`CPUServerAdapter` pushes the actor's weights into it after each training step."""

    def __init__(self, config, model_config, replica_rank: int = 0):
        from teamgym.adapters.verl.server import LocalModelServer

        torch.set_num_threads(1)
        path = getattr(model_config, "local_path", None) or model_config.path
        self.server = LocalModelServer(str(path), seed=int(getattr(config, "seed", 0) or 0))
        self.replica_rank = replica_rank
        self.global_steps: int | None = None
        self.weight_version = 0
        self.awake = True
        self.generate_calls = 0
        self.crashed = False

    def get_server_address(self) -> str:
        return f"teamgym-cpu-replica-{self.replica_rank}"

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        **kwargs: Any,
    ):
        from verl.workers.rollout.replica import TokenOutput

        self.generate_calls += 1
        self._maybe_crash(request_id, list(prompt_ids))
        params = dict(sampling_params)
        if params.get("max_tokens") is None:
            params["max_tokens"] = params.get("max_new_tokens") or 64
        scripted = await self._scripted_pick(
            request_id, list(prompt_ids), int(params["max_tokens"])
        )
        if scripted is not None:
            ids, log_probs = scripted
            return TokenOutput(
                token_ids=ids,
                log_probs=log_probs,
                stop_reason="completed",
                extra_fields={"global_steps": self.global_steps},
            )
        out = await self.server.generate(request_id, prompt_ids=prompt_ids, sampling_params=params)
        stop = "length" if len(out.token_ids) >= int(params["max_tokens"]) else "completed"
        return TokenOutput(
            token_ids=list(out.token_ids),
            log_probs=list(out.log_probs or []),
            stop_reason=stop,
            extra_fields={"global_steps": self.global_steps},
        )

    def _maybe_crash(self, request_id: str, prompt_ids: list[int]) -> None:
        """``TEAMGYM_CPU_ROLLOUT_CRASH_STEP=S``: replica 0 dies once, on the first request of
        training step S whose prompt already holds a reply (a rollout server failing
        mid-episode, as a GPU server can). verl sends a fresh request id per turn, so the
        prompt tells a later turn from a first one."""
        step = os.environ.get("TEAMGYM_CPU_ROLLOUT_CRASH_STEP")
        if not step or self.crashed or self.replica_rank != 0:
            return
        if self.global_steps != int(step) - 1:
            return
        if self.server.tokenizer.decode(prompt_ids).count("<|im_start|>assistant") < 2:
            return  # the generation prompt only: a first turn
        self.crashed = True
        self._record("crash", request_id=request_id)
        raise RuntimeError(f"teamgym_cpu: injected rollout server crash on {request_id}")

    async def _scripted_pick(
        self, request_id: str, prompt_ids: list[int], max_tokens: int
    ) -> tuple[list[int], list[float]] | None:
        """``TEAMGYM_CPU_ROLLOUT_SCRIPT=listener-picks``: a turn whose valid actions are picks is
        answered with one of them, chosen by the request id (verl makes a fresh one per turn, so
        the copies of one row pick at random and their shared returns differ), with the served model's real log-probs of
        those tokens; every other turn is the model's own sample. The untrained model never
        names a valid pick, so without this every return of a run is equal and every GRPO
        advantage 0."""
        if os.environ.get("TEAMGYM_CPU_ROLLOUT_SCRIPT") != "listener-picks":
            return None
        from teamgym.adapters.verl.server import policy_reply

        tok = self.server.tokenizer

        class _Pick:
            def act(self, agent, observation, info):
                picks = [a for a in info["valid_actions"] if a.startswith("pick ")]
                if not picks:
                    return ""
                return f"<action>{picks[zlib.crc32(request_id.encode()) % len(picks)]}</action>"

        reply = policy_reply(_Pick())(tok.decode(prompt_ids))
        ids = [*tok.encode(reply, add_special_tokens=False), tok.eos_token_id] if reply else []
        if not ids or len(ids) > max_tokens:
            return None
        loop = asyncio.get_running_loop()
        return ids, await loop.run_in_executor(self.server.pool, self._log_probs, prompt_ids, ids)

    def _log_probs(self, prompt_ids: list[int], ids: list[int]) -> list[float]:
        """The served model's log-probabilities of ``ids`` after ``prompt_ids``."""
        with torch.no_grad():
            logits = self.server.model(torch.tensor([prompt_ids + ids])).logits[0]
            scores = torch.log_softmax(logits[len(prompt_ids) - 1 : -1].float(), dim=-1)
            return scores.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()

    def update_weights(
        self, named: dict[str, torch.Tensor], global_steps: int | None = None
    ) -> int:
        """Load the actor's parameters (HF names) into the served model."""
        model = self.server.model
        own = model.state_dict()
        missing = [k for k in own if k not in named]
        # tied embeddings: lm_head.weight may be absent from the actor's parameters
        missing = [
            k for k in missing if not (k == "lm_head.weight" and model.config.tie_word_embeddings)
        ]
        unexpected = [k for k in named if k not in own]
        if missing or unexpected:
            raise KeyError(f"weight sync: missing={missing[:5]} unexpected={unexpected[:5]}")
        with torch.no_grad():
            for k, v in named.items():
                own[k].copy_(v.to(own[k].dtype))
        self.weight_version += 1
        if global_steps is not None:
            self.global_steps = global_steps
        self._record("update_weights")
        return self.weight_version

    def _record(self, event: str, **fields: Any) -> None:
        """Append this server's state to ``$TEAMGYM_CPU_ROLLOUT_LOG`` (JSONL), if set."""
        path = os.environ.get("TEAMGYM_CPU_ROLLOUT_LOG")
        if not path:
            return
        import json

        line = {"event": event, **fields, **self.stats(), "checksum": self.param_checksum()}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")

    def param_checksum(self) -> float:
        with torch.no_grad():
            return float(sum(p.double().abs().sum() for p in self.server.model.parameters()))

    def stats(self) -> dict[str, Any]:
        return {
            "replica_rank": self.replica_rank,
            "weight_version": self.weight_version,
            "global_steps": self.global_steps,
            "generate_calls": self.generate_calls,
            "batches": self.server.batches,
        }

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # lifecycle hooks verl calls on every replica server; memory is not an issue on CPU
    def wake_up(self, tags: list[str] | None = None) -> None:
        self.awake = True

    def sleep(self) -> None:
        self.awake = False

    def clear_kv_cache(self) -> None:
        pass

    def release_kv_cache(self) -> None:
        pass

    def resume_kv_cache(self) -> None:
        pass

    def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    def resume_generation(self) -> None:
        pass

    def wait_for_requests_to_drain(self) -> None:
        pass

    def start_profile(self, **kwargs) -> None:
        pass

    def stop_profile(self) -> None:
        pass


from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry  # noqa: E402


class CPUReplica(RolloutReplica):
    """One ``CPUServer`` per replica, on the CPU of the ray node (no GPU reserved)."""

    async def launch_servers(self):
        import ray

        actor_cls = ray.remote(num_cpus=0)(CPUServer)
        server = actor_cls.options(
            name=_server_name(self.replica_rank),
            max_concurrency=self.max_concurrency,
        ).remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        self.servers = [server]
        self._server_handle = server
        self._server_address = await server.get_server_address.remote()


RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: CPUReplica)


from verl.workers.rollout import base as _rollout_base  # noqa: E402
from verl.workers.rollout.base import BaseRollout  # noqa: E402


class CPUServerAdapter(BaseRollout):
    """The hybrid worker's rollout: forwards weight updates to this replica's ``CPUServer``."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", 0))
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        world *= self.config.pipeline_model_parallel_size
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader = rank % world == 0
        self._handle = None

    def _server(self):
        import ray

        if self._handle is None:
            self._handle = ray.get_actor(_server_name(self.replica_rank))
        return self._handle

    async def resume(self, tags: list[str]):
        if self.is_leader:
            await self._server().wake_up.remote(tags=tags)

    async def release(self):
        if self.is_leader:
            await self._server().sleep.remote()

    @torch.no_grad()
    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        assert wire_format == "named_tensors", wire_format
        named = {}
        for name, tensor in weights:  # every rank must drain the generator (FSDP full_tensor)
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            named[name] = tensor.detach().to("cpu").clone()
        if self.is_leader:
            await self._server().update_weights.remote(named, kwargs.get("global_steps"))
        await asyncio.sleep(0)


_rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.CPUServerAdapter"


# --------------------------------------------------------------------------------------------
# 4. the real vLLM engine (``rollout.name=vllm``, the CPU build): what the tests read off it
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
            fields = ["prompts", "responses", "response_mask"]
            data = module.tq.kv_batch_get(
                keys=batch.keys, partition_id=batch.partition_id, select_fields=fields
            )
            for i, key in enumerate(batch.keys):
                _append(
                    path,
                    {
                        "step": self.global_steps,
                        "key": key,
                        "prompt_ids": data["prompts"][i].tolist(),
                        "response_ids": data["responses"][i].tolist(),
                        "response_mask": data["response_mask"][i].tolist(),
                    },
                )
        return log_rollout_data(self, batch, timing_raw, rollout_data_dir)

    trainer._log_rollout_data = logged


cpu_host.after_import(VLLM_SERVER, _hook_vllm_server)
cpu_host.after_import(VLLM_ADAPTER, _hook_vllm_adapter)
cpu_host.after_import(V1_TRAINER, _hook_v1_trainer)
