"""A stand-in for the AI2-THOR Unity player: speaks ai2thor's FIFO protocol, serves the symbolic world.

The real ``ai2thor.controller.Controller`` (5.0.0) starts its Unity executable and talks to it
over two named pipes: it writes actions to ``AI2THOR_FIFO_CLIENT_PIPE_PATH`` (a ``!BI`` header,
a JSON body, an end-of-message header) and reads replies from
``AI2THOR_FIFO_SERVER_PIPE_PATH`` (a header, the msgpack ``MultiAgentMetadata``
``{agents, thirdPartyCameras, activeAgentId, sequenceId}``, end-of-message). This process does
the Unity side with a :class:`~teamgym.envs.thor_assembly.symbolic.SymbolicController`, so the
``thor`` backend's real client code (start-up, ``Initialize`` with ``agentCount``,
``MultiAgentEvent``, error handling) runs end to end where no Unity build can be had (CI).
It is a double of the Unity binary, not of ai2thor: pass it as ``local_executable_path``.

``TEAMGYM_STAND_IN_MODE=crash`` exits before connecting and ``=hang`` never connects, to
exercise the backend's watchdog.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import sys
import time
from pathlib import Path

import msgpack

from teamgym.envs.thor_assembly.symbolic import SymbolicController

__all__ = ["main", "write_launcher"]

HEADER = struct.Struct("!BI")
METADATA, ACTION, EOM = 1, 2, 255


def _read_exact(handle, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = handle.read(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _send(out, controller: SymbolicController, active: int, sequence: int) -> None:
    payload = {
        "agents": [controller.metadata_dict(i) for i in range(controller.agent_count)],
        "thirdPartyCameras": [],
        "activeAgentId": active,
        "sequenceId": sequence,
    }
    body = msgpack.packb(payload, use_bin_type=True)
    out.write(HEADER.pack(METADATA, len(body)) + body + HEADER.pack(EOM, 0))
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Serve until the client closes its pipe."""
    args = sys.argv[1:] if argv is None else argv
    mode = os.environ.get("TEAMGYM_STAND_IN_MODE", "")
    if mode == "crash":
        return 3
    if mode == "hang":
        time.sleep(3600)
        return 0
    width = int(args[args.index("-screen-width") + 1]) if "-screen-width" in args else 300
    height = int(args[args.index("-screen-height") + 1]) if "-screen-height" in args else 300
    server_path = os.environ["AI2THOR_FIFO_SERVER_PIPE_PATH"]
    client_path = os.environ["AI2THOR_FIFO_CLIENT_PIPE_PATH"]
    controller = SymbolicController(scene="FloorPlan1", agentCount=1, width=width, height=height)
    with open(server_path, "wb") as out:
        _send(out, controller, 0, 0)
        with open(client_path, "rb") as inp:
            while True:
                try:
                    kind, length = HEADER.unpack(_read_exact(inp, HEADER.size))
                    body = _read_exact(inp, length)
                    _read_exact(inp, HEADER.size)  # end of message
                except EOFError:
                    return 0
                if kind != ACTION:
                    continue
                action = json.loads(body)
                sequence = int(action.pop("sequenceId", 0))
                name = action.pop("action", None)
                if name == "Reset":
                    controller.reset(action.get("sceneName"))
                    event = controller.last_event
                else:
                    event = controller.step(action=name, **action)
                active = int(getattr(event, "active_agent_id", 0))
                _send(out, controller, active, sequence)


def write_launcher(directory: str | Path) -> Path:
    """An executable file that runs this stand-in with this interpreter (for ``local_executable_path``)."""
    path = Path(directory) / "thor-stand-in"
    path.write_text(
        f'#!/bin/sh\nexec {sys.executable} -m teamgym.envs.thor_assembly.stand_in_unity "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
