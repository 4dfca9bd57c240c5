"""The explicit state of one ``thor-assembly-v0`` episode, and the log its rules write to.

``AssemblyState`` is what the rules change and what the expert, the renderer, the views and the
tests read (``env.assembly``); ``StepLog`` gathers one step's rewards, feedback and events.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from teamgym.envs.thor_assembly.recipes import Recipe
from teamgym.envs.thor_assembly.scenes import Scene

__all__ = ["AssemblyState", "StepLog"]

Pair = tuple[str, str]
_NAMINGS = itertools.count()
"""Owned by ``AssemblyState``: the source of ``names_version``."""


@dataclass
class StepLog:
    """One step's outcome as the rules report it: rewards, feedback in words, typed events."""

    rewards: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Individual reward of each robot this step."""
    feedback: dict[str, str] = field(default_factory=dict)
    """What happened to each robot's action, in words."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Subtask and plan events, in the order they happened."""

    def tell(self, robots: Iterable[str], text: str) -> None:
        """Give every robot in ``robots`` the same feedback."""
        for robot in robots:
            self.feedback[robot] = text

    def reward(self, robots: Iterable[str], amount: float) -> None:
        """Add ``amount`` to every robot in ``robots``."""
        for robot in robots:
            self.rewards[robot] += amount


@dataclass
class AssemblyState:
    """Everything one episode knows: the task drawn, where robots and parts are, what is done."""

    # ---- drawn at reset, fixed for the episode
    robots: list[str]
    """Every robot of the episode (``possible_agents``); the first one leads the planning."""
    recipe: Recipe
    """The product to build."""
    scene: Scene
    """The floor plan, with the reachable grid the backend reported."""
    travel_speed: int
    """Grid cells a robot covers per step."""
    place_cell: dict[str, tuple[int, int]]
    """Receptacle objectId -> the floor cell a robot stands on to use it."""
    place_rot: dict[str, int]
    """Receptacle objectId -> the yaw a robot faces it with."""
    place_ids: list[str]
    """The receptacles, ordered by (type, objectId): the places a robot can go to."""
    workbench: str
    """objectId of the receptacle where the product is assembled."""
    part_ids: dict[str, str]
    """Part type -> objectId of the object that is that part."""
    heavy: set[str]
    """Part types that need two robots to lift and carry."""
    connections: list[Pair]
    """The connections the recipe asks for, as (part, part)."""
    names: dict[str, str] = field(default_factory=dict)
    """objectId -> the name robots use (``Type_N``); objects get one when first seen."""
    type_counter: dict[str, int] = field(default_factory=dict)
    """Type -> how many objects of it have a name so far."""
    names_version: int = field(default_factory=lambda: next(_NAMINGS))
    """Changes whenever ``names`` gains a name, unique in the process (never reused by another
    state): the key of what is derived from the names (the vector slots' texts)."""

    # ---- the task's progress
    phase: str = "act"
    """``"plan"`` during the planning turn, ``"act"`` after."""
    at: dict[str, str | None] = field(default_factory=dict)
    """Robot -> the place it stands at (None at the start or on the way)."""
    travel: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Robot on the way -> (destination, steps left)."""
    carry: dict[str, Pair] = field(default_factory=dict)
    """Heavy part type being carried -> (holder, partner)."""
    conn_state: dict[Pair, str] = field(default_factory=dict)
    """Connection -> ``"todo"`` or ``"fixed"``."""
    conn_by: dict[Pair, list[str]] = field(default_factory=dict)
    """Connection -> the robots that made it last."""
    faulty: set[Pair] = field(default_factory=set)
    """Connections made with a hidden defect, until an inspection reveals them."""
    inspection_passed: bool = False
    """True once an inspection found the product complete: the episode is won."""
    last_inspection: str | None = None
    """``"passed"`` or what the last failed inspection named; None before any."""
    touched: set[str] = field(default_factory=set)
    """Part types some robot has picked up."""
    successes: dict[str, int] = field(default_factory=dict)
    """Robot -> how many of its actions succeeded (for the balance metric)."""
    placed_by: dict[str, list[str]] = field(default_factory=dict)
    """Part type -> the robots that put it on the workbench."""
    plan: dict[str, list[str]] | None = None
    """The leader's parsed plan (subtask -> robots), once given."""
    plan_error: str | None = None
    """Why the plan could not be read, if it could not."""
    turn_order: list[str] = field(default_factory=list)
    """The seeded order in which this step's actions reached the backend."""

    # ---- read from THOR's metadata after every step (``episode.refresh``)
    view: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Robot -> ``{"holding": objectId | None, "visible": [objectId], "cell": (x, z)}``."""
    obj: dict[str, dict[str, Any]] = field(default_factory=dict)
    """objectId -> THOR's object metadata."""
    ids_by_name: dict[str, str] = field(default_factory=dict)
    """Name -> objectId (the inverse of ``names``)."""
    placed: set[str] = field(default_factory=set)
    """Part types lying on the workbench."""

    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """Text derived from this state that the views memoise, keyed by what it depends on."""

    part_type_of: dict[str, str] = field(init=False)
    """objectId -> part type (the inverse of ``part_ids``)."""

    def __post_init__(self) -> None:
        self.part_type_of = {oid: t for t, oid in self.part_ids.items()}

    def name_object(self, oid: str, type_: str) -> None:
        """Give ``oid`` the next ``Type_N`` name of its type (on first sight)."""
        self.type_counter[type_] = self.type_counter.get(type_, 0) + 1
        self.names[oid] = f"{type_}_{self.type_counter[type_]}"
        self.names_version = next(_NAMINGS)

    def part_name(self, part: str) -> str | None:
        """The name of a part type's object, or None while nobody has seen it."""
        return self.names.get(self.part_ids[part])

    def holding_part(self, robot: str) -> str | None:
        """The part type a robot holds, alone or carrying a heavy part with a teammate."""
        for part, (holder, partner) in self.carry.items():
            if robot in (holder, partner):
                return part
        held = self.view[robot]["holding"]
        return self.part_type_of.get(held) if held else None

    def carry_partner(self, robot: str) -> str | None:
        """The teammate a robot carries a heavy part with, if it does."""
        for holder, partner in self.carry.values():
            if robot in (holder, partner):
                return partner if holder == robot else holder
        return None

    def part_place(self, part: str) -> str | None:
        """objectId of the receptacle a part lies in (None while it is carried or on the floor)."""
        parents = self.obj[self.part_ids[part]]["parentReceptacles"] or []
        return parents[0] if parents else None

    def steps_to(self, robot: str, place: str) -> int:
        """Steps a robot needs to reach a place from where it stands."""
        cells = self.scene.distance(self.view[robot]["cell"], self.place_cell[place])
        return max(1, math.ceil(cells / self.travel_speed))

    def places_here(self, robot: str) -> list[str]:
        """The places a robot (not on the way) can see and use from where it stands."""
        here = self.at[robot]
        if here is None:
            return []
        visible = set(self.view[robot]["visible"])
        cell = self.place_cell[here]
        return [p for p in self.place_ids if self.place_cell[p] == cell and p in visible]

    def connection_of(self, x_name: str, y_name: str) -> Pair | None:
        """The recipe's connection between two named parts, in either order, if there is one."""
        x, y = self.ids_by_name.get(x_name), self.ids_by_name.get(y_name)
        tx, ty = self.part_type_of.get(x or ""), self.part_type_of.get(y or "")
        for a, b in self.connections:
            if {a, b} == {tx, ty}:
                return (a, b)
        return None
