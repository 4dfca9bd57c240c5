"""iTHOR scene data for the symbolic world: floor plans, receptacles, object capabilities.

``data/scenes.json`` is derived from the alfworld wheel (MIT licence, see
``data/ALFWORLD_LICENSE``) by ``scripts/derive_thor_scenes.py``: for each of the 120 iTHOR
scenes, its room type, the object types present, every receptacle with the pose from which a
robot interacts with it, and the reachable positions on THOR's 0.25 m grid. The capability
sets below are THOR's object-type table (pickupable, receptacle, openable), and
``receptacle_objects()`` is ALFRED's receptacle-compatibility table.
"""

from __future__ import annotations

import functools
import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["OPENABLE", "PICKUPABLE", "RECEPTACLES", "Scene", "load_scenes", "receptacle_objects"]

DATA = Path(__file__).resolve().parent / "data" / "scenes.json"

#: THOR object types a robot can pick up (THOR's object-type table).
PICKUPABLE = frozenset(
    [
        "AlarmClock",
        "Apple",
        "AppleSliced",
        "BaseballBat",
        "BasketBall",
        "Book",
        "Boots",
        "Bottle",
        "Bowl",
        "Box",
        "Bread",
        "BreadSliced",
        "ButterKnife",
        "Candle",
        "CD",
        "CellPhone",
        "Cloth",
        "CreditCard",
        "Cup",
        "DishSponge",
        "Egg",
        "EggCracked",
        "Fork",
        "HandTowel",
        "Kettle",
        "KeyChain",
        "Knife",
        "Ladle",
        "Laptop",
        "Lettuce",
        "LettuceSliced",
        "Mug",
        "Newspaper",
        "Pan",
        "PaperTowel",
        "Pen",
        "Pencil",
        "PepperShaker",
        "Pillow",
        "Plate",
        "Plunger",
        "Pot",
        "Potato",
        "PotatoSliced",
        "RemoteControl",
        "SaltShaker",
        "ScrubBrush",
        "SoapBar",
        "SoapBottle",
        "Spatula",
        "Spoon",
        "SprayBottle",
        "Statue",
        "TeddyBear",
        "TennisRacket",
        "TissueBox",
        "ToiletPaper",
        "Tomato",
        "TomatoSliced",
        "Towel",
        "Vase",
        "Watch",
        "WateringCan",
        "WineBottle",
    ]
)
#: THOR object types that hold other objects.
RECEPTACLES = frozenset(
    [
        "ArmChair",
        "Bathtub",
        "BathtubBasin",
        "Bed",
        "Bowl",
        "Box",
        "Cabinet",
        "Cart",
        "CoffeeMachine",
        "CoffeeTable",
        "CounterTop",
        "Cup",
        "Desk",
        "DiningTable",
        "Drawer",
        "Dresser",
        "Fridge",
        "GarbageCan",
        "HandTowelHolder",
        "LaundryHamper",
        "Microwave",
        "Mug",
        "Ottoman",
        "Pan",
        "Plate",
        "Pot",
        "Safe",
        "Shelf",
        "SideTable",
        "Sink",
        "SinkBasin",
        "Sofa",
        "StoveBurner",
        "Toaster",
        "Toilet",
        "ToiletPaperHanger",
        "TowelHolder",
        "TVStand",
    ]
)
#: THOR object types that open and close (a closed one hides its contents).
OPENABLE = frozenset(
    [
        "Blinds",
        "Book",
        "Box",
        "Cabinet",
        "Drawer",
        "Fridge",
        "Kettle",
        "Laptop",
        "LaundryHamperLid",
        "Microwave",
        "Safe",
        "ShowerCurtain",
        "ShowerDoor",
    ]
)

Cell = tuple[int, int]


@dataclass(frozen=True, eq=False)
class Scene:
    """One iTHOR floor plan, as the symbolic world needs it."""

    name: str
    room: str
    types: frozenset[str]
    receptacles: tuple[tuple[str, Cell, int], ...]
    """(objectId, interaction cell, rotation in degrees) per receptacle."""
    grid: frozenset[Cell]
    """Reachable positions as 0.25 m grid indices."""
    _distances: dict[Cell, dict[Cell, int]] = field(default_factory=dict, compare=False, repr=False)

    @functools.cached_property
    def floor(self) -> frozenset[Cell]:
        """The largest 4-connected set of reachable cells: where robots live (the layouts have
        a few stray cells that no path reaches)."""
        left, best = set(self.grid), set[Cell]()
        while left:
            seed = min(left)
            comp, queue = {seed}, deque([seed])
            while queue:
                x, z = queue.popleft()
                for nxt in ((x + 1, z), (x - 1, z), (x, z + 1), (x, z - 1)):
                    if nxt in left and nxt not in comp:
                        comp.add(nxt)
                        queue.append(nxt)
            left -= comp
            if len(comp) > len(best):
                best = comp
        return frozenset(best)

    def snap(self, cell: Cell) -> Cell:
        """The floor cell nearest to ``cell`` (interaction poses are reachable in THOR)."""
        if cell in self.floor:
            return cell
        return min(self.floor, key=lambda c: ((c[0] - cell[0]) ** 2 + (c[1] - cell[1]) ** 2, c))

    def distances_from(self, start: Cell) -> dict[Cell, int]:
        """Grid-step distances (4-connected BFS over reachable cells) from ``start``; cached."""
        start = self.snap(start)
        if start not in self._distances:
            dist = {start: 0}
            queue = deque([start])
            while queue:
                x, z = queue.popleft()
                for nxt in ((x + 1, z), (x - 1, z), (x, z + 1), (x, z - 1)):
                    if nxt in self.floor and nxt not in dist:
                        dist[nxt] = dist[(x, z)] + 1
                        queue.append(nxt)
            self._distances[start] = dist
        return self._distances[start]

    def distance(self, a: Cell, b: Cell) -> int:
        """Path length in grid steps between two cells (large when disconnected)."""
        return self.distances_from(a).get(self.snap(b), 10_000)


@functools.cache
def _raw() -> dict:
    return json.loads(DATA.read_text())


@functools.cache
def load_scenes() -> dict[str, Scene]:
    """All 120 scenes by name (``FloorPlan1`` … ``FloorPlan430``)."""
    out = {}
    for s in _raw()["scenes"]:
        out[s["name"]] = Scene(
            name=s["name"],
            room=s["room"],
            types=frozenset(s["types"]),
            receptacles=tuple((r[0], (r[1], r[2]), r[3]) for r in s["receptacles"]),
            grid=frozenset((c[0], c[1]) for c in s["grid"]),
        )
    return out


@functools.cache
def receptacle_objects() -> dict[str, frozenset[str]]:
    """Receptacle type -> object types it may hold (ALFRED's ``VAL_RECEPTACLE_OBJECTS``)."""
    return {k: frozenset(v) for k, v in _raw()["receptacle_objects"].items()}


def object_type(object_id: str) -> str:
    """``"Cabinet|+00.68|+00.50|-02.20"`` -> ``"Cabinet"``."""
    return object_id.split("|", 1)[0]


def object_position(object_id: str) -> tuple[float, float, float]:
    """The position encoded in a THOR objectId."""
    parts = object_id.split("|")
    return float(parts[1]), float(parts[2]), float(parts[3])
