"""Setting up one ``thor-assembly-v0`` episode, and reading the world back after every step.

The draws (recipe, scene, workbench, part spawn, heavy parts, start cells) all come from the
env's ``np_random`` in a fixed order, so an episode is a function of its seed. The world is read
through THOR's protocol only (``GetReachablePositions``, ``metadata["objects"]``), so the same
code serves the symbolic world and a real AI2-THOR build.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from teamgym.envs.thor_assembly.recipes import Recipe, eligible_scenes
from teamgym.envs.thor_assembly.scenes import Scene, object_type
from teamgym.envs.thor_assembly.state import AssemblyState
from teamgym.envs.thor_assembly.symbolic import GRID

__all__ = [
    "cell_of",
    "draw_heavy",
    "draw_recipe",
    "draw_scene",
    "name_places",
    "position_of",
    "read_world",
    "refresh",
    "spawn_parts",
    "start_cells",
]

SPAWN_ATTEMPTS = 20
_FLOORS: dict[tuple[str, frozenset], Scene] = {}


def position_of(cell: tuple[int, int]) -> dict[str, float]:
    """THOR's world position of a grid cell (at a robot's height)."""
    return {"x": cell[0] * GRID, "y": 0.9, "z": cell[1] * GRID}


def cell_of(position: dict[str, Any]) -> tuple[int, int]:
    """The grid cell of a THOR world position."""
    return (round(position["x"] / GRID), round(position["z"] / GRID))


# ---------------------------------------------------------------------- the draws
def draw_recipe(recipes: dict[str, Recipe], choice: str, rng: np.random.Generator) -> Recipe:
    """The recipe named ``choice``, or one drawn by name order when it is ``"random"``."""
    if choice != "random":
        return recipes[choice]
    names = sorted(recipes)
    return recipes[names[int(rng.integers(len(names)))]]


def draw_scene(recipe: Recipe, choice: str | None, rng: np.random.Generator) -> str:
    """The scene asked for (it must fit the recipe), or one drawn among those that fit."""
    scenes = eligible_scenes(recipe)
    if choice is None:
        return scenes[int(rng.integers(len(scenes)))]
    if choice not in scenes:
        raise ValueError(
            f"scene {choice} does not fit recipe {recipe.name}; fitting: {', '.join(scenes)}"
        )
    return choice


def draw_heavy(recipe: Recipe, num_heavy: int, rng: np.random.Generator) -> set[str]:
    """``num_heavy`` of the recipe's heavy-capable parts (fewer if it has fewer)."""
    pool = list(recipe.heavy)
    k = min(num_heavy, len(pool))
    return {pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)} if k else set()


def start_cells(scene: Scene, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Distinct reachable cells for the robots to start on."""
    cells = sorted(scene.floor)
    return [cells[int(i)] for i in rng.choice(len(cells), size=count, replace=False)]


# ---------------------------------------------------------------------- the world
def read_world(
    controller: Any, data: Scene
) -> tuple[Scene, dict[str, tuple[int, int]], dict[str, int]]:
    """The floor and the places as the backend reports them (``GetReachablePositions`` and
    the receptacles in ``metadata["objects"]``). The derived scene data supplies interaction
    poses where objectIds match (always, for the symbolic world); a receptacle it does not
    know (a real build's ids can differ) gets the floor cell nearest to it, facing it."""
    event = controller.step(action="GetReachablePositions", agentId=0)
    cells = frozenset(cell_of(p) for p in event.metadata["actionReturn"] or [])
    scene = data if cells == data.grid or not cells else _floor(data, cells)
    known = {r[0]: (r[1], r[2]) for r in data.receptacles}
    place_cell, place_rot = {}, {}
    for o in controller.last_event.events[0].metadata["objects"]:
        if not o["receptacle"] or o["pickupable"]:
            continue
        oid = o["objectId"]
        if oid in known:
            cell, rot = scene.snap(known[oid][0]), known[oid][1]
        else:
            px, pz = o["position"]["x"] / GRID, o["position"]["z"] / GRID
            cell = scene.snap((round(px), round(pz)))
            rot = int(round(math.degrees(math.atan2(px - cell[0], pz - cell[1])) / 90.0) * 90) % 360
        place_cell[oid], place_rot[oid] = cell, rot
    return scene, place_cell, place_rot


def _floor(data: Scene, cells: frozenset) -> Scene:
    """The scene with the floor a real build reported (cached: builds report the same floor)."""
    key = (data.name, cells)
    if key not in _FLOORS:
        _FLOORS[key] = Scene(data.name, data.room, data.types, data.receptacles, cells)
    return _FLOORS[key]


def name_places(place_cell: dict[str, Any]) -> tuple[list[str], dict[str, str], dict[str, int]]:
    """(place ids ordered by type, objectId -> ``Type_N`` name, type -> count so far)."""
    place_ids = sorted(place_cell, key=lambda o: (object_type(o), o))
    counters: dict[str, int] = defaultdict(int)
    names: dict[str, str] = {}
    for oid in place_ids:
        counters[object_type(oid)] += 1
        names[oid] = f"{object_type(oid)}_{counters[object_type(oid)]}"
    return place_ids, names, dict(counters)


def spawn_parts(
    controller: Any, recipe: Recipe, scene_name: str, rng: np.random.Generator
) -> dict[str, str]:
    """Part type -> objectId after THOR's own randomiser scattered them off the workbench,
    retried until at least one part lies hidden in a closed receptacle."""
    part_ids: dict[str, str] = {}
    for attempt in range(SPAWN_ATTEMPTS):
        controller.step(
            action="InitialRandomSpawn",
            randomSeed=int(rng.integers(2**31)),
            excludedReceptacles=list(recipe.workbench),
            agentId=0,
        )
        objects = controller.last_event.events[0].metadata["objects"]
        part_ids = {}
        for o in objects:
            if o["objectType"] in recipe.parts and o["pickupable"]:
                part_ids.setdefault(o["objectType"], o["objectId"])
        by_id = {o["objectId"]: o for o in objects}
        hidden = [t for t, oid in part_ids.items() if _closed_parent(by_id, oid)]
        if len(part_ids) == len(recipe.parts) and (hidden or attempt == SPAWN_ATTEMPTS - 1):
            break
    if len(part_ids) != len(recipe.parts):
        raise RuntimeError(f"scene {scene_name} lacks parts of {recipe.name}: {sorted(part_ids)}")
    return part_ids


def _closed_parent(by_id: dict[str, dict[str, Any]], oid: str) -> bool:
    parents = by_id[oid]["parentReceptacles"] or []
    return any(by_id[p]["openable"] and not by_id[p]["isOpen"] for p in parents if p in by_id)


def _visible_ids(metadata: Any) -> list[str]:
    """The objectIds a robot sees: the symbolic backend's metadata answers without building its
    objects' dicts; THOR's is read as it comes."""
    fast = getattr(metadata, "visible_ids", None)
    if fast is not None:
        return list(fast())
    return [o["objectId"] for o in metadata["objects"] if o["visible"]]


def refresh(state: AssemblyState, event: Any) -> None:
    """Read every robot's THOR metadata once: holdings, what it sees, where the parts lie;
    objects get their ``Type_N`` name when a robot first sees them."""
    state.view = {}
    state.obj = {o["objectId"]: o for o in event.events[0].metadata["objects"]}
    for i, robot in enumerate(state.robots):
        md = event.events[i].metadata
        inv = md["inventoryObjects"]
        visible = _visible_ids(md)
        state.view[robot] = {
            "holding": inv[0]["objectId"] if inv else None,
            "visible": visible,
            "cell": cell_of(md["agent"]["position"]),
        }
        for oid in visible:
            if oid not in state.names:
                state.name_object(oid, object_type(oid))
    state.ids_by_name = {n: o for o, n in state.names.items()}
    state.placed = {
        t
        for t, oid in state.part_ids.items()
        if state.workbench in (state.obj[oid]["parentReceptacles"] or [])
    }
