"""Episode trajectories into TransferQueue in batches: what teamgym's v1 worker writes.

verl 0.9.1's ``AgentLoopWorkerTQ._agent_loop_postprocess`` writes one session's outputs with one
``tq.async_kv_batch_put``; teamgym's worker writes those of every session that finishes within
:data:`WINDOW` seconds in one put per partition, as TransferQueue's cost is mostly per put (one
trajectory a put costs ~6 ms of CPU across its processes, 64 in one put ~0.6 ms each, on the
development machine). :func:`trajectory_record` is verl's per-output body of that method, with
the uid given; ``tests/adapters/test_verl_v1.py`` pins the verl source it follows and checks the
rows against what verl's own method writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["DONE_AT", "WINDOW", "PutBatcher", "trajectory_record"]

#: The tag teamgym adds to an episode's trajectories: when the episode ended (``time.time()``
#: in the worker), so the sampler can measure the wait to the trainer
#: (:mod:`teamgym.adapters.verl.sampler`).
DONE_AT = "teamgym_done_at"

#: Seconds a batch of finished sessions stays open for more (a rollout's sessions finish
#: together: their last turns come back from the server at about the same time).
WINDOW = 0.002


def trajectory_record(
    worker: Any, output: Any, kwargs: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(key, fields, tags) of one output as verl's ``_agent_loop_postprocess`` builds them, for
    the row fields ``kwargs`` (whose ``uid`` and ``session_id`` name it; its index is 0)."""
    prompts = torch.tensor(output.prompt_ids, dtype=torch.int64)
    responses = torch.tensor(output.response_ids, dtype=torch.int64)
    input_ids = torch.cat([prompts, responses], dim=0)
    attention_mask = torch.ones_like(input_ids, dtype=torch.int64)
    multi_modal_inputs = worker._compute_multi_modal_inputs(output, input_ids)
    position_ids = worker._compute_position_ids(
        input_ids.unsqueeze(0), attention_mask.unsqueeze(0), multi_modal_inputs
    ).squeeze(0)
    field = output.as_dict()
    field.update(kwargs)
    field.pop("multi_modal_data", None)
    field["loss_mask"] = field["response_mask"]
    field["input_ids"] = input_ids
    field["position_ids"] = position_ids
    field["multi_modal_inputs"] = multi_modal_inputs
    prompt_len, response_len = field["prompts"].size(0), field["responses"].size(0)
    tag = {
        "status": "success",
        "prompt_len": prompt_len,
        "response_len": response_len,
        "seq_len": prompt_len + response_len,
        "global_steps": kwargs["global_steps"],
        "min_global_steps": field["extra_fields"].get("min_global_steps"),
        "max_global_steps": field["extra_fields"].get("max_global_steps"),
    }
    return f"{kwargs['uid']}_{kwargs['session_id']}_0", field, tag


class PutBatcher:
    """Collects (key, fields, tags) records for :data:`WINDOW` seconds, then writes them with one
    ``tq.async_kv_batch_put`` per (partition, field names); every caller waits for its write
    (and gets its error). One per worker process and event loop."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window
        self._open: dict[Any, tuple[list[tuple[str, Any, dict]], asyncio.Future]] = {}
        self._tasks: set[asyncio.Task] = set()
        self.puts = 0
        """Puts made so far (for tests and the benchmark)."""
        self.written: list[tuple[str, int, bool]] = []
        """(partition, keys, with fields) of each put so far (for tests)."""

    async def put(self, partition: str, records: Sequence[tuple[str, Any, dict]]) -> None:
        """Write ``records`` into ``partition`` with whatever else arrives within the window
        (fields None: a tag-only put, such as a row's status, batched with other tags)."""
        loop = asyncio.get_running_loop()
        fields = records[0][1]
        group = (id(loop), partition, None if fields is None else tuple(fields))
        batch = self._open.get(group)
        if batch is None:
            batch = self._open[group] = ([], loop.create_future())
            loop.call_later(self.window, self._flush, group)
        batch[0].extend(records)
        await asyncio.shield(batch[1])

    def _flush(self, group: Any) -> None:
        records, done = self._open.pop(group)
        task = asyncio.get_running_loop().create_task(self._write(group[1], records, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(
        self, partition: str, records: list[tuple[str, Any, dict]], done: asyncio.Future
    ) -> None:
        try:
            import transfer_queue as tq
            from verl.utils.tensordict_utils import list_of_dict_to_tensordict

            fields = records[0][1] is not None  # else a status put: tags only
            self.puts += 1
            self.written.append((partition, len(records), fields))
            await tq.async_kv_batch_put(
                keys=[k for k, _, _ in records],
                fields=list_of_dict_to_tensordict([f for _, f, _ in records]) if fields else None,
                tags=[t for _, _, t in records],
                partition_id=partition,
            )
        except Exception as exc:  # every waiter raises it
            done.set_exception(exc)
        else:
            done.set_result(None)
        finally:  # cancelled (the loop shutting down): no waiter is left hanging
            if not done.done():
                done.cancel()
