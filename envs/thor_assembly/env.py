"""``thor-assembly-v0``: robots in an iTHOR scene assemble a product together."""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.text_env import GameStep, TextParallelEnv
from teamgym.envs.thor_assembly.planning import parse_plan, plan_balance, subtask_names
from teamgym.envs.thor_assembly.recipes import Recipe, eligible_scenes, load_recipes
from teamgym.envs.thor_assembly.scenes import Scene, load_scenes, object_type

__all__ = ["DEFAULT_PLAN_TEMPLATE", "ThorAssemblyEnv"]

DEFAULT_PLAN_TEMPLATE = (
    "Decompose the task {task} into {num_subtasks} subtasks that can run in parallel, "
    "and assign each to a robot."
)
MAX_PLACES = 48
MAX_PARTS = 6
_VERBS = ("goto", "open", "close", "put")


class ThorAssemblyEnv(TextParallelEnv):
    """Collaborative assembly in an iTHOR scene (symbolic world by default, real AI2-THOR optional).

    Robots must **locate** the parts of a product (some inside closed receptacles), **bring**
    them to the workbench (a heavy part needs two robots to pick it up and carry it together),
    **connect** them (each connection is a joint action at the workbench in one step: one robot
    ``hold``s a part while another ``attach``es the other part to it), and pass an **inspect**ion.
    Each connection is faulty with probability ``defect_rate``, which only the inspection
    reveals; a failed inspection names what must be redone. Travel takes steps in proportion to
    the path length on the scene's reachable grid, so parallel work pays. A robot sees only its
    place: the receptacles there, what lies in the open ones, the teammates with it.

    The task speaks AI2-THOR's protocol (``controller.step(action=..., agentId=...)`` and
    ``event.metadata``) to its backend: ``backend="symbolic"`` (pure Python, the default) or
    ``backend="thor"`` (``ai2thor.controller.Controller``; pass ``backend_options``). The joint
    action of a step is serialised into one THOR call per robot in a seeded order, recorded in
    ``infos[agent]["turn_order"]``.

    With ``planning=True`` the first step is a planning turn: ``robot_0`` gets the
    ``plan_template`` and answers one line per subtask (``fetch Mug -> robot_1``); the parsed plan
    is shown to every robot and scored (coverage, balance, adherence in the metrics).

    >>> env = ThorAssemblyEnv(num_agents=2, recipe="breakfast_tray")
    >>> obs, infos = env.reset(seed=0)
    >>> "Task: build a breakfast tray" in obs["robot_0"]
    True
    >>> any(a.startswith("goto ") for a in infos["robot_0"]["valid_actions"])
    True
    """

    metadata: ClassVar[dict[str, Any]] = {
        **TextParallelEnv.metadata,
        "name": "thor_assembly_v0",
        "render_modes": ["ansi", "rgb_array"],
    }
    max_game_observation_chars = 6000

    def __init__(
        self,
        num_agents: int = 4,
        *,
        recipe: str = "random",
        recipes: str | None = None,
        scene: str | None = None,
        backend: str = "symbolic",
        backend_options: dict[str, Any] | None = None,
        defect_rate: float = 0.1,
        num_heavy: int = 1,
        planning: bool = False,
        plan_template: str = DEFAULT_PLAN_TEMPLATE,
        travel_speed: int = 4,
        success_reward: float = 1.0,
        subtask_reward: float = 0.1,
        **base: Any,
    ) -> None:
        """Args: ``recipe`` (a name from the recipes file, or ``"random"``), ``recipes`` (a YAML
        file of your own), ``scene`` (``FloorPlanN``; drawn from the eligible ones by default),
        ``backend`` and ``backend_options``, ``defect_rate``, ``num_heavy`` (heavy parts per
        episode), ``planning``, ``plan_template``, ``travel_speed`` (grid cells per step), the
        rewards; ``base`` takes ``TextParallelEnv``'s options."""
        base.setdefault("max_steps", None)
        super().__init__(num_agents, **base)
        self.recipes = load_recipes(recipes)
        if recipe != "random" and recipe not in self.recipes:
            raise ValueError(
                f"unknown recipe {recipe!r}; known: {', '.join(sorted(self.recipes))} or 'random'"
            )
        if not 0.0 <= defect_rate < 1.0:
            raise ValueError(f"defect_rate must be in [0, 1), got {defect_rate!r}")
        if backend not in ("symbolic", "thor"):
            raise ValueError(f"backend must be 'symbolic' or 'thor', got {backend!r}")
        if scene is not None and scene not in load_scenes():
            raise ValueError(
                f"unknown scene {scene!r}; iTHOR scenes are FloorPlan1..30, 201..230, 301..330, 401..430"
            )
        if not isinstance(travel_speed, int) or travel_speed < 1:
            raise ValueError(f"travel_speed must be a positive int, got {travel_speed!r}")
        if not isinstance(num_heavy, int) or num_heavy < 0:
            raise ValueError(f"num_heavy must be a non-negative int, got {num_heavy!r}")
        if "{task}" not in plan_template:
            raise ValueError("plan_template must contain {task} (and may use {num_subtasks})")
        self.recipe_choice = recipe
        self.scene_choice = scene
        self.backend = backend
        self.backend_options = dict(backend_options or {})
        self.defect_rate = float(defect_rate)
        self.num_heavy = num_heavy
        self.planning = planning
        self.plan_template = plan_template
        self.travel_speed = travel_speed
        self.success_reward = float(success_reward)
        self.subtask_reward = float(subtask_reward)
        self.controller: Any = None
        self._controller_scene: str | None = None
        # vector action slots: fixed for the env's life, mapped to this episode's names
        slots: list[tuple[str, str | None]] = [("wait", None), ("inspect", None), ("plan", None)]
        slots += [(f"{verb} place {k}", None) for verb in _VERBS for k in range(MAX_PLACES)]
        slots += [
            (f"{verb} part {j}", None) for verb in ("pickup", "hold") for j in range(MAX_PARTS)
        ]
        slots += [
            (f"attach part {j} to part {m}", None)
            for j in range(MAX_PARTS)
            for m in range(MAX_PARTS)
            if j != m
        ]
        self._slots = slots
        self.recipe: Recipe | None = None

    # ================================================================== episode set-up
    def _game_default_max_steps(self) -> int:
        return 150

    def _make_controller(self, scene: str) -> Any:
        n = len(self.possible_agents)
        if self.controller is not None and self._controller_scene == scene:
            self.controller.reset(scene, agentCount=n)
            return self.controller
        if self.controller is None:
            if self.backend == "symbolic":
                from teamgym.envs.thor_assembly.symbolic import SymbolicController

                self.controller = SymbolicController(scene=scene, agentCount=n, gridSize=0.25)
            else:
                from teamgym.envs.thor_assembly.thor_backend import make_thor_controller

                self.controller = make_thor_controller(scene, n, **self.backend_options)
        else:
            self.controller.reset(scene, agentCount=n)
        self._controller_scene = scene
        return self.controller

    def _thor(self, agent: str, action: str, **kwargs: Any) -> tuple[bool, str]:
        """One THOR call for one robot: (success, error message)."""
        agent_id = self.possible_agents.index(agent)
        if self.backend == "symbolic":
            event = self.controller.step(action=action, agentId=agent_id, **kwargs)
        else:  # a dead or silent Unity process becomes one clear error, not a deep traceback
            from teamgym.envs.thor_assembly.thor_backend import ThorBackendError

            try:
                event = self.controller.step(action=action, agentId=agent_id, **kwargs)
            except (TimeoutError, OSError, RuntimeError, ValueError) as exc:
                raise ThorBackendError(
                    f"AI2-THOR failed on {action} for {agent} ({type(exc).__name__}: {exc}); "
                    "check Unity's Player.log, or raise backend_options['step_timeout']"
                ) from None
            except Exception as exc:  # ai2thor raises a bare Exception when Unity exits
                raise ThorBackendError(
                    f"the AI2-THOR Unity process stopped during {action}: {exc}"
                ) from None
        md = event.metadata
        return bool(md["lastActionSuccess"]), str(md.get("errorMessage") or "")

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        rng = self.np_random
        names = sorted(self.recipes)
        self.recipe = (
            self.recipes[names[int(rng.integers(len(names)))]]
            if self.recipe_choice == "random"
            else self.recipes[self.recipe_choice]
        )
        recipe = self.recipe
        scenes = eligible_scenes(recipe)
        if self.scene_choice is not None:
            if self.scene_choice not in scenes:
                raise ValueError(
                    f"scene {self.scene_choice} does not fit recipe {recipe.name}; fitting: {', '.join(scenes)}"
                )
            scene_name = self.scene_choice
        else:
            scene_name = scenes[int(rng.integers(len(scenes)))]
        controller = self._make_controller(scene_name)
        self.scene, self.place_cell, self.place_rot = self._read_world(load_scenes()[scene_name])

        # places: the scene's receptacles, named Type_N; the workbench drawn among fitting ones
        self.place_ids = sorted(self.place_cell, key=lambda o: (object_type(o), o))
        counters: dict[str, int] = defaultdict(int)
        self.names: dict[str, str] = {}
        for oid in self.place_ids:
            counters[object_type(oid)] += 1
            self.names[oid] = f"{object_type(oid)}_{counters[object_type(oid)]}"
        self._type_counter = dict(counters)
        benches = [o for o in self.place_ids if object_type(o) in recipe.workbench]
        self.workbench = benches[int(rng.integers(len(benches)))]

        # parts: THOR's own randomiser places them off the workbench; at least one hidden
        excluded = list(recipe.workbench)
        for attempt in range(20):
            controller.step(
                action="InitialRandomSpawn",
                randomSeed=int(rng.integers(2**31)),
                excludedReceptacles=excluded,
                agentId=0,
            )
            objects = controller.last_event.events[0].metadata["objects"]
            self.part_ids = {}
            for o in objects:
                if (
                    o["objectType"] in recipe.parts
                    and o["pickupable"]
                    and o["objectType"] not in self.part_ids
                ):
                    self.part_ids[o["objectType"]] = o["objectId"]
            by_id = {o["objectId"]: o for o in objects}
            hidden = [t for t, oid in self.part_ids.items() if self._closed_parent(by_id, oid)]
            if len(self.part_ids) == len(recipe.parts) and (hidden or attempt == 19):
                break
        if len(self.part_ids) != len(recipe.parts):
            raise RuntimeError(
                f"scene {scene_name} lacks parts of {recipe.name}: {sorted(self.part_ids)}"
            )
        self.part_type_of = {oid: t for t, oid in self.part_ids.items()}
        heavy_pool = list(recipe.heavy)
        k = min(self.num_heavy, len(heavy_pool))
        self.heavy = (
            {heavy_pool[int(i)] for i in rng.choice(len(heavy_pool), size=k, replace=False)}
            if k
            else set()
        )

        # robots start at distinct reachable cells
        cells = sorted(self.scene.floor)
        starts = rng.choice(len(cells), size=len(self.possible_agents), replace=False)
        for agent, idx in zip(self.possible_agents, starts, strict=True):
            x, z = cells[int(idx)]
            self._thor(agent, "Teleport", position={"x": x * 0.25, "y": 0.9, "z": z * 0.25})
        self.at: dict[str, str | None] = dict.fromkeys(self.possible_agents)
        self.travel: dict[str, tuple[str, int]] = {}
        self.carry: dict[str, tuple[str, str]] = {}  # heavy part type -> (holder, partner)
        self.connections = [tuple(c) for c in recipe.connections]
        self.conn_state = {c: "todo" for c in self.connections}
        self.conn_by: dict[tuple[str, str], list[str]] = {}
        self.faulty: set[tuple[str, str]] = set()
        self.inspection_passed = False
        self.last_inspection: str | None = None
        self.touched: set[str] = set()
        self.successes = dict.fromkeys(self.possible_agents, 0)
        self.placed_by: dict[str, list[str]] = {}
        self.plan: dict[str, list[str]] | None = None
        self.plan_error: str | None = None
        self.phase = "plan" if self.planning else "act"
        self.turn_order: list[str] = []
        self._refresh()

    def _read_world(self, data: Scene) -> tuple[Scene, dict[str, tuple[int, int]], dict[str, int]]:
        """The floor and the places as the backend reports them (``GetReachablePositions`` and
        the receptacles in ``metadata["objects"]``). The derived scene data supplies interaction
        poses where objectIds match (always, for the symbolic world); a receptacle it does not
        know (a real build's ids can differ) gets the floor cell nearest to it, facing it."""
        event = self.controller.step(action="GetReachablePositions", agentId=0)
        cells = frozenset(
            (round(p["x"] / 0.25), round(p["z"] / 0.25))
            for p in event.metadata["actionReturn"] or []
        )
        scene = data if cells == data.grid or not cells else self._floor_cache(data, cells)
        known = {r[0]: (r[1], r[2]) for r in data.receptacles}
        objects = self.controller.last_event.events[0].metadata["objects"]
        place_cell, place_rot = {}, {}
        for o in objects:
            if not o["receptacle"] or o["pickupable"]:
                continue
            oid = o["objectId"]
            if oid in known:
                cell, rot = scene.snap(known[oid][0]), known[oid][1]
            else:
                px, pz = o["position"]["x"] / 0.25, o["position"]["z"] / 0.25
                cell = scene.snap((round(px), round(pz)))
                rot = (
                    int(round(math.degrees(math.atan2(px - cell[0], pz - cell[1])) / 90.0) * 90)
                    % 360
                )
            place_cell[oid], place_rot[oid] = cell, rot
        return scene, place_cell, place_rot

    _floors: ClassVar[dict[tuple[str, frozenset], Scene]] = {}

    def _floor_cache(self, data: Scene, cells: frozenset) -> Scene:
        key = (data.name, cells)
        if key not in self._floors:
            self._floors[key] = Scene(data.name, data.room, data.types, data.receptacles, cells)
        return self._floors[key]

    @staticmethod
    def _closed_parent(by_id: dict[str, dict[str, Any]], oid: str) -> bool:
        parents = by_id[oid]["parentReceptacles"] or []
        return any(by_id[p]["openable"] and not by_id[p]["isOpen"] for p in parents if p in by_id)

    # ================================================================== world view
    def _refresh(self) -> None:
        """Read every robot's THOR metadata once: holdings, what it sees, part states."""
        event = self.controller.last_event
        self.view: dict[str, dict[str, Any]] = {}
        objects0 = event.events[0].metadata["objects"]
        self.obj = {o["objectId"]: o for o in objects0}
        for i, agent in enumerate(self.possible_agents):
            md = event.events[i].metadata
            inv = md["inventoryObjects"]
            visible = [o["objectId"] for o in md["objects"] if o["visible"]]
            pos = md["agent"]["position"]
            self.view[agent] = {
                "holding": inv[0]["objectId"] if inv else None,
                "visible": visible,
                "cell": (round(pos["x"] / 0.25), round(pos["z"] / 0.25)),
            }
            for oid in visible:  # name objects on first sighting, Type_N per type
                if oid not in self.names:
                    t = object_type(oid)
                    self._type_counter[t] = self._type_counter.get(t, 0) + 1
                    self.names[oid] = f"{t}_{self._type_counter[t]}"
        self.ids_by_name = {n: o for o, n in self.names.items()}
        self.placed = {
            t
            for t, oid in self.part_ids.items()
            if self.workbench in (self.obj[oid]["parentReceptacles"] or [])
        }

    def _holding_part(self, agent: str) -> str | None:
        for part, (holder, partner) in self.carry.items():
            if agent in (holder, partner):
                return part
        held = self.view[agent]["holding"]
        return self.part_type_of.get(held) if held else None

    def _steps_to(self, agent: str, place: str) -> int:
        cells = self.scene.distance(self.view[agent]["cell"], self.place_cell[place])
        return max(1, math.ceil(cells / self.travel_speed))

    # ================================================================== actions
    def _game_valid_actions(self, agent: str) -> list[str]:
        if self.phase == "plan":
            return ["plan"] if agent == self.possible_agents[0] else ["wait"]
        if agent in self.travel:
            return ["wait"]
        acts = ["wait"]
        here = self.at[agent]
        carrying = self._holding_part(agent)
        heavy_carry = carrying in self.carry
        acts += [f"goto {self.names[p]}" for p in self.place_ids if p != here]
        if here is not None:
            md_visible = set(self.view[agent]["visible"])
            for p in self.place_ids:
                if self.place_cell[p] != self.place_cell[here] or p not in md_visible:
                    continue
                o = self.obj[p]
                if o["openable"] and not heavy_carry:
                    acts.append(
                        f"close {self.names[p]}" if o["isOpen"] else f"open {self.names[p]}"
                    )
                if carrying is not None and (not o["openable"] or o["isOpen"]):
                    acts.append(f"put {self.names[p]}")
            if carrying is None:
                for oid in self.view[agent]["visible"]:
                    o = self.obj[oid]
                    if o["pickupable"] and not o["isPickedUp"] and oid in self.names:
                        acts.append(f"pickup {self.names[oid]}")
            if here == self.workbench and carrying is None:
                for a, b in self.connections:
                    if a in self.placed and b in self.placed and self.conn_state[(a, b)] == "todo":
                        na, nb = self.names.get(self.part_ids[a]), self.names.get(self.part_ids[b])
                        if na and nb:
                            acts += [
                                f"hold {na}",
                                f"attach {nb} to {na}",
                                f"hold {nb}",
                                f"attach {na} to {nb}",
                            ]
                acts.append("inspect")
        return list(dict.fromkeys(acts))

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return self._slots

    def _game_vector_action(self, agent: str, index: int) -> tuple[str, str | None]:
        return self._slot_texts()[index], None

    def _slot_texts(self) -> list[str]:
        """Text action of every vector slot now (cached until a new object gets a name)."""
        key = (
            id(self.recipe),
            len(self.names),
            getattr(self, "place_ids", None) and self.place_ids[0],
        )
        if getattr(self, "_slot_key", None) != key:
            self._slot_key, self._slot_cache = (
                key,
                [self._slot_text(slot) for slot, _ in self._slots],
            )
        return self._slot_cache

    def _slot_text(self, slot: str) -> str:
        if self.recipe is None:
            return slot
        words = slot.split()
        if words[1:2] == ["place"]:
            k = int(words[2])
            return (
                f"{words[0]} {self.names[self.place_ids[k]]}" if k < len(self.place_ids) else slot
            )
        if words[0] in ("pickup", "hold"):
            return self._part_action(words[0], int(words[2]))
        if words[0] == "attach":
            na, nb = self._part_name(int(words[2])), self._part_name(int(words[5]))
            return f"attach {na} to {nb}" if na and nb else slot
        return slot

    def _part_name(self, j: int) -> str | None:
        parts = self.recipe.parts if self.recipe else ()
        return self.names.get(self.part_ids[parts[j]]) if j < len(parts) else None

    def _part_action(self, verb: str, j: int) -> str:
        name = self._part_name(j)
        return f"{verb} {name}" if name else f"{verb} part {j}"

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        rewards: dict[str, float] = defaultdict(float)
        feedback: dict[str, str] = {}
        events: list[dict[str, Any]] = []
        if self.phase == "plan":
            return self._plan_step(feedback, events)

        live = list(self.agents)
        order = [live[int(i)] for i in self.np_random.permutation(len(live))]
        self.turn_order = order
        parsed = {a: (actions.get(a) or "wait").split() for a in live}

        # robots on the road keep going (their only action is "wait")
        arrivals = []
        for agent in live:
            if agent in self.travel:
                dest, left = self.travel[agent]
                if left <= 1:
                    arrivals.append(agent)
                else:
                    self.travel[agent] = (dest, left - 1)
                    feedback[agent] = f"On the way to {self.names[dest]}: {left - 1} step(s) left."

        done_joint = self._joint_actions(parsed, order, rewards, feedback, events)
        for agent in order:
            if agent in self.travel or agent in done_joint:
                continue
            self._single(agent, parsed[agent], rewards, feedback, events)
        for agent in arrivals:
            self._arrive(agent, feedback)
        self._refresh()

        done = self.inspection_passed
        last_step = self.num_steps + 1 >= self.max_steps
        if done:
            for agent in live:
                rewards[agent] += self.success_reward
        if done or last_step:
            events.append(self._outcome())
        return GameStep(
            rewards=dict(rewards),
            feedback=feedback,
            events=events,
            done=done,
            info={"turn_order": list(order)},
        )

    def _plan_step(self, feedback: dict[str, str], events: list[dict[str, Any]]) -> GameStep:
        assert self.recipe is not None
        leader = self.possible_agents[0]
        required = subtask_names(self.recipe.parts, self.connections)
        raw = self.raw_replies.get(leader)
        self.plan, self.plan_error = parse_plan(
            raw, self.recipe.parts, self.connections, self.possible_agents
        )
        if self.plan_error:
            feedback[leader] = (
                f"Your plan could not be read: {self.plan_error}. The team acts without a plan."
            )
        else:
            covered = sum(1 for s in required if s in self.plan)
            feedback[leader] = f"Plan recorded: {covered}/{len(required)} subtasks assigned."
        events.append(ev.plan_issued(leader, self.plan or {}, required))
        self.phase = "act"
        balance = plan_balance(self.plan or {}, self.possible_agents)
        return GameStep(
            rewards={}, feedback=feedback, events=events, info={"plan_balance": balance}
        )

    # ------------------------------------------------------------------ joint actions
    def _joint_actions(
        self,
        parsed: dict[str, list[str]],
        order: list[str],
        rewards: dict[str, float],
        feedback: dict[str, str],
        events: list[dict[str, Any]],
    ) -> set[str]:
        handled: set[str] = set()
        # 1. connections: "hold X" + "attach Y to X" at the workbench in the same step
        holds = {
            a: w[1]
            for a, w in parsed.items()
            if len(w) == 2 and w[0] == "hold" and a not in self.travel
        }
        for agent in order:
            words = parsed[agent]
            if agent in self.travel or len(words) != 4 or words[0] != "attach" or words[2] != "to":
                continue
            y_name, x_name = words[1], words[3]
            holder = next(
                (h for h in order if holds.get(h) == x_name and h != agent and h not in handled),
                None,
            )
            pair = self._connection_of(x_name, y_name)
            handled.add(agent)
            if holder is None:
                feedback[agent] = (
                    f"attach failed: a teammate must 'hold {x_name}' at the workbench in the same step."
                )
                continue
            handled.add(holder)
            team = sorted([agent, holder])
            if pair is None or self.conn_state[pair] != "todo":
                feedback[agent] = feedback[holder] = (
                    f"{x_name}+{y_name} is not a connection left to make."
                )
                continue
            name = f"connect {pair[0]}+{pair[1]}"
            events.append(ev.subtask_attempted(name, team))
            if self.at[agent] != self.workbench or self.at[holder] != self.workbench:
                feedback[agent] = feedback[holder] = (
                    "Both robots must be at the workbench to connect parts."
                )
                events.append(ev.subtask_failed(name, team, "not at the workbench"))
                continue
            if pair[0] not in self.placed or pair[1] not in self.placed:
                feedback[agent] = feedback[holder] = (
                    "Both parts must be placed on the workbench first."
                )
                events.append(ev.subtask_failed(name, team, "parts not placed"))
                continue
            self.conn_state[pair] = "fixed"
            self.conn_by[pair] = team
            if self.np_random.random() < self.defect_rate:
                self.faulty.add(pair)
            for a in team:
                rewards[a] += self.subtask_reward
                self.successes[a] += 1
            events.append(ev.subtask_completed(name, team))
            feedback[agent] = f"You attached {y_name} to {x_name}, held by {holder}."
            feedback[holder] = f"You held {x_name} while {agent} attached {y_name}."
        for agent, x_name in holds.items():
            if agent not in handled:
                handled.add(agent)
                feedback[agent] = (
                    f"You held {x_name}, but no teammate attached anything to it this step."
                )

        # 2. heavy parts: two robots pick it up in the same step
        for part in sorted(self.heavy):
            oid = self.part_ids[part]
            name = self.names.get(oid)
            lifters = [
                a for a in order if name and parsed[a] == ["pickup", name] and a not in handled
            ]
            if not lifters:
                continue
            handled.update(lifters)
            if len(lifters) < 2:
                feedback[lifters[0]] = (
                    f"{name} is heavy: two robots must 'pickup {name}' in the same step."
                )
                continue
            holder, partner = lifters[0], lifters[1]
            if self._holding_part(partner) is not None:
                feedback[partner] = feedback[holder] = f"{partner} already carries something."
                continue
            ok, error = self._thor(holder, "PickupObject", objectId=oid)
            if (
                not ok
                or self.at[partner] is None
                or self.place_cell[self.at[partner]] != self.view[holder]["cell"]
            ):
                feedback[holder] = feedback[partner] = (
                    f"Lifting {name} failed: {error or 'both robots must be at it'}."
                )
                if ok:
                    self._thor(holder, "PutObject", objectId=self.at[holder])
                continue
            self.carry[part] = (holder, partner)
            self.touched.add(part)
            events.append(ev.subtask_attempted(f"fetch {part}", [holder, partner]))
            feedback[holder] = feedback[partner] = (
                f"You lifted {name} together ({holder} and {partner})."
            )
            for extra in lifters[2:]:
                feedback[extra] = f"{name} is already carried by {holder} and {partner}."

        # 3. carrying a heavy part: both carriers move (or put) together
        for part, (holder, partner) in list(self.carry.items()):
            wh, wp = parsed[holder], parsed[partner]
            if wh[:1] == ["goto"] or wp[:1] == ["goto"]:
                handled.update((holder, partner))
                if wh != wp:
                    feedback[holder] = feedback[partner] = (
                        f"You carry {self.names[self.part_ids[part]]} together: both must give the same goto."
                    )
                    continue
                self._goto(holder, wh, feedback, partner=partner)
            elif wh[:1] == ["put"] or wp[:1] == ["put"]:
                handled.update((holder, partner))
                words = wh if wh[:1] == ["put"] else wp
                self._put(holder, words, rewards, feedback, events, partner=partner)
        return handled

    def _connection_of(self, x_name: str, y_name: str) -> tuple[str, str] | None:
        x, y = self.ids_by_name.get(x_name), self.ids_by_name.get(y_name)
        tx, ty = self.part_type_of.get(x or ""), self.part_type_of.get(y or "")
        for a, b in self.connections:
            if {a, b} == {tx, ty}:
                return (a, b)
        return None

    # ------------------------------------------------------------------ single actions
    def _single(
        self,
        agent: str,
        words: list[str],
        rewards: dict[str, float],
        feedback: dict[str, str],
        events: list[dict[str, Any]],
    ) -> None:
        verb = words[0] if words else "wait"
        if verb == "wait":
            self._thor(agent, "Pass")
            feedback.setdefault(agent, "You waited.")
        elif verb == "goto":
            self._goto(agent, words, feedback)
        elif verb in ("open", "close"):
            oid = self.ids_by_name.get(" ".join(words[1:]))
            ok, error = self._thor(
                agent, "OpenObject" if verb == "open" else "CloseObject", objectId=oid
            )
            feedback[agent] = (
                f"You {'opened' if verb == 'open' else 'closed'} {words[1]}."
                if ok
                else f"{verb} failed: {error}"
            )
            self.successes[agent] += ok
        elif verb == "pickup":
            oid = self.ids_by_name.get(words[1])
            part = self.part_type_of.get(oid or "")
            if part in self.heavy:
                return  # handled as a joint action
            ok, error = self._thor(agent, "PickupObject", objectId=oid)
            if ok:
                self.successes[agent] += 1
                feedback[agent] = f"You picked up {words[1]}."
                if part:
                    self.touched.add(part)
                    events.append(ev.subtask_attempted(f"fetch {part}", [agent]))
            else:
                feedback[agent] = f"pickup failed: {error}"
        elif verb == "put":
            self._put(agent, words, rewards, feedback, events)
        elif verb == "inspect":
            self._inspect(agent, rewards, feedback, events)
        elif verb == "plan":
            feedback[agent] = "The planning turn is over."

    def _goto(
        self, agent: str, words: list[str], feedback: dict[str, str], partner: str | None = None
    ) -> None:
        place = self.ids_by_name.get(" ".join(words[1:]))
        if place is None or place not in self.place_cell:
            feedback[agent] = f"goto failed: there is no place called {' '.join(words[1:])}."
            return
        steps = self._steps_to(agent, place)
        for robot in [agent] + ([partner] if partner else []):
            self.at[robot] = None
            if steps <= 1:
                self._arrive(robot, feedback, place)
            else:
                self.travel[robot] = (place, steps - 1)
                feedback[robot] = (
                    f"You set off to {self.names[place]}: {steps - 1} more step(s) on the way."
                )

    def _arrive(self, agent: str, feedback: dict[str, str], place: str | None = None) -> None:
        place = place or self.travel.pop(agent)[0]
        self.travel.pop(agent, None)
        x, z = self.place_cell[place]
        ok, error = self._thor(
            agent,
            "Teleport",
            position={"x": x * 0.25, "y": 0.9, "z": z * 0.25},
            rotation={"x": 0, "y": self.place_rot[place], "z": 0},
        )
        self.at[agent] = place
        self.successes[agent] += 1
        feedback[agent] = (
            f"You arrived at {self.names[place]}." if ok else f"Arriving failed: {error}"
        )

    def _put(
        self,
        agent: str,
        words: list[str],
        rewards: dict[str, float],
        feedback: dict[str, str],
        events: list[dict[str, Any]],
        partner: str | None = None,
    ) -> None:
        target = self.ids_by_name.get(" ".join(words[1:]))
        part = self._holding_part(agent)
        held_by = self.carry[part][0] if part in self.carry else agent
        ok, error = self._thor(held_by, "PutObject", objectId=target)
        team = [agent] + ([partner] if partner else [])
        if not ok:
            for a in team:
                feedback[a] = f"put failed: {error}"
            return
        if part in self.carry:
            del self.carry[part]
        for a in team:
            self.successes[a] += 1
            feedback[a] = (
                f"You put {self.names.get(self.part_ids.get(part, ''), 'it')} in {words[1]}."
            )
        if part and target == self.workbench:
            events.append(ev.subtask_completed(f"fetch {part}", sorted(team)))
            self.placed_by[part] = sorted(team)
            for a in team:
                rewards[a] += self.subtask_reward

    def _inspect(
        self,
        agent: str,
        rewards: dict[str, float],
        feedback: dict[str, str],
        events: list[dict[str, Any]],
    ) -> None:
        events.append(ev.subtask_attempted("inspect", [agent]))
        if self.at[agent] != self.workbench:
            feedback[agent] = "inspect failed: go to the workbench first."
            events.append(ev.subtask_failed("inspect", [agent], "not at the workbench"))
            return
        self._refresh()
        missing = [
            self.names.get(self.part_ids[p], p) for p in self.recipe.parts if p not in self.placed
        ]
        todo = [f"{a}+{b}" for (a, b) in self.connections if self.conn_state[(a, b)] == "todo"]
        faulty = sorted(self.faulty)
        for pair in faulty:
            self.conn_state[pair] = "todo"
            events.append(
                ev.subtask_failed(
                    f"connect {pair[0]}+{pair[1]}", self.conn_by.get(pair, []), "faulty"
                )
            )
        self.faulty = set()
        if not missing and not todo and not faulty:
            self.inspection_passed = True
            self.successes[agent] += 1
            events.append(ev.subtask_completed("inspect", [agent]))
            feedback[agent] = "Inspection passed: the product is complete."
            self.last_inspection = "passed"
            return
        problems = []
        if missing:
            problems.append("parts missing from the workbench: " + ", ".join(missing))
        if todo:
            problems.append("connections not made: " + ", ".join(todo))
        if faulty:
            problems.append(
                "faulty connections to redo: " + ", ".join(f"{a}+{b}" for a, b in faulty)
            )
        self.last_inspection = "; ".join(problems)
        feedback[agent] = f"Inspection failed: {self.last_inspection}."
        events.append(ev.subtask_failed("inspect", [agent], self.last_inspection))

    def _outcome(self) -> dict[str, Any]:
        assert self.recipe is not None
        required = len(self.recipe.parts) + len(self.connections) + 1
        good = len(self.placed) + sum(
            1 for c in self.connections if self.conn_state[c] == "fixed" and c not in self.faulty
        )
        transport = (good + int(self.inspection_passed)) / required
        counts = list(self.successes.values())
        balance = min(counts) / max(counts) if max(counts) else 0.0
        return ev.outcome(
            self.inspection_passed,
            transport,
            transport_rate=transport,
            coverage=len(self.touched) / len(self.recipe.parts),
            balance=balance,
        )

    # ================================================================== views
    def _task_line(self) -> str:
        assert self.recipe is not None
        parts = ", ".join(f"{p} (heavy)" if p in self.heavy else p for p in self.recipe.parts)
        conns = ", ".join(f"{a}+{b}" for a, b in self.connections)
        return (
            f"Task: build {self.recipe.description} at the workbench {self.names[self.workbench]} "
            f"from {parts}; connect {conns}; then inspect."
        )

    def _game_instructions(self, agent: str) -> str:
        n = len(self.possible_agents)
        return (
            f"You are {agent}, one of {n} robots assembling a product together in a house. "
            "Find the parts (some are inside closed cabinets, drawers or fridges: open them to look), "
            "bring each part to the workbench and 'put' it there, connect the parts, then 'inspect'. "
            "Rules: you see only the place you are at; going somewhere takes steps in proportion to the "
            "distance, so split the work; you hold one thing at a time; a heavy part needs two robots "
            "at it to 'pickup' it in the same step, and both must give the same 'goto' and one 'put' to "
            "carry it; to connect X and Y one robot says 'hold X' while another says 'attach Y to X' in "
            "the same step, both at the workbench with both parts placed; a connection can be faulty, "
            "which only 'inspect' reveals, and a failed inspection says what to redo. "
            "Commands: goto PLACE, open PLACE, close PLACE, pickup OBJECT, put PLACE, hold PART, "
            "attach PART to PART, inspect, wait (names like Cabinet_2 or Mug_1 are in your observation). "
            "Talk to your team with <say>…</say>.\n"
            "Reply format: think if you like, then give exactly one command as <action>COMMAND</action>."
        )

    def _game_observation(self, agent: str) -> str:
        assert self.recipe is not None
        lines = [f"{self.scene.room.replace('_', ' ')} {self.scene.name}. {self._task_line()}"]
        if self.phase == "plan":
            if agent == self.possible_agents[0]:
                task = f"'build {self.recipe.description}'"
                n_sub = len(subtask_names(self.recipe.parts, self.connections))
                lines.append(self.plan_template.format(task=task, num_subtasks=n_sub))
                lines.append(
                    "Robots: "
                    + ", ".join(self.possible_agents)
                    + ". Write one line per subtask, e.g. "
                    "'fetch Mug -> robot_1', 'connect Plate+Mug -> robot_0, robot_2', 'inspect -> robot_3', "
                    "then <action>plan</action>."
                )
            else:
                lines.append(f"{self.possible_agents[0]} is planning; wait.")
            return "\n".join(lines)
        if self.plan:
            lines.append(
                "Plan: " + "; ".join(f"{s} -> {', '.join(r)}" for s, r in self.plan.items())
            )
        held = self._holding_part(agent)
        held_name = self.names.get(self.part_ids[held]) if held else None
        if self.view[agent]["holding"] and not held_name:
            held_name = self.names.get(self.view[agent]["holding"])
        carry = next(((p, h, q) for p, (h, q) in self.carry.items() if agent in (h, q)), None)
        hold_text = held_name or "nothing"
        if carry:
            other = carry[2] if carry[1] == agent else carry[1]
            hold_text += f" (heavy, carried with {other})"
        if agent in self.travel:
            dest, left = self.travel[agent]
            lines.append(
                f"You are {agent}, on the way to {self.names[dest]} ({left} step(s) left), holding {hold_text}."
            )
        else:
            here = self.at[agent]
            lines.append(
                f"You are {agent} at {self.names[here] if here else 'your start position'}, holding {hold_text}."
            )
            if here is not None:
                visible = set(self.view[agent]["visible"])
                for p in self.place_ids:
                    if self.place_cell[p] != self.place_cell[here] or p not in visible:
                        continue
                    o = self.obj[p]
                    if o["openable"] and not o["isOpen"]:
                        lines.append(f"{self.names[p]} is closed.")
                        continue
                    inside = [
                        self.names[c]
                        for c in (o["receptacleObjectIds"] or [])
                        if c in visible and c in self.names
                    ]
                    state = "open, " if o["openable"] else ""
                    lines.append(
                        f"{self.names[p]} ({state}{'holds ' + ', '.join(inside) if inside else 'empty'})."
                    )
                mates = [
                    a
                    for a in self.possible_agents
                    if a != agent and self.at[a] == here and a not in self.travel
                ]
                if mates:
                    lines.append("Teammates here: " + ", ".join(mates) + ".")
                if here == self.workbench:
                    lines.append(self._workbench_line())
        if self.last_inspection and self.at.get(agent) == self.workbench:
            lines.append(f"Last inspection: {self.last_inspection}.")
        if agent not in self.travel:
            dist = ", ".join(
                f"{self.names[p]}{' (workbench)' if p == self.workbench else ''} {self._steps_to(agent, p)}"
                for p in self.place_ids
                if p != self.at[agent]
            )
            lines.append(f"Places (steps away): {dist}.")
        return "\n".join(lines)

    def _workbench_line(self) -> str:
        assert self.recipe is not None
        placed = [self.names[self.part_ids[p]] for p in self.recipe.parts if p in self.placed]
        conns = ", ".join(
            f"{a}+{b} {'made' if self.conn_state[(a, b)] == 'fixed' else 'to do'}"
            for a, b in self.connections
        )
        return f"Workbench: placed {', '.join(placed) or 'nothing'}; connections: {conns}."

    def _game_render(self) -> str:
        if self.recipe is None:
            return "thor-assembly-v0 (not reset)"
        rows = [
            f"thor-assembly-v0 {self.scene.name} ({self.scene.room}) step {self.num_steps}: {self._task_line()}",
            self._workbench_line().replace("Workbench", f"Workbench {self.names[self.workbench]}"),
        ]
        for agent in self.possible_agents:
            where = (
                f"-> {self.names[self.travel[agent][0]]}"
                if agent in self.travel
                else (self.names[self.at[agent]] if self.at[agent] else "start")
            )
            held = self._holding_part(agent)
            rows.append(f"  {agent}: {where}, holding {held or '-'}")
        for part in self.recipe.parts:
            o = self.obj[self.part_ids[part]]
            where = (o["parentReceptacles"] or ["(carried)" if o["isPickedUp"] else "(floor)"])[0]
            rows.append(
                f"  part {part}{' heavy' if part in self.heavy else ''}: {self.names.get(where, where)}"
            )
        if self.faulty:
            rows.append(
                "  hidden defects: " + ", ".join(f"{a}+{b}" for a, b in sorted(self.faulty))
            )
        return "\n".join(rows)

    def _game_render_rgb(self) -> np.ndarray:
        """THOR's own frame with a real build; the symbolic top-down view otherwise."""
        frame = (
            getattr(self.controller.last_event, "frame", None)
            if self.controller is not None
            else None
        )
        if frame is not None:
            return np.asarray(frame, dtype=np.uint8)
        from teamgym.envs.thor_assembly.render import top_down

        return top_down(self)

    # ------------------------------------------------------------------ vector view
    def _game_vector_size(self) -> int:
        return MAX_PLACES + 4 + MAX_PARTS * 5 + MAX_PARTS * MAX_PARTS + 3

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        out = np.zeros(self._game_vector_size(), dtype=np.float32)
        if self.recipe is None:
            return out
        here = self.at[agent]
        if here is not None:
            out[self.place_ids.index(here)] = 1.0
        base = MAX_PLACES
        out[base] = float(agent in self.travel)
        out[base + 1] = float(here == self.workbench)
        out[base + 2] = float(self._holding_part(agent) is not None)
        out[base + 3] = float(self.phase == "plan")
        base += 4
        visible = set(self.view[agent]["visible"])
        held = self._holding_part(agent)
        for j, part in enumerate(self.recipe.parts):
            oid = self.part_ids[part]
            out[base + 5 * j : base + 5 * j + 5] = (
                float(oid in self.names),
                float(part in self.placed),
                float(oid in visible),
                float(held == part),
                float(part in self.heavy),
            )
        base += 5 * MAX_PARTS
        index = {p: j for j, p in enumerate(self.recipe.parts)}
        for a, b in self.connections:
            out[base + index[a] * MAX_PARTS + index[b]] = (
                1.0 if self.conn_state[(a, b)] == "fixed" else 0.5
            )
        base += MAX_PARTS * MAX_PARTS
        out[base] = float(self.inspection_passed)
        out[base + 1] = min(1.0, self.num_steps / self.max_steps)
        out[base + 2] = (
            sum(1 for a in self.possible_agents if a != agent and here and self.at[a] == here) / 8
        )
        return out

    def close(self) -> None:
        """Stop the backend (and its Unity process for the thor backend)."""
        if self.controller is not None:
            with contextlib.suppress(OSError):  # the Unity process may be gone (broken pipe)
                self.controller.stop()
            self.controller = None
            self._controller_scene = None
