"""docs/envs/hanabi.md says why the tables' comm. column is 0 on Hanabi (hints are moves,
counted in the outcome's ``hints`` extra, not messages) and how often the baselines hint on
the smoke suite's seeds: those figures are the code's."""

from __future__ import annotations

import re
from pathlib import Path

from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode
from teamgym.envs.seeds import episode_seeds
from teamgym.names import EVAL_SEED_BASE

PAGE = Path(__file__).resolve().parents[2] / "docs" / "envs" / "hanabi.md"


def test_hints_are_counted_apart_from_messages_as_the_page_says() -> None:
    text = " ".join(PAGE.read_text().split())
    stated = re.search(
        r"the `expert` hints ([\d.]+) times a game \(of ([\d.]+) moves\) and `random` "
        r"([\d.]+) times \(of ([\d.]+) moves",
        text,
    )
    assert stated, "the page no longer states the baselines' hints"
    env = make("hanabi-v0")
    got = []
    for name in ("expert", "random"):
        policy = make_baseline("hanabi-v0", name, seed=EVAL_SEED_BASE)
        runs = [run_episode(env, policy, s) for s in episode_seeds(EVAL_SEED_BASE, 100)]
        assert all(m.communication_frequency == 0 and m.counts["messages"] == 0 for m in runs)
        got += [
            f"{sum(m.extras['hints'] for m in runs) / len(runs):.2f}",
            f"{sum(m.episode_length for m in runs) / len(runs):.1f}",
        ]
    assert list(stated.groups()) == got
