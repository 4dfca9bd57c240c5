"""``teamgym bench compare --paired``: agent A against agent B on the same seeds."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from teamgym.benchmarks.paired import (
    mcnemar_exact,
    newcombe_paired,
    paired_compare,
    wilcoxon_signed_rank,
)
from teamgym.cli import main


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages on one line, whatever the temporary paths' length."""
    monkeypatch.setenv("COLUMNS", "1000")


def _record(agent: str, seed: int, success: bool | None, score: float | None, **over) -> dict:
    """A ``results.jsonl`` line with only what comparisons read (``success=None``: errored)."""
    errored = success is None
    record = {
        "key": f"signal-v1/{agent}/{seed}",
        "status": "errored" if errored else "ok",
        "error": "server down" if errored else None,
        "env_id": "signal-v1",
        "kwargs": {},
        "teammates": {},
        "agent": agent,
        "config_hash": agent,
        "seed": seed,
        "package_version": "0.1.0",
        "trajectory_hash": f"{agent}{seed}",
        "metrics": None if errored else {"success": success, "score": score},
    }
    return {**record, **over}


def _run(path: Path, records: list[dict]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


#: (A won, B won) per seed: 3 both, 2 only A, 9 only B, 4 neither
TABLE = [(1, 1)] * 3 + [(1, 0)] * 2 + [(0, 1)] * 9 + [(0, 0)] * 4


def _crafted(tmp_path: Path) -> tuple[Path, Path]:
    a = [_record("a", seed, bool(x), float(x)) for seed, (x, _) in enumerate(TABLE)]
    b = [_record("b", seed, bool(y), float(y)) for seed, (_, y) in enumerate(TABLE)]
    return _run(tmp_path / "a", a), _run(tmp_path / "b", b)


def test_mcnemar_p_value_equals_the_hand_computed_binomial_tail(tmp_path: Path) -> None:
    # discordant pairs 2 and 9: p = 2 * P(Bin(11, 1/2) <= 2) = 2 * (1 + 11 + 55) / 2**11
    hand = 2 * (1 + 11 + 55) / 2**11
    assert mcnemar_exact(2, 9) == mcnemar_exact(9, 2) == hand == 0.0654296875
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 6) == 2 / 2**6
    (group,) = paired_compare(*_crafted(tmp_path)).groups
    assert (group.both, group.a_only, group.b_only, group.neither) == (3, 2, 9, 4)
    assert group.pairs == 18 and group.errored == 0
    assert group.mcnemar_p == hand
    assert group.success_a == 5 / 18 and group.success_b == 12 / 18
    assert group.success_diff == pytest.approx(-7 / 18)
    lo, hi = group.success_diff_ci
    assert -1 <= lo < -7 / 18 < hi < 0, group.success_diff_ci  # B better; interval excludes 0


def test_newcombe_interval_holds_the_estimate_and_stays_in_range() -> None:
    for both, a_only, b_only, neither in itertools.product((0, 1, 5, 20), repeat=4):
        n = both + a_only + b_only + neither
        if n == 0:
            continue
        lo, hi = newcombe_paired(both, a_only, b_only, neither)
        diff = (a_only - b_only) / n
        assert -1 <= lo <= diff <= hi <= 1, (both, a_only, b_only, neither, lo, hi)
    lo, hi = newcombe_paired(10, 0, 0, 10)  # no discordant pair: symmetric about 0
    assert lo == pytest.approx(-hi) and hi > 0


def test_wilcoxon_exact_p_value_equals_enumerating_every_sign() -> None:
    diffs = [0.5, -0.5, 1.0, 1.0, 0.0, 0.5, 2.0, -1.0, 0.5, 1.5]  # zeros and ties
    nonzero = [d for d in diffs if d != 0]
    ranks = {v: i for i, v in enumerate(sorted({abs(d) for d in nonzero}))}
    # mean ranks of the tied absolute values: |0.5| x4 -> 2.5, |1| x3 -> 6, |1.5| -> 8, |2| -> 9
    mean_rank = {0: 2.5, 1: 6.0, 2: 8.0, 3: 9.0}
    r = [mean_rank[ranks[abs(d)]] for d in nonzero]
    t = sum(ri for ri, d in zip(r, nonzero, strict=True) if d > 0)
    sums = [
        sum(ri for ri, s in zip(r, signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=len(r))
    ]
    below = sum(s <= t for s in sums) / len(sums)
    above = sum(s >= t for s in sums) / len(sums)
    p, method = wilcoxon_signed_rank(diffs)
    assert method == "exact" and p == pytest.approx(min(1.0, 2 * min(below, above)), abs=1e-12)
    assert wilcoxon_signed_rank([0.0, 0.0]) == (1.0, "exact")
    assert wilcoxon_signed_rank([1.0] * 6)[0] == pytest.approx(2 / 2**6)


def test_wilcoxon_normal_approximation_matches_scipy_for_many_pairs() -> None:
    stats = pytest.importorskip("scipy.stats")
    diffs = [((i * 37) % 11 - 4) / 4 for i in range(500)]  # many ties and zeros
    p, method = wilcoxon_signed_rank(diffs)
    expected = stats.wilcoxon(diffs, method="approx", correction=True).pvalue
    assert method == "normal" and p == pytest.approx(expected, rel=1e-6)


def test_errored_episodes_are_left_out_and_counted(tmp_path: Path) -> None:
    a = [_record("a", s, True, 1.0) for s in range(6)] + [_record("a", 6, None, None)]
    b = [_record("b", s, s < 2, float(s < 2)) for s in range(7)] + [_record("b", 7, True, 1.0)]
    cmp = paired_compare(_run(tmp_path / "a", a), _run(tmp_path / "b", b))
    (group,) = cmp.groups
    assert (group.pairs, group.errored, cmp.only_a, cmp.only_b) == (6, 1, 0, 1)
    assert (group.a_only, group.b_only) == (4, 0) and group.mcnemar_p == 2 / 2**4
    assert group.score_diff == pytest.approx(4 / 6) and group.wilcoxon_method == "exact"


def test_random_against_expert_on_the_same_seeds(tmp_path: Path, capsys) -> None:
    for agent in ("random", "expert"):
        args = ["bench", "run", "smoke", "--env", "signal-v1", "--agent", agent]
        assert main([*args, "--episodes", "20", "--out", str(tmp_path / agent), "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "paired.json"
    runs = [str(tmp_path / "expert"), str(tmp_path / "random")]
    assert main(["bench", "compare", *runs, "--paired", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "A = expert" in printed and "B = random" in printed and "McNemar" in printed
    result = json.loads(out.read_text())
    (group,) = result["groups"]
    assert (result["agent_a"], result["agent_b"], group["pairs"]) == ("expert", "random", 20)
    assert group["success_a"] > group["success_b"] and group["success_diff_ci"][0] > 0
    assert group["mcnemar_p"] < 0.05 and group["wilcoxon_p"] < 0.05
    assert group["score_diff"] > 0 and group["score_diff_ci"][0] > 0
    # the default, unpaired comparison is unchanged: different agents share no episode key
    assert main(["bench", "compare", *runs]) == 2
    assert "(to compare two agents on the same seeds: --paired)" in capsys.readouterr().out


def test_two_agents_of_one_run_are_picked_by_label(tmp_path: Path, capsys) -> None:
    both = _run(
        tmp_path / "both",
        [_record("x", s, True, 1.0) for s in range(4)]
        + [_record("y", s, False, 0.0) for s in range(4)],
    )
    assert main(["bench", "compare", str(both), str(both), "--paired"]) == 2
    assert "holds agents x, y: pick one with --agent-a LABEL" in capsys.readouterr().out
    cmp = paired_compare(both, both, "x", "y")
    assert cmp.groups[0].a_only == 4 and math.isclose(cmp.groups[0].mcnemar_p, 2 / 2**4)


@pytest.mark.parametrize(
    ("b_over", "flags", "message"),
    [
        ({"seed_shift": 100}, [], "no seed in common; "),
        ({"env_id": "foraging-v0"}, [], "no (env, arguments, teammates) in common; "),
        ({"kwargs": {"num_agents": 3}}, [], "b (b) has signal-v1 num_agents=3"),
        ({}, ["--agent-b", "z"], "has no agent 'z'; it holds b"),
        ({}, ["--same"], "pick the same episodes"),
        ({}, ["--no-paired", "--json", "x.json"], "--json need --paired"),
    ],
)
def test_usage_errors_exit_2_and_say_what_differs(
    tmp_path: Path, capsys, b_over: dict, flags: list[str], message: str
) -> None:
    shift = b_over.pop("seed_shift", 0)
    a = _run(tmp_path / "a", [_record("a", s, True, 1.0) for s in range(3)])
    b = _run(tmp_path / "b", [_record("b", s + shift, True, 1.0, **b_over) for s in range(3)])
    runs = [str(a), str(a)] if "--same" in flags else [str(a), str(b)]
    flags = [f for f in flags if f != "--same"]
    paired = [] if "--no-paired" in flags else ["--paired"]
    flags = [f for f in flags if f != "--no-paired"]
    assert main(["bench", "compare", *runs, *paired, *flags]) == 2
    assert message in capsys.readouterr().out
