"""VERL's v1 trainer path (what ``main_ppo`` runs by default) on CPU: the real
``AgentLoopWorkerTQ`` Ray actor runs our loop and writes into a real TransferQueue; the
trainer's ``ReplayBuffer`` samples the batch and ``compute_advantage_for_multi_trajectories``
computes advantages in this (the trainer's) process, for ``grpo`` and ``team_grpo``."""

from __future__ import annotations

import json
import uuid

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
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

from teamgym.adapters.verl import advantage
from teamgym.adapters.verl.server import ScriptedServer, policy_reply
from teamgym.adapters.verl.train import setup_worker
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

    def make():
        loop = loop_yaml_writer(tmp_path_factory.mktemp("loop") / "loop.yaml", max_reply_tokens=64)
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


ROWS = tuple(range(12))  # 6 episodes x 2 agents
WORKERS: list = []  # the agent-loop workers of this module's Ray job (the first owns the registry)


def _rollout(cfg, tokenizer, dataset_dir, reply, rows=ROWS, step=1, pad_to=None, server=None):
    """What the v1 trainer does for one step: uid the rows, register them as pending prompts,
    run the worker, then sample the finished (or failed) groups from the replay buffer; with
    ``pad_to``, pad the batch to a multiple of it with VERL's own synthetic rows, as the v1
    trainer's ``_balance_batch`` does."""
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
    worker = AgentLoopWorkerTQ.remote(cfg, server or ScriptedServer(tokenizer, reply), None, None)
    WORKERS.append(worker)  # verl's manager keeps its workers for the whole job; so do we
    ray.get(worker.generate_sequences.remote(batch), timeout=120)
    buffer = ReplayBuffer(
        trainer_mode="sync",
        trainer_config=cfg.trainer,
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        poll_interval=0.2,
    )
    meta, _ = buffer.sample(global_steps=step, partition_id="train", batch_size=len(rows))
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
    keys, proto, infos, uids = complete_rollout
    assert len(keys) == len(ROWS) * N and {k.split("_")[0] for k in keys} == set(uids)
    scores = proto.batch["rm_scores"].sum(-1)
    assert scores.std() > 0, "random play should give varied shared returns"
    # uid -> episode was recorded in the worker actor's registry; this process never saw it
    assert all(u not in advantage._LOCAL.teams for u in uids)
    episodes = [str(i["episode"]) for i in infos]
    assert list(advantage.team_keys(proto.non_tensor_batch["uid"])) == episodes
    groups = list(proto.non_tensor_batch["uid"]) if estimator == "grpo" else episodes
    assert len(set(groups)) == (len(ROWS) if estimator == "grpo" else len(ROWS) // 2)
    got = _advantages(proto, keys, estimator, v1)
    torch.testing.assert_close(got, _expected(scores, groups), atol=1e-4, rtol=0)


@pytest.mark.parametrize("estimator", ["grpo", "team_grpo"])
def test_verls_padding_rows_get_zero_advantage_in_no_group(
    v1, tokenizer, dataset_dir, estimator
) -> None:
    """The v1 trainer pads the batch with synthetic rows (one shared ``pad…`` uid, a one-token
    response, zero reward): made here by VERL's own ``upsample_batch_to_divisible_size``."""
    keys, proto, infos, _ = _rollout(
        v1, tokenizer, dataset_dir, policy_reply(RandomPolicy(seed=4)), pad_to=10
    )
    real = len(ROWS) * N
    assert len(keys) == 30 and all(advantage.is_padding_uid(k.split("_")[0]) for k in keys[real:])
    got = _advantages(proto, keys, estimator, v1)
    full = compute_advantage_for_multi_trajectories(
        proto, batch_keys=keys, adv_estimator=estimator, num_repeat=N, config=v1.algorithm
    ).batch["advantages"]
    assert torch.count_nonzero(full[real:]) == 0  # padding rows: zero advantage
    scores = proto.batch["rm_scores"].sum(-1)[:real]
    episodes = [str(i["episode"]) for i in infos[:real]]
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

    keys, proto, infos, uids = _rollout(v1, tokenizer, dataset_dir, reply)
    # one instance aborted (its 2 sessions); with n=2 the other copy of each of its rows would
    # be a GRPO group of one, so it is dropped too: the whole episode seed is absent
    assert len(keys) == len(ROWS) * N - 2 * N
    per_uid = {u: sum(k.startswith(u) for k in keys) for u in uids}
    assert sorted(per_uid.values()) == [0, 0] + [N] * (len(ROWS) - 2)
    # what is left are complete groups: each instance's rows have full-length returns
    scores = proto.batch["rm_scores"].sum(-1)
    episodes = [str(i["episode"]) for i in infos]
    for estimator, groups in (
        ("team_grpo", episodes),
        ("grpo", list(proto.non_tensor_batch["uid"])),
    ):
        got = _advantages(proto, keys, estimator, v1)
        torch.testing.assert_close(got, _expected(scores, groups), atol=1e-4, rtol=0)


def test_team_grpo_refuses_rows_without_a_record(v1) -> None:
    unknown = np.array([str(uuid.uuid4()) for _ in range(3)], dtype=object)
    with pytest.raises(advantage.TeamRecordMissingError, match="3 of 3 rows"):
        advantage.team_keys(unknown)


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
    assert len(keys) == len(ROWS) * N
    for ids, extra in zip(list(data["input_ids"]), list(data["extra_fields"]), strict=True):
        turns = calls[f"{extra['teamgym_instance']}/{extra['teamgym_agent']}"]
        ids = [int(t) for t in ids]
        for call in turns:  # every prompt sent, and what came back, is in the trained ids
            end = len(call["sent"])
            assert ids[:end] == call["sent"]
            assert ids[end : end + len(call["got"])] == call["got"]
        assert len(ids) == len(turns[-1]["sent"]) + len(turns[-1]["got"])
