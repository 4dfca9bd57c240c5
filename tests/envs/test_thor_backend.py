"""backend="thor": the real ai2thor 5.0.0 client, end to end against our stand-in Unity process
(it speaks ai2thor's FIFO protocol and serves the symbolic world), and its failure modes."""

from __future__ import annotations

import ctypes.util
import time
from pathlib import Path

import pytest

pytest.importorskip("ai2thor")

from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode
from teamgym.envs.thor_assembly.stand_in_unity import write_launcher
from teamgym.envs.thor_assembly.thor_backend import (
    THOR_COMMIT,
    ThorBackendError,
    make_thor_controller,
)
from teamgym.envs.wrappers import Recorder

ID = "thor-assembly-v0"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    return write_launcher(tmp_path_factory.mktemp("unity"))


def _task_state(env) -> tuple:
    return (
        sorted(env.assembly.placed),
        sorted(env.assembly.conn_state.items()),
        sorted((a, env.assembly.at[a]) for a in env.possible_agents),
        sorted(env.assembly.travel.items()),
        env.assembly.inspection_passed,
    )


def _play(env, seed: int) -> list[tuple]:
    expert = make_baseline(ID, "expert")
    expert.bind(env)
    expert.reset(seed)
    obs, infos = env.reset(seed=seed)
    states = [_task_state(env)]
    while env.agents:
        obs, _, _, _, new = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
        infos.update(new)
        states.append(_task_state(env))
    return states


def test_real_ai2thor_client_runs_the_task_like_the_symbolic_backend(stand_in: Path) -> None:
    thor = make(
        ID,
        num_agents=3,
        backend="thor",
        backend_options={"local_executable_path": str(stand_in), "x_display": ":0"},
    )
    symbolic = make(ID, num_agents=3)
    import ai2thor.controller

    for seed in (0, 1):
        a, b = _play(thor, seed), _play(symbolic, seed)
        assert isinstance(thor.controller, ai2thor.controller.Controller)
        assert type(thor.controller.last_event).__name__ == "MultiAgentEvent"
        assert a == b, "task-level state differs between the thor and symbolic backends"
        assert a[-1][-1], "the expert finished the product through the real client"
    thor.close()


def test_trajectories_are_byte_identical_across_backends(stand_in: Path) -> None:
    hashes = {}
    for backend, opts in (
        ("symbolic", {}),
        ("thor", {"local_executable_path": str(stand_in), "x_display": ":0"}),
    ):
        env = Recorder(make(ID, num_agents=2, backend=backend, backend_options=opts))
        run_episode(env, make_baseline(ID, "expert"), seed=7)
        hashes[backend] = env.episodes[-1]["trajectory_hash"]
        env.close()
    assert hashes["symbolic"] == hashes["thor"]


def test_unity_dying_before_it_connects_is_a_fast_error(stand_in: Path, monkeypatch) -> None:
    monkeypatch.setenv("TEAMGYM_STAND_IN_MODE", "crash")
    start = time.perf_counter()
    with pytest.raises(
        ThorBackendError, match=r"Unity process exited \(code 3\) before it connected"
    ):
        make_thor_controller(
            "FloorPlan1", 2, local_executable_path=str(stand_in), x_display=":0", start_timeout=60
        )
    assert time.perf_counter() - start < 30, "ai2thor 5.0.0 alone would block forever here"


def test_unity_that_never_connects_times_out(stand_in: Path, monkeypatch) -> None:
    monkeypatch.setenv("TEAMGYM_STAND_IN_MODE", "hang")
    start = time.perf_counter()
    with pytest.raises(ThorBackendError, match="did not connect within 2 s"):
        make_thor_controller(
            "FloorPlan1", 2, local_executable_path=str(stand_in), x_display=":0", start_timeout=2
        )
    assert time.perf_counter() - start < 30


def test_local_executable_without_display_is_explained(stand_in: Path, monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(ThorBackendError, match="needs a display string.*x_display"):
        make_thor_controller("FloorPlan1", 2, local_executable_path=str(stand_in))
    with pytest.raises(ThorBackendError, match="is not an executable file"):
        make_thor_controller(
            "FloorPlan1", 2, local_executable_path="/nonexistent/thor", x_display=":0"
        )


def test_no_cached_build_offline_is_explained_without_any_download(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(
        ThorBackendError, match=f"no AI2-THOR build for commit {THOR_COMMIT}.*download_only=True"
    ):
        make_thor_controller("FloorPlan1", 2)
    env = make(ID, num_agents=2, backend="thor")
    with pytest.raises(ThorBackendError, match="allow_download"):
        env.reset(seed=0)


@pytest.mark.skipif(
    ctypes.util.find_library("vulkan") is not None, reason="this machine has Vulkan"
)
def test_cloudrendering_without_vulkan_is_explained() -> None:
    with pytest.raises(ThorBackendError, match="libvulkan1"):
        make_thor_controller("FloorPlan1", 2, platform="CloudRendering")


def _real_build() -> Path | None:
    release = Path.home() / ".ai2thor" / "releases" / f"thor-Linux64-{THOR_COMMIT}"
    return release if release.is_dir() else None


@pytest.mark.skipif(
    _real_build() is None,
    reason="no real AI2-THOR build cached in ~/.ai2thor (cannot be downloaded here)",
)
def test_real_build_matches_the_symbolic_backend() -> None:
    thor = make(ID, num_agents=2, backend="thor", scene="FloorPlan1", recipe="breakfast_tray")
    symbolic = make(ID, num_agents=2, scene="FloorPlan1", recipe="breakfast_tray")
    assert _play(thor, 0) == _play(symbolic, 0)


def test_unity_dying_mid_episode_is_one_clear_error(stand_in: Path) -> None:
    env = make(
        ID,
        num_agents=2,
        backend="thor",
        backend_options={"local_executable_path": str(stand_in), "x_display": ":0"},
    )
    env.reset(seed=0)
    env.controller.server.unity_proc.kill()
    env.controller.server.unity_proc.wait()
    with pytest.raises(ThorBackendError, match="AI2-THOR"):
        env.step({a: "<action>wait</action>" for a in env.agents})
    env.close()  # and closing after the crash is quiet
