"""Turns, their rewards and anchors: how a trajectory's steps become one reward per generated
turn, and the token-level rewards that carry them (fuzzed with hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from teamgym.adapters.credit import (
    anchor_key,
    place_turn_rewards,
    returns_to_go,
    turn_rewards,
    turn_runs,
)
from teamgym.adapters.verl.trajectory import Trajectory


def _trajectory(mask: list[int], steps: list[list], cap: int = 100) -> Trajectory:
    traj = Trajectory(loop=None, prompt_ids=[7], response_length=cap, want_logprobs=False)
    traj.token_ids = [7, *range(len(mask))]
    traj.mask = list(mask)
    traj.steps = [list(s) for s in steps]
    return traj


def test_each_step_pays_the_turn_its_reply_generated() -> None:
    # replies at [0, 2) and [4, 5), observations (mask 0) between
    traj = _trajectory([1, 1, 0, 0, 1, 0], [[0, 2, 0.5, "a"], [4, 5, -1.0, "b"]])
    assert traj.turn_credit() == ([0.5, -1.0], ["a", "b"])


def test_forced_moves_and_empty_replies_pay_the_nearest_generated_turn() -> None:
    """A forced move (mask 0) before any reply pays the first turn; one after a reply, and the
    empty replies once the budget is spent, pay the last turn before them: the turns' rewards
    still sum to the return."""
    mask = [0, 0, 1, 1, 0, 0, 0, 1, 0]
    steps = [
        [0, 2, 0.25, "forced"],
        [2, 4, 0.5, "x"],
        [5, 7, 1.0, "forced"],
        [7, 8, 0.0, "y"],
        [9, 9, 2.0, ""],  # the budget spent: an empty reply, its reward still counted
    ]
    rewards, anchors = _trajectory(mask, steps).turn_credit()
    assert rewards == [1.75, 2.0] and anchors == ["x", "y"]
    assert sum(rewards) == sum(s[2] for s in steps)


def test_a_trajectory_without_a_generated_turn_has_no_turns() -> None:
    assert _trajectory([0, 0, 0], [[0, 3, 1.0, "f"]]).turn_credit() == ([], [])


def test_a_reply_cut_by_the_budget_keeps_its_turn() -> None:
    traj = _trajectory([1, 0, 1, 1, 1], [[0, 1, 0.5, "a"], [2, 5, 1.0, "b"]], cap=4)
    assert traj.turn_credit() == ([0.5, 1.0], ["a", "b"])


def test_anchor_keys_name_the_observation() -> None:
    assert anchor_key("You see a key.") == anchor_key("You see a key.")
    assert anchor_key("You see a key.") != anchor_key("You see a door.")
    assert len(anchor_key("")) == 8


def test_returns_to_go_discount_later_rewards() -> None:
    assert returns_to_go([0.0, 0.0, 1.0], 0.5) == [0.25, 0.5, 1.0]
    assert returns_to_go([], 0.9) == []


masks = st.lists(st.integers(0, 1), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(mask=masks, data=st.data())
def test_placed_rewards_read_back_as_the_same_turns(mask: list[int], data) -> None:
    """Fuzzed: any mask and per-turn rewards placed on it read back as the same rewards (to
    float32), on the turns' last tokens only, summing to the given total; a count that does not
    match the mask's turns is refused (None), never misplaced."""
    runs = turn_runs(torch.tensor(mask))
    assert all(mask[s:e] == [1] * (e - s) for s, e in runs)
    assert sum(e - s for s, e in runs) == sum(mask)
    rewards = data.draw(
        st.lists(st.sampled_from([0.0, 0.25, -0.5, 1.0]), min_size=len(runs), max_size=len(runs))
    )
    placed = place_turn_rewards(mask, rewards, sum(rewards))
    if not runs:
        assert placed is None
        return
    assert placed is not None
    assert turn_rewards(placed, runs) == pytest.approx(rewards, abs=1e-6)
    assert set(torch.nonzero(placed).flatten().tolist()) <= {e - 1 for _, e in runs}
    assert place_turn_rewards(mask, [*rewards, 0.0], 0.0) is None


def test_turns_that_do_not_match_the_mask_are_refused_with_a_warning(caplog, monkeypatch) -> None:
    """A trajectory whose turn rewards were counted on another mask keeps its single reward,
    and says so, once a process (its turn-level credit is lost; a run whose masks all differ
    would flood the log); one with no turn at all is silent."""
    from teamgym.adapters import credit

    monkeypatch.setattr(credit, "_WARNED", [])  # as in a fresh worker process
    mask = [0, 1, 1, 0, 1]  # two turns
    with caplog.at_level("WARNING", logger="teamgym.adapters.credit"):
        assert place_turn_rewards([0, 0], [], 0.0) is None
        assert place_turn_rewards(mask, [1.0, 0.0, 0.5], 1.5) is None
        assert place_turn_rewards(mask, [1.0], 1.0) is None
    (record,) = caplog.records
    assert "2 turns in its response mask but 3 turn rewards" in record.getMessage()


@settings(max_examples=100, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 0.1, 0.25, -0.5, 1.0]), min_size=2, max_size=12),
    data=st.data(),
)
def test_on_one_turn_trajectories_at_grpo_is_verls_grpo(scores: list[float], data) -> None:
    """Where each agent takes one turn (the listener, team and sharing stages), AT-GRPO's groups
    are GRPO's and the return from the turn is the return: the same advantages, bit for bit."""
    from verl.trainer.ppo import core_algos

    from teamgym.adapters.credit import at_grpo_advantages

    groups = data.draw(st.lists(st.sampled_from("abc"), min_size=len(scores), max_size=len(scores)))
    rewards, mask = torch.zeros(len(scores), 5), torch.zeros(len(scores), 5, dtype=torch.int64)
    mask[:, :3] = 1
    rewards[:, 2] = torch.tensor(scores)
    ours = at_grpo_advantages(rewards, mask, groups)
    verl, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, groups)
    alone = [i for i, g in enumerate(groups) if groups.count(g) == 1]
    verl[alone] = 0.0  # a group of one: verl keeps the raw score, teamgym gives none
    assert torch.equal(ours, verl)


@settings(max_examples=100, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 0.1, 0.25, -0.5, 1.0]), min_size=2, max_size=12),
    data=st.data(),
)
def test_on_one_turn_from_one_observation_gigpo_is_twice_grpo(scores: list[float], data) -> None:
    """Where each agent takes one turn and every copy of a seed sees the same observation (the
    listener and sharing stages), GiGPO's step groups are its episode groups, and with step
    weight 1 each advantage is twice AT-GRPO's (= GRPO's): docs/results/credit.md."""
    from teamgym.adapters.credit import at_grpo_advantages, gigpo_advantages

    groups = data.draw(st.lists(st.sampled_from("abc"), min_size=len(scores), max_size=len(scores)))
    rewards, mask = torch.zeros(len(scores), 5), torch.zeros(len(scores), 5, dtype=torch.int64)
    mask[:, :3] = 1
    rewards[:, 2] = torch.tensor(scores)
    anchors = [[f"seen-by-{g}"] for g in groups]  # one observation per episode seed
    doubled = 2 * at_grpo_advantages(rewards, mask, groups)
    torch.testing.assert_close(gigpo_advantages(rewards, mask, groups, anchors), doubled)
