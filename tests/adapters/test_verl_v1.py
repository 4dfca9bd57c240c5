"""VERL's v1 trainer path (what ``main_ppo`` runs by default) on CPU: the real
``AgentLoopWorkerTQ`` Ray actor runs our loop and writes into a real TransferQueue; the
trainer's ``ReplayBuffer`` samples the batch and ``compute_advantage_for_multi_trajectories``
computes advantages in this (the trainer's) process, for ``grpo`` and ``team_grpo``."""

from __future__ import annotations

import asyncio
import json
import uuid
import zlib
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import ray
import transfer_queue as tq
from omegaconf import OmegaConf
from verl.protocol import DataProto
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.v1 import AgentLoopWorkerTQ
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

from teamgym.adapters.cpu.server import ScriptedServer, policy_reply
from teamgym.adapters.verl import estimators
from teamgym.adapters.verl.sampler import sampler_settings, team_replay_buffer
from teamgym.adapters.verl.train import setup_worker
from teamgym.adapters.verl.workers import TeamAgentLoopWorkerTQ
from teamgym.envs.baselines import RandomPolicy

setup_worker()
N = 2  # rollout.n


@pytest.fixture(scope="module")
def v1(make_cfg_module, dataset_dir):
    """A local Ray instance with our setup hook, TransferQueue on one storage unit, and VERL's
    config for the v1 path (``transfer_queue.enable``)."""
    cfg = make_cfg_module()
    ray.init(
        num_cpus=8,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"worker_process_setup_hook": "teamgym.adapters.verl.train.setup_worker"},
    )
    tq.init(cfg.transfer_queue)
    try:
        yield cfg
    finally:
        tq.close()
        ray.shutdown()


@pytest.fixture(scope="module")
def make_cfg_module(model_dir, dataset_dir, tmp_path_factory, loop_yaml_writer):
    from teamgym.adapters.verl.train import compose_config

    def make(**loop_settings):
        loop = loop_yaml_writer(
            tmp_path_factory.mktemp("loop") / "loop.yaml", max_reply_tokens=64, **loop_settings
        )
        cfg = compose_config(
            [
                f"teamgym.dataset_dir={dataset_dir}",
                f"actor_rollout_ref.model.path={model_dir}",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop}",
                "data.train_batch_size=4",
                f"actor_rollout_ref.rollout.n={N}",
                "actor_rollout_ref.rollout.agent.num_workers=1",
                "actor_rollout_ref.rollout.prompt_length=1024",
                "data.max_prompt_length=1024",
                "actor_rollout_ref.rollout.response_length=1024",
                "data.max_response_length=1024",
                "transfer_queue.enable=true",
                "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
            ]
        )
        cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
        OmegaConf.set_struct(cfg, False)
        cfg.pop("teamgym")
        return cfg

    return make


ROWS = tuple(range(6))  # 6 episodes, a row each, 2 trained agents
AGENTS = 2
WORKERS: list = []  # the agent-loop workers of this module's Ray job
SAMPLED: list[dict] = []  # the sampler's metrics of each rollout, in order


def _rollout(
    cfg, tokenizer, dataset_dir, reply, rows=ROWS, step=1, pad_to=None, server=None, worker=None
):
    """What the v1 trainer does for one step: uid the rows, register them as pending prompts,
    run the worker (teamgym's ``TeamAgentLoopWorkerTQ`` unless ``worker`` names another actor class),
    then sample the finished (or failed) groups from the replay buffer; with ``pad_to``, pad
    the batch to a multiple of it with VERL's own synthetic rows, as the v1 trainer's
    ``_balance_batch`` does."""
    ds = RLHFDataset(
        data_files=[str(dataset_dir / "train.parquet")], tokenizer=tokenizer, config=cfg.data
    )
    batch_dict = collate_fn([ds[i] for i in rows])
    uids = [str(uuid.uuid4()) for _ in rows]
    batch_dict["uid"] = np.array(uids, dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", step)
    tags = [{"is_prompt": True, "status": "pending", "global_steps": step} for _ in rows]
    tq.kv_batch_put(keys=uids, partition_id="train", tags=tags)
    actor = (worker or TeamAgentLoopWorkerTQ).remote(
        cfg, server or ScriptedServer(tokenizer, reply), None, None
    )
    WORKERS.append(actor)  # verl's manager keeps its workers for the whole job; so do we
    ray.get(actor.generate_sequences.remote(batch), timeout=120)
    # what main_ppo samples with under teamgym's config (adapters/verl/sampler.py)
    buffer = team_replay_buffer(
        trainer_mode="sync",
        trainer_config=cfg.trainer,
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={**cfg.trainer.v1.sampler.sampler_kwargs, **sampler_settings(cfg)},
        refill_fn=None,
    )
    meta, metrics = buffer.sample(global_steps=step, partition_id="train", batch_size=len(rows))
    SAMPLED.append(metrics)
    if pad_to:
        meta = upsample_batch_to_divisible_size(meta, pad_to, tokenizer.eos_token_id)
    fields = ["uid", "response_mask", "rm_scores", "extra_info"]
    data = tq.kv_batch_get(keys=meta.keys, partition_id="train", select_fields=fields)
    infos = list(data["extra_info"])
    proto = DataProto(batch=data.select("response_mask", "rm_scores").to_padded_tensor())
    proto.batch["token_level_scores"] = proto.batch["rm_scores"]
    proto.batch["token_level_rewards"] = proto.batch["rm_scores"]
    proto.non_tensor_batch["uid"] = np.array([str(u) for u in list(data["uid"])], dtype=object)
    return meta.keys, proto, infos, uids


def _expected(scores: torch.Tensor, groups: list[str]) -> torch.Tensor:
    """VERL's GRPO by hand: (s - mean) / (std + eps) per group; a lone member keeps its score."""
    out = torch.empty_like(scores)
    for i, g in enumerate(groups):
        members = scores[[j for j, h in enumerate(groups) if h == g]]
        out[i] = (
            scores[i]
            if len(members) == 1
            else (scores[i] - members.mean()) / (members.std() + 1e-6)
        )
    return out


def _advantages(proto, keys, estimator, cfg):
    out = compute_advantage_for_multi_trajectories(
        proto, batch_keys=keys, adv_estimator=estimator, num_repeat=N, config=cfg.algorithm
    )
    mask = out.batch["response_mask"].bool()
    first = [out.batch["advantages"][i][mask[i]][:1] for i in range(len(out))]
    return torch.stack([a[0] if len(a) else torch.tensor(0.0) for a in first])  # padding: none


@pytest.fixture(scope="module")
def complete_rollout(v1, tokenizer, dataset_dir):
    return _rollout(v1, tokenizer, dataset_dir, policy_reply(RandomPolicy(seed=3)))


@pytest.mark.parametrize("estimator", ["grpo", "team_grpo"])
def test_v1_worker_replay_buffer_and_advantages(v1, complete_rollout, estimator) -> None:
    keys, proto, _infos, uids = complete_rollout
    assert len(keys) == len(ROWS) * AGENTS * N and {k.split("_")[0] for k in keys} == set(uids)
    scores = proto.batch["rm_scores"].sum(-1)
    assert scores.std() > 0, "random play should give varied shared returns"
    # the uid names its episode (its row) and its seat: no record needed anywhere
    episodes = [k.split("_")[0] for k in keys]
    assert list(estimators.team_keys(proto.non_tensor_batch["uid"])) == episodes
    groups = list(proto.non_tensor_batch["uid"]) if estimator == "grpo" else episodes
    assert len(set(groups)) == (len(ROWS) * AGENTS if estimator == "grpo" else len(ROWS))
    got = _advantages(proto, keys, estimator, v1)
    torch.testing.assert_close(got, _expected(scores, groups), atol=1e-4, rtol=0)


@pytest.mark.parametrize("estimator", ["grpo", "team_grpo"])
def test_verls_padding_rows_get_zero_advantage_in_no_group(
    v1, tokenizer, dataset_dir, estimator
) -> None:
    """The v1 trainer pads the batch with synthetic rows (one shared ``pad…`` uid, a one-token
    response, zero reward): made here by VERL's own ``upsample_batch_to_divisible_size``."""
    keys, proto, _infos, _ = _rollout(
        v1, tokenizer, dataset_dir, policy_reply(RandomPolicy(seed=4)), pad_to=10
    )
    real = len(ROWS) * AGENTS * N
    assert len(keys) == 30 and all(estimators.is_padding_uid(k.split("_")[0]) for k in keys[real:])
    got = _advantages(proto, keys, estimator, v1)
    full = compute_advantage_for_multi_trajectories(
        proto, batch_keys=keys, adv_estimator=estimator, num_repeat=N, config=v1.algorithm
    ).batch["advantages"]
    assert torch.count_nonzero(full[real:]) == 0  # padding rows: zero advantage
    scores = proto.batch["rm_scores"].sum(-1)[:real]
    episodes = [k.split("_")[0] for k in keys[:real]]
    groups = list(proto.non_tensor_batch["uid"][:real]) if estimator == "grpo" else episodes
    # and the real rows' groups are exactly what they were without padding
    torch.testing.assert_close(got[:real], _expected(scores, groups), atol=1e-4, rtol=0)


def test_v1_drops_every_trajectory_of_an_aborted_episode_seed(v1, tokenizer, dataset_dir) -> None:
    crashed = {"done": False}

    def reply(prompt_text: str) -> str:
        if not crashed["done"] and "You are robot_1" in prompt_text and "Step 1/" in prompt_text:
            crashed["done"] = True  # one session of one agent: its rollout server call dies
            raise RuntimeError("rollout server died")
        return policy_reply(RandomPolicy(seed=5))(prompt_text)

    keys, proto, _infos, uids = _rollout(v1, tokenizer, dataset_dir, reply)
    # one session aborted; with n=2 the row's other copy would leave GRPO groups of one, so it
    # is dropped too: the whole episode seed is absent
    assert len(keys) == len(ROWS) * AGENTS * N - AGENTS * N
    per_uid = {u: sum(k.startswith(u) for k in keys) for u in uids}
    assert sorted(per_uid.values()) == [0] + [AGENTS * N] * (len(ROWS) - 1)
    # what is left are complete groups: each session's trajectories have full-length returns
    scores = proto.batch["rm_scores"].sum(-1)
    episodes = [k.split("_")[0] for k in keys]
    for estimator, groups in (
        ("team_grpo", episodes),
        ("grpo", list(proto.non_tensor_batch["uid"])),
    ):
        got = _advantages(proto, keys, estimator, v1)
        torch.testing.assert_close(got, _expected(scores, groups), atol=1e-4, rtol=0)


def test_team_grpo_refuses_rows_that_name_no_episode(v1) -> None:
    unknown = np.array([str(uuid.uuid4()) for _ in range(3)], dtype=object)  # no seat
    with pytest.raises(estimators.TeamRecordMissingError, match="3 of 3 rows name no episode"):
        estimators.team_keys(unknown)


class RecordingServer(ScriptedServer):
    """The scripted double, also writing what each call was sent and answered (JSON lines in
    ``path``): it runs inside the worker actor, so the test reads the file."""

    def __init__(self, tokenizer, reply, path: str) -> None:
        super().__init__(tokenizer, reply)
        self.path = path

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        out = await super().generate(
            request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw
        )
        with open(self.path, "a") as f:
            f.write(json.dumps({"id": request_id, "sent": list(prompt_ids), "got": out.token_ids}))
            f.write("\n")
        return out


def test_v1_batch_holds_exactly_the_ids_sent_and_generated(v1, tokenizer, dataset_dir, tmp_path):
    """Token continuity through the v1 worker: each trajectory's ids in TransferQueue (what the
    trainer reads) are its last prompt as the rollout server received it plus the tokens the
    server generated for it, and every earlier prompt is a prefix: nothing is re-tokenised."""
    log = tmp_path / "calls.jsonl"
    server = RecordingServer(tokenizer, policy_reply(RandomPolicy(seed=9)), str(log))
    keys, _, _, _ = _rollout(v1, tokenizer, dataset_dir, None, server=server)
    data = tq.kv_batch_get(
        keys=keys, partition_id="train", select_fields=["input_ids", "extra_fields"]
    )
    calls: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines():
        call = json.loads(line)
        calls.setdefault(call["id"], []).append(call)
    assert len(keys) == len(ROWS) * AGENTS * N
    for ids, extra in zip(list(data["input_ids"]), list(data["extra_fields"]), strict=True):
        turns = calls[f"{extra['teamgym_session']}/{extra['teamgym_agent']}"]
        ids = [int(t) for t in ids]
        for call in turns:  # every prompt sent, and what came back, is in the trained ids
            end = len(call["sent"])
            assert ids[:end] == call["sent"]
            assert ids[end : end + len(call["got"])] == call["got"]
        assert len(ids) == len(turns[-1]["sent"]) + len(turns[-1]["got"])


class _FixedPolicy:
    """One of the valid actions by a stable hash of the observation: two runs of the same rows
    answer alike whatever order the agents ask in."""

    def act(self, agent: str, observation: str, info: dict) -> str:
        valid = info["valid_actions"]
        return f"<action>{valid[zlib.crc32(observation.encode()) % len(valid)]}</action>"


_fixed_reply = policy_reply(_FixedPolicy())


def test_the_overridden_method_is_still_verls() -> None:
    """The method ``TeamAgentLoopWorker`` overrides is private to verl: its source is the one
    ours was written from (verl 0.9.1), no class between ours and it defines it again, and its
    parameters and the keyword arguments its Hydra call hands the loop are what ours passes;
    a verl that changes any of them fails here rather than on a cluster (re-read
    ``adapters/verl/workers.py`` against the new method, then update the hash)."""
    import ast
    import hashlib
    import inspect
    import textwrap

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from teamgym.adapters.verl import workers

    source = inspect.getsource(AgentLoopWorker._run_agent_loop)
    assert hashlib.sha256(source.encode()).hexdigest()[:16] == "32c3d607c5d4c9fa", source
    assert "_run_agent_loop" not in vars(workers._TQ_BASE)

    def params(fn):
        return [p for p in inspect.signature(fn).parameters if p != "_ray_trace_ctx"]

    assert params(AgentLoopWorker._run_agent_loop) == params(workers._DirectLoop._run_agent_loop)

    def call_keywords(fn, name):
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        calls = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(name)
        ]
        return sorted(k.arg for c in calls for k in c.keywords if k.arg)

    verls = call_keywords(AgentLoopWorker._run_agent_loop, "instantiate")
    ours = call_keywords(workers._DirectLoop._run_agent_loop, "cls")
    assert verls == sorted([*ours, "config"]), (verls, ours)


def test_teamgyms_manager_starts_teamgyms_workers() -> None:
    """The manager ``main_ppo`` gets (``runtime_config``) starts teamgym's worker class, not
    verl's (verl's ``__init__`` only stores what it is given; the workers start in ``create``)."""
    from teamgym.adapters.verl import workers

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {}, "model": {}}})
    started = workers.TeamAgentLoopManagerTQ(cfg, None).agent_loop_workers_class
    plain = started.__ray_metadata__.modified_class.__ray_actor_class__
    assert started is workers.TeamAgentLoopWorkerTQ  # an actor class of its own, as verl's is
    assert issubclass(plain, workers._DirectLoop)


# ---------------------------------------------------------------- the episode layout
EPISODES = ROWS


def _agent_of(key: str) -> tuple[str, str, int]:
    """An episode-layout key ``U_k_s_0``: (row U, seat k, session s)."""
    row, seat, session, index = key.split("_")
    assert index == "0", key
    return row, seat, int(session)


def _assert_one_episode_left_out(keys: list[str], uids: list[str]) -> None:
    """Every row but one stored all its trajectories (N sessions x 2 agents); one stored none."""
    per_row = {u: sum(_agent_of(k)[0] == u for k in keys) for u in uids}
    assert sorted(per_row.values()) == [0] + [N * 2] * (len(EPISODES) - 1), per_row


def _sloppy_listener(prompt_text: str) -> str:
    """Random play, but robot_1 answers nonsense (an invalid reply: a small penalty) on some
    turns, so the two agents' shared returns differ."""
    if "You are robot_1" in prompt_text and zlib.crc32(prompt_text.encode()) % 3 == 0:
        return "I am not sure."
    return policy_reply(RandomPolicy(seed=3))(prompt_text)


@pytest.fixture(scope="module")
def episode_rollout(v1, tokenizer, episode_dataset_dir):
    return _rollout(
        v1,
        tokenizer,
        episode_dataset_dir,
        _sloppy_listener,
        rows=EPISODES,
        worker=TeamAgentLoopWorkerTQ,
    )


@pytest.fixture(scope="module")
def padded_episode_rollout(v1, tokenizer, episode_dataset_dir):
    return _rollout(
        v1,
        tokenizer,
        episode_dataset_dir,
        policy_reply(RandomPolicy(seed=4)),
        rows=EPISODES,
        pad_to=10,
        worker=TeamAgentLoopWorkerTQ,
    )


def test_an_episode_row_stores_one_trajectory_per_agent_with_its_own_return(
    v1, episode_rollout
) -> None:
    """Each episode row's ``rollout.n`` sessions give one trajectory per trained agent, stored
    under the uid ``U_k`` (agent k of row U): verl's replay buffer took them as one group (it
    groups keys by the text before the first ``_``), and each keeps its own agent's shared
    return, not the session's last output's (verl's overwrite of earlier outputs' rewards,
    ``agent_loop_tq.py:172-175``, never applies: one output per put)."""
    keys, proto, infos, uids = episode_rollout
    assert len(keys) == len(EPISODES) * N * 2  # 2 agents a session
    parsed = [_agent_of(k) for k in keys]
    assert {r for r, _, _ in parsed} == set(uids)
    for uid in uids:
        mine = sorted((s, k) for r, k, s in parsed if r == uid)
        assert mine == [(s, k) for s in range(N) for k in ("0", "1")], uid
    stored = list(proto.non_tensor_batch["uid"])
    assert stored == [f"{r}_{k}" for r, k, _ in parsed]  # the uid field: episode and agent
    scores = proto.batch["rm_scores"].sum(-1)
    differ = 0
    for score, info, key in zip(scores.tolist(), infos, keys, strict=True):
        agent = f"robot_{_agent_of(key)[1]}"
        assert info["agents"] == '["robot_0", "robot_1"]'
        returns = tq.kv_batch_get(keys=[key], partition_id="train", select_fields=["extra_fields"])
        (extra,) = list(returns["extra_fields"])
        assert extra["teamgym_agent"] == agent
        own = extra["reward_extra_info"][f"return/{agent}"]
        assert score == pytest.approx(own), (key, score, own)
        other = extra["reward_extra_info"][f"return/robot_{1 - int(_agent_of(key)[1])}"]
        differ += own != other
    assert differ > 0, "no session where the agents' returns differ: the check above is vacuous"


def _same_figures(a: dict, b: dict) -> bool:
    """Two ``process_validation_metrics`` results equal, NaN equal to NaN (a metric an env
    leaves undefined)."""

    def flat(f: dict) -> dict:
        return {(s, v, m): x for s, vs in f.items() for v, ms in vs.items() for m, x in ms.items()}

    flat_a, flat_b = flat(a), flat(b)
    return flat_a.keys() == flat_b.keys() and all(
        (np.isnan(x) and np.isnan(flat_b[k])) or x == pytest.approx(flat_b[k])
        for k, x in flat_a.items()
    )


def test_validation_figures_count_each_episode_once(v1, episode_rollout) -> None:
    """verl's validation figures (``process_validation_metrics``, grouped by the uid field
    ``U_k`` as the v1 trainer groups them) of the episode metrics and every agent's return are
    the figures of one output per session grouped by episode: every agent's output carries its
    session's same episode metrics, so the K agents' groups repeat one episode's, and the
    mean over groups is the mean over episodes (``mean@n``, ``std@n``, ``best@n`` alike)."""
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    keys, proto, _, _ = episode_rollout
    got = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["extra_fields"])
    infos = [e["reward_extra_info"] for e in got["extra_fields"]]
    uids = list(proto.non_tensor_batch["uid"])
    names = [n for n in infos[0] if n != "budget_exhausted"]  # per agent, not per episode
    assert "success" in names and "return/robot_1" in names
    every = process_validation_metrics(
        ["signal"] * len(keys), uids, {n: [i[n] for i in infos] for n in names}
    )
    first = [j for j, k in enumerate(keys) if _agent_of(k)[1] == "0"]
    once = process_validation_metrics(
        ["signal"] * len(first),
        [_agent_of(keys[j])[0] for j in first],
        {n: [infos[j][n] for j in first] for n in names},
    )
    assert _same_figures(every, once)
    returns = [infos[j]["return/robot_0"] for j in first]
    assert len(set(returns)) > 1, "every episode returned alike: the comparison is vacuous"


def test_teamgyms_sampler_reports_the_wait_from_the_last_episode_to_the_batch(
    v1, tokenizer, episode_dataset_dir
) -> None:
    """The sampler main_ppo gets (``adapters/verl/sampler.py``) polls while the worker plays,
    and measures from the last episode's end (the ``teamgym_done_at`` tag each trajectory
    carries) to the batch: a wait inside the time the rollout took."""
    import time

    start = time.time()
    keys, _, _, _ = _rollout(
        v1,
        tokenizer,
        episode_dataset_dir,
        _sloppy_listener,
        rows=EPISODES,
        worker=TeamAgentLoopWorkerTQ,
    )
    took = time.time() - start
    metrics = SAMPLED[-1]
    tags = tq.kv_list(partition_id="train")["train"]
    done = [tags[k]["teamgym_done_at"] for k in keys if k in tags]
    assert len(done) == len(keys), "every episode trajectory carries when its episode ended"
    assert start <= min(done) <= max(done) <= start + took
    assert 0 <= metrics["training/teamgym/wait_after_last_s"] <= took, metrics
    assert 0 <= metrics["training/teamgym/sample_wait_s"] <= took, metrics
    assert metrics["training/teamgym/sample_polls"] >= 0


@pytest.mark.parametrize("estimator", ["grpo", "team_grpo"])
def test_episode_rows_group_per_agent_under_grpo_and_per_episode_under_team_grpo(
    v1, episode_rollout, padded_episode_rollout, estimator
) -> None:
    """verl's own ``grpo`` groups one agent's ``rollout.n`` trajectories of one episode (its
    uid field ``U_k``; each output is the last of its ``{uid}_{session}``, so verl's
    last-output rule scores every one), ``team_grpo`` all of an episode's; verl's padding rows
    get zero advantage in no group."""
    keys, proto, _, _ = episode_rollout
    scores = proto.batch["rm_scores"].sum(-1)
    assert scores.std() > 0, "random play should give varied shared returns"
    stored = list(proto.non_tensor_batch["uid"])
    groups = stored if estimator == "grpo" else [u.split("_")[0] for u in stored]
    assert len(set(groups)) == len(EPISODES) * (2 if estimator == "grpo" else 1)
    torch.testing.assert_close(
        _advantages(proto, keys, estimator, v1), _expected(scores, groups), atol=1e-4, rtol=0
    )
    # and with verl's padding rows (the same rollout, padded as the v1 trainer pads)
    keys, proto, _, _ = padded_episode_rollout
    real = len(EPISODES) * N * 2
    assert len(keys) == 30 and all(estimators.is_padding_uid(k.split("_")[0]) for k in keys[real:])
    full = compute_advantage_for_multi_trajectories(
        proto, batch_keys=keys, adv_estimator=estimator, num_repeat=N, config=v1.algorithm
    ).batch["advantages"]
    assert torch.count_nonzero(full[real:]) == 0


def test_an_episode_whose_model_call_fails_is_left_out_whole(
    v1, tokenizer, episode_dataset_dir
) -> None:
    """A generate call that fails mid-episode ends that session (nothing written); its row's
    other copy would leave each agent a GRPO group of one, so it is dropped too; the other
    episodes are whole."""
    crashed = {"done": False}

    def reply(prompt_text: str) -> str:
        if not crashed["done"] and "You are robot_1" in prompt_text and "Step 1/" in prompt_text:
            crashed["done"] = True
            raise RuntimeError("rollout server died")
        return policy_reply(RandomPolicy(seed=5))(prompt_text)

    keys, proto, _, uids = _rollout(
        v1, tokenizer, episode_dataset_dir, reply, rows=EPISODES, worker=TeamAgentLoopWorkerTQ
    )
    assert crashed["done"] is False  # the reply ran in the worker actor, not here
    _assert_one_episode_left_out(keys, uids)
    scores = proto.batch["rm_scores"].sum(-1)
    stored = list(proto.non_tensor_batch["uid"])
    for estimator, groups in (("grpo", stored), ("team_grpo", [u.split("_")[0] for u in stored])):
        got = _advantages(proto, keys, estimator, v1)
        torch.testing.assert_close(got, _expected(scores, groups), atol=1e-4, rtol=0)


class StallingServer(ScriptedServer):
    """The scripted double whose first answer to robot_1 in some session never comes (a hung
    engine): it runs inside the worker actor."""

    def __init__(self, tokenizer: Any, reply: Any) -> None:
        super().__init__(tokenizer, reply)
        self.stalled: str | None = None

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any
    ) -> Any:
        if self.stalled is None and request_id.endswith("#s0/robot_1"):
            self.stalled = request_id
            await asyncio.sleep(3600)
        return await super().generate(
            request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw
        )


def test_an_episode_whose_turn_times_out_is_left_out_whole(
    make_cfg_module, v1, tokenizer, episode_dataset_dir
) -> None:
    """A turn slower than ``turn_timeout`` (robot_1's reply never comes; robot_0's did) ends
    that session with nothing written, and its row's other copy (a GRPO group of one) with it;
    the rollout goes on with the other episodes whole, long before the stalled call (an hour)
    returns: ``_rollout`` gives the worker 120 s, so waiting for it would fail the test."""
    cfg = make_cfg_module(turn_timeout=2.0)
    keys, _, _, uids = _rollout(
        cfg,
        tokenizer,
        episode_dataset_dir,
        None,
        rows=EPISODES,
        server=StallingServer(tokenizer, policy_reply(RandomPolicy(seed=6))),
        worker=TeamAgentLoopWorkerTQ,
    )
    _assert_one_episode_left_out(keys, uids)


def test_the_episodes_trajectories_go_through_the_batcher(
    v1, tokenizer, episode_dataset_dir
) -> None:
    """The episode rows' trajectories reach TransferQueue through the batcher, never more than
    one put a session (how many sessions share a put depends on timing: test_verl_tq_writes.py)."""
    keys, _, _, _ = _rollout(
        v1,
        tokenizer,
        episode_dataset_dir,
        _fixed_reply,
        rows=EPISODES,
        worker=TeamAgentLoopWorkerTQ,
    )
    assert len(keys) == len(EPISODES) * AGENTS * N
    written = ray.get(WORKERS[-1].__ray_call__.remote(lambda self: self._team_puts.written))
    trajectories = [n for _, n, fields in written if fields]
    assert sum(trajectories) == len(keys)  # never more than one put a session
    assert 1 <= len(trajectories) <= len(EPISODES) * N, written
    # and the rows' statuses too (tags only): every row's "running" in one put, as the rows
    # start in one event-loop turn; then each row's "finished", batched as they finish
    statuses = [n for _, n, fields in written if not fields]
    assert statuses[0] == len(EPISODES) and sum(statuses) == 2 * len(EPISODES), written


def test_the_verl_conventions_the_episode_layout_relies_on() -> None:
    """What teamgym's episode layout reads of verl 0.9.1's private code, pinned: the v1 worker's
    key format and its uid field taken from the call's keyword arguments; the replay buffer
    grouping keys by the text before the first ``_``; ``grpo`` and validation parsing
    ``{uid}_{session}_{index}`` from the right. A verl that changes one fails here first
    (re-read ``adapters/verl/workers.py``, ``tq_writes.py`` and ``episode_loop.py``)."""
    import hashlib
    import inspect

    from verl.trainer.ppo.v1 import replay_buffer, trainer_base, utils

    post = inspect.getsource(
        AgentLoopWorkerTQ.__ray_metadata__.modified_class._agent_loop_postprocess
    )
    # tq_writes.trajectory_record is this method's per-output body: re-read it on a change
    assert hashlib.sha256(post.encode()).hexdigest()[:16] == "523edacbff73640d", post
    assert 'keys.append(f"{uid}_{session_id}_{i}")' in post
    # workers.TeamAgentLoopWorkerTQ._run_prompt is this method with its status puts batched
    run = inspect.getsource(AgentLoopWorkerTQ.__ray_metadata__.modified_class._run_prompt)
    assert hashlib.sha256(run.encode()).hexdigest()[:16] == "3d9bca6b0ea5fe25", run
    assert run.count("await tq.async_kv_put(key=uid, partition_id=partition_id, tag=") == 3
    assert "field.update(kwargs)" in post
    assert 'uid, session_id = kwargs["uid"], kwargs["session_id"]' in post
    buffer = inspect.getsource(replay_buffer)
    assert buffer.count('key.split("_")[0]') >= 4
    assert 'fields = key.rsplit("_", 2)' in inspect.getsource(utils)
    assert 'parts = key.rsplit("_", 2)' in inspect.getsource(trainer_base)
    # verl's uids (dataset rows and padding) never hold the separator; only a row uid and a
    # seat read as an episode-layout uid
    row = str(uuid.uuid4())
    assert "_" not in row
    assert estimators.episode_of(f"{row}_3") == row
    assert estimators.episode_of(row) is None and estimators.episode_of(f"pad{'0' * 32}") is None
    assert (
        estimators.episode_of("uid_sample_7") is None and estimators.episode_of(f"{row}_x") is None
    )


def test_the_same_episode_rows_give_the_same_trajectories_and_advantages(
    v1, tokenizer, model_dir, episode_dataset_dir
) -> None:
    """Reproducible: the local model server samples each request from a generator seeded by the
    request id and prompt, and the episode loop's request ids name the episode and the copy, not
    verl's random uid. Two rollouts of the same rows (fresh uids, each in a new worker actor
    process) give the same trajectories and each the same reward and advantage under both
    estimators; verl collects outputs in completion order, so they are matched by (copy,
    agent)."""
    from teamgym.adapters.cpu.server import LocalModelServer

    played = []
    for _ in range(2):
        keys, proto, _, _ = _rollout(
            v1,
            tokenizer,
            episode_dataset_dir,
            None,
            rows=EPISODES,
            server=LocalModelServer(model_dir, seed=0),
            worker=TeamAgentLoopWorkerTQ,
        )
        fields = ["input_ids", "response_mask", "extra_fields"]
        data = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=fields)
        scores = proto.batch["rm_scores"].sum(-1).tolist()
        advantages = {e: _advantages(proto, keys, e, v1).tolist() for e in ("grpo", "team_grpo")}
        played.append(
            {
                (extra["teamgym_session"], extra["teamgym_agent"]): (
                    tuple(int(t) for t in ids),
                    tuple(int(m) for m in mask),
                    round(scores[i], 6),
                    tuple(round(advantages[e][i], 5) for e in ("grpo", "team_grpo")),
                )
                for i, (ids, mask, extra) in enumerate(
                    zip(data["input_ids"], data["response_mask"], data["extra_fields"], strict=True)
                )
            }
        )
    first, second = played
    assert len(first) == len(EPISODES) * N * 2
    assert first == second


# ---------------------------------------------------------------- partners (issue 40)
def _partner_dataset(out, partners: list[str]):
    """4 training episodes of signal-v0 (2 rounds) with robot_0 played by the pool ``partners``."""
    from teamgym.adapters.verl.dataset import build_dataset
    from teamgym.envs.partners import PartnerPool

    pool = PartnerPool.parse(partners, seats=["robot_0"])
    build_dataset("signal-v0", out, 4, 0, {"num_rounds": 2}, partners=pool)
    return out, pool


def test_a_partner_served_over_http_plays_its_seat_and_never_enters_the_batch(
    v1, tokenizer, model_dir, serve_process, tmp_path
) -> None:
    """robot_0 is a frozen model behind a real ``teamgym serve`` on loopback (the kind of
    server a vLLM serving a checkpoint is): the episode loop asks it each turn, next to the
    trained robot_1's requests. Only robot_1's trajectories are stored (seat 1, no seat-0
    key), their model tokens are the trained replies only, and every output records the
    partner's answered turns and latency."""
    server = serve_process(model_dir)
    try:
        spec = f"openai:{model_dir}@{server.url}"
        data, _ = _partner_dataset(tmp_path / "data", [spec])
        keys, proto, infos, _ = _rollout(
            v1,
            tokenizer,
            data,
            policy_reply(RandomPolicy(seed=6)),
            rows=tuple(range(4)),
            worker=TeamAgentLoopWorkerTQ,
        )
    finally:
        server.stop()
    assert len(keys) == 4 * N  # one trained agent a session
    assert {_agent_of(k)[1] for k in keys} == {"1"}, keys
    assert all(json.loads(i["teammates"]) == {"robot_0": spec} for i in infos)
    data_fields = tq.kv_batch_get(
        keys=keys, partition_id="train", select_fields=["extra_fields", "responses"]
    )
    for extra in data_fields["extra_fields"]:
        assert extra["teamgym_agent"] == "robot_1"
        metrics = extra["reward_extra_info"]
        assert metrics["partner_replies"] >= 2  # a turn a round at least
        assert metrics["partner_latency_s"] > 0
        assert "return/robot_0" not in metrics  # the partner has no return to train on
    mask = proto.batch["response_mask"]
    trained_turns = sum(len(e["teamgym_replies"]) for e in data_fields["extra_fields"])
    assert int(mask.sum()) > 0 and trained_turns > 0


def test_a_pool_picks_by_seed_and_a_failing_partner_leaves_its_episodes_out(
    v1, tokenizer, tmp_path
) -> None:
    """A pool of the scripted expert and a partner whose server is down (no retries): the
    pool's pick, written into each row, decides which episodes fail; those rows store nothing
    (never trained on), the expert's episodes are whole."""
    dead = json.dumps(
        {
            "kind": "openai",
            "model": "frozen",
            "base_url": "http://127.0.0.1:9/v1",  # the discard port: nothing listens
            "max_retries": 0,
            "timeout": 5,
        }
    )
    data, pool = _partner_dataset(tmp_path / "data", ["expert", dead])
    keys, _, _, uids = _rollout(
        v1,
        tokenizer,
        data,
        policy_reply(RandomPolicy(seed=7)),
        rows=tuple(range(4)),
        worker=TeamAgentLoopWorkerTQ,
    )
    import pandas as pd

    rows = pd.read_parquet(data / "train.parquet")
    picked = [pool.pick(int(i["seed"])) for i in rows["extra_info"]]
    assert [i["partner"] for i in rows["extra_info"]] == picked
    assert set(picked) == {"expert", dead}, "the draw should give both partners in 4 episodes"
    stored = {u: sum(_agent_of(k)[0] == u for k in keys) for u in uids}
    assert [stored[u] for u in uids] == [N if p == "expert" else 0 for p in picked]


@pytest.mark.parametrize("estimator", ["at_grpo", "team_at_grpo", "gigpo", "team_gigpo"])
def test_turn_level_estimators_get_each_turns_reward_and_anchor_through_stock_verl(
    v1, tokenizer, episode_dataset_dir, estimator
) -> None:
    """Under a turn-level estimator teamgym's worker writes each turn's reward on the last token
    of its reply (``rm_scores``, still summing to the agent's return) and, for GiGPO, the turns'
    anchor keys in the uid; verl's own advantage step (the v1 trainer's) then gives what
    :mod:`teamgym.adapters.credit` computes from the trajectory's recorded turns. (The scripted
    server answers a prompt the same way in every copy, so the team variants, whose groups hold
    both agents, are the ones sure to give non-zero advantages here.)"""
    from teamgym.adapters.credit import (
        anchor_key,
        at_grpo_advantages,
        gigpo_advantages,
        turn_runs,
    )
    from teamgym.adapters.verl.estimators import split_anchors

    cfg = OmegaConf.create(OmegaConf.to_container(v1, resolve=True))
    cfg.algorithm.adv_estimator = estimator
    cfg.algorithm.gamma = 0.9
    keys, proto, infos, _ = _rollout(
        cfg, tokenizer, episode_dataset_dir, _sloppy_listener, rows=EPISODES,
        worker=TeamAgentLoopWorkerTQ,
    )  # fmt: skip
    uids, anchors = split_anchors(proto.non_tensor_batch["uid"])
    rewards, mask = proto.batch["rm_scores"], proto.batch["response_mask"]
    several, intermediate = 0, 0
    for i, key in enumerate(keys):
        (extra,) = list(
            tq.kv_batch_get(keys=[key], partition_id="train", select_fields=["extra_fields"])[
                "extra_fields"
            ]
        )
        runs = turn_runs(mask[i])
        assert len(runs) == len(extra["turn_scores"]) > 0
        own = extra["reward_extra_info"][f"return/{extra['teamgym_agent']}"]
        assert float(rewards[i].sum()) == pytest.approx(own, abs=1e-6)
        nonzero = set(torch.nonzero(rewards[i]).flatten().tolist())
        assert nonzero <= {end - 1 for _, end in runs}
        for (_, end), score in zip(runs, extra["turn_scores"], strict=True):
            assert float(rewards[i, end - 1]) == pytest.approx(score, abs=1e-6)
        several += len(runs) > 1
        intermediate += len(nonzero) > 1
        assert uids[i] == key.rsplit("_", 2)[0].partition("~")[0]
        if "gigpo" in estimator:
            assert anchors[i] == extra["teamgym_turn_anchors"]
            prompts = json.loads(infos[i]["prompts"])[extra["teamgym_agent"]]
            assert anchors[i][0] == anchor_key(prompts[-1]["content"])  # the first observation
        else:
            assert anchors[i] == []  # the uid is verl's U_k
    assert several and intermediate, "no multi-turn trajectory with rewards on several turns"
    adv = compute_advantage_for_multi_trajectories(
        proto, batch_keys=keys, adv_estimator=estimator, num_repeat=N, config=cfg.algorithm
    ).batch["advantages"]
    groups = [u.split("_")[0] for u in uids] if estimator.startswith("team_") else list(uids)
    if "gigpo" in estimator:
        want = gigpo_advantages(rewards, mask, groups, anchors, 0.9)
    else:
        want = at_grpo_advantages(rewards, mask, groups, 0.9)
    assert torch.equal(adv, want)
    if estimator.startswith("team_"):
        assert torch.any(adv != 0)
