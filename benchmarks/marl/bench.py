"""``teamgym learn-bench marl``: IPPO and MAPPO (:mod:`teamgym.benchmarks.marl.ppo`) on every
env in vector mode, over seeds, next to the random and scripted baselines on the same
held-out seeds; one results table, one curve figure per env and, where roles exist, what the
learned teams do.

Every run is a JSON file under ``OUT/runs/``, written when it ends: a killed benchmark skips
the runs it has and plays the rest. ``OUT/summary.json`` and ``OUT/results.md`` are rewritten
from the run files each time.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from teamgym.adapters.cpu.resume import RunSettingsError
from teamgym.benchmarks.marl.ppo import (
    Args,
    Labour,
    evaluate,
    greedy,
    parse_env_args,
    sampled,
    summarize,
    train,
)
from teamgym.benchmarks.report import mean_ci
from teamgym.envs import make, spec
from teamgym.envs.registration import latest_versions, registry
from teamgym.envs.seeds import eval_seeds

__all__ = ["ALGOS", "Setting", "markdown", "run_marl", "settings"]

ALGOS: tuple[Literal["ippo", "mappo"], ...] = ("ippo", "mappo")
#: Envs whose division of labour the table shows (roles or subtasks per robot; every env's is
#: in ``summary.json``).
LABOUR_ENVS = ("keydoor-v0", "thor-assembly-v0", "kitchen-v0")
#: Fractions of the expert's held-out success whose first crossing in training is reported.
FRACTIONS = (0.5, 0.9)


@dataclass(frozen=True)
class Setting:
    """One env with fixed arguments (``KEY=VALUE`` strings)."""

    env: str
    env_args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``keydoor-v0[difficulty=easy]``, or the id alone."""
        return f"{self.env}[{','.join(self.env_args)}]" if self.env_args else self.env


def settings(env_ids: Sequence[str] | None = None) -> list[Setting]:
    """Every env (the newest version of each) with its defaults, and its ``easy`` preset where
    it has one."""
    out = []
    for env_id in env_ids or latest_versions(registry()):
        factory = spec(env_id).load()
        presets = getattr(__import__(factory.__module__, fromlist=["_"]), "DIFFICULTIES", {})
        if "easy" in presets:
            out.append(Setting(env_id, ("difficulty=easy",)))
        out.append(Setting(env_id))
    return out


def scripted(setting: Setting, name: str, episodes: int) -> dict[str, Any]:
    """Baseline ``name`` on the held-out seeds (text mode, every seat), summarised as the
    learners are (:func:`~teamgym.benchmarks.marl.ppo.summarize`)."""
    from teamgym.envs.lineup import Lineup

    env = make(setting.env, **parse_env_args(setting.env_args))
    agents = list(env.possible_agents)
    players = Lineup.build(setting.env, dict.fromkeys(agents, name), share=True).bind(env)
    finished = []
    for seed in eval_seeds(0, episodes):
        obs, infos = env.reset(seed=seed)
        players.reset(seed)
        labour = Labour(agents)
        while env.agents:
            replies = {a: players.act(a, obs[a], infos[a]) for a in env.agents}
            obs, rewards, _, _, step_infos = env.step(replies)
            infos.update(step_infos)
            labour.step(rewards, step_infos)
        finished.append(labour.record())
    env.close()
    return summarize(finished, agents)


def run_marl(
    out: str | Path,
    env_ids: Sequence[str] | None = None,
    seeds: Sequence[int] = (1, 2, 3),
    total_steps: int = 100_000,
    eval_episodes: int = 100,
    log: Callable[[str], None] = print,
    sharing: float = 0.0,
) -> dict[str, Any]:
    """Train and evaluate every (setting, algorithm, seed) not yet in ``out``, the learners on
    rewards shared with weight ``sharing`` (0: their own); then write the summary and the
    results table. Returns the summary. A run directory holds one ``sharing``: resuming one
    with another is refused."""
    import torch

    torch.set_num_threads(1)  # small networks: one thread is fastest, and leaves a core free
    out = Path(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    _check_sharing(out / "runs", sharing)
    for setting in settings(env_ids):
        for name in ("random", *spec(setting.env).baselines):
            path = out / "runs" / f"{setting.name}.{name}.json"
            if not path.exists():
                _write(path, scripted(setting, name, eval_episodes))
        for algo in ALGOS:
            for seed in seeds:
                path = out / "runs" / f"{setting.name}.{algo}.seed{seed}.json"
                if path.exists():
                    continue
                args = Args(
                    setting.env,
                    setting.env_args,
                    algo,
                    seed,
                    total_steps,
                    eval_episodes=eval_episodes,
                    sharing=sharing,
                )
                t0 = time.time()
                agent, curve = train(args, log=lambda line: None)
                seconds = time.time() - t0
                result: dict[str, Any] = {
                    "args": dataclasses.asdict(args),
                    "train_seconds": round(seconds, 1),
                    "curve": curve,
                    "sampled": evaluate(sampled(agent, seed), args),
                    "greedy": evaluate(greedy(agent), args),
                }
                _write(path, result)
                log(
                    f"{setting.name} {algo} seed {seed}: held-out success "
                    f"{result['sampled']['success_rate']:.2f} ({seconds:.0f} s)"
                )
    return write_summary(out, env_ids, seeds, sharing)


def _check_sharing(runs: Path, sharing: float) -> None:
    """Refuse to add runs of one reward sharing to a directory holding runs of another (any
    env, any seed), before anything trains."""
    for path in sorted(runs.glob("*.seed*.json")):
        saved = json.loads(path.read_text())["args"].get("sharing", 0.0)
        if saved != sharing:
            raise RunSettingsError(
                f"{path} was trained with reward sharing {saved}, this run asks for {sharing}: "
                "give this one its own --out, or the same --sharing to resume"
            )


def _write(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def write_summary(
    out: Path, env_ids: Sequence[str] | None, seeds: Sequence[int], sharing: float = 0.0
) -> dict[str, Any]:
    """Gather the run files into ``summary.json`` and ``results.md``."""
    rows = []
    for setting in settings(env_ids):
        runs = out / "runs"
        base = {
            n: json.loads((runs / f"{setting.name}.{n}.json").read_text())
            for n in ("random", *spec(setting.env).baselines)
            if (runs / f"{setting.name}.{n}.json").exists()
        }
        row: dict[str, Any] = {"setting": setting.name, "baselines": base}
        # sample efficiency on success, or on score where the expert never succeeds (hanabi:
        # success is a perfect game)
        expert_run = base.get("expert", {})
        key = "success_rate" if expert_run.get("success_rate") else "score"
        expert = expert_run.get(key)
        row["efficiency_metric"] = key
        for algo in ALGOS:
            done = [
                json.loads(p.read_text())
                for s in seeds
                if (p := runs / f"{setting.name}.{algo}.seed{s}.json").exists()
            ]
            row[algo] = {
                "seeds": [r["args"]["seed"] for r in done],
                "success": mean_ci([r["sampled"]["success_rate"] for r in done], (0.0, 1.0)),
                "score": mean_ci([r["sampled"]["score"] for r in done], (0.0, 1.0)),
                "per_seed": [r["sampled"]["success_rate"] for r in done],
                "steps_to": {
                    str(f): [_first(r["curve"], key, f * expert) if expert else None for r in done]
                    for f in FRACTIONS
                },
                "train_seconds": [r["train_seconds"] for r in done],
                "labour": [
                    {
                        k: r["sampled"][k]
                        for k in ("subtasks_per_seat", "contribution_gini", "roles")
                    }
                    for r in done
                ],
            }
        rows.append(row)
    summary = {"seeds": list(seeds), "sharing": sharing, "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    (out / "results.md").write_text(markdown(summary))
    summary["figures"] = plot_curves(out, env_ids, seeds)
    return summary


def plot_curves(out: Path, env_ids: Sequence[str] | None, seeds: Sequence[int]) -> list[str]:
    """One figure per env, ``curves-ENV.png``: training success (last 100 episodes) per seed,
    IPPO solid and MAPPO dashed, one panel per setting, the held-out baselines as gray lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_env: dict[str, list[Setting]] = {}
    for setting in settings(env_ids):
        by_env.setdefault(setting.env, []).append(setting)
    written = []
    runs = out / "runs"
    for env, group in by_env.items():
        fig, axes = plt.subplots(1, len(group), figsize=(5 * len(group), 3.6), squeeze=False)
        for ax, setting in zip(axes[0], group, strict=True):
            for algo, style in zip(ALGOS, ("-", "--"), strict=True):
                for k, seed in enumerate(seeds):
                    path = runs / f"{setting.name}.{algo}.seed{seed}.json"
                    if path.exists():
                        curve = json.loads(path.read_text())["curve"]
                        ax.plot(
                            curve["env_steps"],
                            curve["success_rate"],
                            style,
                            color=f"C{k}",
                            label=f"{algo.upper()} seed {seed}",
                        )
            for name, style in (("expert", "-."), ("random", ":")):
                path = runs / f"{setting.name}.{name}.json"
                if path.exists():
                    level = json.loads(path.read_text())["success_rate"]
                    ax.axhline(level, color="gray", linestyle=style, label=f"{name} (held out)")
            ax.set_title(setting.name, fontsize=10)
            ax.set_xlabel("env steps")
            ax.set_ylim(-0.02, 1.05)
        axes[0][0].set_ylabel("success (last 100 training episodes)")
        axes[0][-1].legend(fontsize=7, loc="best")
        fig.tight_layout()
        name = f"curves-{env}.png"
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        written.append(name)
    return written


def _first(curve: dict[str, list[float]], key: str, level: float) -> int | None:
    """The first env step at which the training ``key`` (last 100 episodes) reached ``level``."""
    for steps, value in zip(curve["env_steps"], curve[key], strict=True):
        if value >= level:
            return int(steps)
    return None


def markdown(summary: dict[str, Any]) -> str:
    """The results table: held-out success and score per setting (learners: mean, 95% interval
    over seeds, every seed), env steps to 50% and 90% of the expert (its success, or its score
    where it never succeeds), the baselines on the same seeds; then the division of labour
    where the env reports roles or subtasks."""
    lines = []
    if summary.get("sharing"):
        lines += [
            f"The learners trained on rewards shared with weight {summary['sharing']} "
            "(`RewardSharing`, mixed, team = sum); every figure is the env's own.",
            "",
        ]
    lines += [
        "| setting | random | expert | IPPO | MAPPO | steps to 50% / 90% of expert: IPPO; MAPPO |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary["rows"]:
        base = row["baselines"]
        cells = [f"`{row['setting']}`"]
        cells += [_baseline(base.get(n)) for n in ("random", "expert")]
        cells += [_learned(row[a]) for a in ALGOS]
        efficiency = [
            " / ".join(_steps(row[a]["steps_to"][str(f)]) for f in FRACTIONS) for a in ALGOS
        ]
        score = " (score)" if row.get("efficiency_metric") == "score" else ""
        cells.append("; ".join(efficiency) + score)
        lines.append("| " + " | ".join(cells) + " |")
    labour = []
    for row in summary["rows"]:
        expert = row["baselines"].get("expert")
        if not expert or row["setting"].split("[")[0] not in LABOUR_ENVS:
            continue
        labour.append(f"- `{row['setting']}` expert: {_labour(expert)}")
        for algo in ALGOS:
            for seed, done in zip(row[algo]["seeds"], row[algo]["labour"], strict=True):
                labour.append(f"  - {algo} seed {seed}: {_labour(done)}")
    if labour:
        lines += [
            "",
            "Division of labour (held-out, sampled) in "
            + ", ".join(f"`{e}`" for e in LABOUR_ENVS)
            + ": completed-subtask credit per seat, contribution Gini, each seat's most "
            "frequent role.",
            "",
            *labour,
        ]
    return "\n".join(lines) + "\n"


def _baseline(result: dict[str, Any] | None) -> str:
    """``100% · 1.00``: success and score."""
    return "-" if result is None else f"{result['success_rate']:.0%} · {result['score']:.2f}"


def _learned(cell: dict[str, Any]) -> str:
    """``62% (40-84) [55, 60, 71] · 0.70``: mean success, its interval over seeds, each seed,
    then the mean score."""
    s = cell["success"]
    if s["mean"] is None:
        return "-"
    interval = f" ({s['lo']:.0%}-{s['hi']:.0%})" if s["lo"] is not None else ""
    seeds = ", ".join(f"{v:.0%}" for v in cell["per_seed"])
    return f"{s['mean']:.0%}{interval} [{seeds}] · {cell['score']['mean']:.2f}"


def _steps(values: list[int | None]) -> str:
    """Each seed's first crossing, ``12.3k`` or ``never``."""
    return ", ".join("never" if v is None else f"{v / 1000:.1f}k" for v in values) or "-"


def _labour(result: dict[str, Any]) -> str:
    credit = ", ".join(f"{a} {v:.2f}" for a, v in result["subtasks_per_seat"].items())
    gini = result["contribution_gini"]
    roles = "; ".join(
        f"{a}: {max(r, key=r.get)} ({max(r.values()) / sum(r.values()):.0%})"
        for a, r in result["roles"].items()
    )
    text = f"subtasks {credit}; Gini {'-' if gini is None else f'{gini:.2f}'}"
    return f"{text}; roles {roles}" if roles else text
