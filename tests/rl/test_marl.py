"""``teamgym learn-bench marl``: IPPO and MAPPO on any env in vector mode, the baselines on the
same held-out seeds, the table, the curves, and a killed benchmark that resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _one_thread():
    """The runs use one CPU thread, as ``learn-bench marl`` does (small networks: fastest)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


from teamgym.adapters.cpu.resume import RunSettingsError  # noqa: E402
from teamgym.benchmarks.marl.bench import run_marl, settings  # noqa: E402
from teamgym.benchmarks.marl.ppo import Args, Episodes, evaluate, sampled, train  # noqa: E402


def test_every_env_has_its_default_and_its_easy_preset() -> None:
    names = [s.name for s in settings()]
    assert "keydoor-v0[difficulty=easy]" in names and "keydoor-v0" in names
    assert "kitchen-v0" in names and not any(n.startswith("kitchen-v0[") for n in names)
    assert "signal-v0" not in names  # the newest version of each env only


def test_mappos_critic_sees_the_state_and_the_seat() -> None:
    """IPPO's critic input is the agent's observation; MAPPO's is ``env.state()`` (every
    agent's vector) and a one-hot seat, so it differs between seats of one env."""
    ippo = Episodes(Args("signal-v1", algo="ippo"), 2)
    mappo = Episodes(Args("signal-v1", algo="mappo"), 2)
    for run in (ippo, mappo):
        for e in range(2):
            run.reset(e, e)
    x, _, c = ippo.inputs([0, 1])
    assert torch.equal(x, c)
    x, _, c = mappo.inputs([0, 1])
    state = mappo.envs[0].state()
    assert c.shape == (4, len(state) + 2)
    assert torch.equal(c[0, :-2], torch.as_tensor(state)) and torch.equal(c[0, :-2], c[1, :-2])
    assert c[0, -2:].tolist() == [1.0, 0.0] and c[1, -2:].tolist() == [0.0, 1.0]


def test_same_seed_same_run() -> None:
    args = Args("publicgoods-v0", ("difficulty=easy",), "mappo", total_steps=512, num_envs=4,
                num_steps=32, eval_episodes=8)  # fmt: skip
    first, curve = train(args, log=lambda _: None)
    second, again = train(args, log=lambda _: None)
    assert curve == again
    assert evaluate(sampled(first, 1), args) == evaluate(sampled(second, 1), args)


def test_the_benchmark_writes_its_table_and_resumes(tmp_path: Path) -> None:
    """One env, one seed, a short budget: every run file, the table with the baselines on the
    same seeds, the curve figure; run again, it trains nothing."""
    out = tmp_path / "marl"
    kwargs = {"env_ids": ["keydoor-v0"], "seeds": (0,), "total_steps": 1024, "eval_episodes": 8}
    lines: list[str] = []
    summary = run_marl(out, log=lines.append, **kwargs)
    assert len(lines) == 4  # ippo and mappo on the easy preset and the default
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert (
        "keydoor-v0[difficulty=easy].mappo.seed0.json" in runs and "keydoor-v0.expert.json" in runs
    )
    table = (out / "results.md").read_text()
    assert "| `keydoor-v0[difficulty=easy]` | " in table and "keydoor-v0` expert: subtasks" in table
    assert "| 100% · 1.00 |" in table  # the expert: success and score
    expert = json.loads((out / "runs" / "keydoor-v0.expert.json").read_text())
    assert expert["success_rate"] == 1.0 and expert["roles"]["robot_0"] == {"holder": 8}
    assert (
        summary["figures"] == ["curves-keydoor-v0.png"]
        and (out / "curves-keydoor-v0.png").is_file()
    )
    lines.clear()
    run_marl(out, log=lines.append, **kwargs)
    assert lines == []
    # one sharing per directory, checked before anything trains (another seed would not
    # meet an existing run file)
    with pytest.raises(RunSettingsError, match="reward sharing 0.0, this run asks for 1.0"):
        run_marl(out, log=lines.append, sharing=1.0, **{**kwargs, "seeds": (5,)})
    assert not list((out / "runs").glob("*seed5*")) and lines == []
    assert json.loads((out / "summary.json").read_text())["sharing"] == 0.0


def test_shared_rewards_are_what_the_learners_train_on() -> None:
    """``Args.sharing``: each agent trains on RewardSharing's mix of its reward and the team's;
    the episode records (and so every evaluation) keep the env's own rewards."""
    from teamgym.envs.sharing import RewardSharing

    own = Episodes(Args("publicgoods-v0", ("difficulty=easy",)), 1)
    shared = Episodes(Args("publicgoods-v0", ("difficulty=easy",), sharing=0.5), 1)
    for run in (own, shared):
        run.reset(0, 7)
    differ = False
    while True:  # robot_0 takes its last legal action (gives all), the others their first (keep)
        legal = [own.obs[0][a]["action_mask"].nonzero()[0] for a in own.agents]
        actions = [int(legal[0][-1])] + [int(ok[0]) for ok in legal[1:]]
        r_own, ended = own.step(0, actions)
        differ |= r_own[0] != r_own[1]
        r_shared, _ = shared.step(0, actions)
        expected = RewardSharing(weight=0.5)(dict(zip(own.agents, r_own, strict=True)))
        assert r_shared == pytest.approx([expected[a] for a in own.agents])
        if ended:
            break
    assert differ, "the giver and the keepers earn differently"
    assert own.finished == shared.finished  # the records are the env's, whatever is trained
    from teamgym.benchmarks.marl.bench import markdown

    assert "shared with weight 0.5" in markdown({"sharing": 0.5, "rows": []})  # the table says
    assert "shared" not in markdown({"sharing": 0.0, "rows": []})


def test_learn_bench_marl_cli(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "learn-bench", "marl", "--env", "signal-v1", "--steps",
         "512", "--out", str(tmp_path / "m"), "--quiet"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| `signal-v1` | " in proc.stdout and "curves-signal-v1.png" in proc.stdout
    for stage, weight in (("team", "1"), ("marl", "1.5")):  # marl only; a weight in [0, 1]
        proc = subprocess.run(
            [sys.executable, "-m", "teamgym", "learn-bench", stage, "--sharing", weight,
             "--out", str(tmp_path / "x")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and "sharing" in proc.stdout + proc.stderr, proc.stdout
    assert not (tmp_path / "x").exists()


def test_ippo_beats_random_after_a_short_run() -> None:
    """16k env steps on foraging-v1 easy (the full runs take 100k): far from converged, already
    well above the random policy on the same held-out seeds (the CleanRL-style loop learns)."""
    from teamgym.benchmarks.marl.bench import Setting, scripted

    args = Args("foraging-v1", ("difficulty=easy",), "ippo", seed=1, total_steps=16_384,
                eval_episodes=50)  # fmt: skip
    agent, _ = train(args, log=lambda _: None)
    learned = evaluate(sampled(agent, 1), args)
    random = scripted(Setting("foraging-v1", ("difficulty=easy",)), "random", 50)
    assert learned["team_return"] > random["team_return"] + 0.15, (learned, random)


def test_the_module_cli_reads_every_args_field() -> None:
    """``python -m teamgym.benchmarks.marl.ppo``'s flags: one per ``Args`` field, the sharing
    weight range-checked as a usage error."""
    from teamgym.benchmarks.marl.cli import parse

    args = parse(["--env", "keydoor-v0", "--env-args", "difficulty=easy", "--algo", "mappo",
                  "--sharing", "0.5", "--total-steps", "512"])  # fmt: skip
    assert args == Args("keydoor-v0", ("difficulty=easy",), "mappo", total_steps=512, sharing=0.5)
    with pytest.raises(SystemExit):
        parse(["--sharing", "1.5"])
