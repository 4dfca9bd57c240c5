"""Derive teamgym's compact iTHOR scene data from the alfworld wheel (MIT licence).

Run once by a maintainer; the output is committed as ``envs/thor_assembly/data/scenes.json``
(with the licence in ``envs/thor_assembly/data/ALFWORLD_LICENSE``), so users and CI need no
download. Usage: python scripts/derive_thor_scenes.py [path/to/alfworld-*.whl]
(without an argument it runs ``pip download --no-deps alfworld``).

Per scene it keeps: the room type, the object types present, every receptacle listed in
``FloorPlanN-openable.json`` with its interaction pose (x, z, rotation), and the reachable
positions of ``FloorPlanN-layout.npy`` as 0.25 m grid indices. It also keeps ALFRED's
receptacle-compatibility table (``VAL_RECEPTACLE_OBJECTS``).
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "envs" / "thor_assembly" / "data"
ROOMS = {0: "kitchen", 2: "living_room", 3: "bedroom", 4: "bathroom"}


def room_of(n: int) -> str:
    return ROOMS[n // 100]


def main() -> None:
    if len(sys.argv) > 1:
        wheel = Path(sys.argv[1])
    else:
        tmp = Path(tempfile.mkdtemp())
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp), "alfworld"],
            check=True,
        )
        wheel = next(tmp.glob("alfworld-*.whl"))
    zf = zipfile.ZipFile(wheel)
    version = wheel.name.split("-")[1]
    scenes = []
    for n in [*range(1, 31), *range(201, 231), *range(301, 331), *range(401, 431)]:
        base = f"alfworld/gen/layouts/FloorPlan{n}"
        types = sorted(json.loads(zf.read(f"{base}-objects.json")))
        openable = json.loads(zf.read(f"{base}-openable.json"))
        grid = np.load(io.BytesIO(zf.read(f"{base}-layout.npy")))
        cells = sorted({(round(x / 0.25), round(z / 0.25)) for x, z in grid.tolist()})
        receptacles = [
            [object_id, round(pose[0] / 0.25), round(pose[1] / 0.25), int(pose[2]) % 360]
            for object_id, pose in sorted(openable.items())
        ]
        scenes.append(
            {
                "name": f"FloorPlan{n}",
                "room": room_of(n),
                "types": types,
                "receptacles": receptacles,
                "grid": cells,
            }
        )
    source = zf.read("alfworld/gen/constants.py").decode()
    tree = ast.parse(source)
    table = None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") == "VAL_RECEPTACLE_OBJECTS"
        ):
            table = ast.literal_eval(node.value)
    assert table is not None, "VAL_RECEPTACLE_OBJECTS not found"
    # ALFRED (THOR 2.1) names every table "TableTop"; THOR's current types are these three.
    for table_type in ("DiningTable", "CoffeeTable", "SideTable"):
        table.setdefault(table_type, set(table.get("TableTop", ())))
    # The layouts list a Sink / Bathtub where ALFRED places objects into their basins.
    table.setdefault("Sink", set(table.get("SinkBasin", ())))
    table.setdefault("Bathtub", set(table.get("BathtubBasin", ())))
    compat = {k: sorted(v) for k, v in sorted(table.items())}
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {
        "source": f"alfworld {version} (MIT): alfworld/gen/layouts/*, alfworld/gen/constants.py",
        "grid_size": 0.25,
        "receptacle_objects": compat,
        "scenes": scenes,
    }
    (OUT / "scenes.json").write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n")
    licence = next(n for n in zf.namelist() if n.endswith(".dist-info/LICENSE"))
    (OUT / "ALFWORLD_LICENSE").write_bytes(zf.read(licence))
    print(f"wrote {len(scenes)} scenes to {OUT / 'scenes.json'}")


if __name__ == "__main__":
    main()
