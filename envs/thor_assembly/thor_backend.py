"""``backend="thor"``: the real ``ai2thor.controller.Controller`` (ai2thor 5.0.0), made safe.

ai2thor 5.0.0 has failure modes that cost users hours; each becomes a fast error that says what
to do (``ThorBackendError``):

* offline with no cached build: ai2thor reports a misleading "Invalid commit_id";
* ``local_executable_path`` without a display string: a ``TypeError`` deep in ``subprocess``;
* CloudRendering without Vulkan;
* the Unity process dying before it connects: the Controller blocks forever in ``open()`` on its
  FIFO. A watchdog thread notices the exit (or the start-up timeout), unblocks the pipe and kills
  the process, so the constructor raises instead of hanging.

Options (``backend_options`` of the env): ``local_executable_path``, ``x_display``,
``platform`` ("Linux64" or "CloudRendering"), ``commit_id`` (pinned to ai2thor 5.0.0's default),
``start_timeout``, ``step_timeout``, ``width``, ``height``, ``allow_download`` (False: a missing
build is an error, not a 500 MB download), and any ``Initialize`` parameter.
"""

from __future__ import annotations

import ctypes.util
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any

from teamgym.envs.thor_assembly.symbolic import GRID

__all__ = ["THOR_COMMIT", "ThorBackendError", "make_thor_controller"]

#: The Unity build ai2thor 5.0.0 pins (``ai2thor/_builds.py``); set ``commit_id`` to change it.
THOR_COMMIT = "f0825767cd50d69f666c7f282e54abfe58f1e917"


class ThorBackendError(RuntimeError):
    """The AI2-THOR backend cannot start or stopped answering; the message says what to do."""


def _cache_dir(platform: str, commit: str) -> Path:
    return Path.home() / ".ai2thor" / "releases" / f"thor-{platform}-{commit}"


def make_thor_controller(
    scene: str,
    num_agents: int,
    *,
    local_executable_path: str | None = None,
    x_display: str | None = None,
    platform: str | None = None,
    commit_id: str = THOR_COMMIT,
    start_timeout: float = 120.0,
    step_timeout: float = 60.0,
    width: int = 300,
    height: int = 300,
    allow_download: bool = False,
    **initialize: Any,
) -> Any:
    """A started ``ai2thor`` Controller on ``scene`` with ``agentCount=num_agents``."""
    try:
        import ai2thor.controller
        import ai2thor.platform
    except ImportError as exc:
        raise ThorBackendError(
            f"backend='thor' needs ai2thor 5.0.0 ({exc}); install it with: pip install 'teamgym[thor]'. "
            "Or use backend='symbolic' (the default), which needs no Unity build."
        ) from None

    kwargs: dict[str, Any] = dict(
        scene=scene,
        agentCount=num_agents,
        width=width,
        height=height,
        gridSize=GRID,
        server_timeout=step_timeout,
        server_start_timeout=start_timeout,
        **initialize,
    )
    if local_executable_path is not None:
        kwargs.update(_local_build(local_executable_path, x_display))
    else:
        kwargs.update(_release_build(platform or "Linux64", x_display, commit_id, allow_download))
    return _start(ai2thor.controller.Controller, kwargs, start_timeout)


def _local_build(local_executable_path: str, x_display: str | None) -> dict[str, Any]:
    """Controller arguments for a Unity build on disk (ai2thor launches it as Linux64)."""
    exe = Path(local_executable_path)
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise ThorBackendError(f"local_executable_path={exe} is not an executable file")
    display = x_display or os.environ.get("DISPLAY")
    if not display:
        raise ThorBackendError(
            "local_executable_path needs a display string: ai2thor 5.0.0 launches it as Linux64 "
            "and fails with a TypeError otherwise. Pass backend_options={'x_display': ':0'} "
            "(e.g. under Xvfb), or set DISPLAY."
        )
    return {"local_executable_path": str(exe), "x_display": display}


def _release_build(
    platform: str, x_display: str | None, commit_id: str, allow_download: bool
) -> dict[str, Any]:
    """Controller arguments for a released build of ``commit_id``, refused early when it is
    not cached and downloading is not allowed."""
    import ai2thor.platform

    kwargs: dict[str, Any] = {}
    if platform == "CloudRendering":
        if ctypes.util.find_library("vulkan") is None:
            raise ThorBackendError(
                "platform='CloudRendering' needs the Vulkan loader (libvulkan1) and a GPU driver: "
                "sudo apt-get install -y libvulkan1, then check with vulkaninfo (vulkan-tools)."
            )
        kwargs["platform"] = ai2thor.platform.CloudRendering
    else:
        kwargs.update(headless=True, x_display=x_display or os.environ.get("DISPLAY") or ":0")
    kwargs["commit_id"] = commit_id
    if not _cache_dir(platform, commit_id).is_dir():
        offline_hint = (
            f"no AI2-THOR build for commit {commit_id} on platform {platform} is cached in "
            f"{_cache_dir(platform, commit_id)}. On a connected machine run: python -c "
            f"\"import ai2thor.controller as c; c.Controller(download_only=True, platform='{platform}')\" "
            "and copy ~/.ai2thor/releases/ here, pass backend_options={'local_executable_path': ...}, "
            "or allow ai2thor to download it (about 500 MB) with backend_options={'allow_download': True}."
        )
        if not allow_download:
            raise ThorBackendError(offline_hint)
        kwargs["_offline_hint"] = offline_hint
    return kwargs


def _start(controller_cls: type, kwargs: dict[str, Any], start_timeout: float) -> Any:
    offline_hint = kwargs.pop("_offline_hint", None)
    verdict: dict[str, str] = {}

    class WatchedController(controller_cls):  # type: ignore[misc, valid-type]
        """ai2thor's Controller whose Unity start-up is watched (see the module docstring)."""

        def _start_unity_thread(self, env, width, height, server_params, image_name):
            super()._start_unity_thread(env, width, height, server_params, image_name)
            threading.Thread(
                target=_watch, args=(self.server, start_timeout, verdict), daemon=True
            ).start()

    logs = (
        "Check ~/.ai2thor/log/unity.log and Unity's Player.log; with CloudRendering confirm Vulkan "
        "works (vulkaninfo); with Linux64 confirm the X display."
    )
    try:
        return WatchedController(**kwargs)
    except Exception as exc:
        if "why" in verdict:  # the watchdog saw Unity die, or never connect
            raise ThorBackendError(f"the AI2-THOR Unity process {verdict['why']}. {logs}") from None
        if isinstance(exc, ValueError) and "Invalid commit_id" in str(exc) and offline_hint:
            raise ThorBackendError(
                f"AI2-THOR could not be found or downloaded: {offline_hint}"
            ) from None
        if isinstance(exc, TimeoutError):
            raise ThorBackendError(
                f"AI2-THOR stopped answering ({exc}); raise backend_options['step_timeout'] "
                "or check Unity's Player.log"
            ) from None
        raise ThorBackendError(
            f"AI2-THOR failed to start ({type(exc).__name__}: {exc}). {logs}"
        ) from None


def _watch(server: Any, start_timeout: float, verdict: dict[str, str]) -> None:
    """Unblock ai2thor's FIFO wait when Unity exits, or never connects, during start-up."""
    proc = server.unity_proc
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        if server.server_pipe is not None:
            return  # connected: ai2thor's own read timeouts take over
        if proc.poll() is not None:
            verdict["why"] = f"exited (code {proc.returncode}) before it connected"
            break
        time.sleep(0.05)
    else:
        verdict["why"] = f"did not connect within {start_timeout:g} s and was stopped"
        proc.kill()
    # ai2thor is blocked opening (or reading) its pipe: send it an empty end-of-message so that
    # its receive() returns at once and the constructor raises.
    for _ in range(100):
        try:
            fd = os.open(server.server_pipe_path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)  # the reader has not opened its end yet
            continue
        try:
            os.write(fd, struct.pack("!BI", 255, 0))
        finally:
            os.close(fd)
        return
