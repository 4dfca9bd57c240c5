"""``foraging-v1`` (and ``foraging-v0``): level-based foraging, where most items need several
agents at once."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.drawing import Drawing
from teamgym.envs.foraging import feedback as say
from teamgym.envs.foraging.world import MOVES, Field, spawn
from teamgym.envs.grid import offset_words
from teamgym.envs.parsing import normalize_action, parse_reply
from teamgym.envs.presets import int_in, resolve
from teamgym.envs.text_env import GameStep, TextParallelEnv

__all__ = ["DIFFICULTIES", "ForagingEnv"]

Cell = tuple[int, int]
#: Named settings (explicit keyword arguments override them).
DIFFICULTIES: dict[str, dict[str, Any]] = {
    "easy": {"size": 6, "num_items": 2, "max_agent_level": 2, "force_coop": False, "sight": None},
    "medium": {"size": 8, "num_items": 3, "max_agent_level": 3, "force_coop": False, "sight": 3},
    "hard": {"size": 12, "num_items": 4, "max_agent_level": 3, "force_coop": True, "sight": 2},
}
_ACTIONS = ("north", "south", "west", "east", "load", "wait")
_REPLY_FORMAT = (
    "Reply format: think if you like, then give exactly one command as "
    "<action>COMMAND</action>; to tell your team something add <say>TEXT</say>."
)


def _direction(frm: Cell, to: Cell) -> str:
    """``2 north, 1 east`` from one (row, col) cell to another (rows grow southward)."""
    return offset_words(to[0] - frm[0], to[1] - frm[1])


class ForagingEnv(TextParallelEnv):
    """Level-based foraging (the rules of the ``lbforaging`` package), with text observations.

    Agents and items on a ``size`` x ``size`` field each have a level. An item is loaded when
    the agents next to it (north, south, west, east) that choose ``load`` in the same step have
    levels summing to at least the item's level; each of them is then rewarded
    ``own level x item level / (their summed level x all item levels at the start)``, so a full
    clear pays the team 1 and the reward is split by level contribution. Moves into an item or
    off the field are not legal; two agents moving into one cell both stay. ``force_coop``
    gives every item the sum of all agents' levels (every item needs the whole team; at most 4
    agents, since an item has 4 neighbours). ``sight`` limits what an agent sees to that many
    cells around it (None: the whole field).

    Each item is a subtask (attempted on a load try, completed by its loaders); success means
    the field was cleared, ``score`` is the share of item levels loaded.

    Args:
        num_agents: team size, 2..8 (at most 4 with ``force_coop``).
        difficulty: a named setting of the arguments below (default ``medium``); explicit
            arguments override it.
        size: the field is ``size`` x ``size`` cells, 4..20.
        num_items: items on the field, 1..10.
        max_agent_level: agents' levels are drawn from 1..this, at most 5.
        max_item_level: items' levels are drawn up to this (None: the sum of the three
            lowest agent levels).
        force_coop: every item's level is the sum of all agents' levels (the whole team must
            load it together).
        sight: how many cells around it an agent sees (None: the whole field).
        feedback: ``"detailed"`` (``foraging-v1``) says what happened to each action: the
            move and where it led, what blocked it (an item, the edge of the field, teammates
            in or moving into the same cell), a load with whom, the reward and the items left,
            a failed load with the loaders' summed level and the item's. ``"legacy"``
            (``foraging-v0``) keeps 0.1.0's "Nothing happened." for every legal action.

    >>> env = ForagingEnv(num_agents=2, difficulty="easy")
    >>> obs, infos = env.reset(seed=1)
    >>> print(obs["robot_0"].splitlines()[1])
    You are robot_0, level 1, at row 1, column 0 of a 6x6 field.
    """

    metadata: ClassVar[dict[str, Any]] = {**TextParallelEnv.metadata, "name": "foraging_v0"}
    max_game_observation_chars = 2048
    success_criterion = "the field cleared: every item loaded"

    def __init__(
        self,
        num_agents: int = 2,
        *,
        difficulty: Literal["easy", "medium", "hard"] | None = None,
        size: int | None = None,
        num_items: int | None = None,
        max_agent_level: int | None = None,
        max_item_level: int | None = None,
        force_coop: bool | None = None,
        sight: int | Literal["preset"] | None = "preset",
        feedback: Literal["detailed", "legacy"] = "detailed",
        **base: Any,
    ) -> None:
        """Rules in the class docstring; ``base`` takes the common options of ``TextParallelEnv``."""
        super().__init__(num_agents, **base)
        given = {"size": size, "num_items": num_items, "max_agent_level": max_agent_level,
                 "force_coop": force_coop}  # fmt: skip
        cfg = resolve(DIFFICULTIES, difficulty, given)
        if sight != "preset":
            cfg["sight"] = sight
        int_in("size", cfg["size"], 4, 20)
        int_in("num_items", cfg["num_items"], 1, 10)
        int_in("max_agent_level", cfg["max_agent_level"], 1, 5)
        if cfg["sight"] is not None and (not isinstance(cfg["sight"], int) or cfg["sight"] < 1):
            raise ValueError(f"sight must be a positive int or None, got {cfg['sight']!r}")
        if feedback not in ("detailed", "legacy"):
            raise ValueError(f"feedback must be 'detailed' or 'legacy', got {feedback!r}")
        if cfg["force_coop"] and num_agents > 4:
            raise ValueError("force_coop needs at most 4 agents: an item has only 4 neighbours")
        self.size, self.num_items = cfg["size"], cfg["num_items"]
        self.max_agent_level, self.max_item_level = cfg["max_agent_level"], max_item_level
        self.force_coop, self.sight = bool(cfg["force_coop"]), cfg["sight"]
        self.feedback = feedback
        self.field: Field | None = None
        self.loaded_levels = 0
        self._tried: set[Cell] = set()

    # ------------------------------------------------------------------ rules
    def _game_default_max_steps(self) -> int:
        return 10 * self.size

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        self.field = spawn(
            self.np_random, self.possible_agents, self.size, self.num_items,
            self.max_agent_level, self.max_item_level, self.force_coop,
        )  # fmt: skip
        self.loaded_levels = 0
        self._tried = set()

    def _game_valid_actions(self, agent: str) -> list[str]:
        f = self.field
        assert f is not None
        r, c = f.pos[agent]
        valid = [m for m, (dr, dc) in MOVES.items() if f.free((r + dr, c + dc))]
        if f.adjacent_item((r, c)) is not None:
            valid.append("load")
        return [*valid, "wait"]

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return [(a, None) for a in _ACTIONS]

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        f = self.field
        assert f is not None
        wanted: dict[Cell, list[str]] = {}
        loaders = []
        for agent in self.possible_agents:
            action = actions.get(agent) or "wait"
            r, c = f.pos[agent]
            if action in MOVES:
                dr, dc = MOVES[action]
                wanted.setdefault((r + dr, c + dc), []).append(agent)
            else:
                wanted.setdefault((r, c), []).append(agent)
                if action == "load":
                    loaders.append(agent)
        start = dict(f.pos)
        for cell, who in wanted.items():  # two or more agents into one cell: none of them moves
            if len(who) == 1:
                f.pos[who[0]] = cell
        said = self._move_feedback(actions, wanted, start) if self.feedback == "detailed" else None
        rewards, events = self._load(loaders, said)
        done = not f.items
        if done or self.num_steps + 1 >= self.max_steps:
            score = self.loaded_levels / f.food_spawned if f.food_spawned else 1.0
            events.append(ev.outcome(done, score))
        if said is not None and done:
            said = {a: f"{said[a]} {say.won()}" if said.get(a) else say.won() for a in actions}
        return GameStep(rewards=rewards, feedback=said or {}, events=events, done=done)

    def _move_feedback(
        self, actions: dict[str, str | None], wanted: dict[Cell, list[str]], start: dict[str, Cell]
    ) -> dict[str, str]:
        """Detailed feedback on moves, waits and unusable replies (loads are told in ``_load``)."""
        f = self.field
        assert f is not None
        out = {}
        for agent in actions:
            action = actions[agent]
            if action is None:
                why = say.cannot(f, start[agent], self._attempted(agent))
                if why:
                    out[agent] = why
            elif action == "wait":
                out[agent] = say.waited(start[agent])
            elif action in MOVES:
                dr, dc = MOVES[action]
                target = (start[agent][0] + dr, start[agent][1] + dc)
                others = [a for a in wanted[target] if a != agent]
                if not others:
                    out[agent] = say.moved(action, target)
                    continue
                movers = [a for a in others if actions.get(a) in MOVES]
                stayers = [a for a in others if a not in movers]
                out[agent] = say.blocked(action, start[agent], target, stayers, movers)
        return out

    def _attempted(self, agent: str) -> str | None:
        """The action an unusable reply named, if any (to say why it is not legal now)."""
        raw = self.raw_replies.get(agent)
        if self.obs_mode == "vector":
            names = self._game_action_names(agent)
            try:
                index = int(raw)  # type: ignore[arg-type]  # whatever was sent: refused below
            except (TypeError, ValueError):
                return None
            return names[index][0] if 0 <= index < len(names) else None
        action = parse_reply(raw).action
        return normalize_action(action) if action else None

    def _load(
        self, loaders: list[str], said: dict[str, str] | None = None
    ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """Resolve the load attempts in agent order: each item with the loaders next to it;
        ``said`` (detailed feedback) gets each loader's sentence."""
        f = self.field
        assert f is not None
        rewards: dict[str, float] = {}
        events: list[dict[str, Any]] = []
        pending = list(loaders)
        loads: list[tuple[Cell, int, list[str]]] = []
        while pending:
            item = f.adjacent_item(f.pos[pending[0]])
            if item is None:  # its item went to an earlier group this step
                agent = pending.pop(0)
                if said is not None:
                    said[agent] = say.cannot(f, f.pos[agent], "load") or ""
                continue
            group = [
                a for a in pending if abs(f.pos[a][0] - item[0]) + abs(f.pos[a][1] - item[1]) == 1
            ]
            pending = [a for a in pending if a not in group]
            name = f"item@{item[0]},{item[1]}"
            if item not in self._tried:
                events.append(ev.subtask_attempted(name, group))
                self._tried.add(item)
            level, total = f.items[item], sum(f.levels[a] for a in group)
            if total < level:
                events.append(ev.subtask_failed(name, group, f"levels {total} < {level}"))
                if said is not None:
                    said.update({a: say.load_failed(f, a, item, level, group) for a in group})
                continue
            for a in group:
                rewards[a] = f.levels[a] * level / (total * f.food_spawned)
            del f.items[item]
            self.loaded_levels += level
            events.append(ev.subtask_completed(name, group))
            loads.append((item, level, group))
        if said is not None:  # after every load: "items left" counts the whole step's
            for item, level, group in loads:
                said.update({a: say.loaded(f, a, item, level, group, rewards[a]) for a in group})
        return rewards, events

    # ------------------------------------------------------------------ views
    def _visible(self, frm: Cell, cell: Cell) -> bool:
        return self.sight is None or max(abs(frm[0] - cell[0]), abs(frm[1] - cell[1])) <= self.sight

    def _game_instructions(self, agent: str) -> str:
        sight = "the whole field" if self.sight is None else f"{self.sight} cells around you"
        coop = " Every item needs the whole team." if self.force_coop else ""
        return (
            f"You are {agent} in a team of {len(self.possible_agents)} foraging on a "
            f"{self.size}x{self.size} field. Agents and items have levels. An item is loaded "
            "when the agents standing next to it (north, south, west or east) who choose 'load' "
            "in the same step have levels that add up to at least the item's level; they share "
            f"the reward by level.{coop} You see {sight}. Moves: north, south, west, east "
            "(not into an item; two agents moving into one cell both stay); 'load'; 'wait'. "
            "Clear the field together.\n" + _REPLY_FORMAT
        )

    def _game_observation(self, agent: str) -> str:
        f = self.field
        assert f is not None
        here = f.pos[agent]
        lines = [
            f"You are {agent}, level {f.levels[agent]}, at row {here[0]}, column {here[1]} of a "
            f"{self.size}x{self.size} field."
        ]
        items = [
            f"a level-{lv} item {_direction(here, cell)}"
            for cell, lv in sorted(f.items.items())
            if self._visible(here, cell)
        ]
        lines.append("Items you see: " + ("; ".join(items) if items else "none") + ".")
        mates = [
            f"{a} (level {f.levels[a]}) {_direction(here, cell)}"
            for a, cell in f.pos.items()
            if a != agent and self._visible(here, cell)
        ]
        lines.append("Teammates you see: " + ("; ".join(mates) if mates else "none") + ".")
        nxt = f.adjacent_item(here)
        if nxt is not None:
            lines.append(
                f"You are next to an item of level {f.items[nxt]} ({_direction(here, nxt)})."
            )
        return "\n".join(lines)

    def picture(self, agent: str) -> str | None:
        """The field, where agents see all of it (``sight`` None, the easy setting)."""
        return self._game_render() if self.sight is None else None

    def drawing(self, agent: str) -> Drawing | None:
        """The field as ``agent`` sees it, fogged beyond its ``sight``
        (:mod:`teamgym.envs.foraging.drawing`)."""
        if self.field is None:
            return None
        from teamgym.envs.foraging.drawing import drawing

        return drawing(self, agent)

    def _game_render(self) -> str:
        f = self.field
        if f is None:
            return f"{self._name} (not reset)"
        grid = [["." for _ in range(self.size)] for _ in range(self.size)]
        for (r, c), lv in f.items.items():
            grid[r][c] = str(min(lv, 9))
        for a, (r, c) in f.pos.items():
            grid[r][c] = chr(ord("A") + int(a.removeprefix("robot_")))
        head = f"{self._name} step {self.num_steps} loaded {self.loaded_levels}/{f.food_spawned}"
        return head + "\n" + "\n".join("".join(row) for row in grid)

    @property
    def _name(self) -> str:
        """The registered id this configuration is (the render's header)."""
        return "foraging-v0" if self.feedback == "legacy" else "foraging-v1"

    def _game_vector_size(self) -> int:
        return 3 + 3 * self.num_items + 3 * (len(self.possible_agents) - 1)

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        f = self.field
        assert f is not None
        n, top = self.size, max(f.food_spawned, 1)
        here = f.pos[agent]
        out = np.zeros(self._game_vector_size(), dtype=np.float32)
        out[:3] = here[0] / n, here[1] / n, f.levels[agent] / self.max_agent_level
        i = 3
        for cell, lv in sorted(f.items.items()):
            if self._visible(here, cell):
                out[i : i + 3] = (cell[0] - here[0]) / n, (cell[1] - here[1]) / n, lv / top
            i += 3
        i = 3 + 3 * self.num_items
        for a in self.possible_agents:
            if a != agent:
                cell = f.pos[a]
                if self._visible(here, cell):
                    out[i : i + 3] = (
                        (cell[0] - here[0]) / n,
                        (cell[1] - here[1]) / n,
                        f.levels[a] / self.max_agent_level,
                    )
                i += 3
        return out
