"""``keydoor-v0``: two rooms and a door that stays open only while someone holds the plate."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.drawing import Drawing
from teamgym.envs.keydoor.world import MOVES, Layout, generate_layout, relative
from teamgym.envs.presets import int_in, resolve
from teamgym.envs.text_env import GameStep, TextParallelEnv

__all__ = ["DIFFICULTIES", "KeyDoorEnv"]

Cell = tuple[int, int]
#: Named settings (explicit keyword arguments override them).
DIFFICULTIES: dict[str, dict[str, Any]] = {
    "easy": {"room_size": 3, "room_height": 3, "with_key": False, "fixed_layout": True},
    "medium": {"room_size": 4, "room_height": 4, "with_key": False, "fixed_layout": False},
    "hard": {"room_size": 6, "room_height": 5, "with_key": True, "fixed_layout": False},
}
_REPLY_FORMAT = (
    "Reply format: think if you like, then give exactly one command as "
    "<action>COMMAND</action>; to tell your team something add <say>TEXT</say>."
)


class KeyDoorEnv(TextParallelEnv):
    """Explorer and exploiter: one agent must hold the door open for another.

    Two rooms, ``room_size`` x ``room_height`` each, are joined by a doorway in the wall between
    them. The team starts in the west room, with a pressure plate; the treasure, the only
    reward, lies in the east room and is seen only from there. An agent may step into the
    doorway only while some agent stands on the plate (the state at the start of the step
    counts), so no agent can win alone: one must hold the plate while another crosses. With
    ``with_key`` the door is also locked: someone must ``take`` the key in the west room and
    carry it into the doorway once (that unlocks it). Moves are ``north``/``south``/``east``/
    ``west``; ``take`` picks up the key or the treasure; agents may share cells.

    Taking the treasure gives the taker 1 and ends the episode (success, score 1); otherwise the
    score is 0.5 once someone crossed and 0.25 once the plate was held. Subtasks ``open_door``
    (plate held while a teammate crosses, credited to both), ``unlock`` and ``treasure``
    measure the collaboration; at the end a ``role`` event per agent says who held the door
    (``holder``), who crossed (``fetcher``) and who did neither (``idle``), so role
    specialisation across episodes can be counted.

    Args:
        num_agents: team size, 2..8.
        difficulty: a named setting of the arguments below (default ``medium``); explicit
            arguments override it.
        room_size: width of each room in cells, 2..10.
        room_height: height of each room in cells, 2..10.
        with_key: the door is also locked; a key in the west room must be carried into the
            doorway once.
        fixed_layout: the plate, door and key stay in place (only the starts and the
            treasure are drawn).

    >>> env = KeyDoorEnv(num_agents=2, difficulty="easy")
    >>> obs, infos = env.reset(seed=0)
    >>> "The door is closed" in obs["robot_0"], sorted(infos["robot_0"]["valid_actions"])[:2]
    (True, ['east', 'north'])
    """

    metadata: ClassVar[dict[str, Any]] = {**TextParallelEnv.metadata, "name": "keydoor_v0"}
    max_agents = 6
    max_game_observation_chars = 2048
    success_criterion = "the treasure taken"

    def __init__(
        self,
        num_agents: int = 2,
        *,
        difficulty: Literal["easy", "medium", "hard"] | None = None,
        room_size: int | None = None,
        room_height: int | None = None,
        with_key: bool | None = None,
        fixed_layout: bool | None = None,
        **base: Any,
    ) -> None:
        """Rules in the class docstring; ``base`` takes the common options of ``TextParallelEnv``."""
        super().__init__(num_agents, **base)
        given = {"room_size": room_size, "room_height": room_height, "with_key": with_key,
                 "fixed_layout": fixed_layout}  # fmt: skip
        preset = resolve(DIFFICULTIES, difficulty, given)
        for name in ("room_size", "room_height"):
            int_in(name, preset[name], 2, 10)
        self.room_size, self.room_height = preset["room_size"], preset["room_height"]
        self.with_key, self.fixed_layout = bool(preset["with_key"]), bool(preset["fixed_layout"])
        self.layout: Layout | None = None
        self.pos: dict[str, Cell] = {}
        self.carrier: str | None = None
        self.key_taken = False
        self.unlocked = not self.with_key
        self.held_once = False
        self.crossers: set[str] = set()
        self.holders: set[str] = set()
        self.explorers: set[str] = set()
        self.won_by: str | None = None

    # ------------------------------------------------------------------ rules
    def _game_default_max_steps(self) -> int:
        return 6 * (2 * self.room_size + self.room_height) + (20 if self.with_key else 0)

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        self.layout = generate_layout(
            self.np_random, len(self.possible_agents), self.room_size, self.room_height,
            self.with_key, self.fixed_layout,
        )  # fmt: skip
        self.pos = dict(zip(self.possible_agents, self.layout.starts, strict=True))
        self.carrier, self.key_taken, self.unlocked = None, False, not self.with_key
        self.held_once, self.won_by = False, None
        self.crossers, self.holders, self.explorers = set(), set(), set()

    def _on_plate(self) -> list[str]:
        assert self.layout is not None
        return [a for a, c in self.pos.items() if c == self.layout.plate]

    def door_open_for(self, agent: str) -> bool:
        """Whether ``agent`` may step into the doorway now: the plate is held and the door is
        unlocked (or the agent carries the key)."""
        return bool(self._on_plate()) and (self.unlocked or self.carrier == agent)

    def _target(self, agent: str, move: str) -> Cell | None:
        """Where ``move`` takes ``agent``, or None when a wall or the closed door is in the way."""
        assert self.layout is not None
        x, y = self.pos[agent]
        dx, dy = MOVES[move]
        cell = (x + dx, y + dy)
        if not self.layout.inside(cell):
            return None
        if cell == self.layout.door and not self.door_open_for(agent):
            return None
        return cell

    def _game_valid_actions(self, agent: str) -> list[str]:
        assert self.layout is not None
        valid = [m for m in MOVES if self._target(agent, m) is not None]
        here = self.pos[agent]
        if here == self.layout.treasure or (here == self.layout.key and not self.key_taken):
            valid.append("take")
        return [*valid, "wait"]

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return [(a, None) for a in (*MOVES, "take", "wait")]

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        assert self.layout is not None
        events: list[dict[str, Any]] = []
        feedback: dict[str, str] = {}
        holders = self._on_plate()
        targets = {a: self._target(a, m) if m in MOVES else None for a, m in actions.items() if m}
        for agent, action in actions.items():
            if action in MOVES and (target := targets[agent]) is not None:
                before, self.pos[agent] = self.pos[agent], target
                feedback[agent] = f"You moved {action}."
                events += self._moved(agent, before, holders)
            elif action == "take":
                events += self._take(agent, feedback)
            elif action == "wait":
                feedback[agent] = "You waited."
        for agent in self._on_plate():
            if not self.held_once:
                events.append(ev.subtask_attempted("open_door", [agent]))
            self.held_once = True
        rewards = {self.won_by: 1.0} if self.won_by else {}
        done = self.won_by is not None
        if done or self.num_steps + 1 >= self.max_steps:
            events += self._ending()
        return GameStep(rewards=rewards, feedback=feedback, events=events, done=done)

    def _moved(self, agent: str, before: Cell, holders: list[str]) -> list[dict[str, Any]]:
        """Events of a move: crossing the doorway (with who held the plate), unlocking, exploring."""
        assert self.layout is not None
        out = []
        if self.pos[agent] == self.layout.door and before != self.layout.door:
            if not self.crossers:
                out.append(ev.subtask_completed("open_door", sorted({*holders, agent})))
            self.crossers.add(agent)
            self.holders.update(h for h in holders if h != agent)
            if not self.unlocked and self.carrier == agent:
                self.unlocked = True
                out.append(ev.subtask_completed("unlock", [agent]))
        if self.layout.room(self.pos[agent]) == "east" and agent not in self.explorers:
            if not self.explorers:
                out.append(ev.subtask_attempted("treasure", [agent]))
            self.explorers.add(agent)
        return out

    def _take(self, agent: str, feedback: dict[str, str]) -> list[dict[str, Any]]:
        assert self.layout is not None
        here = self.pos[agent]
        if here == self.layout.treasure and self.won_by is None:
            self.won_by = agent
            feedback[agent] = "You took the treasure!"
            return [ev.subtask_completed("treasure", [agent])]
        if here == self.layout.key and not self.key_taken:
            self.key_taken, self.carrier = True, agent
            feedback[agent] = "You picked up the key; carry it into the doorway to unlock the door."
            return [ev.subtask_attempted("unlock", [agent])]
        feedback[agent] = "There is nothing to take here."
        return []

    def _ending(self) -> list[dict[str, Any]]:
        """Who played which role, and the outcome."""
        roles = []
        for agent in self.possible_agents:
            role = (
                "holder"
                if agent in self.holders
                else "fetcher"
                if agent in self.crossers
                else "idle"
            )
            roles.append(ev.role(agent, role))
        score = 1.0 if self.won_by else 0.5 if self.crossers else 0.25 if self.held_once else 0.0
        return [*roles, ev.outcome(self.won_by is not None, score)]

    # ------------------------------------------------------------------ views
    def _game_instructions(self, agent: str) -> str:
        key = (
            " The door is also locked: someone must 'take' the key in the west room and carry it "
            "into the doorway once."
            if self.with_key
            else ""
        )
        return (
            f"You are {agent} in a team of {len(self.possible_agents)}. Two rooms, "
            f"{self.room_size} wide and {self.room_height} tall, are joined by a doorway in the "
            "wall between them. You start in the west room, which has a pressure plate; the "
            "treasure is in the east room and can be seen only from there. The doorway can be "
            "entered only while someone stands on the plate, so one of you must hold the plate "
            f"while another goes through.{key} Moves: north, south, east, west; 'take' picks up "
            "the key or the treasure; 'wait' stays. Taking the treasure wins for the team.\n"
            + _REPLY_FORMAT
        )

    def _game_observation(self, agent: str) -> str:
        assert self.layout is not None
        lay, here = self.layout, self.pos[agent]
        holders = self._on_plate()
        door = (
            "locked" if not self.unlocked and not (holders and self.carrier == agent)
            else f"open ({', '.join(holders)} on the plate)" if holders
            else "closed (nobody is on the plate)"
        )  # fmt: skip
        lines = [
            f"You are in the {lay.room(here)}{'' if lay.room(here) == 'doorway' else ' room'}. "
            f"The door is {door}.",
            f"Pressure plate: {relative(here, lay.plate)}. Doorway: {relative(here, lay.door)}.",
        ]
        if self.with_key:
            where = (
                "you carry it" if self.carrier == agent
                else f"{self.carrier} carries it" if self.carrier
                else relative(here, lay.key) if lay.key else "gone"
            )  # fmt: skip
            lines.append(f"Key: {'used' if self.unlocked else where}.")
        treasure = (
            relative(here, lay.treasure) if lay.room(here) != "west" else "not visible from here"
        )
        lines.append(f"Treasure: {treasure}.")
        mates = [f"{a} {relative(here, c)}" for a, c in self.pos.items() if a != agent]
        lines.append("Teammates: " + "; ".join(mates) + ".")
        return "\n".join(lines)

    def drawing(self, agent: str) -> Drawing | None:
        """The rooms as ``agent`` sees them, the treasure only from where it is seen
        (:mod:`teamgym.envs.keydoor.drawing`)."""
        if self.layout is None:
            return None
        from teamgym.envs.keydoor.drawing import drawing

        return drawing(self, agent)

    def _game_render(self) -> str:
        if self.layout is None:
            return "keydoor-v0 (not reset)"
        lay = self.layout
        rows = []
        for y in range(lay.height):
            row = []
            for x in range(lay.width):
                cell = (x, y)
                mark = "#" if x == lay.wall else "."
                if cell == lay.door:
                    mark = "D" if self._on_plate() and self.unlocked else "d"
                elif cell == lay.plate:
                    mark = "P"
                elif cell == lay.treasure and not self.won_by:
                    mark = "T"
                elif cell == lay.key and not self.key_taken:
                    mark = "K"
                here = [a for a, c in self.pos.items() if c == cell]
                row.append(here[0].removeprefix("robot_")[-1] if here else mark)
            rows.append("".join(row))
        return f"keydoor-v0 step {self.num_steps}\n" + "\n".join(rows)

    def _game_vector_size(self) -> int:
        return 15 + 2 * (len(self.possible_agents) - 1)

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        assert self.layout is not None
        lay, (x, y) = self.layout, self.pos[agent]
        w, h = lay.width, lay.height

        def rel(cell: Cell) -> tuple[float, float]:
            return (cell[0] - x) / w, (cell[1] - y) / h

        seen = lay.room((x, y)) != "west"
        out = [x / w, y / h, float(bool(self._on_plate())), float(self.unlocked),
               float(self.carrier == agent), *rel(lay.plate), *rel(lay.door),
               float(seen), *(rel(lay.treasure) if seen else (0.0, 0.0)),
               *(rel(lay.key) if lay.key and not self.key_taken else (0.0, 0.0)),
               float(lay.key is not None and not self.key_taken)]  # fmt: skip
        for other in self.possible_agents:
            if other != agent:
                out += rel(self.pos[other])
        return np.asarray(out, dtype=np.float32)
