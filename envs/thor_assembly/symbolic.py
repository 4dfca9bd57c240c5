"""A pure-Python controller that speaks AI2-THOR's protocol over the iTHOR floor plans.

``SymbolicController`` implements ``controller.step(action=..., agentId=..., **args) -> event``
for the actions the assembly task uses, with THOR's metadata schema (``event.metadata``,
``event.events[i].metadata``) and THOR's semantics where they matter: a closed receptacle hides
its contents, one object in hand, an object goes only into a compatible (and open) receptacle,
and a failure sets ``lastActionSuccess=False`` with an ``errorMessage``. It is the default
backend of ``thor-assembly-v0`` and the world the stand-in Unity process serves.

Supported actions: ``Initialize`` (``agentCount``, ``gridSize``, ``visibilityDistance``),
``Reset`` (``sceneName``), ``GetScenesInBuild``, ``GetReachablePositions``, ``Teleport`` /
``TeleportFull`` (``position``), ``InitialRandomSpawn`` (``randomSeed``,
``excludedReceptacles``), ``OpenObject``, ``CloseObject``, ``PickupObject``, ``PutObject``,
``DropHandObject``, ``Pass`` / ``Done`` / ``NoOp``, and the resolution/quality no-ops a
Controller sends at start-up. Anything else fails with ``errorCode="InvalidAction"``.
Visibility is by place: a robot sees the receptacles whose interaction pose it stands on, what
lies in them when they are open (or not openable), and what it holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from teamgym.envs.thor_assembly.scenes import (
    OPENABLE,
    PICKUPABLE,
    RECEPTACLES,
    Scene,
    load_scenes,
    object_position,
    object_type,
    receptacle_objects,
)
from teamgym.envs.thor_assembly.symbolic_metadata import (
    GRID,
    Agent,
    LazyMetadata,
    Obj,
    SymbolicEvent,
    SymbolicMultiAgentEvent,
    xyz,
)

__all__ = ["GRID", "SymbolicController", "SymbolicEvent", "SymbolicMultiAgentEvent"]


class SymbolicController:
    """THOR-protocol controller over a symbolic iTHOR world (see the module docstring)."""

    def __init__(self, scene: str = "FloorPlan1", agentCount: int = 1, **init: Any) -> None:
        self.agent_count = int(agentCount)
        self.grid_size = float(init.get("gridSize", GRID))
        self.visibility_distance = float(init.get("visibilityDistance", 1.5))
        self.width, self.height = int(init.get("width", 300)), int(init.get("height", 300))
        self.last_event: Any = None
        self.sequence = 0
        self._seen_from: list[tuple[str, tuple[Any, ...]]] | None = None
        self.reset(scene, agentCount=agentCount)

    # ------------------------------------------------------------------ world
    def reset(self, scene: str | None = None, **init: Any) -> Any:
        """Load a scene (objects back to their initial places) and initialise the agents."""
        name = scene or self.scene.name
        scenes = load_scenes()
        if name.endswith("_physics"):
            name = name[: -len("_physics")]
        if name not in scenes:
            raise ValueError(
                f"Scene '{name}' not contained in build; iTHOR scenes are FloorPlan1..430"
            )
        self.scene: Scene = scenes[name]
        if "agentCount" in init:
            self.agent_count = int(init["agentCount"])
        self.compat = receptacle_objects()
        self.static_cache: dict[tuple[str, tuple[float, float, float]], dict[str, Any]] = {}
        self.objects: dict[str, Obj] = {}
        for object_id, cell, _rot in self.scene.receptacles:
            t = object_type(object_id)
            self.objects[object_id] = Obj(
                object_id,
                t,
                object_position(object_id),
                self.scene.snap(cell),
                pickupable=False,
                receptacle=True,
                openable=t in OPENABLE,
            )
        self.receptacle_ids = [o for o in self.objects]
        # one object of each pickupable type the scene has, first in a compatible receptacle
        for t in sorted(self.scene.types & PICKUPABLE):
            homes = [
                r for r in self.receptacle_ids if t in self.compat.get(self.objects[r].type, ())
            ]
            if not homes:
                continue
            home = self.objects[homes[0]]
            x, y, z = home.position
            object_id = f"{t}|{x:+06.2f}|{y + 0.1:+06.2f}|{z:+06.2f}"
            obj = Obj(
                object_id,
                t,
                (x, y + 0.1, z),
                home.cell,
                pickupable=True,
                receptacle=t in RECEPTACLES,
                openable=t in OPENABLE,
                parent=home.object_id,
            )
            self.objects[object_id] = obj
            home.contents.append(object_id)
        cells = sorted(self.scene.grid)
        self.agents = [Agent(cells[i % len(cells)]) for i in range(self.agent_count)]
        self.sequence = 0
        return self._emit(0, "Initialize", True, "", None, None)

    def stop(self) -> None:
        """Nothing to release (THOR's Controller.stop)."""

    # ------------------------------------------------------------------ protocol
    def step(self, action: str | dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Run one action for one agent; returns a (Multi)AgentEvent with THOR's metadata."""
        if isinstance(action, dict):
            kwargs = {**action, **kwargs}
            action = kwargs.pop("action")
        kwargs.pop("sequenceId", None)
        agent = int(kwargs.pop("agentId", 0) or 0)
        if not 0 <= agent < self.agent_count:
            return self._emit(
                0, str(action), False, f"agentId {agent} is out of range", "InvalidArgument", None
            )
        handler = getattr(self, f"_do_{action}", None)
        if handler is None:
            return self._emit(
                agent, str(action), False, f"Invalid action: {action}", "InvalidAction", None
            )
        try:
            ok, error, code, ret = handler(agent, **kwargs)
        except TypeError as exc:
            ok, error, code, ret = False, f"{action}: {exc}", "MissingArguments", None
        return self._emit(agent, str(action), ok, error, code, ret)

    def _emit(
        self, agent: int, action: str, ok: bool, error: str, code: str | None, ret: Any
    ) -> Any:
        self.sequence += 1
        self._seen_from = None  # the world changed: where objects are seen from, again
        results = {
            "lastAction": action,
            "lastActionSuccess": ok,
            "errorMessage": error,
            "errorCode": code,
            "actionReturn": ret,
            "agentId": agent,
        }
        if self.agent_count == 1:
            self.last_event = SymbolicEvent(LazyMetadata(self, 0, results))
        else:
            self.last_event = SymbolicMultiAgentEvent(agent, self.agent_count, self, results)
        return self.last_event

    # ------------------------------------------------------------------ actions
    def _fail(self, message: str, code: str | None = None) -> tuple[bool, str, str | None, None]:
        return False, message, code, None

    def _ok(self, ret: Any = None) -> tuple[bool, str, None, Any]:
        return True, "", None, ret

    def _do_Initialize(self, agent: int, **init: Any) -> tuple:
        if "agentCount" in init and int(init["agentCount"]) != self.agent_count:
            self.agent_count = int(init["agentCount"])
            cells = sorted(self.scene.grid)
            self.agents = [Agent(cells[i % len(cells)]) for i in range(self.agent_count)]
        self.grid_size = float(init.get("gridSize", self.grid_size))
        self.visibility_distance = float(init.get("visibilityDistance", self.visibility_distance))
        return self._ok()

    def _do_Reset(self, agent: int, sceneName: str, **_: Any) -> tuple:
        self.reset(sceneName)
        return self._ok()

    def _do_GetScenesInBuild(self, agent: int, **_: Any) -> tuple:
        return self._ok(sorted(f"{name}_physics" for name in load_scenes()))

    def _do_Pass(self, agent: int, **_: Any) -> tuple:
        return self._ok()

    _do_Done = _do_NoOp = _do_Pass
    _do_ChangeResolution = _do_ChangeQuality = _do_Pass

    def _do_GetReachablePositions(self, agent: int, **_: Any) -> tuple:
        return self._ok([xyz(x * GRID, 0.9, z * GRID) for x, z in sorted(self.scene.grid)])

    def _do_Teleport(
        self, agent: int, position: dict[str, float] | None = None, rotation: Any = None, **_: Any
    ) -> tuple:
        if position is None:
            return self._fail("Teleport needs a position", "MissingArguments")
        cell = (round(float(position["x"]) / GRID), round(float(position["z"]) / GRID))
        if cell not in self.scene.grid:
            return self._fail(
                f"Teleport failed: ({position['x']}, {position['z']}) is not a reachable position"
            )
        self.agents[agent].cell = cell
        if rotation is not None:
            self.agents[agent].rotation = (
                int(rotation["y"] if isinstance(rotation, dict) else rotation) % 360
            )
        return self._ok()

    _do_TeleportFull = _do_Teleport

    def _do_InitialRandomSpawn(
        self,
        agent: int,
        randomSeed: int = 0,
        excludedReceptacles: list[str] | None = None,
        **_: Any,
    ) -> tuple:
        rng = np.random.default_rng(int(randomSeed))
        excluded = set(excludedReceptacles or ())
        for obj in [o for o in self.objects.values() if o.pickupable and o.holder is None]:
            homes = [
                r
                for r in self.receptacle_ids
                if self.objects[r].type not in excluded
                and obj.type in self.compat.get(self.objects[r].type, ())
            ]
            if not homes:
                continue
            self._move_into(obj, self.objects[homes[int(rng.integers(len(homes)))]])
        return self._ok()

    def _move_into(self, obj: Obj, home: Obj) -> None:
        if obj.parent is not None:
            self.objects[obj.parent].contents.remove(obj.object_id)
        obj.parent, obj.cell = home.object_id, home.cell
        obj.position = (home.position[0], home.position[1] + 0.1, home.position[2])
        home.contents.append(obj.object_id)

    def _target(self, agent: int, object_id: str | None) -> Obj | str:
        if not object_id or object_id not in self.objects:
            return f"Object ID appears to be invalid: {object_id}"
        obj = self.objects[object_id]
        if not self.visible(agent, obj):
            return f"{object_id} is not visible to agent {agent}"
        return obj

    def _do_OpenObject(self, agent: int, objectId: str | None = None, **_: Any) -> tuple:
        obj = self._target(agent, objectId)
        if isinstance(obj, str):
            return self._fail(obj)
        if not obj.openable:
            return self._fail(f"{obj.object_id} is not openable")
        obj.is_open = True
        return self._ok()

    def _do_CloseObject(self, agent: int, objectId: str | None = None, **_: Any) -> tuple:
        obj = self._target(agent, objectId)
        if isinstance(obj, str):
            return self._fail(obj)
        if not obj.openable:
            return self._fail(f"{obj.object_id} is not openable")
        obj.is_open = False
        return self._ok()

    def _do_PickupObject(self, agent: int, objectId: str | None = None, **_: Any) -> tuple:
        if self.agents[agent].held is not None:
            return self._fail("Agent hand has something in it already! Can't pick up anything else")
        obj = self._target(agent, objectId)
        if isinstance(obj, str):
            return self._fail(obj)
        if not obj.pickupable:
            return self._fail(f"{obj.object_id} is not pickupable")
        if obj.holder is not None:
            return self._fail(f"{obj.object_id} is already held by agent {obj.holder}")
        if obj.parent is not None:
            self.objects[obj.parent].contents.remove(obj.object_id)
        obj.parent, obj.holder = None, agent
        self.agents[agent].held = obj.object_id
        return self._ok()

    def _do_PutObject(self, agent: int, objectId: str | None = None, **_: Any) -> tuple:
        held = self.agents[agent].held
        if held is None:
            return self._fail("Cannot put: the agent is not holding any object")
        target = self._target(agent, objectId)
        if isinstance(target, str):
            return self._fail(target)
        if not target.receptacle:
            return self._fail(f"{target.object_id} is not a receptacle")
        if target.openable and not target.is_open:
            return self._fail(f"{target.object_id} is closed: open it first")
        obj = self.objects[held]
        if obj.type not in self.compat.get(target.type, ()):
            return self._fail(
                f"{obj.type} is not allowed in {target.type}", "ObjectNotAllowedInReceptacle"
            )
        obj.holder = None
        self.agents[agent].held = None
        self._move_into(obj, target)
        return self._ok()

    def _do_DropHandObject(self, agent: int, **_: Any) -> tuple:
        held = self.agents[agent].held
        if held is None:
            return self._fail("Cannot drop: the agent is not holding any object")
        obj = self.objects[held]
        obj.holder, obj.parent, obj.cell = None, None, self.agents[agent].cell
        self.agents[agent].held = None
        return self._ok()

    # ------------------------------------------------------------------ views
    def visible(self, agent: int, obj: Obj) -> bool:
        """THOR's ``visible`` flag, by place: see the module docstring."""
        if obj.holder is not None:
            return obj.holder == agent
        if obj.parent is None:
            return obj.cell == self.agents[agent].cell
        parent = self.objects[obj.parent]
        if parent.openable and not parent.is_open:
            return False
        return self.visible(agent, parent)

    def visible_ids(self, agent: int) -> list[str]:
        """The objectIds ``agent`` sees (``visible`` true), in object order: where each object
        is seen from is worked out once per event for every agent."""
        if self._seen_from is None:
            self._seen_from = [(oid, self._seen_where(o)) for oid, o in self.objects.items()]
        held, cell = ("held", agent), ("cell", self.agents[agent].cell)
        return [oid for oid, where in self._seen_from if where in (held, cell)]

    def _seen_where(self, obj: Obj) -> tuple[Any, ...]:
        """Whence an object is visible, by :meth:`visible`'s rules: ``("held", agent)``,
        ``("cell", cell)``, or ``("hidden",)`` inside a closed receptacle."""
        if obj.holder is not None:
            return ("held", obj.holder)
        if obj.parent is None:
            return ("cell", obj.cell)
        parent = self.objects[obj.parent]
        if parent.openable and not parent.is_open:
            return ("hidden",)
        return self._seen_where(parent)

    def metadata_dict(self, agent: int) -> dict[str, Any]:
        """A plain (materialised) metadata dict of ``agent`` for the last event, e.g. to send."""
        event = self.last_event.events[agent]
        return dict(event.metadata.items())
