"""VERL's real ``AgentLoopWorker`` running our episode loop on CPU, in-process (teamgym's
subclass, the CPU trainer's): a batch from VERL's own ``RLHFDataset``, each row (an episode)
repeated as copies, against a local model built by our code."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from verl.trainer.ppo import core_algos

from teamgym.adapters.cpu.server import LocalModelServer, ScriptedServer, policy_reply
from teamgym.adapters.verl import estimators
from teamgym.envs import RewardSharing, SharedReward, make
from teamgym.envs.baselines import RandomPolicy


def _run(cfg, server, batch, timeout: float = 300):
    from teamgym.adapters.verl.workers import TeamAgentLoopWorker

    worker = TeamAgentLoopWorker(cfg, server)
    return asyncio.run(asyncio.wait_for(worker.generate_sequences(batch), timeout=timeout))


def _segments(mask: list[int]) -> list[tuple[int, int, int]]:
    """Runs of equal mask values: (start, end, value)."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((start, i, mask[start]))
            start = i
    return runs


def _rows(out):
    """Per output row: response ids (unpadded), mask, score, and our extra fields."""
    rows = []
    prompt_len = out.batch["prompts"].shape[1]
    for i in range(len(out)):
        n = int(out.batch["attention_mask"][i, prompt_len:].sum())
        rows.append(
            {
                "ids": out.batch["responses"][i, :n].tolist(),
                "mask": out.batch["response_mask"][i, :n].tolist(),
                "score": float(out.batch["rm_scores"][i].sum()),
                "agent": out.non_tensor_batch["teamgym_agent"][i],
                "instance": out.non_tensor_batch["teamgym_session"][i],
                "episode": out.non_tensor_batch["teamgym_episode_key"][i],
                "replies": list(out.non_tensor_batch["teamgym_replies"][i]),
                "info": out.non_tensor_batch["extra_info"][i],
                "extra": out.non_tensor_batch["reward_extra_info"][i],
            }
        )
    return rows


def _replay(rows_of_instance, weight: float = 0.7):
    """Step a fresh env with the replies the rows recorded: shared returns and observations."""
    info = rows_of_instance[0]["info"]
    env = SharedReward(
        make(info["env_id"], **json.loads(info["env_kwargs"])), RewardSharing(weight=weight)
    )
    obs, _ = env.reset(seed=int(info["seed"]))
    replies = {r["agent"]: r["replies"] for r in rows_of_instance}
    returns = dict.fromkeys(env.possible_agents, 0.0)
    seen = {a: [] for a in env.possible_agents}
    t = 0
    while env.agents:
        obs, rewards, _, _, _ = env.step({a: replies[a][t] for a in env.agents})
        for a, r in rewards.items():
            returns[a] += r
        for a in env.agents:
            seen[a].append(obs[a])
        t += 1
    return returns, seen


def _assert_scores_match_replay(rows) -> None:
    """Every row's score is the shared return a replay of its instance pays its agent."""
    by_instance: dict[str, list[dict]] = {}
    for row in rows:
        by_instance.setdefault(row["instance"], []).append(row)
    for members in by_instance.values():
        returns, _ = _replay(members)
        for row in members:
            assert row["score"] == pytest.approx(returns[row["agent"]], abs=1e-5)


def test_worker_with_local_model_masks_scores_and_shared_states(
    make_cfg, make_batch, model_dir, tokenizer
) -> None:
    cfg = make_cfg()
    batch = make_batch(cfg)
    out = _run(cfg, LocalModelServer(model_dir, seed=1), batch)
    assert len(out) == 2 * len(batch), "one trajectory per trained agent of each copy"
    rows = _rows(out)
    for row in rows:  # each keeps its episode row's fields, and plays one of its agents
        assert row["agent"] in json.loads(row["info"]["agents"])
        assert row["extra"]["prompt_mismatch"] == 0.0

    by_instance: dict[str, list[dict]] = {}
    for row in rows:
        by_instance.setdefault(row["instance"], []).append(row)
    assert len(by_instance) == len(batch)
    for members in by_instance.values():
        assert sorted(r["agent"] for r in members) == ["robot_0", "robot_1"]
        returns, seen = _replay(members)
        for row in members:
            # rm_scores: the shared return the env paid this agent
            assert row["score"] == pytest.approx(returns[row["agent"]], abs=1e-5), row["agent"]
            # response_mask: 1 exactly on generated tokens; each run of 1s decodes to a reply the env got
            runs = _segments(row["mask"])
            generated = [
                tokenizer.decode(row["ids"][s:e], skip_special_tokens=True)
                for s, e, v in runs
                if v == 1
            ]
            assert generated == row["replies"][: len(generated)]
            for (
                s,
                e,
                v,
            ) in runs:  # a reply ends at EOS, at the per-turn cap (24), or at the budget's end
                ended = (
                    row["ids"][e - 1] == tokenizer.eos_token_id
                    or e - s == 24
                    or e == len(row["ids"])
                )
                assert v == 0 or ended, (
                    f"a generated run [{s}:{e}] of {row['agent']} ends mid-reply"
                )
            # mask-0 runs are the observations this agent saw, from the same env states as its teammate
            observed = [tokenizer.decode(row["ids"][s:e]) for s, e, v in runs if v == 0]
            for text, obs in zip(observed, seen[row["agent"]], strict=False):
                assert obs in text, f"{row['agent']} saw {text!r}, the replay gave {obs!r}"


def test_scripted_policies_give_rewards_and_grpo_matches_the_formula(
    make_cfg, make_batch, tokenizer
) -> None:
    cfg = make_cfg(max_reply_tokens=64, response_length=1024)
    batch = make_batch(cfg, n=4)
    server = ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=3)))
    out = _run(cfg, server, batch)
    rows = _rows(out)
    scores = torch.tensor([r["score"] for r in rows])
    assert scores.std() > 0, "random valid play should give varied shared rewards"
    bad = [(r["agent"], r["replies"]) for r in rows if r["extra"]["invalid_action_rate"] != 0.0]
    assert not bad, bad

    # VERL's GRPO, grouped by uid = (seed, agent) row: (s - mean) / (std + eps) within the group
    uids = out.non_tensor_batch["uid"]
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        out.batch["rm_scores"], out.batch["response_mask"], uids
    )
    for i in range(len(rows)):
        group = scores[[j for j in range(len(rows)) if uids[j] == uids[i]]]
        expected = (scores[i] - group.mean()) / (group.std() + 1e-6)
        assert adv[i][out.batch["response_mask"][i].bool()].allclose(expected, atol=1e-4)

    # team_grpo: one group per episode seed, all agents and rollouts together
    adv_team, _ = core_algos.get_adv_estimator_fn(estimators.TEAM_ESTIMATOR)(
        token_level_rewards=out.batch["rm_scores"],
        response_mask=out.batch["response_mask"],
        index=uids,
    )
    episodes = [r["episode"] for r in rows]
    for i in range(len(rows)):
        group = scores[[j for j in range(len(rows)) if episodes[j] == episodes[i]]]
        assert len(group) == 2 * 4
        expected = (scores[i] - group.mean()) / (group.std() + 1e-6)
        assert adv_team[i][out.batch["response_mask"][i].bool()].allclose(expected, atol=1e-4)


def test_shuffled_rows_still_pair_correctly(make_cfg, make_batch, tokenizer) -> None:
    cfg = make_cfg(max_reply_tokens=64, response_length=1024)
    batch = make_batch(cfg, permute_seed=7)
    out = _run(cfg, ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=1))), batch)
    rows = _rows(out)
    by_instance: dict[str, list[str]] = {}
    for row in rows:
        by_instance.setdefault(row["instance"], []).append(row["agent"])
        assert row["episode"] == row["info"]["episode"]
    assert all(sorted(v) == ["robot_0", "robot_1"] for v in by_instance.values())
    _assert_scores_match_replay(rows)


def test_response_budget_running_out_mid_episode(
    make_cfg, make_batch, model_dir, tokenizer
) -> None:
    """The agent stops growing its trajectory, keeps playing no-ops, and nothing hangs."""
    cfg = make_cfg(response_length=40, max_reply_tokens=30)
    batch = make_batch(cfg, rows=[0, 1])
    out = _run(cfg, LocalModelServer(model_dir, seed=2), batch, timeout=120)
    rows = _rows(out)
    assert all(len(r["mask"]) <= 40 for r in rows)
    assert any(r["extra"]["budget_exhausted"] == 1.0 for r in rows)
    for r in rows:
        assert len(r["replies"]) == r["extra"]["episode_length"] == 4  # played to the end
        assert r["replies"][-1] == "" or r["extra"]["budget_exhausted"] == 0.0
    returns, _ = _replay(
        rows[:1] + [x for x in rows if x["instance"] == rows[0]["instance"] and x is not rows[0]]
    )
    assert rows[0]["score"] == pytest.approx(returns[rows[0]["agent"]], abs=1e-5)


def test_a_crashing_agent_loop_fails_the_batch_without_hanging(
    make_cfg, make_batch, tokenizer
) -> None:
    def reply(prompt_text: str) -> str:
        if "You are robot_1" in prompt_text and "Step 1/" in prompt_text:
            raise RuntimeError("rollout server died")
        return policy_reply(RandomPolicy(seed=0))(prompt_text)

    cfg = make_cfg()
    batch = make_batch(cfg, rows=[0, 1, 2, 3])
    with pytest.raises(RuntimeError, match="rollout server died"):
        _run(cfg, ScriptedServer(tokenizer, reply), batch, timeout=60)


def test_all_agents_of_an_episode_are_in_flight_at_once(make_cfg, make_batch, tokenizer) -> None:
    cfg = make_cfg(max_reply_tokens=64, response_length=1024)  # budget for every turn
    batch = make_batch(cfg, rows=[0], n=1)  # one episode, its two agents
    server = ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=0)), latency=0.05)
    out = _run(cfg, server, batch)
    turns = int(_rows(out)[0]["extra"]["episode_length"])
    assert server.max_in_flight == 2
    assert server.calls == 2 * turns


def test_rm_scores_follow_the_sharing_weight(make_cfg, make_batch, tokenizer) -> None:
    selfish = _rows(
        _run(
            make_cfg(sharing={"weight": 0.0}, max_reply_tokens=64, response_length=1024),
            ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=4))),
            make_batch(make_cfg(), n=1),
        )
    )
    for members in {
        r["instance"]: [x for x in selfish if x["instance"] == r["instance"]] for r in selfish
    }.values():
        returns, _ = _replay(members, weight=0.0)
        for row in members:
            assert row["score"] == pytest.approx(returns[row["agent"]], abs=1e-6)
    assert np.isfinite([r["score"] for r in selfish]).all()


def _dataset_batch(
    tmp_path,
    model_dir,
    tokenizer,
    loop_yaml_writer,
    env_id,
    env_kwargs,
    *,
    episodes,
    prompt_length,
    max_reply_tokens,
    teammates=None,
    n=2,
):
    """Our dataset builder -> VERL's RLHFDataset -> a uid'd batch repeated n times, and its config."""
    import uuid

    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from teamgym.adapters.verl.dataset import build_dataset
    from teamgym.adapters.verl.train import compose_config

    data = tmp_path / "data"
    manifest = build_dataset(
        env_id,
        data,
        train_episodes=episodes,
        val_episodes=1,
        env_kwargs=env_kwargs,
        teammates=teammates,
    )
    loop = loop_yaml_writer(tmp_path / "loop.yaml", max_reply_tokens=max_reply_tokens)
    cfg = compose_config(
        [
            f"teamgym.dataset_dir={data}",
            f"actor_rollout_ref.model.path={model_dir}",
            f"actor_rollout_ref.rollout.prompt_length={prompt_length}",
            "actor_rollout_ref.rollout.response_length=1024",
            f"data.max_prompt_length={prompt_length}",
            "data.max_response_length=1024",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop}",
        ]
    )
    ds = RLHFDataset(data_files=[str(data / "train.parquet")], tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([ds[i] for i in range(len(ds))]))
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
    )
    batch = batch.repeat(repeat_times=n, interleave=True)
    batch.non_tensor_batch["session_id"] = np.tile(np.arange(n), len(ds))
    return manifest, cfg, batch


def test_thor_assembly_episodes_through_the_worker(
    model_dir, tokenizer, tmp_path, loop_yaml_writer
) -> None:
    """The adapter is env-agnostic: thor-assembly-v0 rows pair up and score like the env."""
    _, cfg, batch = _dataset_batch(
        tmp_path,
        model_dir,
        tokenizer,
        loop_yaml_writer,
        "thor-assembly-v0",
        {"num_agents": 2, "recipe": "spa_basket", "max_steps": 6},
        episodes=2,
        prompt_length=2048,
        max_reply_tokens=48,
    )
    out = _run(cfg, ScriptedServer(tokenizer, policy_reply(RandomPolicy(seed=9))), batch)
    rows = _rows(out)
    assert len(rows) == 8 and all(r["extra"]["prompt_mismatch"] == 0.0 for r in rows)
    by_instance: dict[str, list[dict]] = {}
    for row in rows:
        by_instance.setdefault(row["instance"], []).append(row)
    for members in by_instance.values():
        assert sorted(r["agent"] for r in members) == ["robot_0", "robot_1"]
        returns, _ = _replay(members)
        for row in members:
            assert row["score"] == pytest.approx(returns[row["agent"]], abs=1e-5)


def test_teammates_played_by_a_baseline(model_dir, tokenizer, tmp_path, loop_yaml_writer) -> None:
    """Only the listener is trained: the loop plays robot_0 with the scripted expert speaker."""
    from teamgym.envs.baselines import make_baseline

    manifest, cfg, batch = _dataset_batch(
        tmp_path,
        model_dir,
        tokenizer,
        loop_yaml_writer,
        "signal-v0",
        {"speaker": "fixed", "num_rounds": 1},
        episodes=6,
        prompt_length=1024,
        max_reply_tokens=64,
        teammates={"robot_0": "expert"},
    )
    assert manifest.rows_per_episode == 1
    listener = policy_reply(
        make_baseline("signal-v0", "expert")
    )  # reads the expert speaker's words
    out = _run(cfg, ScriptedServer(tokenizer, listener), batch)
    rows = _rows(out)
    assert [r["agent"] for r in rows] == ["robot_1"] * 12
    assert all(r["extra"]["success"] == 1.0 for r in rows)


def test_forced_moves_are_played_by_the_loop_without_the_model(
    make_cfg, make_batch, model_dir, tokenizer
) -> None:
    """``forced_moves: auto``: a turn with one valid action (signal-v0's 'wait') costs no model
    call, its tokens carry response_mask 0, and the returns still match a replay."""
    server = LocalModelServer(model_dir, seed=3)
    cfg = make_cfg(response_length=512, forced_moves="auto", max_reply_tokens=8)
    out = _run(cfg, server, make_batch(cfg, rows=[0, 1]))
    rows = _rows(out)
    forced_seen = 0
    for row in rows:
        runs = _segments(row["mask"])
        generated = [
            tokenizer.decode(row["ids"][s:e], skip_special_tokens=True)
            for s, e, v in runs
            if v == 1
        ]
        model_replies = [r for r in row["replies"] if r not in ("<action>wait</action>",)]
        forced = [r for r in row["replies"] if r == "<action>wait</action>"]
        forced_seen += len(forced)
        assert generated == model_replies  # 1s are exactly the model's replies
        text0 = tokenizer.decode(
            [t for t, m in zip(row["ids"], row["mask"], strict=True) if m == 0]
        )
        assert text0.count("<action>wait</action>") == len(forced)  # forced ones are context
    # 2 rounds, 2 agents: each round, one of the two waits (the listener at talk, the speaker at pick)
    assert forced_seen == len(rows) * 2
    assert server.calls == sum(len(r["replies"]) for r in rows) - forced_seen
    _assert_scores_match_replay(rows)


def test_batched_sampling_equals_one_request_at_a_time(model_dir, tokenizer) -> None:
    """The server's batched pass (left padding, one KV cache) gives the same greedy tokens and
    log-probs as sampling each prompt alone."""
    from transformers import AutoModelForCausalLM

    from teamgym.adapters.agents.sampling import _Request, sample_batch, sample_tokens

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    env = make("signal-v0")
    prompts = []
    for seed in range(4):
        obs, infos = env.reset(seed=seed)
        for agent in env.agents:
            text = tokenizer.apply_chat_template(
                [
                    {"role": "system", "content": infos[agent]["instructions"][: 40 * (seed + 1)]},
                    {"role": "user", "content": obs[agent]},
                ],
                add_generation_prompt=True,
                tokenize=False,
            )
            prompts.append(tokenizer.encode(text, add_special_tokens=False))
    assert len({len(p) for p in prompts}) > 2  # different lengths, so padding is exercised
    stop = {tokenizer.eos_token_id}
    alone = [sample_tokens(model, p, 12, 0.0, stop, torch.Generator()) for p in prompts]
    together = sample_batch(
        model,
        [_Request(p, 12, 0.0, 1.0, torch.Generator(), None) for p in prompts],
        stop,
        tokenizer.pad_token_id,
    )
    for (a_ids, a_lp), (b_ids, b_lp) in zip(alone, together, strict=True):
        assert a_ids == b_ids
        assert np.allclose(a_lp, b_lp, atol=1e-4)


def test_copies_of_a_prompt_prefill_once_and_sample_as_if_alone(model_dir, tokenizer) -> None:
    """Requests with the same prompt (a GRPO group's copies) share one prefill row; each still
    samples with its own generator what it samples alone (temperature 1, seeded)."""
    from transformers import AutoModelForCausalLM

    from teamgym.adapters.agents.sampling import _Request, sample_batch, sample_tokens

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    env = make("signal-v0")
    distinct = []
    for seed in range(2):
        obs, infos = env.reset(seed=seed)
        text = tokenizer.apply_chat_template(
            [
                {"role": "system", "content": infos["robot_0"]["instructions"]},
                {"role": "user", "content": obs["robot_0"]},
            ],
            add_generation_prompt=True,
            tokenize=False,
        )
        distinct.append(tokenizer.encode(text, add_special_tokens=False))
    prompts = [distinct[0], distinct[1], distinct[0], distinct[0], distinct[1]]
    stop = {tokenizer.eos_token_id}
    rows: list[int] = []
    hook = model.model.embed_tokens.register_forward_hook(
        lambda _m, inputs, _o: rows.append(inputs[0].shape[0])
    )
    together = sample_batch(
        model,
        [
            _Request(p, 10, 1.0, 1.0, torch.Generator().manual_seed(i), None)
            for i, p in enumerate(prompts)
        ],
        stop,
        tokenizer.pad_token_id,
    )
    hook.remove()
    assert rows[0] == 2 and set(rows[1:]) == {5}, rows  # the prefill: each prompt once
    for i, (p, (ids, lps)) in enumerate(zip(prompts, together, strict=True)):
        alone_ids, alone_lps = sample_tokens(
            model, p, 10, 1.0, stop, torch.Generator().manual_seed(i)
        )
        assert ids == alone_ids
        assert np.allclose(lps, alone_lps, atol=1e-4)
    assert together[2] != together[3], "copies draw their own samples"


def test_each_request_carries_its_own_seed_under_vllm_unless_switched_off(
    make_cfg, make_batch, tokenizer
) -> None:
    """Under ``rollout.name=vllm`` each request the loop sends carries a sampling seed of its
    own (from the rollout's seed, the request id and the turn's prompt), so vLLM samples it from
    its own generator whatever batch it lands in; ``seed_requests: false`` sends none."""
    from teamgym.adapters.agents.sampling import request_seed

    class Recording(ScriptedServer):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.seen: list[tuple[str, list[int], dict]] = []

        async def generate(self, request_id: str, *, prompt_ids, sampling_params, **kw: Any):
            self.seen.append((request_id, list(prompt_ids), dict(sampling_params)))
            return await super().generate(
                request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw
            )

    cfg = make_cfg()
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.name == "vllm"
    server = Recording(tokenizer, policy_reply(RandomPolicy(seed=4)))
    _run(cfg, server, make_batch(cfg, rows=[0, 1]))
    seeds = [p["seed"] for _, _, p in server.seen]
    assert len(server.seen) > 2 and len(set(seeds)) == len(seeds)
    for request_id, prompt_ids, sampling in server.seen:  # these rows carry no training step
        assert sampling["seed"] == request_seed(int(rollout.seed), request_id, prompt_ids)
    request_id, prompt_ids, _ = server.seen[0]
    assert request_seed(42, request_id, prompt_ids, step=3) != request_seed(
        42, request_id, prompt_ids
    ), "an episode met again at a later step draws new noise"
    plain = Recording(tokenizer, policy_reply(RandomPolicy(seed=4)))
    cfg = make_cfg(seed_requests=False)
    _run(cfg, plain, make_batch(cfg, rows=[0, 1]))
    assert plain.seen and not any("seed" in p for _, _, p in plain.seen)


def test_stop_strings_end_a_reply_and_reach_the_server(
    make_cfg, make_batch, model_dir, tokenizer
) -> None:
    """``stop`` in the loop's settings reaches the server as vLLM's ``stop`` (keeping the stop
    string), and the local server ends a row at the first token whose text contains it."""
    from transformers import AutoModelForCausalLM

    from teamgym.adapters.agents.sampling import _Request, sample_batch

    class Recording(ScriptedServer):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.seen: list[dict] = []

        async def generate(self, request_id: str, *, prompt_ids, sampling_params, **kw: Any):
            self.seen.append(dict(sampling_params))
            return await super().generate(
                request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw
            )

    server = Recording(tokenizer, policy_reply(RandomPolicy(seed=4)))
    cfg = make_cfg(stop=["</action>"])
    rows = _rows(_run(cfg, server, make_batch(cfg, rows=[0, 1])))  # both agents of an episode
    assert server.seen and all(
        p["stop"] == ["</action>"] and p["include_stop_str_in_output"] for p in server.seen
    )
    stopped = 0
    for row in rows:  # mask_stop: the stop string is context (mask 0), the rest is trained
        trained = [
            tokenizer.decode(row["ids"][s:e], skip_special_tokens=True)
            for s, e, v in _segments(row["mask"])
            if v == 1
        ]
        # (a turn after the response budget ran out is an empty reply, no tokens)
        assert trained == [r.removesuffix("</action>") for r in row["replies"] if r]
        stopped += sum(r.endswith("</action>") for r in row["replies"])
    assert stopped > 0  # (a reply cut by max_reply_tokens first keeps all its tokens trained)
    _assert_scores_match_replay(rows)
    plain = Recording(tokenizer, policy_reply(RandomPolicy(seed=4)))
    cfg = make_cfg()
    _run(cfg, plain, make_batch(cfg, rows=[0, 1]))
    assert plain.seen and not any("stop" in p for p in plain.seen)

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    prompt = tokenizer.encode("Valid actions: pick 1 | pick 2", add_special_tokens=False)
    free, _ = sample_batch(
        model,
        [_Request(prompt, 12, 0.0, 1.0, torch.Generator(), None)],
        {tokenizer.eos_token_id},
        tokenizer.pad_token_id,
    )[0]
    assert len(free) > 3
    stop_text = tokenizer.decode(free[1:3])  # a string the greedy reply is known to contain
    cut, logprobs = sample_batch(
        model,
        [_Request(prompt, 12, 0.0, 1.0, torch.Generator(), None, stop=(stop_text,))],
        {tokenizer.eos_token_id},
        tokenizer.pad_token_id,
        tokenizer.decode,
    )[0]
    assert stop_text in tokenizer.decode(cut)  # kept, like include_stop_str_in_output
    assert stop_text not in tokenizer.decode(cut[:-1])  # and nothing after the first token
    assert cut == free[: len(cut)] and len(logprobs) == len(cut) < len(free)


@pytest.mark.parametrize(
    ("outcomes", "enforce", "kept"),
    [
        ([True, False], True, 0),  # a lone survivor: a GRPO group of one, dropped
        ([False, True], True, 0),  # whichever finishes first
        ([True, True, False], True, 2),  # two survivors are a group: kept
        ([True, False], False, 1),  # validation rows: nothing is trained, metrics kept
        ([True], True, 1),  # rollout.n=1: no group to speak of
    ],
)
def test_a_row_with_one_complete_copy_is_dropped(outcomes, enforce, kept) -> None:
    from teamgym.adapters.verl.episode_loop import EpisodeIncomplete, _Quorum

    async def copy(group, complete: bool, delay: float) -> str:
        await asyncio.sleep(delay)
        if not complete:
            await group.settle(False)
            raise RuntimeError("aborted episode")
        await group.settle(True)
        return "trajectory"

    async def main():
        groups = [_Quorum.join("row-uid", enforce) for _ in outcomes]  # started before any await
        return await asyncio.gather(
            *(
                copy(g, ok, 0.01 * i)
                for i, (g, ok) in enumerate(zip(groups, outcomes, strict=True))
            ),
            return_exceptions=True,
        )

    results = asyncio.run(main())
    assert sum(r == "trajectory" for r in results) == kept, results
    dropped = [r for r, ok in zip(results, outcomes, strict=True) if ok and r != "trajectory"]
    assert all(isinstance(r, EpisodeIncomplete) and "group of one" in str(r) for r in dropped)


def test_every_turns_prompt_is_the_chat_template_of_the_whole_conversation(
    make_cfg, make_batch, templated
) -> None:
    """Token continuity: the ids the rollout server is sent on each turn are exactly the chat
    template applied to the conversation so far (system, first observation, each reply, each
    next observation, generation prompt), although each turn only tokenises what is new; and
    the trajectory trained on is the last turn's ids plus the last reply. No re-tokenisation
    drift between what was sampled and what is trained."""
    sent: dict[str, list[list[int]]] = {}

    class Recording(ScriptedServer):
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
            sent.setdefault(request_id, []).append(list(prompt_ids))
            return await super().generate(
                request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw
            )

    model, tokenizer = templated
    cfg = make_cfg(max_reply_tokens=64, response_length=1024)  # room for every turn
    cfg.actor_rollout_ref.model.path = str(model)  # the worker loads this tokenizer
    batch = make_batch(cfg, rows=[0, 1, 2, 3], n=2)
    rows = _rows(_run(cfg, Recording(tokenizer, policy_reply(RandomPolicy(seed=7))), batch))
    by_instance: dict[str, list[dict]] = {}
    for row in rows:
        by_instance.setdefault(row["instance"], []).append(row)
    checked = 0
    for members in by_instance.values():
        _, seen = _replay(members)
        info = members[0]["info"]
        env = make(info["env_id"], **json.loads(info["env_kwargs"]))
        first_obs, infos = env.reset(seed=int(info["seed"]))
        for row in members:
            agent = row["agent"]
            messages = [
                {"role": "system", "content": infos[agent]["instructions"]},
                {"role": "user", "content": first_obs[agent]},
            ]
            prompts = sent[f"{row['instance']}/{agent}"]
            assert len(prompts) == len(row["replies"]) >= 2
            for turn, ids in enumerate(prompts):
                expected = tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=True
                )["input_ids"]
                assert ids == list(expected), f"{agent}, turn {turn}: the sent ids drifted"
                checked += 1
                if turn < len(seen[agent]):  # the episode goes on: the reply, then what follows
                    messages += [
                        {"role": "assistant", "content": row["replies"][turn]},
                        {"role": "user", "content": seen[agent][turn]},
                    ]
            # the batch row (prompt ids, then response ids) starts with every sent prompt
            full = prompts[0] + row["ids"]
            assert full[: len(prompts[-1])] == prompts[-1], f"{agent}: trained ids differ from sent"
            assert (
                tokenizer.decode(full[len(prompts[-1]) :], skip_special_tokens=True)
                == row["replies"][-1]
            ), f"{agent}: the last reply is not what follows the last prompt"
    assert checked >= 2 * len(rows), checked  # every turn of every trajectory was compared


def test_the_local_model_server_travels_to_another_process(model_dir) -> None:
    """Pickled (as Ray hands it to verl's v1 worker actor: issue 39, ``teamgym verl-bench`` with
    its default ``--server both`` could not pickle the thread pool's queue) it answers the same
    request with the same tokens."""
    import asyncio
    import pickle

    server = LocalModelServer(model_dir, seed=4)
    copy = pickle.loads(pickle.dumps(server))
    params = {"max_tokens": 8, "temperature": 1.0}

    async def ask(s: LocalModelServer) -> list[int]:
        out = await s.generate("r1", prompt_ids=[1, 2, 3, 4], sampling_params=params)
        return list(out.token_ids)

    assert asyncio.run(ask(copy)) == asyncio.run(ask(server))
    assert copy.pool is not server.pool and copy.calls == 1
