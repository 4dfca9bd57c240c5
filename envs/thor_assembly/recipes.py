"""Products of ``thor-assembly-v0`` as data: parts, connections, heavy parts, workbench, rooms."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

from teamgym.envs.thor_assembly.scenes import (
    OPENABLE,
    PICKUPABLE,
    load_scenes,
    object_type,
    receptacle_objects,
)

__all__ = ["BUILTIN_RECIPES", "Recipe", "eligible_scenes", "load_recipes"]

BUILTIN_RECIPES = Path(__file__).resolve().parent / "recipes.yaml"


@dataclass(frozen=True)
class Recipe:
    """One product: what to fetch, what to connect, where, and in which rooms."""

    name: str
    description: str
    rooms: tuple[str, ...]
    workbench: tuple[str, ...]
    parts: tuple[str, ...]
    connections: tuple[tuple[str, str], ...]
    heavy: tuple[str, ...]

    def validate(self) -> None:
        """Raise a ValueError naming what is wrong with this recipe."""
        compat = receptacle_objects()
        if len(set(self.parts)) != len(self.parts) or not 2 <= len(self.parts) <= 6:
            raise ValueError(
                f"recipe {self.name}: parts must be 2..6 distinct THOR types, got {self.parts}"
            )
        for part in self.parts:
            if part not in PICKUPABLE:
                raise ValueError(f"recipe {self.name}: {part} is not a pickupable THOR type")
            for bench in self.workbench:
                if part not in compat.get(bench, ()):
                    raise ValueError(f"recipe {self.name}: {part} cannot be put on a {bench}")
        for a, b in self.connections:
            if a not in self.parts or b not in self.parts or a == b:
                raise ValueError(
                    f"recipe {self.name}: connection {a}+{b} must join two of its parts"
                )
        if not set(self.heavy) <= set(self.parts):
            raise ValueError(f"recipe {self.name}: heavy parts {self.heavy} must be parts")
        if not eligible_scenes(self):
            raise ValueError(
                f"recipe {self.name}: no iTHOR scene of rooms {self.rooms} has its parts and workbench"
            )


def load_recipes(path: str | Path | None = None) -> dict[str, Recipe]:
    """Recipes by name from a YAML file (the built-in ones by default), validated."""
    entries = yaml.safe_load(Path(path or BUILTIN_RECIPES).read_text())
    out = {}
    for e in entries:
        recipe = Recipe(
            name=e["name"],
            description=e.get("description", e["name"].replace("_", " ")),
            rooms=tuple(e["rooms"]),
            workbench=tuple(e["workbench"]),
            parts=tuple(e["parts"]),
            connections=tuple((a, b) for a, b in e["connections"]),
            heavy=tuple(e.get("heavy", ())),
        )
        recipe.validate()
        out[recipe.name] = recipe
    return out


@functools.cache
def eligible_scenes(recipe: Recipe) -> tuple[str, ...]:
    """Scenes of the recipe's rooms with a workbench receptacle, every part type, a home for
    each part off the workbench, and an openable receptacle that can hide a part."""
    compat = receptacle_objects()
    out = []
    for scene in load_scenes().values():
        if scene.room not in recipe.rooms or not set(recipe.parts) <= scene.types:
            continue
        types = [object_type(r[0]) for r in scene.receptacles]
        if not any(t in recipe.workbench for t in types):
            continue
        if not all(
            any(p in compat.get(t, ()) and t not in recipe.workbench for t in types)
            for p in recipe.parts
        ):
            continue
        if not any(
            t in OPENABLE and any(p in compat.get(t, ()) for p in recipe.parts) for t in types
        ):
            continue
        out.append(scene.name)
    return tuple(out)
