"""Episode metrics from events, and the Recorder's trajectory format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from pettingzoo import ParallelEnv

from teamgym.envs import events as ev
from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.metrics import EpisodeTracker, gini, metrics_from_records
from teamgym.envs.sharing import RewardSharing
from teamgym.envs.wrappers import Recorder, SharedReward


def _infos(agents, events, individual=None):
    return {
        a: {"events": events, "individual_reward": (individual or {}).get(a, 0.0)} for a in agents
    }


def test_gini() -> None:
    assert gini([1, 1, 1, 1]) == 0.0
    assert gini([0, 0, 0, 0]) == 0.0
    assert gini([0, 0, 0, 4]) == pytest.approx(0.75)  # (n-1)/n when one agent does everything
    assert gini([1, 3]) == pytest.approx(0.25)


def test_tracker_scenario() -> None:
    agents = ["a", "b", "c"]
    t = EpisodeTracker(agents)
    t.step(
        {"a": 0.0, "b": -0.01, "c": 0.0},
        _infos(
            agents,
            [
                ev.plan_issued(
                    "a", {"fetch": ["b"], "fix": ["a", "c"]}, required=["fetch", "fix", "check"]
                ),
                ev.message_sent("a", ["b", "c"], tokens=6, truncated=False),
                ev.invalid_action("b", "bad"),
                ev.subtask_attempted("fetch", ["b"]),
            ],
            individual={"b": -0.01},
        ),
    )
    t.step(
        {"a": 1.0, "b": 1.0, "c": 0.0},
        _infos(
            agents,
            [
                ev.subtask_completed("fetch", ["b"]),
                ev.subtask_attempted("fix", ["a", "c"]),
                ev.subtask_completed("fix", ["a", "b"]),  # b helped, though c was assigned with a
                ev.subtask_attempted("check", ["c"]),
                ev.subtask_failed("check", ["c"], "defect"),
                ev.message_sent("c", ["a", "b"], tokens=2, truncated=False),
                ev.outcome(False, 2 / 3),
            ],
            individual={"a": 1.0, "b": 1.0},
        ),
    )
    m = t.metrics()
    assert m.episode_length == 2
    assert m.success is False and m.score == pytest.approx(2 / 3)
    assert m.team_return == pytest.approx(1.99)
    assert m.returns == {"a": 1.0, "b": 0.99, "c": 0.0}
    assert m.collaboration_index == pytest.approx(2 / 3)
    assert m.communication_frequency == pytest.approx(2 / 6)
    assert m.mean_message_tokens == pytest.approx(4.0)
    assert m.invalid_action_rate == pytest.approx(1 / 6)
    assert m.contribution_gini == pytest.approx(gini([0.5, 1.5, 0.0]))
    assert m.plan_coverage == pytest.approx(2 / 3)
    assert m.plan_adherence == pytest.approx(1.0)  # both completions include an assigned agent
    assert m.counts["subtasks_completed"] == 2


def test_tracker_without_subtasks_or_plans() -> None:
    m = EpisodeTracker(["a"]).metrics()
    assert m.collaboration_index is None and m.contribution_gini is None
    assert m.plan_coverage is None and m.plan_adherence is None
    json.dumps(m.to_dict())


def test_subtask_credit_rule_is_the_one_proportional_sharing_reads() -> None:
    """An equal share per named agent, only for completions; the tracker and SharedReward
    accumulate the same numbers."""
    events = [
        ev.subtask_completed("s1", ["a", "b"]),
        ev.subtask_attempted("s2", ["c"]),
        ev.subtask_failed("s2", ["c"], "dropped"),
        ev.subtask_completed("s3", ["a"]),
    ]
    credit: dict[str, float] = {}
    for event in events:
        ev.add_subtask_credit(credit, event)
    assert credit == {"a": 1.5, "b": 0.5}

    tracker = EpisodeTracker(["a", "b", "c"])
    tracker.step({"a": 0.0, "b": 0.0, "c": 0.0}, _infos(["a", "b", "c"], events))
    assert tracker.credit == {**credit, "c": 0.0}

    env = SharedReward(_ScriptedEnv(events), RewardSharing(mode="proportional"))
    env.reset(seed=0)
    _, rewards, _, _, _ = env.step({})
    assert rewards == pytest.approx({"a": 3.0 * 1.5 / 2.0, "b": 3.0 * 0.5 / 2.0, "c": 0.0})


class _ScriptedEnv(ParallelEnv):
    """Three agents, each rewarded 1 per step, and the same given events every step."""

    metadata: ClassVar[dict] = {"name": "scripted"}

    def __init__(self, events: list[dict]) -> None:
        self.events = events
        self.possible_agents = ["a", "b", "c"]
        self.agents: list[str] = []

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return dict.fromkeys(self.agents, 0), {a: {} for a in self.agents}

    def step(self, actions):
        live = dict.fromkeys(self.agents, False)
        infos = {a: {"events": self.events} for a in self.agents}
        return dict.fromkeys(self.agents, 0), dict.fromkeys(self.agents, 1.0), live, live, infos


def test_recorder_writes_steps_and_summary(tmp_path: Path) -> None:
    path = tmp_path / "traj.jsonl"
    env = Recorder(make("signal-v0", num_agents=3), path)
    expert = make_baseline("signal-v0", "expert")
    for seed in (0, 1):
        obs, infos = env.reset(seed=seed)
        while env.agents:
            obs, _, _, _, new = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
            infos.update(new)
    env.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    kinds = [x["kind"] for x in lines]
    assert kinds == (["reset"] + ["step"] * 4 + ["episode"]) * 2
    summaries = [x for x in lines if x["kind"] == "episode"]
    assert [s["seed"] for s in summaries] == [0, 1]
    assert all(s["metrics"]["success"] for s in summaries)
    assert summaries[0]["trajectory_hash"] != summaries[1]["trajectory_hash"]
    # the metrics can be recomputed from the step lines alone
    steps0 = [x for x in lines if x["kind"] == "step" and x["episode"] == 0]
    again = metrics_from_records(["robot_0", "robot_1", "robot_2"], steps0)
    assert again.to_dict() == summaries[0]["metrics"]
    assert env.episodes == summaries


def test_recorder_handles_vector_actions_and_needs_reset(tmp_path: Path) -> None:
    env = Recorder(make("signal-v0", obs_mode="vector"), tmp_path / "v.jsonl", observations=True)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})
    obs, _ = env.reset(seed=3)
    env.step({a: obs[a]["action_mask"].argmax() for a in env.agents})  # numpy ints
    env.close()
    rows = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert isinstance(rows[1]["observations"]["robot_0"]["observation"], list)


def test_recorder_keeps_finished_steps_when_killed(tmp_path: Path) -> None:
    """Each line is flushed as written: a SIGKILL loses nothing already stepped."""
    path = tmp_path / "killed.jsonl"
    code = f"""
import os, signal
from teamgym.envs import make
from teamgym.envs.sharing import RewardSharing
from teamgym.envs.wrappers import Recorder, SharedReward
env = Recorder(make("signal-v0"), {str(path)!r})
env.reset(seed=0)
env.step({{"robot_0": "<action>pass</action>", "robot_1": "<action>wait</action>"}})
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == -9
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["reset", "step"]
