"""Summaries, reports, plots and comparisons of benchmark runs.

:func:`summarise` groups a run's episodes by setting (env, arguments, agent) and gives each
group its means with 95% confidence intervals (Wilson for success, Student t for the rest;
each clipped to the values its metric can take, :data:`RANGES`), its
errored count, and two fingerprints: ``fingerprint``, the SHA-256 of the episodes' metrics in
seed order (the same number ``teamgym baselines`` prints for the same seeds), and
``trajectories``, a hash of the episodes' trajectory hashes; a setting played by an LLM agent
also gets ``llm`` (replies, prompt and generated tokens per episode, successes per 1 000
generated tokens, from its results' ``llm`` counts); with the run's trajectories, each setting
gets ``actions``: the distinct legal actions its agent chose and which of its seats did the same
in every episode whatever they saw (:mod:`teamgym.benchmarks.choices`). :func:`write_report` writes
``summary.json``, ``report.md`` (with what success means in each env, :func:`success_criteria`)
and the plots (:func:`figures`, each with its caption); :func:`~teamgym.benchmarks.reproduce.compare_runs` says, episode by
episode, whether two runs reproduced each other; :func:`paired_compare` tests whether agent A beats
agent B on the same seeds (McNemar's exact test on success, Wilcoxon's signed-rank test on
score, paired 95% intervals of both differences).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamgym.benchmarks.choices import setting_choices
from teamgym.benchmarks.intervals import RANGES, interval_name, mean_ci, wilson
from teamgym.benchmarks.plots import PANELS, caption, write_plots
from teamgym.benchmarks.results import JsonLines, latest_by_key
from teamgym.envs.describe import success_criteria

__all__ = [
    "Report",
    "episodes",
    "interval_name",
    "load_run",
    "mean_ci",
    "success_criteria",
    "summarise",
    "wilson",
    "write_report",
]

#: metric key in the episode record -> (summary name, column title)
MEANS = {
    "score": "score",
    "team_return": "team return",
    "episode_length": "steps",
    "collaboration_index": "collab. index",
    "communication_frequency": "comm. freq",
    "invalid_action_rate": "invalid",
    "contribution_gini": "gini",
}


def episodes(n: int) -> str:
    """``1 episode``, ``2 episodes``: a count of episodes as a sentence says it."""
    return f"{n} episode" if n == 1 else f"{n} episodes"


def load_run(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The latest result of every episode of a run directory, by key. Labels are stored as
    each line was written; the episodes of one setting are all given the label of its newest
    line, so a run resumed after its labels changed (a newer teamgym naming a model where an
    older one wrote its path, an edited ``label:``) reads as one agent."""
    path = Path(run_dir) / "results.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} has no results.jsonl: pass a directory written by `teamgym bench run`"
        )
    records = JsonLines(path).load(repair=False)
    results = latest_by_key(records)
    newest = {r.get("config_hash"): r for r in records}
    for key, record in results.items():
        last = newest[record.get("config_hash")]
        names = {f: last[f] for f in _NAMES if f in record and f in last}
        if any(record[f] != name for f, name in names.items()):
            results[key] = {**record, **names}
    return results


_NAMES = ("agent", "group", "partner")
"""The fields of a result line that name its setting's agents (labels)."""


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def summarise(
    results: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """One summary row per setting, in ``order`` (config hashes: the suite's order) and then
    in first-seen order (see the module docstring)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in results.values():
        groups.setdefault(record["config_hash"], []).append(record)
    rank = {h: i for i, h in enumerate(order)}
    rows = []
    for config_hash, records in sorted(
        groups.items(), key=lambda item: rank.get(item[0], len(rank))
    ):
        records = sorted(records, key=lambda r: r["seed"])
        ok = [r for r in records if r["status"] == "ok"]
        metrics = [r["metrics"] for r in ok]
        wins = sum(bool(m["success"]) for m in metrics)
        lo, hi = wilson(wins, len(metrics))
        first = records[0]
        rows.append(
            {
                "group": first["group"],
                "env_id": first["env_id"],
                "kwargs": first["kwargs"],
                "agent": first["agent"],
                # cross-play rows only (as in results.jsonl): who played which seats beside it
                **{k: first[k] for k in ("partner", "partner_seats") if k in first},
                "config_hash": config_hash,
                "episodes": len(ok),
                "errored": len(records) - len(ok),
                "errors": sorted({r["error"] for r in records if r["status"] != "ok"})[:5],
                "seeds": [records[0]["seed"], records[-1]["seed"]],
                "success": {
                    "mean": wins / len(metrics) if metrics else None,
                    "lo": lo,
                    "hi": hi,
                    "n": len(metrics),
                },
                **{
                    key: mean_ci((m[key] for m in metrics), RANGES.get(key, (None, None)))
                    for key in MEANS
                },
                "fingerprint": _hash(metrics)[:16] if metrics else None,
                "trajectories": _hash([(r["seed"], r["trajectory_hash"]) for r in ok]),
                **_llm_summary(ok, wins),
            }
        )
    return rows


def _args(kwargs: Mapping[str, Any]) -> str:
    """A setting's arguments as the tables show them: ``k=v,k2=v2``, sorted."""
    return ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))


def _llm_summary(ok: Sequence[Mapping[str, Any]], wins: int) -> dict[str, Any]:
    """``{"llm": ...}`` for a setting whose agent is an LLM (its results carry ``llm``):
    replies and generated tokens per ok episode, and successes per 1 000 generated tokens
    (what a success costs); ``{}`` otherwise, so baseline runs' summaries stay as they were."""
    usage = [r["llm"] for r in ok if r.get("llm")]
    if not usage or len(usage) != len(ok):
        return {}
    generated = sum(u["completion_tokens"] for u in usage)
    return {
        "llm": {
            "replies_per_episode": sum(u["replies"] for u in usage) / len(usage),
            "prompt_tokens_per_episode": sum(u["prompt_tokens"] for u in usage) / len(usage),
            "generated_tokens_per_episode": generated / len(usage),
            "success_per_1k_generated_tokens": 1000 * wins / generated if generated else None,
        }
    }


def llm_table(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The Markdown lines of the LLM settings' token table (none when no setting has one)."""
    llm = [r for r in rows if r.get("llm")]
    if not llm:
        return []
    lines = [
        "",
        "## LLM replies and tokens",
        "",
        "Per ok episode, the agent under test's replies, prompt tokens and generated tokens "
        "(as its model or server counted them); successes per 1 000 generated tokens.",
        "",
        "| env | args | agent | replies | prompt tokens | generated tokens | success / 1k tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in llm:
        u = r["llm"]
        args = _args(r["kwargs"])
        per_k = u["success_per_1k_generated_tokens"]
        lines.append(
            f"| {r['env_id']} | {args} | {r['agent']} | {u['replies_per_episode']:.1f} | "
            f"{u['prompt_tokens_per_episode']:.0f} | {u['generated_tokens_per_episode']:.0f} | "
            f"{'-' if per_k is None else f'{per_k:.3f}'} |"
        )
    return lines


def fixed_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Markdown list items naming each setting's fixed seats and its most chosen actions (none
    if no setting has a fixed seat)."""
    out = []
    for r in rows:
        choices = r.get("actions")
        if choices and choices["fixed"]:
            top = ", ".join(f"`{a}` ({n} of {choices['chosen']})" for a, n in choices["top"])
            args = _args(r["kwargs"])
            where = f"{r['env_id']} {args}" if args else r["env_id"]
            fixed = ", ".join(choices["fixed"])
            out.append(
                f"- {where}, {r['agent']}: fixed {fixed} (of {len(choices['seats'])} seats); "
                f"most chosen {top or 'none'}"
            )
    return ["", *out] if out else []


def _fmt(stat: Mapping[str, Any], pct: bool = False) -> str:
    mean = stat["mean"]
    if mean is None:
        return "-"
    if pct and "lo" in stat and stat.get("ci", True):
        return f"{100 * mean:.0f}% ({100 * stat['lo']:.0f}-{100 * stat['hi']:.0f})"
    return f"{100 * mean:.1f}%" if pct else f"{mean:.3f}"


SUMMARY_COLUMNS = (
    "env",
    "args",
    "agent",
    "episodes",
    "success (95% CI)",
    "score",
    "steps",
    "team return",
    "collab.",
    "comm.",
    "invalid",
    "actions",
    "gini",
    "fingerprint",
)
"""Columns of the terminal and Markdown tables: collab. = collaboration index, comm. =
messages per agent-step, invalid = invalid replies per agent-step, actions = distinct legal
actions chosen (:data:`ACTIONS_NOTE`), gini = contribution Gini."""

ACTIONS_NOTE = (
    "actions: the distinct legal actions the agent under test chose (all its seats, steps and "
    "ok episodes); fixed k/n: k of the n seats it played replied alike at each step in every ok "
    "episode (the same legal action, or an invalid reply, and the same message), though the "
    "episodes differed: nothing those seats observed changed what they did, as with a constant "
    "policy"
)
"""What the ``actions`` column says (:mod:`teamgym.benchmarks.choices`), under the tables."""


def columns_and_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """:data:`SUMMARY_COLUMNS` and :func:`table_rows`, without ``args`` when no setting has any
    and without ``actions`` when no setting has its choices (a run without trajectories,
    ``teamgym baselines``)."""
    rows = list(rows)
    cells = table_rows(rows)
    columns = list(SUMMARY_COLUMNS)
    shown = {"args": any(row[1] for row in cells), "actions": _has_choices(rows)}
    drop = [SUMMARY_COLUMNS.index(name) for name, on in shown.items() if not on]
    for i in sorted(drop, reverse=True):
        columns.pop(i)
        cells = [row[:i] + row[i + 1 :] for row in cells]
    return columns, cells


def _has_choices(rows: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any summary row carries ``actions`` (what its agent chose)."""
    return any(r.get("actions") for r in rows)


def _actions(choices: Mapping[str, Any] | None) -> str:
    """The ``actions`` cell: ``3``, or ``3 fixed 1/2`` (one of its two seats fixed); ``-``
    when unknown."""
    if not choices:
        return "-"
    fixed, seats = len(choices["fixed"]), len(choices["seats"])
    return f"{choices['distinct']}" + (f" fixed {fixed}/{seats}" if fixed else "")


def table_rows(rows: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """Summary rows as the strings of :data:`SUMMARY_COLUMNS` (terminal table and Markdown)."""
    out = []
    for r in rows:
        args = _args(r["kwargs"])
        episodes = str(r["episodes"]) + (f" (+{r['errored']} errored)" if r["errored"] else "")
        steps = r["episode_length"]["mean"]
        out.append(
            [
                r["env_id"],
                args,
                r["agent"],
                episodes,
                _fmt(r["success"], pct=True),
                _fmt(r["score"]),
                "-" if steps is None else f"{steps:.1f}",
                _fmt(r["team_return"]),
                _fmt(r["collaboration_index"]),
                _fmt(r["communication_frequency"]),
                _fmt({**r["invalid_action_rate"], "ci": False}, pct=True),
                _actions(r.get("actions")),
                _fmt(r["contribution_gini"]),
                r["fingerprint"] or "-",
            ]
        )
    return out


def _markdown(run_dir: Path, rows: list[dict[str, Any]], plots: list[str], meta: Mapping) -> str:
    lines = [
        f"# Benchmark run: {meta.get('suite_name', run_dir.name)}",
        "",
        f"teamgym {meta.get('package_version', '?')}, suite hash `{meta.get('suite_hash', '?')}`, "
        f"{episodes(sum(r['episodes'] for r in rows))} ok, "
        f"{sum(r['errored'] for r in rows)} errored.",
        "Success is the share of ok episodes that met the env's success criterion (below), "
        f"with its {interval_name('success')} over those episodes; score is the env's graded "
        "result in [0, 1] (an agent that never succeeds can still score); the other columns "
        "are means over the ok episodes (collab. = collaboration index, comm. = messages per "
        "agent-step, invalid = invalid replies per agent-step, gini = contribution Gini). "
        "`fingerprint` hashes the episodes' metrics in seed order: a rerun prints the same.",
        "",
    ]
    columns, cells = columns_and_rows(rows)
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    if _has_choices(rows):
        lines += ["", ACTIONS_NOTE[0].upper() + ACTIONS_NOTE[1:] + "."]
        lines += fixed_lines(rows)
    lines += llm_table(rows)
    lines += ["", "## What success means", "", "| env | success |", "|---|---|"]
    criteria = success_criteria(r["env_id"] for r in rows)
    lines += [f"| {env} | {text.replace('|', '&#124;')} |" for env, text in criteria.items()]
    errored = [r for r in rows if r["errored"]]
    if errored:
        lines += ["", "## Errored episodes", ""]
        lines += [f"- {r['group']}: {r['errored']}: {'; '.join(r['errors'])}" for r in errored]
    if plots:
        shown = [r for r in rows if r["episodes"]]
        lines += ["", "## Plots"]
        for p in plots:
            lines += ["", f"![{p}]({p})", "", f"{p}: {caption(shown, PANELS[p])}."]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote: the summary's rows and the plots' file names."""

    rows: list[dict[str, Any]]
    plots: list[str]


def write_report(run_dir: str | Path) -> Report:
    """Write ``summary.json``, ``report.md`` and plots for a run directory."""
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    results = load_run(run_dir)
    rows = summarise(results, meta.get("settings", ()))
    choices = setting_choices(run_dir, results)
    for row in rows:
        if row["config_hash"] in choices:
            row["actions"] = choices[row["config_hash"]]
    summary = {
        "suite_name": meta.get("suite_name"),
        "suite_hash": meta.get("suite_hash"),
        "package_version": meta.get("package_version"),
        "episodes": sum(r["episodes"] for r in rows),
        "errored": sum(r["errored"] for r in rows),
        "expected": meta.get("episodes"),
        "rows": rows,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    plots = write_plots(run_dir, rows)
    (run_dir / "report.md").write_text(_markdown(run_dir, rows, plots, meta))
    return Report(rows, plots)
