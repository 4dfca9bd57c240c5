"""The seed plan: every function documented, and equal to the formula each site used before the
plan had one module (the fingerprints depend on these numbers)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from teamgym.envs import seeds
from teamgym.names import EVAL_SEED_BASE

GRID = [0, 1, 2, 7, 42, 999, 12345, 1_000_000]


@pytest.mark.parametrize("name", seeds.__all__)
def test_every_name_of_the_plan_is_documented(name: str) -> None:
    obj = getattr(seeds, name)
    if inspect.isfunction(obj):
        assert obj.__doc__ and len(obj.__doc__.split()) > 5, f"{name} has no docstring"
        assert f":func:`{name}`" in seeds.__doc__, f"the module's table does not list {name}"
    else:
        assert isinstance(obj, int), f"{name} is {obj!r}"


def test_eval_seed_base_is_the_one_in_names() -> None:
    assert seeds.EVAL_SEED_BASE is EVAL_SEED_BASE


@pytest.mark.parametrize("seed", GRID)
def test_policy_seed_keeps_the_three_rules(seed: int) -> None:
    # evaluation: run_episode and the benchmark runner reset slot i with seed * 1000 + i
    assert [seeds.policy_seed(seed, i) for i in range(4)] == [seed * 1000 + i for i in range(4)]
    # training: the episode loop, the warm-up and the corpus reset every policy with the episode seed
    assert seeds.policy_seed(seed, None) == seed
    # Gymnasium: one draw from the env's np_random per teammate, in order
    old = np.random.default_rng(seed)
    new = np.random.default_rng(seed)
    expected = [int(old.integers(2**31 - 1)) for _ in range(3)]
    assert [seeds.policy_seed(new, i) for i in range(3)] == expected


def test_policy_slots_stay_below_the_stride() -> None:
    with pytest.raises(ValueError, match="0..999"):
        seeds.policy_seed(3, 1000)


@pytest.mark.parametrize("seed", GRID)
def test_run_seeds_match_the_old_formulas(seed: int) -> None:
    assert [seeds.update_seed(seed, t) for t in range(1, 6)] == [
        seed * 100_003 + t for t in range(1, 6)
    ]
    assert list(seeds.episode_seeds(seed, 5)) == [seed + k for k in range(5)]
    old = np.random.default_rng(seed)
    expected = [int(s) for s in old.integers(0, EVAL_SEED_BASE, size=6)]
    assert seeds.train_seeds(np.random.default_rng(seed), 6) == expected


@pytest.mark.parametrize("eval_set", [0, 1, 2, 9])
def test_eval_seeds_match_the_old_formula(eval_set: int) -> None:
    assert seeds.eval_seeds(eval_set, 7) == [
        EVAL_SEED_BASE + eval_set * 100_000 + k for k in range(7)
    ]
    assert seeds.eval_seeds(0, 1) == [EVAL_SEED_BASE]  # the sharing stage's probe episode


@pytest.mark.parametrize(("seed", "train", "val"), [(0, 1, 0), (3, 16, 8), (99, 5, 5)])
def test_dataset_seeds_match_the_old_split(seed: int, train: int, val: int) -> None:
    rng = np.random.default_rng(seed)
    old_train = rng.choice(EVAL_SEED_BASE, size=train, replace=False).tolist()
    old_val = (EVAL_SEED_BASE + rng.choice(EVAL_SEED_BASE, size=val, replace=False)).tolist()
    assert seeds.dataset_seeds(seed, train, val) == (old_train, old_val)
    assert max(old_train) < EVAL_SEED_BASE <= min(old_val, default=EVAL_SEED_BASE)


def test_warmup_seeds_are_the_first_episodes() -> None:
    assert list(seeds.warmup_seeds(4)) == [0, 1, 2, 3]
