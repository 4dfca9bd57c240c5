"""THOR's metadata and events for the symbolic world: the ``Event`` / ``MultiAgentEvent``
classes and the per-object and per-agent metadata dicts, built lazily (most steps read few keys).

Apart from ``symbolic.py`` so that the controller there reads as the world's rules only.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamgym.envs.thor_assembly.scenes import Scene

if TYPE_CHECKING:
    from teamgym.envs.thor_assembly.symbolic import SymbolicController

__all__ = [
    "GRID",
    "Agent",
    "LazyMetadata",
    "Obj",
    "SymbolicEvent",
    "SymbolicMultiAgentEvent",
    "agent_metadata",
    "agent_pose",
    "inventory",
    "object_metadata",
    "scene_bounds",
    "static_metadata",
    "xyz",
]

GRID = 0.25
XYZ0 = {"x": 0.0, "y": 0.0, "z": 0.0}
_BOUNDS: dict[str, tuple[dict[str, float], dict[str, float]]] = {}


@dataclass
class Obj:
    """An object of the symbolic world (a receptacle or a pickupable part)."""

    object_id: str
    type: str
    position: tuple[float, float, float]
    cell: tuple[int, int]
    pickupable: bool
    receptacle: bool
    openable: bool
    is_open: bool = False
    parent: str | None = None
    contents: list[str] = field(default_factory=list)
    holder: int | None = None


@dataclass
class Agent:
    """A robot of the symbolic world: its cell, its yaw, what it holds."""

    cell: tuple[int, int]
    rotation: int = 0
    held: str | None = None


def xyz(x: float, y: float, z: float) -> dict[str, float]:
    """A THOR vector."""
    return {"x": float(x), "y": float(y), "z": float(z)}


class LazyMetadata(Mapping[str, Any]):
    """THOR's per-agent metadata dict, built on first access of each expensive key: the agent's
    own keys on the first read of one, ``objects`` (one dict per object) on its first read."""

    def __init__(self, controller: SymbolicController, agent: int, result: dict[str, Any]) -> None:
        self._c, self._agent, self._data = controller, agent, result
        self._full: dict[str, Any] | None = None
        self._objects: list[dict[str, Any]] | None = None
        self._few: dict[str, Any] = {}  # keys read alone (``refresh`` reads these two)

    def _materialize(self) -> dict[str, Any]:
        if self._full is None:
            self._full = {**agent_metadata(self._c, self._agent, self._data), **self._few}
        return self._full

    def _alone(self, key: str) -> Any:
        """``agent`` or ``inventoryObjects`` without the rest of the agent's keys."""
        if key not in self._few:
            world, agent = self._c, self._agent
            pose = agent_pose(world, agent) if key == "agent" else inventory(world, agent)
            self._few[key] = pose
        return self._few[key]

    def _object_list(self) -> list[dict[str, Any]]:
        if self._objects is None:
            world, agent = self._c, self._agent
            self._objects = [object_metadata(world, o, agent) for o in world.objects.values()]
        return self._objects

    def visible_ids(self) -> list[str]:
        """``[o["objectId"] for o in self["objects"] if o["visible"]]``, without building the
        objects' dicts (``episode.refresh`` asks it of every robot on every step)."""
        if self._objects is not None:
            return [o["objectId"] for o in self._objects if o["visible"]]
        return self._c.visible_ids(self._agent)

    def __getitem__(self, key: str) -> Any:
        if key in self._data:
            return self._data[key]
        if key == "objects":
            return self._object_list()
        if self._full is None and key in ("agent", "inventoryObjects"):
            return self._alone(key)
        return self._materialize()[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._materialize()
        yield "objects"

    def __len__(self) -> int:
        return len(self._materialize()) + 1


class SymbolicEvent:
    """One agent's view after a step (THOR's ``Event``: ``metadata``, ``frame``, ``events``)."""

    def __init__(self, metadata: Mapping[str, Any]) -> None:
        self.metadata = metadata
        self.frame = None
        self.events = [self]

    def __bool__(self) -> bool:
        return bool(self.metadata["lastActionSuccess"])

    def get_object(self, object_id: str) -> dict[str, Any] | None:
        """The object's metadata, as ``Event.get_object`` in ai2thor."""
        return next((o for o in self.metadata["objects"] if o["objectId"] == object_id), None)


class SymbolicMultiAgentEvent:
    """THOR's ``MultiAgentEvent``: ``metadata`` of the acting agent, ``events[i]`` per agent
    (the other agents' events made on first access: most actions' are never read)."""

    def __init__(
        self, active_agent_id: int, count: int, world: SymbolicController, results: dict[str, Any]
    ) -> None:
        self.active_agent_id = active_agent_id
        self._count, self._world, self._results = count, world, results
        self._active = SymbolicEvent(LazyMetadata(world, active_agent_id, results))
        self._events: list[SymbolicEvent] | None = None
        self.metadata = self._active.metadata
        self.frame = None

    @property
    def events(self) -> list[SymbolicEvent]:
        """One event per agent, in agent order."""
        if self._events is None:
            results, active = self._results, self.active_agent_id
            self._events = [
                self._active
                if i == active
                else SymbolicEvent(LazyMetadata(self._world, i, {**results, "agentId": i}))
                for i in range(self._count)
            ]
        return self._events

    def __bool__(self) -> bool:
        return bool(self.metadata["lastActionSuccess"])


def static_metadata(
    obj: Obj, cache: dict[tuple[str, tuple[float, float, float]], dict[str, Any]]
) -> dict[str, Any]:
    """The keys of an object's metadata that only change when it moves (cached)."""
    key = (obj.object_id, obj.position)
    cached = cache.get(key)
    if cached is None:
        x, y, z = obj.position
        half = 0.15
        corners = [
            [x + dx, y + dy, z + dz]
            for dx in (-half, half)
            for dy in (-half, half)
            for dz in (-half, half)
        ]
        cached = {
            "name": f"{obj.type}_{zlib.crc32(obj.object_id.encode()):08x}",
            "objectId": obj.object_id,
            "objectType": obj.type,
            "position": xyz(x, y, z),
            "rotation": dict(XYZ0),
            "obstructed": False,
            "receptacle": obj.receptacle,
            "openable": obj.openable,
            "pickupable": obj.pickupable,
            "moveable": False,
            "mass": 0.5 if obj.pickupable else 0.0,
            "salientMaterials": None,
            "toggleable": False,
            "isToggled": False,
            "breakable": False,
            "isBroken": False,
            "canFillWithLiquid": False,
            "isFilledWithLiquid": False,
            "fillLiquid": None,
            "dirtyable": False,
            "isDirty": False,
            "canBeUsedUp": False,
            "isUsedUp": False,
            "cookable": False,
            "isCooked": False,
            "temperature": "RoomTemp",
            "ObjectTemperature": "RoomTemp",
            "isHeatSource": False,
            "isColdSource": False,
            "sliceable": False,
            "isSliced": False,
            "isMoving": False,
            "axisAlignedBoundingBox": {
                "cornerPoints": corners,
                "center": xyz(x, y, z),
                "size": xyz(0.3, 0.3, 0.3),
            },
            "objectOrientedBoundingBox": {"cornerPoints": corners} if obj.pickupable else None,
        }
        cache[key] = cached
    return cached


def object_metadata(world: SymbolicController, obj: Obj, agent: int) -> dict[str, Any]:
    """An object's metadata as one agent sees it."""
    ax, az = world.agents[agent].cell
    x, _, z = obj.position
    return {
        **static_metadata(obj, world.static_cache),
        "distance": math.hypot(x - ax * GRID, z - az * GRID),
        "visible": world.visible(agent, obj),
        "receptacleObjectIds": list(obj.contents) if obj.receptacle else None,
        "parentReceptacles": [obj.parent] if obj.parent else None,
        "isOpen": obj.is_open,
        "openness": 1.0 if obj.is_open else 0.0,
        "isPickedUp": obj.holder is not None,
    }


def agent_pose(world: SymbolicController, agent: int) -> dict[str, Any]:
    """THOR's ``metadata["agent"]``: name, position, rotation, camera."""
    a = world.agents[agent]
    return {
        "name": f"agent{agent}",
        "position": xyz(a.cell[0] * GRID, 0.9, a.cell[1] * GRID),
        "rotation": xyz(0, a.rotation, 0),
        "cameraHorizon": 0.0,
        "isStanding": True,
        "inHighFrictionArea": False,
    }


def inventory(world: SymbolicController, agent: int) -> list[dict[str, str]]:
    """THOR's ``metadata["inventoryObjects"]``: what the agent holds."""
    held = world.agents[agent].held
    if held is None:
        return []
    return [{"objectId": held, "objectType": world.objects[held].type}]


def agent_metadata(
    world: SymbolicController, agent: int, results: dict[str, Any]
) -> dict[str, Any]:
    """One agent's THOR metadata after an action with ``results``, but ``objects`` (built
    apart: :class:`LazyMetadata`)."""
    pose = agent_pose(world, agent)
    pos = pose["position"]
    center, size = scene_bounds(world.scene)
    return {
        **results,
        "isSceneAtRest": True,
        "agent": pose,
        "heldObjectPose": {
            "position": pos,
            "rotation": dict(XYZ0),
            "localPosition": dict(XYZ0),
            "localRotation": dict(XYZ0),
        },
        "inventoryObjects": inventory(world, agent),
        "sceneName": f"{world.scene.name}_physics",
        "sceneBounds": {"cornerPoints": [], "center": center, "size": size},
        "fov": 90.0,
        "cameraPosition": pos,
        "cameraOrthSize": 0.0,
        "thirdPartyCameras": [],
        "collided": False,
        "collidedObjects": [],
        "screenWidth": world.width,
        "screenHeight": world.height,
        "colors": None,
        "colorBounds": None,
        "flatSurfacesOnGrid": [],
        "distances": [],
        "normals": [],
        "isOpenableGrid": [],
        "segmentedObjectIds": [],
        "objectIdsInBox": [],
        "actionIntReturn": 0,
        "actionFloatReturn": 0.0,
        "actionStringsReturn": [],
        "actionFloatsReturn": [],
        "actionVector3sReturn": [],
        "visibleRange": None,
        "currentTime": 0.0,
    }


def scene_bounds(scene: Scene) -> tuple[dict[str, float], dict[str, float]]:
    """(center, size) of a scene's floor, as THOR's ``sceneBounds`` (cached per scene)."""
    if scene.name not in _BOUNDS:
        xs = [c[0] * GRID for c in scene.grid]
        zs = [c[1] * GRID for c in scene.grid]
        _BOUNDS[scene.name] = (
            xyz((min(xs) + max(xs)) / 2, 1.5, (min(zs) + max(zs)) / 2),
            xyz(max(xs) - min(xs), 3.0, max(zs) - min(zs)),
        )
    return _BOUNDS[scene.name]
