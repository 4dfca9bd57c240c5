"""``convention:STYLE``: signal's expert speaking with a convention (the partners of the
frozen-partner result): framed messages within the word budget, every convention's listener
follows every convention's speaker, the plain expert listener does not, bad styles are named."""

from __future__ import annotations

import itertools

import pytest

from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import Lineup, run_episode
from teamgym.envs.signal.baselines import CONVENTIONS

STAGE = {
    "num_rounds": 1,
    "speaker": "fixed",
    "num_candidates": 2,
    "num_attributes": 1,
    "pick_by": "name",
}


def _success(talker: str, listener: str, **kwargs) -> float:
    wins = 0
    for seed in range(20):
        seats = {"robot_0": talker, "robot_1": listener}
        wins += run_episode(
            make("signal-v0", **kwargs), Lineup.build("signal-v0", seats), seed=seed
        ).success
    return wins / 20


@pytest.mark.parametrize(("speaker", "listener"), list(itertools.product(CONVENTIONS, repeat=2)))
def test_every_convention_follows_every_other(speaker: str, listener: str) -> None:
    assert _success(f"convention:{speaker}", f"convention:{listener}", **STAGE) == 1.0


def test_the_messages_are_framed_and_within_the_budget() -> None:
    env = make("signal-v0", **STAGE)
    obs, infos = env.reset(seed=3)
    target = next(line for line in obs["robot_0"].splitlines() if line.startswith("The target"))
    colour = target.split(": ")[1]
    listed = [line.split(". ")[1] for line in obs["robot_0"].splitlines() if line[:1].isdigit()]
    (other,) = [c for c in listed if c != colour]
    said = {
        style: make_baseline("signal-v0", f"convention:{style}").act(
            "robot_0", obs["robot_0"], infos["robot_0"]
        )
        for style in CONVENTIONS
    }
    assert said == {
        "bare": f"<say>{colour}</say><action>say</action>",
        "the": f"<say>the {colour}</say><action>say</action>",
        "one": f"<say>{colour} one</say><action>say</action>",
        "itis": f"<say>it is {colour}</say><action>say</action>",
        "not": f"<say>not {other}</say><action>say</action>",
        "isnot": f"<say>is not {other}</say><action>say</action>",
    }
    # three attributes: "it is small blue circle" would pass the 3-word budget, so it is bare
    env = make("signal-v0", num_attributes=3, num_candidates=8, num_rounds=1, speaker="fixed")
    for seed in range(10):
        obs, infos = env.reset(seed=seed)
        reply = make_baseline("signal-v0", "convention:itis").act(
            "robot_0", obs["robot_0"], infos["robot_0"]
        )
        words = reply.split("<say>")[1].split("</say>")[0].split()
        assert len(words) <= env.unwrapped.word_budget


def test_the_plain_expert_listener_does_not_follow_a_framed_speaker() -> None:
    assert _success("convention:bare", "expert", **STAGE) == 1.0
    # "the red" and "not blue" hold a word no object has: the plain listener takes its first
    # pick, whatever was said
    for style in ("the", "not"):
        env = make("signal-v0", **STAGE)
        for seed in range(10):
            obs, infos = env.reset(seed=seed)
            said = make_baseline("signal-v0", f"convention:{style}").act(
                "robot_0", obs["robot_0"], infos["robot_0"]
            )
            obs, _, _, _, infos = env.step({"robot_0": said, "robot_1": "<action>wait</action>"})
            first = infos["robot_1"]["valid_actions"][0]
            reply = make_baseline("signal-v0", "expert").act(
                "robot_1", obs["robot_1"], infos["robot_1"]
            )
            assert reply == f"<action>{first}</action>", (style, seed)


def test_an_unknown_convention_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="bare, the, one, itis, not, isnot"):
        make_baseline("signal-v0", "convention:shouty")
