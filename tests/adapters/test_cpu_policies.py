"""A model per seat (``teamgym train --policy NAME=SEAT[,SEAT...]``): each policy served on its
own seats, updated on its own seats' trajectories only, checkpointed and resumed with the
others; one policy over every seat is the shared model; bad seatings are refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("verl")

from teamgym.adapters.cpu.trainer import TrainArgs, train

SMALL = {"num_rounds": 1, "speaker": "fixed", "num_candidates": 3}
#: The signal game with both seats trained: the speaker robot_0, the listener robot_1.
SEATS = {"speaker": ["robot_0"], "listener": ["robot_1"]}


def _args(model_dir: Path, out: Path, **kw) -> TrainArgs:
    """Two steps of both seats trained, tiny budgets; an entropy bonus, so every update moves
    its policy even when no group's returns differ."""
    base = TrainArgs(
        model=str(model_dir),
        out=str(out),
        env_kwargs=SMALL,
        policy=SEATS,
        steps=2,
        episodes_per_step=2,
        group_size=2,
        lr=1e-3,
        entropy_coef=0.05,
        eval_every=0,
        warmup_steps=0,
        max_reply_tokens=8,
    )
    return replace(base, **kw)


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_two_policies_each_train_on_their_own_seats(model_dir, tmp_path) -> None:
    """Speaker and listener, each its own model: both move from the start model, apart from
    each other; each update took its seat's trajectories only (one per episode copy); the
    step line has each policy's figures under its name; the checkpoint holds both; the
    held-out evaluation seats both (``start.json`` names each seat's start)."""
    import torch

    out = tmp_path / "run"
    history = train(_args(model_dir, out, eval_every=2, eval_episodes=4), progress=False)
    assert [h["step"] for h in history] == [1, 2]
    per_seat = 2 * 2  # episodes_per_step x group_size: one trajectory a seat a copy
    for record in history:
        for name in SEATS:
            for key in ("kl", "loss", "entropy", "grad_norm", "reward"):
                assert f"{name}/{key}" in record, (name, key, sorted(record))
            assert record[f"{name}/trajectories"] == per_seat, record
        assert record["kl"] == max(record["speaker/kl"], record["listener/kl"])
    assert "eval_success" in history[-1]
    start = json.loads((out / "start.json").read_text())
    assert start["model"] == {"robot_0": str(model_dir), "robot_1": str(model_dir)}

    base = _weights(model_dir)
    speaker, listener = (
        _weights(out / "policies" / "speaker"),
        _weights(out / "policies" / "listener"),
    )
    assert not _same(speaker, base), "the speaker's policy did not move"
    assert not _same(listener, base), "the listener's policy did not move"
    assert not _same(speaker, listener), "the two policies took the same updates"
    assert not (out / "policy").exists(), "a run with policies writes policies/NAME only"
    ckpt = torch.load(out / "checkpoints" / "latest.pt", weights_only=False)
    assert set(ckpt["policies"]) == {"speaker", "listener"} and ckpt["state"]["step"] == 2
    for name, weights in (("speaker", speaker), ("listener", listener)):
        saved = ckpt["policies"][name]["model"]  # (with the tied head the file leaves out)
        assert _same({k: saved[k] for k in weights}, weights), name
        assert ckpt["policies"][name]["optim"]["state"], f"{name}: no AdamW state saved"
    # each final policy is a model directory: a frozen teammate for later runs
    from teamgym.envs.baselines import make_baseline

    mate = make_baseline("signal-v0", f"checkpoint:{out / 'policies' / 'listener'}")
    assert mate.chat_model.model.config.num_hidden_layers >= 1


def test_each_policy_warms_up_on_its_own_seats_turns(model_dir, tokenizer, tmp_path) -> None:
    """With policies, the format warm-up trains each policy on its own seats' turns (the
    teacher still plays every seat): the listener's examples are the listener's turns of the
    episodes a shared warm-up learns from; each warmed model is its policy's GRPO start."""
    from teamgym.adapters.cpu.warmup import warmup_examples

    args = _args(
        model_dir, tmp_path / "run", steps=1, warmup_steps=3, warmup_episodes=4, eval_episodes=4
    )
    every = warmup_examples(args.warmup, tokenizer, episodes=4)
    listener = warmup_examples(replace(args.warmup, seats=("robot_1",)), tokenizer, episodes=4)
    assert len(every) == 2 * 4 and listener == every[1::2]  # say, then pick, each episode

    (record,) = train(args, progress=False)
    out = tmp_path / "run"
    info = json.loads((out / "warmup.json").read_text())
    assert {name: p["examples"] for name, p in info["policies"].items()} == {
        "speaker": 4,
        "listener": 4,
    }
    assert "eval_success" in info and not (out / "start.json").exists()
    for name in SEATS:
        warmed = _weights(out / "warmup_models" / name)
        assert not _same(warmed, _weights(model_dir)), f"{name}: the warm-up did not train it"
    assert record["speaker/kl"] == pytest.approx(0.0, abs=1e-6), "GRPO starts from the warm-up"


def test_each_seat_is_served_and_updated_by_its_own_policy(model_dir, tokenizer, tmp_path) -> None:
    """The router sends each request to its agent's server (two scripted servers with
    different replies: every row's replies are its own seat's server's); an agent no policy
    plays is an error; :func:`policy_rows` picks one seat's rows, and the update on them is
    the update on that seat's batch alone (the other seat's tokens never reach it)."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM
    from verl.utils.config import omega_conf_to_dataclass

    from teamgym.adapters.cpu.grpo import Learner, grpo_update
    from teamgym.adapters.cpu.policies import policy_rows
    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, SeatRouter
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    args = _args(model_dir, tmp_path, max_reply_tokens=16, forced_moves="model")  # all asked
    cfg = compose_config(args.rollout, tmp_path, args.update)
    replies = {
        "robot_0": "<say>red</say><action>say</action>",
        "robot_1": "<action>pick 2</action>",
    }
    router = SeatRouter(
        {a: ScriptedServer(tokenizer, lambda _, r=r: r) for a, r in replies.items()}
    )
    worker = TeamAgentLoopWorker(cfg, router)
    out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [0, 1, 2], "train", 4)))
    agents = list(out.non_tensor_batch["teamgym_agent"])
    for agent, said in zip(agents, out.non_tensor_batch["teamgym_replies"], strict=True):
        assert said and all(r == replies[agent] for r in said), (agent, said)
    with pytest.raises(KeyError, match="no policy plays 'robot_2'"):
        asyncio.run(router.generate("ep#s0/robot_2", prompt_ids=[1], sampling_params={}))

    speaker = policy_rows(out, ["robot_0"])
    assert list(speaker) == [i for i, a in enumerate(agents) if a == "robot_0"]
    assert len(speaker) == 3 * 4 and len(policy_rows(out, ["robot_0", "robot_1"])) == len(out)

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    actor_cfg = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)

    def updated(batch, rows=None) -> dict[str, torch.Tensor]:
        policy = copy.deepcopy(base)
        reference = copy.deepcopy(base).requires_grad_(False)
        learner = Learner(
            policy, reference, torch.optim.AdamW(policy.parameters(), lr=1e-3), actor_cfg
        )
        grpo_update(learner, batch, args.update, rows=rows)
        return {k: v.detach().clone() for k, v in policy.state_dict().items()}

    picked = updated(out, rows=speaker)
    assert _same(picked, updated(out.select_idxs(speaker))), "rows beyond the seat's reached it"
    assert not _same(picked, updated(out)), "the whole batch gives another update"


def test_one_policy_over_every_seat_is_the_shared_model(model_dir, tmp_path) -> None:
    """``--policy team=robot_0,robot_1``: the same rows, advantage and update as the shared
    model, so the same weights and figures, byte for byte (the policy machinery adds nothing)."""
    shared = train(_args(model_dir, tmp_path / "shared", policy={}), progress=False)
    named = train(
        _args(model_dir, tmp_path / "named", policy={"team": ["robot_0", "robot_1"]}),
        progress=False,
    )
    for a, b in zip(shared, named, strict=True):
        keys = ("kl", "loss", "entropy", "reward")
        assert [a[k] for k in keys] == [b[f"team/{k}"] for k in keys], (a, b)
        assert "grad_norm" not in a, "a shared run's line is the line it always was"
    assert _same(
        _weights(tmp_path / "shared" / "policy"), _weights(tmp_path / "named" / "policies" / "team")
    )


def test_sigkill_then_resume_continues_every_policy(model_dir, tmp_path, sigkill_after) -> None:
    """``teamgym train --policy ...`` killed after its second step resumes both policies from
    the checkpoint: every step's line once, and the final weights of a run never killed."""
    out = tmp_path / "killed"
    cmd = [
        *(sys.executable, "-m", "teamgym", "train", "--model", str(model_dir), "--out", str(out)),
        *("--policy", "speaker=robot_0", "--policy", "listener=robot_1"),
        *("--steps", "4", "--episodes-per-step", "2", "--group-size", "2", "--lr", "1e-3"),
        *("--entropy-coef", "0.05", "--eval-every", "0", "--warmup-steps", "0"),
        *("--max-reply-tokens", "8", "--quiet"),
        *[a for k, v in SMALL.items() for a in ("--env-arg", f"{k}={v}")],
    ]
    metrics = out / "metrics.jsonl"
    done = sigkill_after(cmd, metrics, 2, timeout=300)
    assert 2 <= done < 4, f"killed after {done} steps"
    proc = subprocess.run([*cmd, "--resume"], timeout=600, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "policy speaker at" in proc.stdout and "policy listener at" in proc.stdout
    steps = [json.loads(x)["step"] for x in metrics.read_text().splitlines()]
    assert steps == [1, 2, 3, 4], f"steps after resume: {steps}"
    straight = tmp_path / "straight"
    train(_args(model_dir, straight, steps=4), progress=False)
    for name in SEATS:
        assert _same(_weights(out / "policies" / name), _weights(straight / "policies" / name)), (
            f"{name}: the resumed run's weights are not the uninterrupted run's"
        )


def test_bad_policy_flags_are_refused_before_training(model_dir, tmp_path, capsys) -> None:
    """A seat named twice, a teammate's or partner's seat, a seat the env lacks, a policy with
    no seats, a trained seat left out, a name given twice, a model for no policy, a bad LoRA
    rank, and a LoRA policy's warm-up: each an error line and status 2, nothing written."""
    from teamgym import cli

    out = tmp_path / "o"
    base = ["train", "--model", str(model_dir), "--out", str(out), "--warmup-steps", "0"]
    speaker, listener = ("--policy", "speaker=robot_0"), ("--policy", "listener=robot_1")
    cases = [
        (
            [*speaker, "--policy", "listener=robot_1,robot_0"],
            "robot_0 is named by speaker and listener",
        ),
        (["--policy", "both=robot_0,robot_0", *listener], "robot_0 is named twice"),
        (
            [*speaker, *listener, "--teammate", "robot_0=expert"],
            "robot_0 is played by the teammate",
        ),
        (
            [*speaker, *listener, "--partner", "expert", "--partner-seat", "robot_0"],
            "robot_0 is a partner seat",
        ),
        ([*speaker, "--policy", "listener=robot_7"], "'robot_7' is not an agent of signal-v0"),
        ([*speaker, "--policy", "listener="], "--policy listener: no seats"),
        ([*speaker], "robot_1 is trained but in no policy"),
        ([*speaker, *listener, "--policy", "speaker=robot_1"], "--policy speaker is given twice"),
        ([*speaker, *listener, "--policy-model", "critic=lora:4"], "no --policy critic"),
        ([*speaker, *listener, "--policy-model", "speaker=lora:0"], "RANK a whole number >= 1"),
        ([*speaker, *listener, "--policy-model", "speaker=/no/such"], "not a model directory"),
        (["--policy-model", "speaker=lora:4"], "--policy-model needs --policy"),
        (["--policy", "a/b=robot_0", *listener], "a policy's name is a folder"),
        (
            [*speaker, *listener, "--policy-model", "speaker=lora:4", "--warmup-steps", "5"],
            "a LoRA policy starts from --model itself",
        ),
    ]
    for flags, message in cases:
        assert cli.main([*base, *flags]) == 2, flags
        printed = " ".join(capsys.readouterr().out.split())
        assert "error:" in printed and message in printed, (flags, printed)
    assert not out.exists()


def test_lora_policies_train_adapters_over_a_frozen_base(model_dir, tmp_path) -> None:
    """``--policy-model speaker=lora:4``: the speaker is an adapter over ``--model``, the
    listener a full model, side by side. The checkpoint holds the adapter's weights only; the
    final speaker is a full model that differs from the base in the adapted projections only
    (the base stayed frozen), whose forward pass is the adapter's; a resumed run ends where an
    uninterrupted one does."""
    import torch
    from transformers import AutoModelForCausalLM

    from teamgym.adapters.cpu.lora import load_lora_policies

    lora = {"speaker": "lora:4"}
    straight = tmp_path / "straight"
    history = train(_args(model_dir, straight, policy_model=lora), progress=False)
    assert history[0]["speaker/kl"] == pytest.approx(0.0, abs=1e-6), "starts as its reference"
    assert history[1]["speaker/kl"] > 0.0 and history[1]["listener/kl"] > 0.0
    ckpt = torch.load(straight / "checkpoints" / "latest.pt", weights_only=False)
    adapter = ckpt["policies"]["speaker"]["model"]
    assert adapter and all("lora_" in k for k in adapter), sorted(adapter)
    assert not any("lora_" in k for k in ckpt["policies"]["listener"]["model"])

    base, speaker = _weights(model_dir), _weights(straight / "policies" / "speaker")
    assert speaker.keys() == base.keys()
    moved = {k for k in base if not torch.equal(base[k], speaker[k])}
    assert moved and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in moved), moved
    (view,) = load_lora_policies(str(model_dir), {"speaker": 4}, seed=0).values()
    view.load_state_dict(adapter)
    merged = AutoModelForCausalLM.from_pretrained(straight / "policies" / "speaker").eval()
    ids = torch.randint(3, 200, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(view.eval()(input_ids=ids).logits, merged(input_ids=ids).logits)

    resumed = tmp_path / "resumed"
    train(_args(model_dir, resumed, policy_model=lora, steps=1), progress=False)
    train(_args(model_dir, resumed, policy_model=lora, resume=True), progress=False)
    lines = [json.loads(x)["step"] for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert lines == [1, 2]
    for name in SEATS:
        assert _same(_weights(resumed / "policies" / name), _weights(straight / "policies" / name))


def test_lora_adapters_serve_their_own_seats_side_by_side(model_dir, tmp_path) -> None:
    """Two adapters of one base, each seat's server on its own thread: every trajectory's
    sampled log-probs are those of its own seat's adapter, not the other's (a forward pass
    never runs with the other adapter switched on)."""
    import torch
    from transformers import AutoTokenizer

    from teamgym.adapters.cpu.grpo import response_logprobs
    from teamgym.adapters.cpu.lora import load_lora_policies
    from teamgym.adapters.cpu.policies import policy_rows
    from teamgym.adapters.cpu.rollout import build_batch, compose_config, local_server
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    views = load_lora_policies(str(model_dir), {"speaker": 4, "listener": 4}, seed=0)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for view in views.values():  # adapters far apart (LoRA's B starts at zero)
            for p in view.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    args = _args(model_dir, tmp_path, max_reply_tokens=8, forced_moves="model")
    cfg = compose_config(args.rollout, tmp_path, args.update)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    seats = {"robot_0": views["speaker"], "robot_1": views["listener"]}
    worker = TeamAgentLoopWorker(cfg, local_server(seats, tokenizer, 0))
    out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [0, 1, 2], "train", 4)))
    mask = out.batch["response_mask"].bool()
    for agent, own, other in (
        ("robot_0", "speaker", "listener"),
        ("robot_1", "listener", "speaker"),
    ):
        rows = policy_rows(out, [agent])
        part = out.select_idxs(rows)
        sampled = part.batch["rollout_log_probs"][mask[rows]]
        with torch.no_grad():
            mine = response_logprobs(views[own].eval(), part)[0][mask[rows]]
            theirs = response_logprobs(views[other].eval(), part)[0][mask[rows]]
        torch.testing.assert_close(sampled, mine, atol=1e-4, rtol=1e-4)
        assert (sampled - theirs).abs().max() > 0.1, f"{agent}: both adapters give its tokens"
