"""The CPU GRPO trainer: VERL's data path and algorithms with a local model; metrics, plots,
checkpoints and resume after SIGKILL, the rollback guard, Prometheus over loopback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("verl")

from teamgym.adapters.cpu.trainer import TrainArgs, train
from teamgym.envs.baselines import make_baseline

SMALL = {"num_rounds": 1, "speaker": "fixed", "num_candidates": 3}


def _args(model_dir: Path, out: Path, **kw) -> TrainArgs:
    base = TrainArgs(
        model=str(model_dir),
        out=str(out),
        env_kwargs=SMALL,
        teammates={"robot_0": "expert"},
        steps=2,
        episodes_per_step=2,
        group_size=2,
        eval_every=0,
        warmup_steps=0,
        max_reply_tokens=8,
    )
    return replace(base, **kw)


def _train_cmd(
    model_dir: Path, out: Path, steps: int, per_step: int, group: int, teammate: str = ""
) -> list[str]:
    """``teamgym train`` as a user runs it: no warm-up or evaluation, short replies."""
    return [
        *(sys.executable, "-m", "teamgym", "train", "--model", str(model_dir), "--out", str(out)),
        *("--steps", str(steps), "--episodes-per-step", str(per_step), "--group-size", str(group)),
        *(("--teammate", teammate) if teammate else ()),
        *("--eval-every", "0", "--warmup-steps", "0", "--max-reply-tokens", "8", "--quiet"),
        *[a for k, v in SMALL.items() for a in ("--env-arg", f"{k}={v}")],
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_changed_settings_compare_what_the_settings_mean(tmp_path) -> None:
    """A field an older ``args.json`` lacks counts as its default; paths under the run's parent
    (a stage's phases point at each other) compare relative to it, so a moved stage resumes,
    while a model elsewhere is compared where it is; free settings never count."""
    from dataclasses import asdict

    from teamgym.adapters.cpu.resume import changed_settings

    def phase(root: Path, **kw) -> dict:
        policy = root / "listener" / "policy"
        args = TrainArgs(
            model=str(policy),
            out=str(root / "both"),
            warmup_teachers={"robot_1": f"checkpoint:{policy}"},
        )
        return asdict(replace(args, **kw))

    saved = phase(tmp_path / "a")
    assert changed_settings(saved, phase(tmp_path / "b", steps=99)) == {}  # moved, longer
    older = {k: v for k, v in saved.items() if k != "entropy_coef"}  # an older release's file
    assert changed_settings(older, saved) == {}
    assert changed_settings(older, {**saved, "entropy_coef": 0.1}) == {"entropy_coef": (0.0, 0.1)}
    elsewhere = {**saved, "model": str(tmp_path / "models" / "other")}
    assert list(changed_settings(saved, elsewhere)) == ["model"]
    other_teacher = phase(tmp_path / "a", warmup_teachers={"robot_1": "expert"})
    assert list(changed_settings(saved, other_teacher)) == ["warmup_teachers"]


def test_training_steps_write_metrics_checkpoints_and_a_curve(model_dir, tmp_path) -> None:
    out = tmp_path / "run"
    history = train(
        _args(model_dir, out, eval_every=2, eval_episodes=6, entropy_coef=0.01), progress=False
    )
    assert [h["step"] for h in history] == [1, 2]
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert lines == history
    for key in (
        "success",
        "reward",
        "kl",
        "entropy",
        "loss",
        "episodes_per_s",
        "collaboration_index",
        "groups_with_signal",
    ):
        assert key in lines[0]
    assert 0.0 <= lines[0]["groups_with_signal"] <= 1.0
    assert lines[0]["kl"] == pytest.approx(0.0, abs=1e-6), (
        "the policy starts equal to its reference"
    )
    assert lines[1]["kl"] > 0.0, "one update moved it"
    assert "eval_success" in lines[1]
    # no warm-up: the start model's held-out figures are the curve's step 0, on the same
    # held-out episodes as the steps' evaluations
    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.rollout import evaluate_metrics
    from teamgym.envs.seeds import HELD_OUT_SET

    start = json.loads((out / "start.json").read_text())
    args = _args(model_dir, out, eval_every=2, eval_episodes=6)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert start["eval"] == evaluate_metrics(
        str(model_dir), tokenizer, args.evaluation, seed=HELD_OUT_SET
    )
    assert start["eval_success"] == start["eval"]["success"]
    # the seeds' figure takes a `teamgym train` directory: its curve starts at start.json
    import importlib.util

    script = Path(__file__).parents[2] / "scripts" / "plot_learn_seeds.py"
    spec = importlib.util.spec_from_file_location("plot_learn_seeds", script)
    assert spec is not None and spec.loader is not None
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    xs, ys, steps, _, _ = plot.curve(out)
    assert ys == [start["eval_success"], lines[1]["eval_success"]] and steps == [1, 2]
    assert xs[1] == pytest.approx(lines[0]["seconds"] + lines[1]["seconds"])
    assert plot.run_summary(out)["variant"] == "one model"  # the legend: not --policy
    plot.main(str(tmp_path / "seeds.png"), [str(out)])
    assert (tmp_path / "seeds.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "checkpoints" / "latest.pt").exists() and (
        out / "checkpoints" / "stable.pt"
    ).exists()
    # the final policy is a model directory: a frozen teammate for later runs
    mate = make_baseline("signal-v0", f"checkpoint:{out / 'policy'}")
    assert mate.chat_model.model.config.num_hidden_layers >= 1
    with pytest.raises(FileExistsError, match="--resume"):
        train(_args(model_dir, out), progress=False)


def test_a_resume_under_other_settings_is_refused(model_dir, tmp_path, capsys) -> None:
    """Resuming mixes two experiments under one name unless the settings match: only the
    length (``steps``) and where metrics go may change; the refusal names what differs, at
    the command line too (``error:``, status 2), and touches nothing."""
    from teamgym import cli
    from teamgym.adapters.cpu.resume import RunSettingsError
    from teamgym.adapters.cpu.run_state import RunDir

    out = tmp_path / "run"
    first = _args(model_dir, out)
    RunDir(out).start(first)
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    saved = (out / "args.json").read_text()
    RunDir(out).start(replace(first, resume=True, steps=9, metrics_port=9999))  # allowed
    moved = tmp_path / "moved"  # a run moved elsewhere is the same run
    shutil.copytree(out, moved)
    RunDir(moved).start(replace(first, out=str(moved), resume=True, steps=9))
    with pytest.raises(RunSettingsError, match=r"lr: 0.0003 -> 0.01; seed: 0 -> 1"):
        RunDir(out).start(replace(first, resume=True, lr=1e-2, seed=1))
    with pytest.raises(RunSettingsError, match="warmup_steps"):
        RunDir(out).start(replace(first, resume=True, warmup_steps=400))
    # killed before its first step: no metrics, but a warm-up model a fresh start would reuse
    early = tmp_path / "early"
    RunDir(early).start(replace(first, out=str(early)))
    (early / "warmup_model").mkdir()
    (early / "warmup_model" / "config.json").write_text("{}")
    RunDir(early).start(replace(first, out=str(early)))  # the same settings: fine
    with pytest.raises(RunSettingsError, match=r"lr: 0.0003 -> 0.01\)"):
        RunDir(early).start(replace(first, out=str(early), lr=1e-2))
    argv = _train_cmd(model_dir, out, steps=2, per_step=2, group=2, teammate="robot_0=expert")
    capsys.readouterr()
    assert cli.main([*argv[3:], "--resume", "--lr", "0.01"]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "error:" in printed and "other settings (lr: 0.0003 -> 0.01);" in printed, printed
    assert json.loads((out / "args.json").read_text())["steps"] == 9
    assert json.loads(saved)["lr"] == json.loads((out / "args.json").read_text())["lr"]


def test_guard_rolls_back_and_lowers_the_learning_rate(model_dir, tmp_path) -> None:
    history = train(
        _args(
            model_dir,
            tmp_path / "g",
            steps=3,
            kl_limit=0.0,
            guard_patience=1,
            lr=1e-3,
            entropy_coef=0.05,
        ),
        progress=False,
    )
    assert "guard" not in history[0]
    assert "rolled back to the stable checkpoint" in history[1]["guard"]
    assert history[2]["lr"] == pytest.approx(history[0]["lr"] / 2)
    # step 1's record measured the start weights, so those are what step 2 restored: step 3
    # starts from the reference again
    assert history[2]["kl"] == pytest.approx(0.0, abs=1e-6), history[2]["kl"]


def test_guard_patience_zero_turns_the_guard_off(model_dir, tmp_path) -> None:
    history = train(
        _args(model_dir, tmp_path / "off", steps=3, kl_limit=0.0, guard_patience=0, lr=1e-3),
        progress=False,
    )
    # every step is above the limit, yet nothing is restored and the rate stays
    assert all("guard" not in h for h in history)
    assert [h["lr"] for h in history] == [1e-3] * 3
    assert history[2]["kl"] > 0.0
    assert not (tmp_path / "off" / "start.json").exists()  # no evaluation asked, none run


def test_sigkill_then_resume_loses_no_finished_step(model_dir, tmp_path) -> None:
    out = tmp_path / "killed"
    cmd = _train_cmd(model_dir, out, steps=5, per_step=2, group=2, teammate="robot_0=expert")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    metrics = out / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and (
        not metrics.exists() or len(metrics.read_text().splitlines()) < 2
    ):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = [json.loads(x)["step"] for x in metrics.read_text().splitlines()]
    assert len(done_before) >= 2
    subprocess.run([*cmd, "--resume"], check=True, timeout=600, capture_output=True)
    steps = [json.loads(x)["step"] for x in metrics.read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5], f"steps after resume: {steps}"


def test_same_seed_same_run_across_processes(model_dir, tmp_path) -> None:
    """Two processes, same arguments: the same rollouts, metrics and weights, byte for byte
    (VERL tokenises prompts on a thread pool, so loops start in any order; each copy's
    session number, given in row order, keeps pairings and sampling streams fixed)."""
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        cmd = _train_cmd(model_dir, out, steps=1, per_step=16, group=8)
        subprocess.run(cmd, check=True, timeout=600, capture_output=True)
        lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        for line in lines:
            for timing in ("seconds", "cpu_seconds", "episodes_per_s"):
                line.pop(timing)
        runs.append((lines, (out / "policy" / "model.safetensors").read_bytes()))
    assert runs[0][0] == runs[1][0]
    assert runs[0][1] == runs[1][1]
    # and the run learned something from its rollouts (the weights moved)
    assert runs[0][1] != (Path(model_dir) / "model.safetensors").read_bytes()


def test_prometheus_endpoint_matches_metrics_jsonl(model_dir, tmp_path) -> None:
    port = _free_port()
    out = tmp_path / "prom"
    train(_args(model_dir, out, metrics_port=port), progress=False)
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {
        line.split()[0]: float(line.split()[1])
        for line in body.splitlines()
        if line.startswith("teamgym_")
    }
    assert values["teamgym_step"] == last["step"]
    assert values["teamgym_success"] == pytest.approx(last["success"])
    assert values["teamgym_kl"] == pytest.approx(last["kl"])
    assert values["teamgym_collaboration_index"] == pytest.approx(last["collaboration_index"])
    assert values["teamgym_invalid_action_rate"] == pytest.approx(last["invalid_action_rate"])


def test_format_warmup_teaches_the_format_not_the_strategy(model_dir, tmp_path) -> None:
    out = tmp_path / "warm"
    train(_args(model_dir, out, steps=1, warmup_steps=60, eval_episodes=48), progress=False)
    info = json.loads((out / "warmup.json").read_text())
    assert info["last_loss"] < info["first_loss"] / 2, "the reply format was learned"
    chance = 1 / SMALL["num_candidates"]
    assert info["eval_success"] <= chance + 4 * (chance * (1 - chance) / 48) ** 0.5, (
        "no strategy was learned"
    )
    assert (out / "warmup_model" / "config.json").exists()


def test_warmup_scores_the_prompts_only_when_asked(model_dir, tokenizer, tmp_path, capsys) -> None:
    """``warmup_prompts`` labels every token of an example (language-model pretraining on the
    env's text), otherwise only the reply; ``warmup_episodes`` sets how many episodes the
    teacher plays (one choice per episode here), and the warm-up learns from what it scores,
    its progress bar showing the loss."""
    import torch

    from teamgym.adapters.cpu.warmup import _padded_batch, format_warmup, warmup_examples

    args = _args(model_dir, tmp_path)
    examples = warmup_examples(args.warmup, tokenizer, episodes=3)
    replies = _padded_batch(examples, tokenizer.pad_token_id)
    everything = _padded_batch(examples, tokenizer.pad_token_id, prompts=True)
    for b, (ids, n_reply) in enumerate(examples):
        assert int((replies["labels"][b] != -100).sum()) == n_reply
        assert everything["labels"][b, : len(ids)].tolist() == ids
        assert (everything["labels"][b, len(ids) :] == -100).all()  # padding is never scored
    assert torch.equal(replies["input_ids"], everything["input_ids"])

    warmup = replace(
        args, warmup_steps=20, warmup_lr=3e-3, warmup_episodes=5, warmup_prompts=True
    ).warmup
    info = format_warmup(warmup, tmp_path / "lm", progress=True, label="team")
    assert info["examples"] == 5
    assert info["last_loss"] < 0.75 * info["first_loss"], "the env's text was learned"
    drawn = capsys.readouterr().out
    assert "warm-up team loss" in drawn, drawn


@pytest.mark.parametrize("teacher", ["random", "expert"])
def test_warmup_examples_are_the_teachers_replies_in_the_agent_loop_chat(
    model_dir, tokenizer, teacher
) -> None:
    """Each example is the trained agent's chat so far (rendered as the agent loop renders it)
    followed by the teacher's reply and EOS; the expert teacher makes it behaviour cloning."""
    from teamgym.adapters.cpu.trainer import warmup_examples
    from teamgym.envs import make
    from teamgym.envs.baselines import make_baseline

    args = _args(model_dir, model_dir, env_kwargs={**SMALL, "num_rounds": 2}, warmup_policy=teacher)
    examples = warmup_examples(args.warmup, tokenizer, episodes=6)
    # the listener's turns with a choice: 2 rounds x pick (its waits are forced moves)
    assert len(examples) == 6 * 2
    env = make("signal-v0", **args.env_kwargs)
    speaker, listener = make_baseline("signal-v0", "expert"), make_baseline("signal-v0", teacher)
    k, right = 0, 0
    for seed in range(6):
        obs, infos = env.reset(seed=seed)
        listener.reset(seed)
        chat = [{"role": "system", "content": infos["robot_1"]["instructions"]}]
        while env.agents:
            reply = listener.act("robot_1", obs["robot_1"], infos["robot_1"])
            chat.append({"role": "user", "content": obs["robot_1"]})
            if len(infos["robot_1"]["valid_actions"]) > 1:
                ids, n_reply = examples[k]
                prompt = tokenizer.apply_chat_template(
                    chat, add_generation_prompt=True, tokenize=False
                )
                full = tokenizer.encode(prompt, add_special_tokens=False)
                assert ids[:-n_reply] == full[-args.prompt_length :]  # cut on the left, like VERL
                assert ids[-1] == tokenizer.eos_token_id
                assert tokenizer.decode(ids[-n_reply:-1]) == reply
                k += 1
            chat.append({"role": "assistant", "content": reply})
            obs, rewards, _, _, new = env.step(
                {
                    "robot_0": speaker.act("robot_0", obs["robot_0"], infos["robot_0"]),
                    "robot_1": reply,
                }
            )
            infos.update(new)
            right += int(rewards.get("robot_1", 0.0) == 1.0)
    if teacher == "expert":  # behaviour cloning: every pick in the examples is right
        assert right == 6 * 2
    else:
        assert right < 6 * 2


def test_warmup_teachers_play_their_agents_and_the_teacher_the_others(model_dir, tokenizer) -> None:
    """With both agents trained, ``warmup_teachers`` gives the listener its own teacher (here
    the expert, which follows the message) while ``warmup_policy`` (the babbler) speaks: every
    listener example picks exactly what the babbler's example before it said."""
    import re

    from teamgym.adapters.cpu.warmup import warmup_examples

    args = _args(
        model_dir,
        model_dir,
        env_kwargs={**SMALL, "pick_by": "name", "num_attributes": 1},
        teammates={},
        warmup_teachers={"robot_1": "expert"},
        warmup_policy="babbler",
    )
    examples = warmup_examples(args.warmup, tokenizer, episodes=8)
    replies = [tokenizer.decode(ids[-n:-1]) for ids, n in examples]
    assert len(replies) == 8 * 2  # the speaker's say, then the listener's pick
    said = [re.fullmatch(r"<say>(.+)</say><action>say</action>", r) for r in replies[0::2]]
    assert all(said), replies[0::2]
    assert replies[1::2] == [f"<action>pick {m.group(1)}</action>" for m in said if m]
    babbled = {m.group(1) for m in said if m}
    assert len(babbled) > 1, "the babbler names more than one object"


def test_a_checkpoint_teacher_replays_replies_as_rollouts_end(
    model_dir, tokenizer, monkeypatch
) -> None:
    """A ``checkpoint:`` warm-up teacher answers under the trainer's rules: with
    ``args.max_reply_tokens``, cut after ``</action>``, and its forced ``wait`` turn is the
    forced move, not a model reply (the model is asked for the pick only). The model is a
    stand-in that writes on past its command, as the listener stage's policy does."""
    from teamgym.adapters.agents import chat
    from teamgym.adapters.cpu.warmup import warmup_examples

    asked: list[tuple[list[dict[str, str]], int]] = []

    class RunsOn:  # stands in for ChatModel.complete: the command, then a tail
        def complete(self, messages, *, max_tokens, max_prompt_tokens):
            asked.append((list(messages), max_tokens))
            return chat.Completion("<action>pick 1</action>pick 1 pick", 9, max_tokens, "length")

    monkeypatch.setattr(chat, "load_chat_model", lambda path: RunsOn())
    args = _args(
        model_dir,
        model_dir,
        env_kwargs={**SMALL, "pick_by": "name", "num_attributes": 1},
        teammates={},
        max_reply_tokens=12,
        warmup_teachers={"robot_1": "checkpoint:/stand-in"},
        warmup_policy="babbler",
    )
    examples = warmup_examples(args.warmup, tokenizer, episodes=5)
    replies = [tokenizer.decode(ids[-n:-1]) for ids, n in examples]
    assert replies[1::2] == ["<action>pick 1</action>"] * 5, replies
    assert len(asked) == 5, "the model answers the pick turns only"
    for messages, max_tokens in asked:
        assert max_tokens == 12
        # system, the wait turn and its forced move, then the pick turn
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert messages[2]["content"] == "<action>wait</action>"


@pytest.mark.parametrize(("epochs", "mini_batches"), [(1, 1), (2, 3)])
def test_grpo_update_raises_rewarded_replies_and_lowers_the_others(
    model_dir, tmp_path, epochs, mini_batches
) -> None:
    """The update's sign and token alignment: after a few updates on one batch, replies with a
    positive GRPO advantage are more likely under the policy, those with a negative one less
    (with mini-batches, whose advantages need not balance, more likely than those); each pass
    takes one optimiser step per mini-batch."""
    import asyncio
    import copy

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.trainer.ppo import core_algos
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.cpu.grpo import Learner, grpo_update, response_logprobs
    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker
    from teamgym.envs.baselines import RandomPolicy

    args = _args(model_dir, tmp_path / "u", max_reply_tokens=16)
    (tmp_path / "u").mkdir()
    cfg = compose_config(args.rollout, tmp_path / "u", args.update)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    worker = AgentLoopWorker(cfg, ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=3))))
    batch = build_batch(args.rollout, list(range(6)), "train", 6)
    out = asyncio.run(worker.generate_sequences(batch))
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        out.batch["rm_scores"], out.batch["response_mask"], out.non_tensor_batch["uid"]
    )
    row_adv = adv.sum(-1) / out.batch["response_mask"].sum(-1)
    assert (row_adv > 0).any() and (row_adv < 0).any(), "the batch needs both kinds of rows"

    policy = AutoModelForCausalLM.from_pretrained(model_dir)
    reference = copy.deepcopy(policy).requires_grad_(False)
    optim = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    actor_cfg = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    mask = out.batch["response_mask"].float()

    def seq_logp() -> torch.Tensor:
        with torch.no_grad():
            logp, _ = response_logprobs(policy, out)
        return (logp * mask).sum(-1)

    steps = 0
    original_step = optim.step

    def counted_step(*a, **k):
        nonlocal steps
        steps += 1
        return original_step(*a, **k)

    optim.step = counted_step
    before = seq_logp()
    updates = 5 if epochs == 1 else 2
    learner = Learner(policy, reference, optim, actor_cfg)
    settings = replace(
        args, kl_coef=0.0, entropy_coef=0.0, ppo_epochs=epochs, mini_batches=mini_batches
    )
    for k in range(updates):
        grpo_update(learner, out, settings.update, seed=k)
    assert steps == updates * epochs * mini_batches
    change = seq_logp() - before
    # the surrogate GRPO raises: advantage-weighted log-likelihood of the batch's replies
    assert float((row_adv * change).sum()) > 0
    if mini_batches == 1:  # one step on the whole batch: the advantages balance over shared tokens
        assert change[row_adv > 0].mean() > 0, "rewarded replies did not become more likely"
        assert change[row_adv < 0].mean() < 0, "penalised replies did not become less likely"


def test_micro_batches_accumulate_the_whole_batch_gradient(model_dir, tmp_path) -> None:
    """``micro_batch`` changes memory, not the update: micro-batches of 1 and 5 trajectories
    (of 24, uneven token counts) give the weights one pass over the batch gives, and the same
    loss, KL and entropy, to float32 rounding (each term is the batch's token mean)."""
    import asyncio
    import copy

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.cpu.grpo import Learner, grpo_update
    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker
    from teamgym.envs.baselines import RandomPolicy

    args = _args(model_dir, tmp_path, max_reply_tokens=16, kl_coef=0.1, entropy_coef=0.01)
    cfg = compose_config(args.rollout, tmp_path, args.update)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    pick = policy_reply(RandomPolicy(seed=5))
    count = iter(range(10**6))

    def reply(prompt: str) -> str:  # a thought of 0 to 3 words first: uneven lengths
        return " ".join(["hm"] * (next(count) % 4)) + pick(prompt)

    worker = AgentLoopWorker(cfg, ScriptedServer(tokenizer, reply))
    out = asyncio.run(
        worker.generate_sequences(build_batch(args.rollout, [0, 1, 2, 3], "train", 6))
    )
    tokens = out.batch["response_mask"].sum(-1)
    assert len(out) == 24 and len(set(tokens.tolist())) > 1, "uneven trajectories wanted"
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    reference = copy.deepcopy(base).requires_grad_(False)
    next(reference.parameters()).data.mul_(1.01)  # a KL term that is not zero

    def updated(micro: int) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        policy = copy.deepcopy(base)
        optim = torch.optim.SGD(policy.parameters(), lr=0.5)  # the step is the gradient itself
        actor_cfg = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
        learner = Learner(policy, reference, optim, actor_cfg)
        losses = grpo_update(learner, out, replace(args, micro_batch=micro).update)
        return {k: v.detach().clone() for k, v in policy.state_dict().items()}, losses

    whole, whole_losses = updated(24)
    moved = sum(float((whole[k] - v).abs().sum()) for k, v in base.state_dict().items())
    assert moved > 0
    for micro in (1, 5):
        weights, losses = updated(micro)
        assert losses == pytest.approx(whole_losses, rel=1e-4, abs=1e-6), micro
        for k in whole:
            torch.testing.assert_close(weights[k], whole[k], rtol=1e-4, atol=1e-6)


def test_learning_rate_ramps_from_zero_like_verl(model_dir, tmp_path) -> None:
    """``lr_warmup_steps`` ramps the rate linearly over optimiser steps as VERL's constant
    schedule with warm-up does: the first step fills Adam's moments and moves no weight, the
    next moves them, and past the ramp the rate is ``lr`` (the guard's halved rate included)."""
    import asyncio

    import torch
    from transformers import AutoTokenizer
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.cpu.grpo import grpo_update, load_learner, warmup_factor
    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import LocalModelServer
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker

    assert [warmup_factor(k, 4) for k in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert warmup_factor(0, 0) == 1.0

    args = _args(model_dir, tmp_path, lr=1e-3, lr_warmup_steps=3, mini_batches=2, kl_coef=0.0)
    cfg = compose_config(args.rollout, tmp_path, args.update)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    actor_cfg = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    learner = load_learner(str(model_dir), args.update, actor_cfg, args.seed)
    worker = AgentLoopWorker(cfg, LocalModelServer(learner.policy, tokenizer, seed=0))
    out = asyncio.run(
        worker.generate_sequences(build_batch(args.rollout, [0, 1, 2, 3], "train", 4))
    )
    lrs: list[float] = []
    original = learner.optim.step

    def recorded(*a, **k):
        lrs.append(learner.optim.param_groups[0]["lr"])
        return original(*a, **k)

    learner.optim.step = recorded
    start = {k: v.clone() for k, v in learner.policy.state_dict().items()}
    grpo_update(learner, out, args.update, step=1, lr=args.lr)  # optimiser steps 0, 1 of the ramp
    assert lrs == pytest.approx([0.0, 1e-3 / 3])
    grpo_update(learner, out, args.update, step=2, lr=5e-4)  # steps 2 and 3, the guard halved it
    assert lrs[2:] == pytest.approx([5e-4 * 2 / 3, 5e-4])

    learner.policy.load_state_dict(start)
    learner.optim = torch.optim.AdamW(learner.policy.parameters(), lr=args.lr)
    grpo_update(learner, out, replace(args, mini_batches=1).update, step=1)  # one step, at rate 0
    after = learner.policy.state_dict()
    assert all(torch.equal(start[k], after[k]) for k in start), "a step at rate 0 moved weights"
    assert learner.optim.state, "Adam's moments were filled"


@pytest.mark.parametrize("window", [None, 8])
def test_trimmed_logprobs_equal_the_full_padded_forward(
    model_dir, tokenizer, tmp_path, window
) -> None:
    """Padding columns are cut, and with sliding-window attention (2 layers x 8 tokens) so
    is every prompt token beyond the receptive field: the log-probs are unchanged."""
    import asyncio

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.utils.torch_functional import logprobs_from_logits

    from teamgym.adapters.cpu.grpo import response_logprobs
    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker
    from teamgym.envs.baselines import RandomPolicy

    args = _args(model_dir, tmp_path / "t")
    (tmp_path / "t").mkdir()
    cfg = compose_config(args.rollout, tmp_path / "t")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    worker = AgentLoopWorker(cfg, ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=1))))
    out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [1, 2, 3], "train", 2)))
    if window is None:
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    else:
        from teamgym.adapters.agents.local_model import LocalModelConfig, build_model
        from teamgym.adapters.cpu.grpo import receptive_field

        model = build_model(LocalModelConfig(sliding_window=window), tokenizer).eval()
        assert receptive_field(model.config) == 2 * window
    with torch.no_grad():
        trimmed, _ = response_logprobs(model, out)
        b = out.batch
        r = b["responses"].shape[1]
        logits = model(
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            position_ids=b["position_ids"],
        ).logits
        full = logprobs_from_logits(
            logits[:, -r - 1 : -1].float(), b["responses"], inplace_backward=False
        )
    mask = b["response_mask"].bool()
    assert torch.allclose(trimmed[mask], full[mask], atol=1e-4)


def test_a_groups_copies_run_their_shared_prompt_once_with_the_same_logprobs_and_gradients(
    model_dir, tmp_path
) -> None:
    """``response_logprobs`` runs each distinct prompt of a micro-batch once (a GRPO group's
    copies share their first prompt), then the responses on its keys and values: the log-probs,
    the entropy and the gradients of a loss on them equal the one-forward-per-row pass's."""
    import asyncio

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from teamgym.adapters.cpu.grpo import by_prompt, prompt_owners, response_logprobs
    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker as AgentLoopWorker
    from teamgym.envs.baselines import RandomPolicy

    args = _args(model_dir, tmp_path / "s")
    (tmp_path / "s").mkdir()
    cfg = compose_config(args.rollout, tmp_path / "s")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    worker = AgentLoopWorker(cfg, ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=4))))
    out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [5, 6], "train", 3)))
    unique, owner = prompt_owners(out)
    assert 1 < len(unique) < len(out), "copies of two episodes share their prompts"
    order = by_prompt(out)
    assert sorted(order.tolist()) == list(range(len(out)))
    assert owner[order].diff().ge(0).all(), "by_prompt puts each prompt's rows side by side"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompt_rows: list[int] = []
    hook = model.model.embed_tokens.register_forward_hook(
        lambda _m, inputs, _o: prompt_rows.append(inputs[0].shape[0])
    )
    mask = out.batch["response_mask"].bool()
    results = {}
    for share in (False, True):
        model.zero_grad()
        prompt_rows.clear()
        logp, entropy = response_logprobs(model, out, with_entropy=True, share_prompts=share)
        (logp[mask].sum() + entropy[mask].sum()).backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results[share] = (logp[mask].detach(), entropy[mask].detach(), grads, list(prompt_rows))
    hook.remove()
    assert results[False][3] == [len(out)]  # one pass, every row with its own prompt
    assert results[True][3] == [len(unique), len(out)]  # the prompts once, then the responses
    for a, b in zip(results[False][:3], results[True][:3], strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), float((a - b).abs().max())


def test_too_short_prompt_length_is_refused(model_dir, tmp_path) -> None:
    with pytest.raises(ValueError, match="prompt_length=64 is shorter than the first turn"):
        train(_args(model_dir, tmp_path / "short", prompt_length=64), progress=False)


def test_groups_with_signal_counts_groups_whose_returns_differ() -> None:
    import numpy as np
    import torch
    from verl.protocol import DataProto

    from teamgym.adapters.cpu.rollout import groups_with_signal

    scores = torch.zeros(6, 3)
    scores[0, 2], scores[2, 1], scores[3, 1] = 1.0, 1.0, 1.0  # group a differs; b and c do not
    out = DataProto.from_dict(
        tensors={"rm_scores": scores},
        non_tensors={"uid": np.array(["a", "a", "b", "b", "c", "c"], dtype=object)},
    )
    assert groups_with_signal(out) == pytest.approx(1 / 3)


def test_partners_play_their_seats_and_evaluations_report_cross_play(model_dir, tmp_path) -> None:
    """``teamgym train --partner expert --partner babbler --partner-seat robot_0
    --eval-partner palette-babbler``: each episode's rows train robot_1 only, with the partner
    the pool picks for the seed; the warm-up seats the same partners; every evaluation reports
    success per training partner, cross-play with the held-out partner, and their gap."""
    from teamgym.adapters.cpu.rollout import build_batch
    from teamgym.envs.partners import PartnerPool

    out = tmp_path / "run"
    args = _args(
        model_dir,
        out,
        teammates={},
        partners=["expert", "babbler"],
        partner_seats=["robot_0"],
        eval_partners=["palette-babbler"],
        steps=1,
        eval_every=1,
        eval_episodes=8,
        warmup_steps=2,
    )
    pool = PartnerPool.parse(["expert", "babbler"], ["robot_0"])
    batch = build_batch(args.rollout, list(range(8)), "train", 2)
    infos = list(batch.non_tensor_batch["extra_info"])
    assert {tuple(json.loads(i["agents"])) for i in infos} == {("robot_1",)}
    assert [i["partner"] for i in infos] == [pool.pick(i["seed"]) for i in infos]
    assert {i["partner"] for i in infos} == {"expert", "babbler"}
    (record,) = train(args, progress=False)
    for key in ("eval_success", "eval_crossplay_success", "success/expert", "success/babbler"):
        assert any(k.endswith(key) for k in record), (key, sorted(record))
    assert record["eval_crossplay_gap"] == pytest.approx(
        record["eval_success"] - record["eval_crossplay_success"]
    )
    warmup = json.loads((out / "warmup.json").read_text())
    assert "crossplay_success" in warmup["eval"] and "crossplay_gap" in warmup["eval"]


def test_the_batch_is_the_episode_loops_one_group_per_agent_and_episode(
    model_dir, tmp_path
) -> None:
    """The trainer plays episode rows through the episode loop (the loop ``main_ppo`` runs):
    each copy of an episode yields one trajectory per trained agent, stored under the uid
    verl's v1 worker gives it (``U_k``: the row's UUID, named by its episode, and the seat),
    listed episode by episode, seat by seat, copy by copy; ``grpo`` groups an agent's copies,
    ``team_grpo`` the episode's."""
    import asyncio
    import uuid

    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.rollout import build_batch, compose_config, local_server
    from teamgym.adapters.verl.estimators import team_keys
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    args = _args(model_dir, tmp_path / "run", teammates={})
    batch = build_batch(args.rollout, [4, 9], "train", 3)
    assert list(batch.non_tensor_batch["agent_name"]) == ["teamgym_episode"] * 6
    assert list(batch.non_tensor_batch["session_id"]) == [0, 1, 2] * 2
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    worker = TeamAgentLoopWorker(
        compose_config(args.rollout, tmp_path, args.update), local_server(model_dir, tokenizer, 0)
    )
    out = asyncio.run(worker.generate_sequences(batch))
    uids = [str(u) for u in out.non_tensor_batch["uid"]]
    rows = list(dict.fromkeys(str(u) for u in batch.non_tensor_batch["uid"]))
    assert uids == [f"{r}_{seat}" for r in rows for seat in (0, 1) for _ in range(3)]
    assert all(uuid.UUID(r).version == 5 for r in rows)  # named by the episode: reruns agree
    assert list(team_keys(out.non_tensor_batch["uid"])) == [r for r in rows for _ in range(6)]
    seats = [json.loads(i["agents"]) for i in out.non_tensor_batch["extra_info"]]
    assert seats == [["robot_0", "robot_1"]] * 12
    # each trajectory is its seat's: the agent its replies were written for
    assert list(out.non_tensor_batch["teamgym_agent"]) == [
        a for _ in rows for a in ("robot_0", "robot_1") for _ in range(3)
    ]
    assert int(out.batch["response_mask"].sum()) > 0


def test_an_llm_partner_served_over_http_plays_its_seat_in_training(
    model_dir, serve_process, tmp_path
) -> None:
    """``teamgym train --partner openai:MODEL@URL --partner-seat robot_0``: a frozen model behind
    a real ``teamgym serve`` on loopback plays robot_0 each turn (the episode loop asks it, as
    under ``main_ppo``); only robot_1 is trained, and its rows record the partner's turns."""
    import asyncio

    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.rollout import build_batch, compose_config, local_server
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    server = serve_process(model_dir)
    try:
        spec = f"openai:{model_dir}@{server.url}"
        args = _args(
            model_dir, tmp_path / "run", teammates={}, partners=[spec], partner_seats=["robot_0"]
        )
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        worker = TeamAgentLoopWorker(
            compose_config(args.rollout, tmp_path, args.update),
            local_server(model_dir, tokenizer, 0),
        )
        out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [1, 2], "train", 2)))
        (record,) = train(replace(args, steps=1), progress=False)
    finally:
        server.stop()
    assert list(out.non_tensor_batch["teamgym_agent"]) == ["robot_1"] * 4
    for extra in out.non_tensor_batch["reward_extra_info"]:
        assert extra["partner_replies"] >= 1 and extra["partner_latency_s"] > 0
        assert "return/robot_0" not in extra
    assert record["step"] == 1 and record["episodes_per_s"] > 0


def test_partner_flags_are_checked_before_training(tmp_path, capsys) -> None:
    """Seats without a pool, a held-out pool without seats, a seat the env lacks, an unknown
    baseline, batch sizes below 1: each an error line and status 2, nothing trained."""
    from teamgym import cli

    base = ["train", "--model", "m", "--out", str(tmp_path / "o"), "--warmup-steps", "0"]
    cases = [
        (["--eval-partner", "expert"], "--eval-partner needs --partner-seat"),
        (["--partner", "expert", "--partner-seat", "robot_7"], "'robot_7' is not an agent"),
        (["--partner", "nope", "--partner-seat", "robot_0"], "no baseline 'nope'"),
        (["--partner", "expert=-2", "--partner-seat", "robot_0"], "must be > 0"),
        (["--micro-batch", "0"], "--micro-batch must be at least 1, got 0"),
        (["--mini-batches", "-1"], "--mini-batches must be at least 1, got -1"),
    ]
    for flags, message in cases:
        assert cli.main([*base, *flags]) == 2, flags
        assert message in " ".join(capsys.readouterr().out.split()), flags
    assert not (tmp_path / "o").exists()
