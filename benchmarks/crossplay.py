"""Cross-play: do agents work with partners they did not train with?

:func:`crossplay_source` turns a set of agents into a suite that plays every ordered pairing
on the same seeds: agent A (the row) in the first seat, partner B (the column) in the others
(``partner_seats``; for keydoor and signal the seats are roles: ``robot_0`` is signal's
speaker). The diagonal is self-play, A in every seat: the very episodes ``bench run`` plays for
A, so its fingerprints equal the baselines table's. People (``human:NAME``, played on the web page) fill
their row only: a person with each partner; never another agent's partner nor alone in every
seat, which would measure a person playing with themselves. Their column and diagonal stay
empty (``-``); their row counts in the cross-play mean. It is an ordinary suite, so the run
directory, the resume after a kill and ``bench compare`` are ``bench run``'s.

:func:`crossplay_matrix` reads the summary back into one matrix per env (success with its
Wilson interval, score with its Student-t one) and the partner-overfitting gap: the mean over
the diagonal minus the mean off it (a team that only works with itself has a large gap).
:func:`write_crossplay` writes ``crossplay.json``, ``crossplay.md`` and a heatmap per env.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from teamgym.benchmarks.suites import ALL_BASELINES, Suite

__all__ = [
    "CROSSPLAY_JSON",
    "CROSSPLAY_MD",
    "Matrix",
    "crossplay_matrix",
    "crossplay_source",
    "matrix_lines",
    "write_crossplay",
]

CROSSPLAY_JSON = "crossplay.json"
CROSSPLAY_MD = "crossplay.md"
_METRICS = ("success", "score")


def _expand(agents: Sequence[Any], env_id: str) -> list[Any]:
    """The agents for one env: ``baselines`` stands for random and the env's scripted ones."""
    from teamgym.envs import spec

    out: list[Any] = []
    for agent in agents:
        names = ["random", *spec(env_id).baselines] if agent == ALL_BASELINES else [agent]
        out += [a for a in names if a not in out]
    return out


def _is_human(agent: Any) -> bool:
    """Whether ``agent`` (a spec string or mapping) is people at the web page."""
    if isinstance(agent, str):
        return agent.startswith("human:")
    return isinstance(agent, Mapping) and agent.get("kind") == "human"


def crossplay_source(
    env_ids: Sequence[str],
    agents: Sequence[Any],
    *,
    episodes: int,
    seed: int,
    partner_seats: Sequence[str] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    name: str = "crossplay",
) -> dict[str, Any]:
    """The suite mapping of a cross-play run: per env, each agent alone (self-play) and with
    each other agent as its partner in ``partner_seats`` (default: every seat but the first)."""
    if not env_ids:
        raise ValueError("cross-play needs at least one env")
    entries: list[dict[str, Any]] = []
    for env_id in env_ids:
        players = _expand(agents, env_id)
        if len(players) < 2:
            raise ValueError(f"cross-play on {env_id} needs two agents or more, got {players}")
        base = {"id": env_id, **({"kwargs": dict(kwargs)} if kwargs else {})}
        for i, a in enumerate(players):
            if not _is_human(a):  # a person plays the human row only (see the module docstring)
                entries.append({**base, "agents": [a]})
            for j, b in enumerate(players):
                if i != j and not _is_human(b):
                    seats = {"partner_seats": list(partner_seats)} if partner_seats else {}
                    entries.append({**base, "agents": [a], "partner": b, **seats})
    return {
        "name": name,
        "description": "every ordered pairing of the agents on the same seeds (cross-play)",
        "seed": seed,
        "episodes": episodes,
        "envs": entries,
    }


@dataclass
class Matrix:
    """One env's cross-play matrix: ``cells[a][b]`` is A (row) with partner B (column)."""

    env: str
    """The env id, with its arguments when the suite gave some."""
    agents: list[str]
    """Row and column order (the agents' labels)."""
    seats: list[str]
    """The seats the partner (column) played off the diagonal."""
    cells: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """``cells[a][b][metric]``: ``{mean, lo, hi, n}`` for ``success`` and ``score``, plus
    ``episodes``, ``errored`` and ``fingerprint``."""

    def gap(self, metric: str = "score") -> dict[str, float | None]:
        """Self-play (diagonal) mean, cross-play (off-diagonal) mean and their difference."""
        diag = [self._mean(a, a, metric) for a in self.agents]
        off = [self._mean(a, b, metric) for a in self.agents for b in self.agents if a != b]
        self_play, cross = _fmean(diag), _fmean(off)
        gap = None if self_play is None or cross is None else self_play - cross
        return {"self_play": self_play, "cross_play": cross, "gap": gap}

    def agent_gaps(self, metric: str = "score") -> dict[str, dict[str, float | None]]:
        """Per agent: its self-play mean and its mean with every other agent (either side)."""
        out = {}
        for a in self.agents:
            others = [self._mean(a, b, metric) for b in self.agents if b != a]
            others += [self._mean(b, a, metric) for b in self.agents if b != a]
            out[a] = {"self_play": self._mean(a, a, metric), "cross_play": _fmean(others)}
        return out

    def _mean(self, a: str, b: str, metric: str) -> float | None:
        cell = self.cells.get(a, {}).get(b)
        return None if cell is None else cell[metric]["mean"]


def _fmean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def crossplay_matrix(suite: Suite, rows: Sequence[Mapping[str, Any]]) -> list[Matrix]:
    """The matrices of a cross-play suite from its summary ``rows`` (:func:`summarise`), one
    per env and arguments, in the suite's order."""
    by_hash = {r["config_hash"]: r for r in rows}
    matrices: dict[str, Matrix] = {}
    for setting in suite.settings:
        args = ",".join(f"{k}={v}" for k, v in sorted(setting.kwargs.items()))
        env = f"{setting.env_id}[{args}]" if args else setting.env_id
        a = setting.agent.label
        b = setting.partner.label if setting.partner is not None else a
        matrix = matrices.setdefault(env, Matrix(env, [], []))
        for label in (a, b):
            if label not in matrix.agents:
                matrix.agents.append(label)
        if setting.partner is not None and not matrix.seats:
            matrix.seats = list(setting.partner_seats)
        row = by_hash.get(setting.config_hash)
        if row is None:  # no episode finished yet
            continue
        cell = {m: dict(row[m]) for m in _METRICS}
        cell.update(
            episodes=row["episodes"], errored=row["errored"], fingerprint=row["fingerprint"]
        )
        matrix.cells.setdefault(a, {})[b] = cell
    return list(matrices.values())


def _cell_text(cell: Mapping[str, Any] | None) -> str:
    """``success% (lo-hi) / score`` of one cell, ``-`` when it has no episode."""
    if cell is None or not cell["episodes"]:
        return "-"
    s, score = cell["success"], cell["score"]
    text = f"{s['mean']:.0%} ({s['lo']:.0%}-{s['hi']:.0%})"
    return text if score["mean"] is None else f"{text} / {score['mean']:.2f}"


def matrix_lines(matrix: Matrix) -> list[str]:
    """A matrix as markdown: the table, then the gap per env and per agent."""
    head = "| agent A \\ partner B | " + " | ".join(f"`{b}`" for b in matrix.agents) + " |"
    lines = [
        f"### `{matrix.env}`",
        "",
        f"Rows: agent A; columns: partner B, in {', '.join(matrix.seats) or '-'} (A in the "
        "other seats); the diagonal is self-play. Each cell: success (95% Wilson interval) / "
        "mean score.",
        "",
        head,
        "|" + " --- |" * (len(matrix.agents) + 1),
    ]
    for a in matrix.agents:
        cells = [_cell_text(matrix.cells.get(a, {}).get(b)) for b in matrix.agents]
        lines.append(f"| `{a}` | " + " | ".join(cells) + " |")
    lines.append("")
    for metric in _METRICS:
        g = matrix.gap(metric)
        lines.append(
            f"- {metric}: self-play {_num(g['self_play'])}, cross-play {_num(g['cross_play'])}, "
            f"gap {_num(g['gap'])}"
        )
    for a, g in matrix.agent_gaps().items():
        lines.append(
            f"- `{a}`: score {_num(g['self_play'])} in self-play, {_num(g['cross_play'])} "
            "with the others"
        )
    return lines


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def write_crossplay(run_dir: str | Path, matrices: Sequence[Matrix]) -> list[str]:
    """Write ``crossplay.json``, ``crossplay.md`` and a heatmap per env into ``run_dir``;
    returns the heatmaps' file names (none without matplotlib)."""
    run_dir = Path(run_dir)
    payload = [
        {**asdict(m), "gap": {k: m.gap(k) for k in _METRICS}, "agent_gaps": m.agent_gaps()}
        for m in matrices
    ]
    (run_dir / CROSSPLAY_JSON).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    plots = _heatmaps(run_dir, matrices)
    body = ["# Cross-play", ""]
    for m, plot in zip(matrices, plots or [None] * len(matrices), strict=True):
        body += matrix_lines(m) + (["", f"![{m.env}]({plot})"] if plot else []) + [""]
    (run_dir / CROSSPLAY_MD).write_text("\n".join(body))
    return [p for p in plots if p]


def _heatmaps(run_dir: Path, matrices: Sequence[Matrix]) -> list[str | None]:
    """One figure per env: success and score, rows A, columns B, each cell annotated."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names: list[str | None] = []
    for m in matrices:
        n = len(m.agents)
        fig, axes = plt.subplots(1, 2, figsize=(2 * (2.2 + 1.0 * n), 1.8 + 0.8 * n), squeeze=False)
        for ax, metric in zip(axes[0], _METRICS, strict=True):
            grid = [[m._mean(a, b, metric) for b in m.agents] for a in m.agents]
            shown = [[float("nan") if v is None else v for v in row] for row in grid]
            image = ax.imshow(shown, vmin=0.0, vmax=1.0, cmap="viridis")
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    text = "-" if v is None else (f"{v:.0%}" if metric == "success" else f"{v:.2f}")
                    colour = "black" if v is not None and v > 0.6 else "white"
                    ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=9)
            ax.set_xticks(range(n), m.agents, rotation=30, ha="right")
            ax.set_yticks(range(n), m.agents)
            ax.set_xlabel(f"partner B ({', '.join(m.seats)})")
            ax.set_ylabel("agent A (the other seats)" if ax is axes[0][0] else "")
            ax.set_title(f"{metric} (gap {_num(m.gap(metric)['gap'])})")
            fig.colorbar(image, ax=ax, fraction=0.046)
        fig.suptitle(f"cross-play: {m.env}")
        fig.tight_layout()
        name = "crossplay-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in m.env)
        fig.savefig(run_dir / f"{name}.png", dpi=100)
        plt.close(fig)
        names.append(f"{name}.png")
    return names
