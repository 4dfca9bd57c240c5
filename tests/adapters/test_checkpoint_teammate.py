"""A frozen model directory as a teammate (``checkpoint:PATH``): greedy replies that match
``transformers``' own greedy ``generate``, deterministic, and played by the episode loop."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl")

from teamgym.adapters.agents.checkpoint import CheckpointPolicy
from teamgym.envs import RewardSharing, SharedReward, make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode

KW = {"speaker": "fixed", "num_rounds": 2, "num_candidates": 3}


def test_checkpoint_replies_are_greedy_generate_on_the_agents_chat(model_dir, tokenizer) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    policy = make_baseline("signal-v0", f"checkpoint:{model_dir}")
    assert isinstance(policy, CheckpointPolicy)
    env = make("signal-v0", **KW)
    obs, infos = env.reset(seed=4)
    policy.reset(4)
    reply = policy.act("robot_0", obs["robot_0"], infos["robot_0"])

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    chat = [
        {"role": "system", "content": infos["robot_0"]["instructions"]},
        {"role": "user", "content": obs["robot_0"]},
    ]
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    ids = torch.tensor([tokenizer.encode(ids, add_special_tokens=False)])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=32,
            do_sample=False,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    assert reply == tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    # the chat goes on: the next turn sees the reply and the new observation
    assert policy.history["robot_0"][-1] == {"role": "assistant", "content": reply}


def test_with_a_trainers_rules_replies_end_as_rollouts_end(model_dir) -> None:
    """Given ``stop`` and ``forced_moves="auto"``, a reply is the plain greedy reply cut after
    its first stop string (kept, as vLLM's ``include_stop_str_in_output``), and a turn with one
    valid action is the forced move, written into the chat without asking the model."""
    env = make("signal-v0", **KW)
    obs, infos = env.reset(seed=4)
    plain = CheckpointPolicy(model_dir).act("robot_0", obs["robot_0"], infos["robot_0"])
    assert len(plain) > 4, plain
    stop = plain[2:4]  # a string this model does write, so the cut is exercised
    ruled = CheckpointPolicy(model_dir, stop=["</never>", stop], forced_moves="auto")
    reply = ruled.act("robot_0", obs["robot_0"], infos["robot_0"])
    assert reply == plain[: plain.index(stop) + len(stop)], (reply, plain)

    asked: list[int] = []

    class Spy:  # the real model, counting its calls
        def complete(self, *args, **kwargs):
            asked.append(1)
            return model.complete(*args, **kwargs)

    model, ruled.chat_model = ruled.chat_model, Spy()
    info = {"instructions": "wait", "valid_actions": ["wait"]}
    assert ruled.act("robot_1", "your turn", info) == "<action>wait</action>"
    assert asked == [], "a forced move never asks the model"
    assert ruled.history["robot_1"][-1] == {"role": "assistant", "content": "<action>wait</action>"}
    with pytest.raises(ValueError, match="forced_moves"):
        CheckpointPolicy(model_dir, forced_moves="always")


def test_checkpoint_teammate_is_deterministic_and_resets(model_dir) -> None:
    env = make("signal-v0", **KW)

    def play() -> tuple[dict, list]:
        policy = CheckpointPolicy(model_dir)
        metrics = run_episode(env, {"robot_0": policy, "robot_1": policy}, seed=7)
        return metrics.to_dict(), policy.history["robot_1"]

    first, second = play(), play()
    assert first == second
    assert len(first[1]) == 1 + 2 * 4  # system + (observation, reply) per step, 2 rounds x 2 steps


def test_a_missing_checkpoint_says_what_to_pass(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="teamgym model init"):
        make_baseline("signal-v0", f"checkpoint:{tmp_path / 'nowhere'}")
    with pytest.raises(KeyError, match="checkpoint:PATH"):
        make_baseline("signal-v0", "nonesuch")


def test_the_episode_loop_plays_a_checkpoint_teammate(model_dir, tokenizer, tmp_path) -> None:
    """Rows exist only for the trained agent; scores equal a replay where a fresh checkpoint
    policy plays robot_0 against the replies the trained agent sent."""
    import asyncio
    from dataclasses import replace

    from teamgym.adapters.cpu.rollout import build_batch, compose_config
    from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
    from teamgym.adapters.cpu.trainer import TrainArgs
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker
    from teamgym.envs.baselines import RandomPolicy

    mate = f"checkpoint:{model_dir}"
    args = replace(
        TrainArgs(model=str(model_dir), out=str(tmp_path)),
        env_kwargs=KW,
        teammates={"robot_0": mate},
        max_reply_tokens=16,
        prompt_length=1024,
        response_length=512,
    )
    worker = TeamAgentLoopWorker(
        compose_config(args.rollout, tmp_path),
        ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=1))),
    )
    out = asyncio.run(worker.generate_sequences(build_batch(args.rollout, [11, 12], "train", 2)))
    assert list(out.non_tensor_batch["teamgym_agent"]) == ["robot_1"] * 4
    for i in range(len(out)):
        info = out.non_tensor_batch["extra_info"][i]
        assert json.loads(info["teammates"]) == {"robot_0": mate}
        replies = list(out.non_tensor_batch["teamgym_replies"][i])
        env = SharedReward(make("signal-v0", **KW), RewardSharing(weight=0.7))
        obs, infos = env.reset(seed=int(info["seed"]))
        speaker = CheckpointPolicy(model_dir)
        speaker.reset(int(info["seed"]))
        total, t = 0.0, 0
        while env.agents:
            actions = {
                "robot_0": speaker.act("robot_0", obs["robot_0"], infos["robot_0"]),
                "robot_1": replies[t],
            }
            obs, rewards, _, _, new = env.step(actions)
            infos.update(new)
            total += rewards["robot_1"]
            t += 1
        assert float(out.batch["rm_scores"][i].sum()) == pytest.approx(total, abs=1e-5)
