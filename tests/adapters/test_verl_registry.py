"""``team_grpo``'s uid -> episode registry belongs to one job: two jobs on one Ray instance each
get their own, neither sees the other's records, and Ray removes a job's registry when the job
ends (it is owned by the job's first recording worker, not detached)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("verl")

import ray

from teamgym.adapters.verl.advantage import _TeamRegistry

JOB = """
import json, sys
import numpy as np
import ray
from teamgym.adapters.verl import advantage

ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False)
mine, other = sys.argv[2], sys.argv[3]


@ray.remote
class Loop:  # an agent-loop worker: records as TeamAgentLoop does, lives as long as the job
    async def record(self, uid, team):
        await advantage.record_team(uid, team)
        return advantage.registry_name()


loop = Loop.remote()
name = ray.get(loop.record.remote(mine, "episode-of-" + mine))
try:
    advantage.team_keys(np.array([other], dtype=object))
    sees_other = True
except advantage.TeamRecordMissingError:
    sees_other = False
keys = list(advantage.team_keys(np.array([mine], dtype=object)))
print(json.dumps({"name": name, "keys": keys, "sees_other": sees_other}), flush=True)
sys.stdin.readline()  # stay alive (a running job) until told to end
ray.shutdown()  # the job ends: the driver disconnects
"""


def _start(address: str, mine: str, other: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", JOB, address, mine, other],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _report(proc: subprocess.Popen) -> dict:
    """The job's one line, once it has recorded and looked up (it then waits to be ended)."""
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line:
        pytest.fail(f"a job failed:\n{proc.stderr.read()[-3000:]}")
    return json.loads(line)


def _alive(name: str) -> bool:
    try:
        ray.get_actor(name, namespace="teamgym")
        return True
    except ValueError:
        return False


def _gone(name: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(name):
            return True
        time.sleep(0.5)
    return False


def test_two_jobs_on_one_ray_instance_keep_their_records_apart() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        first = _start(address, "uid-a", "uid-b")
        second = _start(address, "uid-b", "uid-a")  # both jobs run at once
        a, b = _report(first), _report(second)
        assert a["name"] != b["name"] and a["name"].startswith("teamgym_team_registry:")
        assert a["keys"] == ["episode-of-uid-a"] and b["keys"] == ["episode-of-uid-b"]
        assert not a["sees_other"] and not b["sees_other"]
        assert _alive(a["name"]) and _alive(b["name"])
        first.communicate("\n", timeout=60)  # the first job ends: its registry goes with it
        assert _gone(a["name"]), "a finished job's registry outlived it"
        assert _alive(b["name"]), "ending one job removed another job's registry"
        second.communicate("\n", timeout=60)
        assert _gone(b["name"])
    finally:
        ray.shutdown()


def test_registry_stays_bounded() -> None:
    registry = _TeamRegistry(capacity=3)
    for i in range(5):
        registry.put(f"u{i}", f"e{i}")
    assert registry.size() == 3
    assert registry.get(["u0", "u1", "u2", "u4"]) == [None, None, "e2", "e4"]


class _Handle:
    """The shape of a Ray actor handle (``handle.put_many.remote(...)`` is awaitable), recording
    each call: the real actor is exercised by the job tests above."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[tuple[str, str]]] = []
        self.fail = fail
        self.put_many = self

    def remote(self, records):
        import asyncio

        self.calls.append(list(records))
        done = asyncio.get_running_loop().create_future()
        if self.fail:
            done.set_exception(RuntimeError("registry actor died"))
        else:
            done.set_result(None)
        return done


def test_records_of_one_loop_turn_reach_the_registry_in_one_call(monkeypatch) -> None:
    import asyncio

    from teamgym.adapters.verl import advantage

    handle = _Handle()
    monkeypatch.setattr(advantage, "_ray_registry", lambda create: handle)

    async def main() -> None:
        await asyncio.gather(*(advantage.record_team(f"u{i}", f"e{i // 4}") for i in range(40)))
        await advantage.record_team("late", "e-late")

    asyncio.run(main())
    assert [len(c) for c in handle.calls] == [40, 1]
    assert handle.calls[0][5] == ("u5", "e1") and handle.calls[1] == [("late", "e-late")]


def test_a_failed_registry_call_fails_every_row_of_its_batch(monkeypatch) -> None:
    import asyncio

    from teamgym.adapters.verl import advantage

    monkeypatch.setattr(advantage, "_ray_registry", lambda create: _Handle(fail=True))

    async def main() -> list:
        rows = (advantage.record_team(f"u{i}", "e") for i in range(5))
        return await asyncio.gather(*rows, return_exceptions=True)

    results = asyncio.run(main())
    assert all(isinstance(r, RuntimeError) and "died" in str(r) for r in results)


def test_the_ray_worker_hook_registers_every_estimator_and_agent_loop() -> None:
    """``setup_worker`` (Ray's ``worker_process_setup_hook``) alone, in a fresh interpreter,
    registers what a worker needs: a user's own agent-loop manager imports nothing of ours."""
    code = (
        "from teamgym.adapters.verl.train import setup_worker; setup_worker()\n"
        "from verl.trainer.ppo import core_algos\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        "import json; print(json.dumps([sorted(core_algos.ADV_ESTIMATOR_REGISTRY), "
        "sorted(_agent_loop_registry)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    estimators, loops = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("team_grpo", "at_grpo", "team_at_grpo", "gigpo", "team_gigpo"):
        assert name in estimators, name
    assert {"teamgym_agent", "teamgym_episode"} <= set(loops)
