"""teamgym's replay buffer (``adapters/verl/sampler.py``): verl's own classes with a fitted
poll, built the way verl's v1 trainer builds a custom sampler, from the settings teamgym's
train entry hands it. Through a real TransferQueue and ``main_ppo``: ``test_verl_v1.py`` and
``test_verl_main_ppo.py``."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf
from verl.trainer.ppo.v1 import replay_buffer, trainer_base
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

from teamgym.adapters.verl import sampler as team_sampler
from teamgym.adapters.verl.config import (
    SAMPLER_NAME,
    SAMPLER_PATH,
    TeamConfigError,
    check_row_changes,
)
from teamgym.adapters.verl.sampler import (
    VERL_SETTINGS,
    TeamReplayBuffer,
    TeamReplayBufferAsync,
    sampler_settings,
    team_replay_buffer,
)
from teamgym.adapters.verl.train import compose_config, runtime_config


def _kwargs(mode: str = "sync", **sampler_kwargs) -> dict:
    """What verl's ``_build_replay_buffer`` passes a custom sampler (trainer_base.py)."""
    settings = dict.fromkeys(VERL_SETTINGS)
    settings.update(sync_refill_failed_groups=False, gen_batch_size=4, train_batch_size=4)
    settings["max_inflight_gen_batches"] = 1
    return dict(
        trainer_mode=mode,
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({**settings, **sampler_kwargs}),
        refill_fn=lambda n: None,
    )


def test_the_poll_starts_short_doubles_while_nothing_finishes_and_resets_on_progress(
    monkeypatch,
) -> None:
    """The wait before each poll: ``min_poll_interval`` after a group reached a terminal
    status, twice the last one while none did (a trajectory arriving alone is no progress),
    never above the maximum; verl's own sleep does the waiting."""
    slept: list[float] = []
    monkeypatch.setattr(replay_buffer.time, "sleep", slept.append)
    buffer = team_replay_buffer(**_kwargs(min_poll_interval=0.01, max_poll_interval=0.05))
    assert isinstance(buffer, TeamReplayBuffer) and isinstance(buffer, ReplayBuffer)
    for _ in range(5):  # nothing new: 0.01 (first look), then doubling up to the cap
        buffer._wait_for_next_poll("train", 0.0)
    buffer.finished_keys["train"].add("a")  # a group finished
    buffer._wait_for_next_poll("train", 0.0)
    buffer.partitions["train"]["b_0_0_0"] = {}  # a trajectory arrived: no group is done
    buffer._wait_for_next_poll("train", 0.0)
    buffer.failure_keys["train"].add("c")  # a group failed: terminal too
    buffer._wait_for_next_poll("train", 0.0)
    assert slept == [0.01, 0.02, 0.04, 0.05, 0.05, 0.01, 0.02, 0.01]
    assert buffer.polls == 8
    defaults = team_replay_buffer(**_kwargs())
    assert (defaults.min_poll_interval, defaults.max_poll_interval) == (0.05, 0.5)


def test_the_buffer_follows_the_trainer_mode_and_gets_verls_own_settings() -> None:
    """Sync: verl's ``ReplayBuffer`` with DAPO's metric, the refill switch and the batch sizes
    verl would give its own; async: ``ReplayBufferAsync`` with the metric and the switch."""
    sync = team_replay_buffer(**_kwargs(filter_groups_metric="team_return", gen_batch_size=1))
    assert sync.filter_groups_metric == "team_return" and sync.gen_batch_size == 1
    async_ = team_replay_buffer(**_kwargs("colocate_async", sync_refill_failed_groups=True))
    assert isinstance(async_, TeamReplayBufferAsync) and isinstance(async_, ReplayBufferAsync)
    assert async_.sync_refill_failed_groups is True


def test_a_buffer_without_verls_settings_is_refused() -> None:
    """A custom sampler gets no DAPO or refill settings from verl: without teamgym's train
    entry adding them, the buffer refuses rather than run with DAPO silently off."""
    kwargs = _kwargs()
    kwargs["sampler_kwargs"] = OmegaConf.create({"min_poll_interval": 0.01})
    with pytest.raises(ValueError, match="lacks filter_groups_metric.*teamgym.adapters.verl.train"):
        team_replay_buffer(**kwargs)
    with pytest.raises(ValueError, match="0 < min_poll_interval <= max_poll_interval"):
        team_replay_buffer(**_kwargs(min_poll_interval=1.0, max_poll_interval=0.5))


def test_verl_builds_a_custom_sampler_as_teamgym_expects() -> None:
    """What this module relies on in verl 0.9.1, pinned: a custom sampler is loaded by path and
    name and called with these keywords only (no DAPO or refill settings), and the poll's wait
    is one overridable method that sleeps ``self.poll_interval``."""
    build = inspect.getsource(trainer_base.PPOTrainer._build_replay_buffer)
    assert "load_extern_type(custom_sampler.path, custom_sampler.name)" in build
    for keyword in ("trainer_mode=", "sampler_kwargs=", "refill_fn=", "max_off_policy_threshold="):
        assert keyword in build
    assert "if not has_custom_sampler:" in build  # DAPO's settings go to verl's own only
    wait = inspect.getsource(ReplayBuffer._wait_for_next_poll)
    assert "time.sleep(self.poll_interval)" in wait
    for method in (ReplayBuffer.sample, ReplayBufferAsync.wait_for_sampleable):
        assert "self._wait_for_next_poll(partition_id, last_debug_time)" in inspect.getsource(
            method
        )


def test_teamgyms_config_plugs_it_in_and_the_train_entry_adds_verls_settings(
    dataset_dir,
) -> None:
    """The overlay names teamgym's buffer; ``runtime_config`` (what ``main_ppo`` gets) adds
    DAPO's and the refill's settings as verl computes them for its own sampler."""
    overrides = [
        f"teamgym.dataset_dir={dataset_dir}",
        "data.train_batch_size=8",
        "algorithm.filter_groups.enable=true",
        "algorithm.filter_groups.metric=team_return",
    ]
    cfg = compose_config(overrides)
    custom = cfg.trainer.v1.sampler.custom_sampler
    assert (custom.path, custom.name) == (SAMPLER_PATH, SAMPLER_NAME)
    given = runtime_config(cfg).trainer.v1.sampler.sampler_kwargs
    assert given.filter_groups_metric == "team_return" and given.gen_batch_size == 1
    assert given.train_batch_size == 8 and given.min_poll_interval == 0.05
    plain = sampler_settings(compose_config(overrides[:2]))
    assert plain["filter_groups_metric"] is None and plain["gen_batch_size"] == 8
    # and verl's own loader finds it under that path and name
    from verl.utils.import_utils import load_extern_type

    assert load_extern_type(custom.path, custom.name) is team_sampler.team_replay_buffer


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.v1.sampler.custom_sampler.name=Other", "custom_sampler=pkg://teamgym"),
        (  # verl would load a path without pkg:// as a file, and fail after Ray started
            "trainer.v1.sampler.custom_sampler.path=teamgym.adapters.verl.sampler",
            "set path=pkg://teamgym.adapters.verl.sampler name=team_replay_buffer",
        ),
        ("trainer.v1.sampler.sampler_kwargs.min_poll_interval=0", "0 < min_poll_interval"),
        (
            "algorithm.filter_groups.enable=true algorithm.filter_groups.metric=team_return "
            "reward.reward_model.enable=true",
            "colocated reward model",
        ),
    ],
)
def test_the_checks_refuse_another_sampler_and_bad_intervals(
    dataset_dir, override, message
) -> None:
    cfg = compose_config([f"teamgym.dataset_dir={dataset_dir}", *override.split()])
    with pytest.raises(TeamConfigError, match=message):
        check_row_changes(cfg)
    base = f"teamgym.dataset_dir={dataset_dir}"
    for unset in (["path=null", "name=null"], ["path=null"]):  # verl's own: it needs both set
        verls = compose_config([base, *(f"trainer.v1.sampler.custom_sampler.{u}" for u in unset)])
        check_row_changes(verls)
