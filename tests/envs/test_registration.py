"""The registry: ids, errors that help, third-party plugins through a real dist-info, and
foreign PettingZoo envs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pettingzoo import ParallelEnv

from teamgym.envs import make, register, registry, spec
from teamgym.envs.registration import _REGISTRY
from teamgym.envs.signal import SignalEnv


@pytest.fixture
def scratch_ids():
    """Remove the ids a test registers."""
    before = set(_REGISTRY)
    yield
    for key in set(_REGISTRY) - before:
        del _REGISTRY[key]


def test_make_signal_with_overrides() -> None:
    env = make("signal-v0", num_agents=3)
    assert isinstance(env, SignalEnv)
    assert env.possible_agents == ["robot_0", "robot_1", "robot_2"]


def test_registry_lists_ids_with_descriptions() -> None:
    ids = registry()
    assert "signal-v1" in ids and "signal-v0" in ids
    assert "speaker" in ids["signal-v1"]
    assert "superseded by signal-v1" in ids["signal-v0"]


def test_unknown_id_names_close_matches() -> None:
    with pytest.raises(KeyError, match="Did you mean 'signal-v0'"):
        make("signl-v0")
    with pytest.raises(KeyError, match="signal-v1"):
        make("signal-v2")


def test_latest_versions_keep_the_newest_of_each_env() -> None:
    from teamgym.envs.registration import latest_versions

    assert latest_versions(["signal-v1", "foo-v0", "signal-v0", "foo-v3", "plain"]) == [
        "signal-v1",
        "foo-v3",
        "plain",
    ]
    assert "signal-v0" not in latest_versions(registry()) and "signal-v1" in latest_versions(
        registry()
    )


def test_signal_v0_keeps_its_wording_and_v1_says_a_message_arrived() -> None:
    """signal-v0 is 0.1.0's game byte for byte; signal-v1 only changes that feedback line."""
    for env_id, expected in (("signal-v0", "Nothing happened."), ("signal-v1", "You received")):
        env = make(env_id, num_agents=3)
        env.reset(seed=0)
        replies = {a: "<action>wait</action>" for a in env.agents}
        replies[env.speaker] = "<say>small blue circle</say><action>say</action>"
        _, _, _, _, infos = env.step(replies)
        listener = next(a for a in env.agents if a != env.speaker)
        assert infos[listener]["feedback"].startswith(expected), (
            env_id,
            infos[listener]["feedback"],
        )


def test_bad_kwargs_name_the_accepted_ones() -> None:
    with pytest.raises(
        TypeError, match=r"unknown argument\(s\) 'num_agent'.*accepted:.*num_agents"
    ):
        make("signal-v0", num_agent=3)
    # keywords of the TextParallelEnv base (forwarded through **base) are accepted
    assert make("signal-v0", message_max_tokens=8).message_max_tokens == 8
    with pytest.raises(ValueError, match="num_agents must be"):
        make("signal-v0", num_agents=9)


def test_reregistering_needs_force(scratch_ids) -> None:
    register("scratch-v0", "teamgym.envs.signal:SignalEnv", num_rounds=1)
    with pytest.raises(ValueError, match=r"already registered.*force=True"):
        register("scratch-v0", "teamgym.envs.signal:SignalEnv")
    register("scratch-v0", "teamgym.envs.signal:SignalEnv", force=True, num_rounds=3)
    assert make("scratch-v0").num_rounds == 3
    assert make("scratch-v0", num_rounds=2).num_rounds == 2


@pytest.mark.parametrize("bad", ["scratch", "scratch-v", "Scratch v0", "", "-v0"])
def test_ids_must_be_versioned(bad: str, scratch_ids) -> None:
    with pytest.raises(ValueError, match="versioned"):
        register(bad, "teamgym.envs.signal:SignalEnv")


def test_registration_is_lazy(scratch_ids) -> None:
    register("lazy-v0", "no_such_module_xyz:Env")  # nothing imported yet
    with pytest.raises(ImportError, match=r"no_such_module_xyz.*installed"):
        make("lazy-v0")
    assert "unavailable" in registry()["lazy-v0"]


def test_make_rejects_non_parallel_envs(scratch_ids) -> None:
    register("notenv-v0", dict)
    with pytest.raises(TypeError, match=r"not a pettingzoo.ParallelEnv"):
        make("notenv-v0")


def test_make_wraps_a_foreign_pettingzoo_env() -> None:
    env = make("mpe2.simple_spread_v3:parallel_env", N=2, max_cycles=5)
    assert isinstance(env, ParallelEnv)
    obs, _ = env.reset(seed=0)
    assert set(obs) == set(env.possible_agents)


def test_register_a_foreign_pettingzoo_env(scratch_ids) -> None:
    register("mpe-spread-v0", "mpe2.simple_spread_v3:parallel_env", N=3, max_cycles=10)
    env = make("mpe-spread-v0")
    assert len(env.possible_agents) == 3
    assert spec("mpe-spread-v0").kwargs == {"N": 3, "max_cycles": 10}


def test_third_party_plugin_through_an_installed_dist_info(tmp_path: Path, run_python) -> None:
    """A package on sys.path with a real ``entry_points.txt`` in group ``teamgym.envs``."""
    pkg = tmp_path / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent('''
        """A third-party env package."""
        from teamgym.envs.signal import SignalEnv

        class TinySignal(SignalEnv):
            """Tiny referential game from a plugin."""
    ''')
    )
    dist = tmp_path / "plugpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugpkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[teamgym.envs]\nplug-signal-v0 = plugpkg:TinySignal\nbad id = plugpkg:TinySignal\n"
    )
    (dist / "RECORD").write_text("")
    code = textwrap.dedent("""
        import warnings
        from teamgym.envs import make, registry
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ids = registry()
        assert ids["plug-signal-v0"] == "Tiny referential game from a plugin.", ids
        assert any("bad id" in str(w.message) for w in caught), [str(w.message) for w in caught]
        env = make("plug-signal-v0", num_agents=3)
        assert type(env).__name__ == "TinySignal" and len(env.possible_agents) == 3
        print("plugin ok")
    """)
    out = run_python(code, env={"PYTHONPATH": str(tmp_path)})
    assert "plugin ok" in out.stdout


@pytest.mark.parametrize(
    ("typed", "offered"),
    [
        ("nosuch-v0", []),
        ("kitchn-v0", ["kitchen-v0"]),
        ("forage-v0", ["foraging-v0"]),
        ("signal-v7", ["signal-v0", "signal-v1"]),
        ("thor-asembly-v0", ["thor-assembly-v0"]),
        ("hanabi", ["hanabi-v0"]),
    ],
)
def test_close_matches_are_only_close_names(typed: str, offered: list[str]) -> None:
    """A match is offered only for a name close to a registered one (issue 39: ``nosuch-v0``
    was offered ``kitchen-v0``); a wrong version offers the versions there are."""
    from teamgym.envs.registration import _close_ids

    assert _close_ids(typed, list(registry())) == offered
    with pytest.raises(KeyError) as err:
        make(typed)
    assert ("Did you mean" in str(err.value)) == bool(offered)
