"""Partner pools (issue 40): the episode seed alone decides an episode's partner, in any
process, in proportion to the weights; bad pools are refused with what to fix."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teamgym.envs.partners import PartnerPool, parse_weighted

SEEDS = range(4000)


def test_the_same_seed_picks_the_same_partner_in_another_process(run_python) -> None:
    pool = PartnerPool.parse(["expert", "random=2", "checkpoint:/models/a=0.5"], ["robot_0"])
    here = [pool.pick(s) for s in range(200)]
    code = (
        "import json\nfrom teamgym.envs.partners import PartnerPool\n"
        "pool = PartnerPool.parse(['expert', 'random=2', 'checkpoint:/models/a=0.5'], ['robot_0'])\n"
        "print(json.dumps([pool.pick(s) for s in range(200)]))\n"
    )
    assert json.loads(run_python(code).stdout) == here
    assert len(set(here)) == 3


def test_picks_follow_the_weights() -> None:
    """Over 4000 seeds the shares are within 3 points of weight / total (their standard
    error is under 0.8 points): a fixed draw, so this is the same numbers every run."""
    pool = PartnerPool.parse(["a", "b=2", "c=5"], ["robot_0"])
    picks = [pool.pick(s) for s in SEEDS]
    for spec, share in (("a", 1 / 8), ("b", 2 / 8), ("c", 5 / 8)):
        assert abs(picks.count(spec) / len(picks) - share) < 0.03, (spec, picks.count(spec))


def test_one_partner_plays_every_partner_seat_of_an_episode() -> None:
    pool = PartnerPool.parse(["a", "b"], ["robot_0", "robot_2"])
    for seed in range(50):
        seats = pool.seats_for(seed)
        assert list(seats) == ["robot_0", "robot_2"]
        assert len(set(seats.values())) == 1 and seats["robot_0"] == pool.pick(seed)


def test_a_pool_is_not_changed_by_another_pools_draws() -> None:
    """The draw depends on the seed only: a second pool (validation's) leaves the first's
    picks as they were, and a pool of one always picks it."""
    train = PartnerPool.parse(["a", "b"], ["robot_0"])
    before = [train.pick(s) for s in range(100)]
    held_out = PartnerPool.parse(["c"], ["robot_0"])
    assert {held_out.pick(s) for s in range(100)} == {"c"}
    assert [train.pick(s) for s in range(100)] == before


@pytest.mark.parametrize(
    ("specs", "seats", "message"),
    [
        (["a=0"], ["robot_0"], "weight after '=' must be > 0"),
        (["a=-1"], ["robot_0"], "weight after '=' must be > 0"),
        (["a=nan"], ["robot_0"], "weight after '=' must be > 0"),
        (["a", "a=2"], ["robot_0"], "listed twice"),
        ([], ["robot_0"], "at least one spec"),
        (["a"], [], "at least one partner seat"),
        (["a"], ["robot_0", "robot_0"], "repeat an agent"),
        ([" "], ["robot_0"], "empty partner spec"),
    ],
)
def test_bad_pools_are_refused(specs, seats, message) -> None:
    with pytest.raises(ValueError, match=message):
        PartnerPool.parse(specs, seats)


def test_seats_must_be_agents_and_not_fixed_teammates() -> None:
    pool = PartnerPool.parse(["a"], ["robot_1"])
    pool.check(["robot_0", "robot_1"])
    with pytest.raises(ValueError, match="'robot_1' is not an agent"):
        pool.check(["robot_0"])
    with pytest.raises(ValueError, match="both a partner seat and a fixed teammate"):
        pool.check(["robot_0", "robot_1"], teammates=["robot_1"])


def test_weights_and_specs_with_equals_signs() -> None:
    assert parse_weighted("expert") == ("expert", 1.0)
    assert parse_weighted("expert=2.5") == ("expert", 2.5)
    assert parse_weighted("openai:m@http://h:1/v1?a=b") == ("openai:m@http://h:1/v1?a=b", 1.0)
    assert parse_weighted("openai:m@http://h:1/v1?a=b=3") == ("openai:m@http://h:1/v1?a=b", 3.0)
    assert PartnerPool.parse(["x=3"], ["r"]).to_json() == {
        "seats": ["r"],
        "partners": [{"spec": "x", "weight": 3.0}],
    }


@given(st.text(max_size=40))
def test_parse_weighted_never_fails_but_with_a_value_error(text: str) -> None:
    """Fuzzed: any text is a (spec, positive weight) or a ValueError."""
    try:
        spec, weight = parse_weighted(text)
    except ValueError:
        return
    assert spec and spec == spec.strip() and weight > 0


def test_self_seats_nobody() -> None:
    """A ``self`` pick leaves the partner seats to the trained model; the others seat."""
    from teamgym.envs.partners import SELF

    pool = PartnerPool.parse([SELF, "expert"], seats=["robot_0", "robot_1"])
    picks = {s: pool.pick(s) for s in range(40)}
    assert set(picks.values()) == {SELF, "expert"}
    for seed, pick in picks.items():
        expected = {} if pick == SELF else {"robot_0": "expert", "robot_1": "expert"}
        assert pool.seats_for(seed) == expected
