"""An LLM agent's replies and tokens per episode (issue 43): counted from its chat records
into ``results.jsonl`` (``llm``), summarised per setting with successes per 1 000 generated
tokens, shown in ``report.md``; baseline settings get none of it."""

from __future__ import annotations

from teamgym.benchmarks.episodes import llm_usage
from teamgym.benchmarks.report import llm_table, summarise


def test_both_record_shapes_are_counted_and_a_failed_turn_is_not_a_reply() -> None:
    transformers = [
        {"reply": "<action>wait</action>", "prompt_tokens": 100, "completion_tokens": 7},
        {"reply": "x", "prompt_tokens": 120, "completion_tokens": 32},
    ]
    openai = [
        {"reply": "a", "usage": {"prompt_tokens": 90, "completion_tokens": 5}},
        {"reply": None, "attempts": [{"error": "timeout"}]},  # the failed last turn
    ]
    assert llm_usage(transformers) == {"replies": 2, "prompt_tokens": 220, "completion_tokens": 39}
    assert llm_usage(openai) == {"replies": 1, "prompt_tokens": 90, "completion_tokens": 5}
    assert llm_usage([]) is None


def _result(seed: int, success: bool, llm: dict | None, agent: str = "m") -> dict:
    metrics = {
        "success": success,
        "score": float(success),
        "team_return": 0.0,
        "episode_length": 4,
        "collaboration_index": None,
        "communication_frequency": 0.0,
        "invalid_action_rate": 0.0,
        "contribution_gini": None,
    }
    line = {
        "key": f"{agent}/{seed}",
        "config_hash": agent,
        "group": agent,
        "env_id": "signal-v1",
        "kwargs": {},
        "agent": agent,
        "seed": seed,
        "status": "ok",
        "error": None,
        "metrics": metrics,
        "trajectory_hash": str(seed),
    }
    return line if llm is None else {**line, "llm": llm}


def test_a_setting_summarises_tokens_per_episode_and_successes_per_1k_tokens() -> None:
    results = {
        "a": _result(0, True, {"replies": 4, "prompt_tokens": 1000, "completion_tokens": 300}),
        "b": _result(1, False, {"replies": 2, "prompt_tokens": 600, "completion_tokens": 100}),
        "c": _result(0, True, None, agent="expert"),
    }
    llm_row, expert_row = summarise(results, order=["m", "expert"])
    assert llm_row["llm"] == {
        "replies_per_episode": 3.0,
        "prompt_tokens_per_episode": 800.0,
        "generated_tokens_per_episode": 200.0,
        "success_per_1k_generated_tokens": 1000 * 1 / 400,
    }
    assert "llm" not in expert_row
    table = llm_table([llm_row, expert_row])
    assert table[-1] == "| signal-v1 |  | m | 3.0 | 800 | 200 | 2.500 |"
    assert llm_table([expert_row]) == []


def test_no_generated_token_gives_no_rate_rather_than_a_division_by_zero() -> None:
    row = summarise(
        {"a": _result(0, False, {"replies": 0, "prompt_tokens": 0, "completion_tokens": 0})}
    )[0]
    assert row["llm"]["success_per_1k_generated_tokens"] is None
    assert llm_table([row])[-1].endswith("| - |")
