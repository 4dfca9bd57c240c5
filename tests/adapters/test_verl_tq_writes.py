"""The batcher behind teamgym's v1 worker writes (``adapters/verl/tq_writes.py``): what arrives
within its window goes in one put per partition, and a failed put reaches every waiter. The put
itself is replaced by a recorder here (the real TransferQueue writes are checked through verl's
worker in ``test_verl_v1.py``); the window is made wide, so what counts as "together" does not
depend on the machine's speed."""

from __future__ import annotations

import asyncio

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import transfer_queue as tq

from teamgym.adapters.verl.tq_writes import PutBatcher


def _record(key: str) -> tuple[str, dict, dict]:
    return key, {"input_ids": torch.tensor([1, 2, 3]), "name": key}, {"status": "success"}


def test_records_of_one_window_go_in_one_put_per_partition(monkeypatch) -> None:
    puts: list[dict] = []

    async def recorded(**kwargs):
        puts.append(kwargs)

    monkeypatch.setattr(tq, "async_kv_batch_put", recorded)
    batcher = PutBatcher(window=0.2)

    async def main():
        await asyncio.gather(
            batcher.put("train", [_record("a_0_0_0"), _record("a_1_0_0")]),
            batcher.put("train", [_record("b_0_0_0")]),
            batcher.put("val", [_record("c_0_0_0")]),
        )

    asyncio.run(main())
    assert batcher.puts == len(puts) == 2
    by_partition = {p["partition_id"]: p for p in puts}
    assert by_partition["train"]["keys"] == ["a_0_0_0", "a_1_0_0", "b_0_0_0"]
    assert by_partition["val"]["keys"] == ["c_0_0_0"]
    assert list(by_partition["train"]["fields"]["name"]) == ["a_0_0_0", "a_1_0_0", "b_0_0_0"]
    assert by_partition["train"]["tags"] == [{"status": "success"}] * 3


def test_a_failed_put_fails_every_waiter_of_its_batch(monkeypatch) -> None:
    async def broken(**kwargs):
        raise ConnectionError("storage unit gone")

    monkeypatch.setattr(tq, "async_kv_batch_put", broken)
    batcher = PutBatcher(window=0.2)

    async def main():
        return await asyncio.gather(
            batcher.put("train", [_record("a_0_0_0")]),
            batcher.put("train", [_record("b_0_0_0")]),
            return_exceptions=True,
        )

    results = asyncio.run(asyncio.wait_for(main(), timeout=10))
    assert [type(r) for r in results] == [ConnectionError, ConnectionError]
