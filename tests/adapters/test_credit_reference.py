"""The turn-level estimators against their reference code, on the same recorded batches.

* AT-GRPO: PettingLLMs' ``compute_grpo_outcome_advantage`` (its vendored verl, commit a054fb1),
  given one sample per (trajectory, turn) keyed ``(group, turn)`` as its
  ``_assign_consistent_uids`` keys them, each scored by the return from that turn;
* GiGPO: verl-agent's ``compute_step_discounted_returns`` and
  ``compute_gigpo_outcome_advantage`` (commit 5d7e4b8), given one sample per (trajectory,
  turn) with the trajectory's return, the turn's anchor and its trajectory id.

Both are copied verbatim under ``tests/adapters/reference``. The batches: several groups and
group sizes, copies of different lengths, aborted copies (fewer copies in a group), equal
rewards (dyadic and not), anchors shared across turns and copies, lone samples.
"""

from __future__ import annotations

import contextlib
import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from verl.trainer.ppo import core_algos

from teamgym.adapters.credit import (
    at_grpo_advantages,
    gigpo_advantages,
    place_turn_rewards,
    returns_to_go,
    turn_runs,
)
from teamgym.adapters.verl.estimators import anchored_uid

from .reference import pettingllms_grpo, verl_agent_core_gigpo

OBS = 2  # observation tokens between turns (mask 0)


def _batch(seed: int, dyadic: bool) -> dict:
    """A random recorded batch: rows (group, copy) with per-turn rewards and anchors, as the
    agent loop writes them (each turn's reward on its last token)."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(int(rng.integers(1, 4))):
        copies = int(rng.integers(2, 6))
        aborted = int(rng.integers(0, copies - 1))  # a group keeps at least two copies
        for c in range(copies - aborted):
            turns = int(rng.integers(1, 5))
            step = 0.25 if dyadic else 0.1
            rewards = [float(x) * step for x in rng.integers(0, 4, turns)]
            anchors = [f"{int(x):08x}" for x in rng.integers(0, 3, turns)]
            lengths = [int(x) for x in rng.integers(1, 4, turns)]
            rows.append((f"g{g}", f"g{g}c{c}", rewards, anchors, lengths))
    width = max(sum(lens) + OBS * len(lens) for *_, lens in rows) + 1
    rewards_t = torch.zeros(len(rows), width)
    mask_t = torch.zeros(len(rows), width, dtype=torch.int64)
    for i, (_, _, rewards, _, lengths) in enumerate(rows):
        mask: list[int] = []
        for n in lengths:
            mask += [1] * n + [0] * OBS
        placed = place_turn_rewards(mask, rewards, float(np.float32(sum(rewards))))
        assert placed is not None
        rewards_t[i, : len(mask)] = placed
        mask_t[i, : len(mask)] = torch.tensor(mask)
    return {"rows": rows, "rewards": rewards_t, "mask": mask_t}


def _turn_samples(batch: dict) -> list[tuple[int, int]]:
    return [(i, t) for i, row in enumerate(batch["rows"]) for t in range(len(row[2]))]


def _ours_at(adv: torch.Tensor, batch: dict) -> torch.Tensor:
    """Our advantage of each (row, turn), read on the turn's tokens (all equal)."""
    out = []
    for i, t in _turn_samples(batch):
        start, end = turn_runs(batch["mask"][i])[t]
        assert torch.all(adv[i, start:end] == adv[i, start])
        out.append(adv[i, start])
    return torch.stack(out)


def _observation_tokens_zero(adv: torch.Tensor, batch: dict) -> bool:
    return bool(torch.all(adv[batch["mask"] == 0] == 0))


@pytest.mark.parametrize("scale", [True, False], ids=["std", "mean-only"])
@pytest.mark.parametrize("seed", range(40))
def test_at_grpo_equals_pettingllms(seed: int, scale: bool) -> None:
    batch = _batch(seed, dyadic=seed % 2 == 0)
    samples = _turn_samples(batch)
    groups = [row[0] for row in batch["rows"]]
    ours = at_grpo_advantages(batch["rewards"], batch["mask"], groups, gamma=0.9, scale=scale)
    assert _observation_tokens_zero(ours, batch)

    returns = [returns_to_go(row[2], 0.9) for row in batch["rows"]]
    scores = torch.zeros(len(samples), 3)
    scores[:, 1] = torch.tensor([returns[i][t] for i, t in samples])
    index = np.array([f"{groups[i]}/{t}" for i, t in samples], dtype=object)
    if len(set(index)) == len(index):
        pytest.skip("every sample alone: PettingLLMs returns raw scores there (see credit.py)")
    ref, _ = pettingllms_grpo.compute_grpo_outcome_advantage(
        scores, torch.ones(len(samples), 3), index, norm_adv_by_std_in_grpo=scale
    )
    torch.testing.assert_close(_ours_at(ours, batch), ref[:, 0], rtol=0, atol=1e-6)
    if seed % 2 == 0:  # dyadic rewards survive float32 unchanged: the same bits
        assert torch.equal(_ours_at(ours, batch), ref[:, 0])


def _gigpo_reference(batch: dict, gamma: float, mode: str, weight: float) -> torch.Tensor:
    rows, samples = batch["rows"], _turn_samples(batch)
    step_batch = SimpleNamespace(
        non_tensor_batch={
            "rewards": np.array([rows[i][2][t] for i, t in samples], dtype=object),
            "traj_uid": np.array([rows[i][1] for i, _ in samples], dtype=object),
            "active_masks": np.ones(len(samples), dtype=object),
        },
        batch={"input_ids": torch.zeros(1)},
    )
    step_returns = verl_agent_core_gigpo.compute_step_discounted_returns(step_batch, gamma)
    totals = batch["rewards"].sum(dim=-1)
    episode = torch.zeros(len(samples), 3)
    episode[:, 2] = torch.stack([totals[i] for i, _ in samples])
    with contextlib.redirect_stdout(io.StringIO()):  # it prints a group-size summary
        ref, _ = verl_agent_core_gigpo.compute_gigpo_outcome_advantage(
            episode,
            step_returns,
            torch.ones(len(samples), 3),
            np.array([rows[i][3][t] for i, t in samples], dtype=object),
            np.array([rows[i][0] for i, _ in samples], dtype=object),
            np.array([rows[i][1] for i, _ in samples], dtype=object),
            step_advantage_w=weight,
            mode=mode,
        )
    return ref[:, 0]


@pytest.mark.parametrize("scale", [True, False], ids=["mean_std_norm", "mean_norm"])
@pytest.mark.parametrize("seed", range(40))
def test_gigpo_equals_verl_agent(seed: int, scale: bool) -> None:
    batch = _batch(seed, dyadic=seed % 2 == 0)
    groups = [row[0] for row in batch["rows"]]
    anchors = [row[3] for row in batch["rows"]]
    ours = gigpo_advantages(
        batch["rewards"], batch["mask"], groups, anchors, 0.95, 1e-6, scale, step_weight=0.7
    )
    assert _observation_tokens_zero(ours, batch)
    ref = _gigpo_reference(batch, 0.95, "mean_std_norm" if scale else "mean_norm", 0.7)
    torch.testing.assert_close(_ours_at(ours, batch), ref, rtol=0, atol=1e-6)
    if seed % 2 == 0:  # dyadic rewards survive float32 unchanged: the same bits
        assert torch.equal(_ours_at(ours, batch), ref)


def test_a_lone_trajectory_gets_no_advantage_where_verl_agent_gives_its_return() -> None:
    """The one difference, on purpose: a group of one trajectory has no baseline. verl-agent
    gives a one-turn lone trajectory its return (mean 0, std 1), and a longer one the step
    advantages of its own repeated anchors."""
    rewards = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0]])
    assert torch.all(gigpo_advantages(rewards, mask, ["g"], [["a"]], 1.0) == 0)
    assert torch.all(at_grpo_advantages(rewards, mask, ["g"]) == 0)
    batch = {"rows": [("g", "t", [1.0], ["a"], [2])], "rewards": rewards}
    assert torch.all(_gigpo_reference(batch, 1.0, "mean_norm", 1.0) == 1.0)

    rewards = torch.tensor([[0.5, 0.0, 0.0, 1.0]])
    mask = torch.tensor([[1, 0, 0, 1]])
    assert torch.all(gigpo_advantages(rewards, mask, ["g"], [["a", "a"]], 1.0) == 0)
    batch = {"rows": [("g", "t", [0.5, 1.0], ["a", "a"], [1, 1])], "rewards": rewards}
    assert torch.any(_gigpo_reference(batch, 1.0, "mean_norm", 1.0) != 0)


@pytest.mark.parametrize("name", ["at_grpo", "team_at_grpo", "gigpo", "team_gigpo"])
def test_registered_estimators_read_turns_from_the_rewards_and_anchors_from_the_uid(
    name: str,
) -> None:
    """What verl calls: episode-layout uids ``U_k`` (anchors appended for GiGPO), a padding
    row; the result equals the function's on the same groups, the padding row gets zero."""
    import teamgym.adapters.verl.estimators  # noqa: F401  (registers the estimators)

    batch = _batch(7, dyadic=False)
    episodes = {g: f"0000000{k}-0000-4000-8000-000000000000" for k, g in enumerate("012")}
    uids = []
    for k, row in enumerate(batch["rows"]):
        uid = f"{episodes[row[0][1]]}_{k % 2}"  # two agents per episode
        uids.append(anchored_uid(uid, row[3]) if "gigpo" in name else uid)
    pad = "pad" + "0" * 32
    rewards = torch.cat([batch["rewards"], torch.zeros(1, batch["rewards"].shape[1])])
    mask = torch.cat([batch["mask"], torch.zeros(1, batch["mask"].shape[1], dtype=torch.int64)])
    mask[-1, 0] = 1
    config = SimpleNamespace(gamma=0.9, norm_adv_by_std_in_grpo=True)
    adv, returns = core_algos.get_adv_estimator_fn(name)(
        token_level_rewards=rewards,
        response_mask=mask,
        index=np.array([*uids, pad], dtype=object),
        config=config,
    )
    assert torch.equal(adv, returns) and torch.all(adv[-1] == 0)
    plain = [u.partition("~")[0] for u in uids]
    groups = [u.split("_")[0] for u in plain] if name.startswith("team_") else plain
    if "gigpo" in name:
        want = gigpo_advantages(
            batch["rewards"], batch["mask"], groups, [r[3] for r in batch["rows"]], 0.9
        )
    else:
        want = at_grpo_advantages(batch["rewards"], batch["mask"], groups, 0.9)
    assert torch.equal(adv[:-1], want)
    assert torch.any(want != 0)
