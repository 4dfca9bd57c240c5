"""The episode hub on its own: pairing of copies, missing agents, crashes and stalls never hang."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")

from teamgym.adapters.verl.hub import EpisodeHub
from teamgym.envs.sharing import RewardSharing

KW = {"num_rounds": 1}


def _seat(agent: str) -> dict:
    """``join``'s keyword arguments for ``agent`` in episode ``ep``, seed 1."""
    return {"key": "ep", "agent": agent, "env_id": "signal-v0", "env_kwargs": KW, "seed": 1}


async def _play(hub: EpisodeHub, key: str, agent: str, replies: list[str], seed: int = 5):
    joined = await hub.join(
        key=key, agent=agent, env_id="signal-v0", env_kwargs=KW, seed=seed, sharing=RewardSharing()
    )
    results = []
    for reply in replies:
        result = await hub.submit(joined.instance, agent, reply)
        results.append(result)
        if result.done:
            break
    return joined, results


def test_copies_pair_one_row_per_agent_per_instance() -> None:
    async def main():
        hub = EpisodeHub(join_timeout=5)
        script = {
            "robot_0": ["<say>x</say><action>say</action>", "wait"],
            "robot_1": ["wait", "pick 1"],
        }
        # three copies of each row, arriving interleaved in an odd order
        order = ["robot_0", "robot_0", "robot_1", "robot_0", "robot_1", "robot_1"]
        outs = await asyncio.gather(*(_play(hub, "ep", a, script[a]) for a in order))
        return hub, order, outs

    hub, order, outs = asyncio.run(main())
    by_instance: dict[str, list[str]] = {}
    for agent, (joined, results) in zip(order, outs, strict=True):
        by_instance.setdefault(joined.instance, []).append(agent)
        assert results[-1].done and results[-1].metrics is not None and not joined.missing_agents
    assert sorted(sorted(v) for v in by_instance.values()) == [["robot_0", "robot_1"]] * 3
    assert hub.live_instances() == 0


def test_slots_pair_the_kth_copies_whatever_the_arrival_order() -> None:
    async def main(order):
        hub = EpisodeHub(join_timeout=5)
        joins = [
            hub.join(key="ep", agent=agent, env_id="signal-v0", env_kwargs=KW, seed=5, slot=slot)
            for agent, slot in order
        ]
        return await asyncio.gather(*joins)

    # robot_1's copies arrive first and backwards, robot_0's slot 1 twice (counted in two
    # processes): the second one falls back to arrival order instead of sharing an instance
    order = [("robot_1", 2), ("robot_1", 1), ("robot_1", 0), ("robot_0", 0), ("robot_0", 1)]
    order += [("robot_0", 1)]
    joined = asyncio.run(main(order))
    ids = [j.instance for j in joined]
    assert ids[:5] == ["ep#s2", "ep#s1", "ep#s0", "ep#s0", "ep#s1"]
    assert ids[5] == "ep#s2"  # the free instance that lacks robot_0, not a second robot_0 in s1
    assert not any(j.missing_agents for j in joined)


def test_missing_agents_start_after_join_timeout() -> None:
    async def main():
        hub = EpisodeHub(join_timeout=0.2)
        return await asyncio.wait_for(_play(hub, "ep", "robot_1", ["wait", "pick 1"]), timeout=10)

    joined, results = asyncio.run(main())
    assert joined.missing_agents == ("robot_0",)
    assert results[-1].done and results[-1].metrics["missing_agents"] == ["robot_0"]


def test_a_crashed_loop_ends_the_episode_for_its_teammates() -> None:
    async def main():
        hub = EpisodeHub(join_timeout=5)

        async def crashing():
            joined = await hub.join(**_seat("robot_0"))
            await hub.leave(joined.instance, "robot_0", "RuntimeError: server died")

        _, (_joined, results) = await asyncio.wait_for(
            asyncio.gather(crashing(), _play(hub, "ep", "robot_1", ["wait", "pick 1"], seed=1)),
            timeout=10,
        )
        return hub, results

    hub, results = asyncio.run(main())
    assert results[-1].done and "server died" in results[-1].aborted
    assert hub.live_instances() == 0


def test_a_stalled_turn_times_out() -> None:
    async def main():
        hub = EpisodeHub(join_timeout=5, turn_timeout=0.3)

        async def stalled():
            await hub.join(**_seat("robot_0"))
            await asyncio.sleep(3)  # never submits

        task = asyncio.create_task(stalled())
        _, results = await asyncio.wait_for(
            _play(hub, "ep", "robot_1", ["wait"], seed=1), timeout=10
        )
        task.cancel()
        return results

    results = asyncio.run(main())
    assert (
        results[-1].done and "timed out" in results[-1].aborted and "robot_0" in results[-1].aborted
    )


def test_unknown_agent_is_refused() -> None:
    async def main():
        await EpisodeHub().join(**_seat("robot_7"))

    with pytest.raises(ValueError, match="robot_7.*not in signal-v0"):
        asyncio.run(main())


def test_a_loop_cancelled_while_joining_leaves_nothing_behind() -> None:
    """VERL's legacy worker cancels every other row when one raises: a row still waiting for
    its teammates must not leave an instance that never starts (seen under load in the suite)."""

    async def main():
        hub = EpisodeHub(join_timeout=5)
        alone = asyncio.create_task(hub.join(**_seat("robot_0")))
        await asyncio.sleep(0.05)
        before = hub.live_instances()
        alone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await alone
        # the same episode can still be played in full afterwards
        both = await asyncio.wait_for(
            asyncio.gather(
                _play(hub, "ep", "robot_0", ["say", "pass"], seed=1),
                _play(hub, "ep", "robot_1", ["wait", "pick 1"], seed=1),
            ),
            timeout=10,
        )
        return before, hub.live_instances(), both

    before, after, both = asyncio.run(main())
    assert before == 1 and after == 0
    assert all(results[-1].done and not results[-1].aborted for _, results in both)
