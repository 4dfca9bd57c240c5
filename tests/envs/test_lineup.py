"""The Lineup: the one "some, not all" check, checkpoint paths resolved once, and the seed rule
each slot resets with."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teamgym.envs import baselines, make
from teamgym.envs.lineup import Lineup, check_teammates, resolve_spec, run_episode


class Recording:
    """A policy that records the seeds it was reset with and the env it was bound to."""

    def __init__(self, name: str = "", seed: int | None = None, **options: Any) -> None:
        self.name, self.built_with, self.options = name, seed, options
        self.seeds: list[int | None] = []
        self.env: Any = None

    def bind(self, env: Any) -> None:
        self.env = env

    def reset(self, seed: int | None = None) -> None:
        self.seeds.append(seed)

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        return f"<action>{info['valid_actions'][0]}</action>"


@pytest.fixture
def rec_prefix(monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``rec:NAME`` policy family, registered for this test only."""
    monkeypatch.setitem(baselines._PREFIXED, "rec:", Recording)
    return "rec:"


AGENTS = ["robot_0", "robot_1", "robot_2"]


@pytest.mark.parametrize(
    ("teammates", "keep"),
    [({"robot_1": "x"}, ()), ({"robot_0": "x", "robot_2": "y"}, ("robot_1",))],
)
def test_some_teammates_pass(teammates: dict, keep: tuple) -> None:
    check_teammates(teammates, AGENTS, keep)


@pytest.mark.parametrize(
    ("teammates", "keep", "extra"),
    [
        ({"robot_9": "x"}, (), ""),  # not an agent of the env
        (dict.fromkeys(AGENTS, "x"), (), ""),  # all of them
        ({"robot_1": "x"}, ("robot_1",), "robot_1 is played by the model"),
    ],
)
def test_teammates_that_are_not_some_not_all_are_refused(
    teammates: dict, keep: tuple, extra: str
) -> None:
    with pytest.raises(ValueError, match="some, not all") as err:
        check_teammates(teammates, AGENTS, keep)
    assert extra in str(err.value), str(err.value)


def test_checkpoint_paths_resolve_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_spec("checkpoint:models/a") == f"checkpoint:{tmp_path / 'models' / 'a'}"
    assert resolve_spec("checkpoint:~/m") == f"checkpoint:{tmp_path / 'home' / 'm'}"
    assert resolve_spec("expert") == "expert"
    assert resolve_spec("checkpoint:models/a", str.upper) == "checkpoint:MODELS/A"


def test_every_layer_resolves_checkpoints_the_same_way(tmp_path: Path, monkeypatch) -> None:
    """The agent spec parser and the command line's ``--teammate`` both go through it."""
    from teamgym.adapters.agents import parse_agent_spec
    from teamgym.cli.common import _agent_baselines

    monkeypatch.chdir(tmp_path)
    expected = resolve_spec("checkpoint:m")
    assert parse_agent_spec("checkpoint:m").options["name"] == expected
    assert _agent_baselines(["robot_0=checkpoint:m"], "--teammate") == {"robot_0": expected}


def test_streams_are_numbered_from_first_stream_in_seat_order() -> None:
    a, b, c = Recording("a"), Recording("b"), Recording("c")
    Lineup({"robot_2": a, "robot_0": b, "robot_1": c}, first_stream=1).reset(7)
    assert (a.seeds, b.seeds, c.seeds) == ([7001], [7002], [7003])


def test_a_shared_policy_is_one_slot() -> None:
    shared, other = Recording(), Recording()
    lineup = Lineup({"robot_0": shared, "robot_1": other, "robot_2": shared})
    lineup.reset(5)
    assert (shared.seeds, other.seeds) == ([5000], [5001])


def test_the_training_rule_gives_every_policy_the_episode_seed() -> None:
    a, b = Recording(), Recording()
    Lineup({"robot_0": a, "robot_1": b}, first_stream=None).reset(12)
    assert a.seeds == b.seeds == [12]


def test_a_generator_draws_one_seed_per_slot_in_order() -> None:
    a, b = Recording(), Recording()
    Lineup({"robot_1": a, "robot_2": b}).reset(np.random.default_rng(3))
    rng = np.random.default_rng(3)
    assert a.seeds + b.seeds == [int(rng.integers(2**31 - 1)) for _ in range(2)]


def test_build_resolves_shares_and_passes_options_to_prefixed_families(
    rec_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    seats = {"robot_0": "rec:a", "robot_1": "rec:a", "robot_2": "random"}
    shared = Lineup.build("signal-v0", seats, seed=4, share=True, max_reply_tokens=8)
    assert len(shared.distinct) == 2 and shared.policies["robot_0"] is shared.policies["robot_1"]
    rec = shared.policies["robot_0"]
    assert isinstance(rec, Recording)
    assert (rec.name, rec.built_with, rec.options) == ("a", 4, {"max_reply_tokens": 8})
    own = Lineup.build("signal-v0", seats)
    assert len(own.distinct) == 3
    assert "robot_2" in own and "robot_3" not in own


def test_start_binds_then_resets(rec_prefix: str) -> None:
    env = make("signal-v0")
    lineup = Lineup.build("signal-v0", {"robot_1": "rec:x"}, first_stream=1).start(env, 2)
    rec = lineup.policies["robot_1"]
    assert isinstance(rec, Recording)
    assert (rec.env, rec.seeds) == (env, [2001])


def test_run_episode_seats_distinct_policies_from_slot_0() -> None:
    env = make("signal-v0", num_agents=3)
    one = Recording()
    run_episode(env, one, seed=9)
    assert one.seeds == [9000] and one.env is env
    a, b = Recording(), Recording()
    run_episode(env, {"robot_0": a, "robot_1": b, "robot_2": a}, seed=9)
    assert (a.seeds, b.seeds) == ([9000], [9001])


def test_the_benchmark_runner_seats_teammates_from_slot_1(rec_prefix: str) -> None:
    """The agent under test holds slot 0; teammates follow in agent-name order."""
    from teamgym.benchmarks.episodes import _teammates
    from teamgym.benchmarks.suites import parse_suite

    suite = parse_suite(
        {
            "name": "t",
            "episodes": 1,
            "seed": 4,
            "agents": ["random"],
            "envs": [
                {
                    "id": "signal-v0",
                    "kwargs": {"num_agents": 3},
                    "teammates": {"robot_2": "rec:b", "robot_1": "rec:a"},
                }
            ],
        },
        where="t.yaml",
    )
    (job,) = suite.jobs()
    mates = _teammates(job, make("signal-v0", num_agents=3))
    assert {a: p.seeds for a, p in mates.items()} == {"robot_1": [4001], "robot_2": [4002]}
