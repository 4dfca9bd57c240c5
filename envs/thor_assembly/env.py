"""``thor-assembly-v0``: robots in an iTHOR scene assemble a product together.

This module holds the env's hooks and its backend; the episode's state is ``state.py``, its
set-up ``episode.py``, its rules ``rules.py`` and ``joint.py``, what robots read ``views.py`` and
``vector.py``, the picture ``render.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

import numpy as np

from teamgym.envs.drawing import Drawing
from teamgym.envs.text_env import GameStep, TextParallelEnv
from teamgym.envs.thor_assembly import episode, joint, rules, vector, views
from teamgym.envs.thor_assembly.planning import planning_turn
from teamgym.envs.thor_assembly.recipes import load_recipes
from teamgym.envs.thor_assembly.scenes import load_scenes, object_type
from teamgym.envs.thor_assembly.state import AssemblyState, StepLog
from teamgym.envs.thor_assembly.symbolic import GRID

__all__ = ["DEFAULT_PLAN_TEMPLATE", "ThorAssemblyEnv"]

DEFAULT_PLAN_TEMPLATE = (
    "Decompose the task {task} into {num_subtasks} subtasks that can run in parallel, "
    "and assign each to a robot."
)


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

    Args:
        num_agents: robots, 2..8.
        recipe: the product to build: a name from the recipes file, or ``random`` (drawn
            per episode).
        recipes: a YAML file of your own recipes (default: the shipped ``recipes.yaml``).
        scene: an iTHOR room, ``FloorPlanN`` (default: drawn from the eligible ones).
        backend: ``symbolic`` (pure Python) or ``thor`` (a real AI2-THOR build).
        backend_options: keyword arguments for the backend's controller.
        defect_rate: chance that a connection is faulty (only the inspection shows it).
        num_heavy: heavy parts per episode (two robots must lift and carry each).
        planning: episodes open with a planning step (a plan reply, then the task).
        plan_template: the planning step's prompt.
        travel_speed: grid cells a robot travels per step.
        success_reward: each robot's reward when the product passes inspection.
        subtask_reward: the reward of the robots that complete a subtask.

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
    success_criterion = "the assembled product passes the inspection"

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
        """Rules in the class docstring; ``base`` takes ``TextParallelEnv``'s options."""
        base.setdefault("max_steps", None)
        super().__init__(num_agents, **base)
        self.recipes = load_recipes(recipes)
        _check_options(
            self.recipes,
            recipe,
            defect_rate,
            backend,
            scene,
            travel_speed,
            num_heavy,
            plan_template,
        )
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
        self._slots = vector.action_slots()
        self._slot_texts = vector.SlotTexts(self._slots)
        #: The episode's state (None before the first reset): what the expert, the renderer
        #: and the tests read.
        self.assembly: AssemblyState | None = None

    @property
    def _state(self) -> AssemblyState:
        if self.assembly is None:
            raise RuntimeError("thor-assembly-v0 needs reset() first")
        return self.assembly

    # ================================================================== backend
    def _make_controller(self, scene: str) -> Any:
        n = len(self.possible_agents)
        if self.controller is not None and self._controller_scene == scene:
            self.controller.reset(scene, agentCount=n)
            return self.controller
        if self.controller is None:
            if self.backend == "symbolic":
                from teamgym.envs.thor_assembly.symbolic import SymbolicController

                self.controller = SymbolicController(scene=scene, agentCount=n, gridSize=GRID)
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

    def _refresh(self) -> None:
        """Read every robot's THOR metadata into the state."""
        episode.refresh(self._state, self.controller.last_event)

    # ================================================================== episode
    def _game_default_max_steps(self) -> int:
        return 150

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        rng = self.np_random
        recipe = episode.draw_recipe(self.recipes, self.recipe_choice, rng)
        scene_name = episode.draw_scene(recipe, self.scene_choice, rng)
        controller = self._make_controller(scene_name)
        scene, place_cell, place_rot = episode.read_world(controller, load_scenes()[scene_name])
        place_ids, names, type_counter = episode.name_places(place_cell)
        benches = [o for o in place_ids if object_type(o) in recipe.workbench]
        workbench = benches[int(rng.integers(len(benches)))]
        part_ids = episode.spawn_parts(controller, recipe, scene_name, rng)
        heavy = episode.draw_heavy(recipe, self.num_heavy, rng)
        starts = episode.start_cells(scene, len(self.possible_agents), rng)
        for agent, cell in zip(self.possible_agents, starts, strict=True):
            self._thor(agent, "Teleport", position=episode.position_of(cell))
        connections = list(recipe.connections)
        self.assembly = AssemblyState(
            robots=list(self.possible_agents),
            recipe=recipe,
            scene=scene,
            travel_speed=self.travel_speed,
            place_cell=place_cell,
            place_rot=place_rot,
            place_ids=place_ids,
            workbench=workbench,
            part_ids=part_ids,
            heavy=heavy,
            connections=connections,
            names=names,
            type_counter=type_counter,
            phase="plan" if self.planning else "act",
            at=dict.fromkeys(self.possible_agents),
            conn_state={c: "todo" for c in connections},
            successes=dict.fromkeys(self.possible_agents, 0),
        )
        self._refresh()

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        state = self._state
        turn = rules.Turn(
            state,
            StepLog(),
            self._thor,
            self._refresh,
            self.np_random,
            self.defect_rate,
            self.subtask_reward,
        )
        log = turn.log
        if state.phase == "plan":
            balance = planning_turn(state, log, self.raw_replies.get(state.robots[0]))
            return GameStep(
                rewards={}, feedback=log.feedback, events=log.events, info={"plan_balance": balance}
            )
        live = list(self.agents)
        order = [live[int(i)] for i in self.np_random.permutation(len(live))]
        state.turn_order = order
        parsed = {a: (actions.get(a) or "wait").split() for a in live}
        arrivals = rules.advance_travel(turn, live)  # robots on the road keep going
        handled = joint.joint_actions(turn, parsed, order)
        for agent in order:
            if agent not in state.travel and agent not in handled:
                rules.act_alone(turn, agent, parsed[agent])
        for agent in arrivals:
            rules.arrive(turn, agent)
        self._refresh()
        done = state.inspection_passed
        if done:
            log.reward(live, self.success_reward)
        if done or self.num_steps + 1 >= self.max_steps:
            log.events.append(rules.outcome(state))
        return GameStep(
            rewards=dict(log.rewards),
            feedback=log.feedback,
            events=log.events,
            done=done,
            info={"turn_order": list(order)},
        )

    # ================================================================== actions
    def _game_valid_actions(self, agent: str) -> list[str]:
        return rules.valid_actions(self._state, agent)

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return self._slots

    def _game_vector_action(self, agent: str, index: int) -> tuple[str, str | None]:
        return self._slot_texts.texts(self._state)[index], None

    def _game_vector_texts(self, agent: str) -> Sequence[str]:
        return self._slot_texts.texts(self._state)  # one list for every robot

    def _game_vector_key(self, agent: str) -> Hashable:
        return self._state.names_version  # slot texts name places and parts

    # ================================================================== views
    def _game_instructions(self, agent: str) -> str:
        return views.instructions(agent, len(self.possible_agents))

    def _game_observation(self, agent: str) -> str:
        return views.observation(self._state, agent, self.plan_template)

    def drawing(self, agent: str) -> Drawing | None:
        """The house as ``agent`` knows it: the floor plan, its place and what it sees there,
        the task's connections (:mod:`teamgym.envs.thor_assembly.drawing`)."""
        if self.assembly is None:
            return None
        from teamgym.envs.thor_assembly.drawing import drawing

        return drawing(self, agent)

    def _game_render(self) -> str:
        if self.assembly is None:
            return "thor-assembly-v0 (not reset)"
        return views.render_text(self.assembly, self.num_steps)

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

        return top_down(self._state)

    def _game_vector_size(self) -> int:
        return vector.VECTOR_SIZE

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        if self.assembly is None:
            return np.zeros(vector.VECTOR_SIZE, dtype=np.float32)
        progress = self.num_steps / self.max_steps
        return vector.vector_observation(self.assembly, agent, progress)

    def close(self) -> None:
        """Stop the backend (and its Unity process for the thor backend)."""
        if self.controller is not None:
            with contextlib.suppress(OSError):  # the Unity process may be gone (broken pipe)
                self.controller.stop()
            self.controller = None
            self._controller_scene = None


def _check_options(
    recipes: dict[str, Any],
    recipe: str,
    defect_rate: float,
    backend: str,
    scene: str | None,
    travel_speed: Any,
    num_heavy: Any,
    plan_template: str,
) -> None:
    """Refuse a bad constructor argument with a message that says what would be valid."""
    if recipe != "random" and recipe not in recipes:
        raise ValueError(
            f"unknown recipe {recipe!r}; known: {', '.join(sorted(recipes))} or 'random'"
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
