"""The vector view of ``thor-assembly-v0`` (``obs_mode="vector"``): fixed action slots mapped
to this episode's names, and a fixed-size numeric observation."""

from __future__ import annotations

import numpy as np

from teamgym.envs.thor_assembly.state import AssemblyState

__all__ = ["MAX_PARTS", "MAX_PLACES", "SlotTexts", "action_slots", "vector_observation"]

MAX_PLACES = 48
MAX_PARTS = 6
VECTOR_SIZE = MAX_PLACES + 4 + MAX_PARTS * 5 + MAX_PARTS * MAX_PARTS + 3
_PLACE_VERBS = ("goto", "open", "close", "put")


def action_slots() -> list[tuple[str, str | None]]:
    """Every vector action slot, fixed for the env's life: place and part indices stand for
    this episode's places and recipe parts."""
    slots: list[tuple[str, str | None]] = [("wait", None), ("inspect", None), ("plan", None)]
    slots += [(f"{verb} place {k}", None) for verb in _PLACE_VERBS for k in range(MAX_PLACES)]
    slots += [(f"{verb} part {j}", None) for verb in ("pickup", "hold") for j in range(MAX_PARTS)]
    slots += [
        (f"attach part {j} to part {m}", None)
        for j in range(MAX_PARTS)
        for m in range(MAX_PARTS)
        if j != m
    ]
    return slots


class SlotTexts:
    """The text action of every slot now, cached until an object gets a name (keyed on the
    state's ``names_version``, unique in the process: another episode never shares it)."""

    def __init__(self, slots: list[tuple[str, str | None]]) -> None:
        self.slots = slots
        self._key: int | None = None
        self._texts: list[str] = []

    def texts(self, state: AssemblyState) -> list[str]:
        """Slot index -> text command for this episode's names."""
        key = state.names_version
        if self._key != key:
            self._key, self._texts = key, [_slot_text(state, slot) for slot, _ in self.slots]
        return self._texts


def _slot_text(state: AssemblyState, slot: str) -> str:
    words = slot.split()
    if words[1:2] == ["place"]:
        k = int(words[2])
        return f"{words[0]} {state.names[state.place_ids[k]]}" if k < len(state.place_ids) else slot
    if words[0] in ("pickup", "hold"):
        name = _part_name(state, int(words[2]))
        return f"{words[0]} {name}" if name else f"{words[0]} part {words[2]}"
    if words[0] == "attach":
        na, nb = _part_name(state, int(words[2])), _part_name(state, int(words[5]))
        return f"attach {na} to {nb}" if na and nb else slot
    return slot


def _part_name(state: AssemblyState, j: int) -> str | None:
    parts = state.recipe.parts
    return state.part_name(parts[j]) if j < len(parts) else None


def vector_observation(state: AssemblyState, robot: str, progress: float) -> np.ndarray:
    """[place one-hot | travelling, at workbench, holding, planning | per part: named, placed,
    visible, held, heavy | connection matrix (1 made, .5 to do) | passed, progress, mates].
    What every robot shares is filled once per step (:func:`_shared`); this robot's ones are
    set in one numpy call."""
    out = _shared(state, progress).copy()
    here = state.at[robot]
    held = state.holding_part(robot)
    base = MAX_PLACES
    flags = (
        robot in state.travel,
        here == state.workbench,
        held is not None,
        state.phase == "plan",
    )
    ones = [base + f for f, on in enumerate(flags) if on]
    if here is not None:
        ones.append(_place_index(state)[here])
    base += 4
    visible = set(state.view[robot]["visible"])
    for j, part in enumerate(state.recipe.parts):
        if state.part_ids[part] in visible:
            ones.append(base + 5 * j + 2)
        if held == part:
            ones.append(base + 5 * j + 3)
    out[ones] = 1.0
    if here is not None:
        mates = sum(1 for a in state.robots if a != robot and state.at[a] == here)
        out[VECTOR_SIZE - 1] = mates / 8
    return out


def _shared(state: AssemblyState, progress: float) -> np.ndarray:
    """The robot-independent entries (per part: named, placed, heavy; the connections; passed,
    progress), memoised on the state for the step (``progress`` and the names mark it)."""
    key = (progress, state.names_version)
    memo = state.memo.get("vector")
    if memo is not None and memo[0] == key:
        return memo[1]
    out = [0.0] * VECTOR_SIZE
    base = MAX_PLACES + 4
    parts = state.recipe.parts
    for j, part in enumerate(parts):
        out[base + 5 * j] = float(state.part_ids[part] in state.names)
        out[base + 5 * j + 1] = float(part in state.placed)
        out[base + 5 * j + 4] = float(part in state.heavy)
    base += 5 * MAX_PARTS
    index = {p: j for j, p in enumerate(parts)}
    for a, b in state.connections:
        out[base + index[a] * MAX_PARTS + index[b]] = (
            1.0 if state.conn_state[(a, b)] == "fixed" else 0.5
        )
    base += MAX_PARTS * MAX_PARTS
    out[base : base + 2] = (float(state.inspection_passed), min(1.0, progress))
    array = np.array(out, dtype=np.float32)
    state.memo["vector"] = (key, array)
    return array


def _place_index(state: AssemblyState) -> dict[str, int]:
    """Place objectId -> its index in ``place_ids`` (memoised on the state)."""
    index = state.memo.get("place_index")
    if index is None:
        index = state.memo["place_index"] = {p: k for k, p in enumerate(state.place_ids)}
    return index
