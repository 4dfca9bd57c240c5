"""``kitchen-v0``: Overcooked-AI's kitchen in words, two chefs cooking onion soups."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.drawing import Drawing
from teamgym.envs.kitchen.layouts import LAYOUT_NAMES, Cell, Layout, load_layout
from teamgym.envs.kitchen.words import (
    FACING,
    HELD,
    KINDS,
    PREVIEW,
    TERRAIN,
    draw_map,
    item_words,
    pot_words,
    where,
)
from teamgym.envs.kitchen.world import (
    ACTIONS,
    DEFAULT_COOK_TIME,
    DIRECTIONS,
    RECIPE_SIZE,
    SOUP_VALUE,
    Chef,
    Happening,
    Kitchen,
    Soup,
    item_name,
)
from teamgym.envs.presets import int_in
from teamgym.envs.text_env import GameStep, TextParallelEnv

__all__ = ["DEFAULT_HORIZON", "PLANNER_SOUPS", "KitchenEnv"]

_LayoutName = Literal[
    "cramped_room",
    "asymmetric_advantages",
    "coordination_ring",
    "forced_coordination",
    "counter_circuit",
]

#: The classic benchmark's episode length (Carroll et al. 2019; ``overcooked_env``'s 400).
DEFAULT_HORIZON = 400
#: Soups :class:`~teamgym.envs.kitchen.baselines.KitchenPlanner` serves in 400 steps with the
#: default cook time, per layout: the yardstick of ``score`` (see :meth:`KitchenEnv.target`).
PLANNER_SOUPS: dict[str, int] = {
    "cramped_room": 10,
    "asymmetric_advantages": 15,
    "coordination_ring": 8,
    "forced_coordination": 13,
    "counter_circuit": 8,
}
_REPLY_FORMAT = (
    "Reply format: think if you like, then give exactly one command as "
    "<action>COMMAND</action>; to tell your teammate something add <say>TEXT</say>."
)


class KitchenEnv(TextParallelEnv):
    """Two chefs cook and serve onion soups on a classic Overcooked-AI layout.

    The rules are those of ``overcooked-ai`` 1.1.0 (tested step by step against it). Each
    step both chefs act at once: ``up``/``down``/``left``/``right`` move one cell (or only turn,
    when the cell ahead is not floor), ``stay`` does nothing, ``interact`` works on the cell the
    chef faces: take an onion or a dish from a dispenser, put down or pick up an item on a
    counter, put an onion in a pot (3 at most), start a pot cooking (empty-handed; it takes
    ``cook_time`` steps), take a ready soup out of a pot with a dish, serve a soup at a
    serving spot. Two chefs moving into one cell, or swapping cells, both stay. Interacts
    happen before moves, ``robot_0``'s first.

    Serving a soup of 3 onions (the layouts' only order) gives the serving chef 1 (the
    reference's 20 points); the reference credits the delivery to the serving chef as well,
    and teamgym's ``RewardSharing`` shares it. Subtasks show the division of labour:
    ``add_onion`` (attempted on taking an onion, completed when it goes in a pot),
    ``start_cooking`` (credited to the chefs who filled and started the pot), ``plate_soup``
    (a dish taken, a soup plated), ``serve_soup`` (plated, then served: credited to plater
    and server) and ``handoff`` (an item put on a counter, picked up by the other chef). The
    episode runs ``max_steps`` steps (400 by default, as in the classic benchmark); success
    means at least one soup was served, ``score`` is soups served over :meth:`target`.

    Args:
        num_agents: team size; always 2 (the two chefs).
        layout: the kitchen: ``cramped_room`` (default), ``asymmetric_advantages``,
            ``coordination_ring``, ``forced_coordination`` (the chefs must pass onions and
            dishes over the middle counter) or ``counter_circuit``.
        cook_time: steps a soup cooks, 1..100 (20, the reference's, by default).
        target_soups: the soups that make ``score`` 1 (None: what the scripted planner serves
            on this layout, scaled to ``max_steps``).
        random_start: the chefs start on two distinct floor cells drawn from the episode's
            seed (overcooked-ai's ``random_start_pos``); False (default): the layout's start
            cells, the same every episode.
        random_objects: the probability, per pot and per chef, of starting with objects
            (overcooked-ai's ``rnd_obj_prob_thresh``, onions only: a pot with 1-3 onions,
            cooking or not; a chef holding a dish, an onion or a cooked soup), 0..1 (0:
            empty, default). With both off, the seed changes nothing.

    >>> env = KitchenEnv(layout="cramped_room")
    >>> obs, infos = env.reset(seed=0)
    >>> print(obs["robot_0"].splitlines()[2])
    You (robot_0) stand at (1, 2), facing up toward the floor at (1, 1); you hold nothing.
    """

    metadata: ClassVar[dict[str, Any]] = {**TextParallelEnv.metadata, "name": "kitchen_v0"}
    min_agents = 2
    max_agents = 2
    max_game_observation_chars = 4096
    success_criterion = "at least one soup served"
    idle_actions = frozenset({"stay"})

    def __init__(
        self,
        num_agents: int = 2,
        *,
        layout: _LayoutName = "cramped_room",
        cook_time: int = DEFAULT_COOK_TIME,
        target_soups: int | None = None,
        random_start: bool = False,
        random_objects: float = 0.0,
        **base: Any,
    ) -> None:
        """Rules in the class docstring; ``base`` takes the common options of ``TextParallelEnv``."""
        super().__init__(num_agents, **base)
        if layout not in LAYOUT_NAMES:
            raise ValueError(f"layout must be one of {list(LAYOUT_NAMES)}, got {layout!r}")
        int_in("cook_time", cook_time, 1, 100)
        if target_soups is not None:
            int_in("target_soups", target_soups, 1, 1000)
        self.layout: Layout = load_layout(layout)
        self.cook_time = cook_time
        self.target_soups = target_soups
        if not isinstance(random_start, bool):
            raise ValueError(f"random_start must be true or false, got {random_start!r}")
        number = isinstance(random_objects, (int, float)) and not isinstance(random_objects, bool)
        if not number or not 0.0 <= random_objects <= 1.0:
            raise ValueError(f"random_objects must be a number in 0..1, got {random_objects!r}")
        self.random_start = random_start
        self.random_objects = float(random_objects)
        self.kitchen = Kitchen.start(self.layout, cook_time)
        self._reset_tallies()

    def _reset_tallies(self) -> None:
        self.soups = 0
        self.wrong_soups = 0
        self.onions_potted = 0
        self.tallies = {
            a: dict.fromkeys(("cook", "server", "runner"), 0) for a in self.possible_agents
        }

    def target(self) -> int:
        """Soups served for ``score`` 1: ``target_soups``, else :data:`PLANNER_SOUPS` of the
        layout times ``max_steps / 400`` (at least 1)."""
        if self.target_soups is not None:
            return self.target_soups
        return max(1, round(PLANNER_SOUPS[self.layout.name] * self.max_steps / DEFAULT_HORIZON))

    # ------------------------------------------------------------------ rules
    def _game_default_max_steps(self) -> int:
        return DEFAULT_HORIZON

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        if self.random_start or self.random_objects:
            self.kitchen = Kitchen.random_start(
                self.layout, self.np_random, self.cook_time, self.random_start, self.random_objects
            )
        else:
            self.kitchen = Kitchen.start(self.layout, self.cook_time)  # nothing is random
        self._reset_tallies()

    def _game_valid_actions(self, agent: str) -> list[str]:
        return list(ACTIONS)

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return [(a, None) for a in ACTIONS]

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        names = self.possible_agents
        joint = [actions.get(a) or "stay" for a in names]
        happenings = self.kitchen.step(joint)
        rewards: dict[str, float] = {}
        feedback = {a: "You stayed." for a in names if actions.get(a) == "stay"}
        events: list[dict[str, Any]] = []
        for h in happenings:
            agent = names[h.chef]
            feedback[agent] = self._say(h)
            events += self._events(h)
            if h.kind == "serve":
                rewards[agent] = rewards.get(agent, 0.0) + h.value / SOUP_VALUE
        if self.num_steps + 1 >= self.max_steps:
            events += self._ending()
        return GameStep(rewards=rewards, feedback=feedback, events=events)

    def _say(self, h: Happening) -> str:
        """What a happening was, in words, for the chef it happened to."""
        other = self.possible_agents[1 - h.chef]
        at = f"({h.cell[0]}, {h.cell[1]})"
        if h.kind == "moved":
            return f"You moved to {at}."
        if h.kind == "turned":
            return f"You turned toward the {TERRAIN[h.item]} at {at}; it blocks the way."
        if h.kind == "collided":
            return f"You and {other} got in each other's way: you both stayed (but turned)."
        if h.kind == "put_down":
            return f"You put {HELD[h.item]} on the counter at {at}."
        if h.kind == "pick_up":
            return f"You picked up {HELD[h.item]} from the counter at {at}."
        if h.kind in ("take_onion", "take_dish"):
            return f"You took {HELD[h.item]} from the dispenser."
        if h.kind == "add_onion":
            return f"You put an onion in the pot at {at}: it holds {h.value} of {RECIPE_SIZE}."
        if h.kind == "start_cooking":
            return (
                f"You started the pot at {at} cooking ({h.value} onions, {self.cook_time} steps)."
            )
        if h.kind == "plate":
            return f"You plated the soup from the pot at {at}; now serve it."
        if h.kind == "serve":
            if h.value:
                return f"You served a soup of {RECIPE_SIZE} onions: +{h.value / SOUP_VALUE:g}!"
            return "You served a soup that is no order (only 3 onions is): it earned nothing."
        return "Your interact did nothing."

    def _events(self, h: Happening) -> list[dict[str, Any]]:
        """The subtask events of one happening (see the class docstring)."""
        names = self.possible_agents
        agent = names[h.chef]
        tally = self.tallies[agent]
        if h.kind == "take_onion":
            return [ev.subtask_attempted("add_onion", [agent])]
        if h.kind == "take_dish":
            return [ev.subtask_attempted("plate_soup", [agent])]
        if h.kind == "put_down":
            return [ev.subtask_attempted("handoff", [agent])]
        if h.kind == "pick_up" and h.other != h.chef:
            self.tallies[names[h.other]]["runner"] += 1
            return [ev.subtask_completed("handoff", [names[h.other], agent])]
        if h.kind == "add_onion":
            tally["cook"] += 1
            self.onions_potted += 1
            return [ev.subtask_completed("add_onion", [agent])]
        if h.kind == "start_cooking":
            tally["cook"] += 1
            soup = self.kitchen.pot(h.cell)
            hands = sorted({names[i] for i in soup.hands}) if soup else [agent]
            return [ev.subtask_attempted("start_cooking", [agent]),
                    ev.subtask_completed("start_cooking", hands)]  # fmt: skip
        if h.kind == "plate":
            tally["server"] += 1
            return [ev.subtask_completed("plate_soup", [agent]),
                    ev.subtask_attempted("serve_soup", [agent])]  # fmt: skip
        if h.kind == "serve":
            tally["server"] += 1
            if not h.value:
                self.wrong_soups += 1
                reason = f"only a soup of {RECIPE_SIZE} onions is an order; this one earned nothing"
                return [ev.subtask_failed("serve_soup", [agent], reason)]
            self.soups += 1
            return [ev.subtask_completed("serve_soup", sorted({names[h.other], agent}))]
        return []

    def _ending(self) -> list[dict[str, Any]]:
        """Each chef's role (what it did most) and the outcome."""
        out = []
        for agent, tally in self.tallies.items():
            best = max(tally, key=lambda k: tally[k])
            out.append(ev.role(agent, best if tally[best] else "idle"))
        target = self.target()
        score = min(1.0, self.soups / target)
        out.append(ev.outcome(self.soups >= 1, score, soups=self.soups, target_soups=target,
                              onions_potted=self.onions_potted,
                              wrong_soups=self.wrong_soups))  # fmt: skip
        return out

    # ------------------------------------------------------------------ views
    def _game_instructions(self, agent: str) -> str:
        lay = self.layout
        return (
            f"You are {agent}, one of two chefs in an Overcooked kitchen ({lay.name}, "
            f"{lay.width} wide and {lay.height} tall). The team earns a point for every soup of "
            f"{RECIPE_SIZE} onions it serves in {self.max_steps} steps. To make one: take onions "
            "from an onion dispenser and put 3 in a pot, then interact with the pot empty-handed "
            f"to start it cooking ({self.cook_time} steps); take a dish from a dish dispenser, "
            "interact with the ready pot to plate the soup, and bring it to a serving spot. "
            "You hold one thing at a time and can put it on an empty counter for your teammate. "
            "Actions: up, down, left, right (move one cell, or only turn to face the cell when "
            "it is not floor), stay, interact (with the cell you face). Both chefs act at once; "
            "if you both move into the same cell, or swap cells, neither moves.\n" + _REPLY_FORMAT
        )

    def _game_observation(self, agent: str) -> str:
        k, lay = self.kitchen, self.layout
        i = self.possible_agents.index(agent)
        me, other = k.chefs[i], k.chefs[1 - i]
        mate = self.possible_agents[1 - i]
        left = self.max_steps - self.num_steps

        def facing(chef: Chef) -> str:
            ahead = chef.ahead
            name = TERRAIN[lay.at(ahead)]
            return f"facing {FACING[chef.facing]} toward the {name} at ({ahead[0]}, {ahead[1]})"

        ahead = k.objects.get(me.ahead)
        preview = PREVIEW[k.interaction(i)].format(item=item_words(ahead))
        lines = [
            f"Kitchen {lay.name}, {lay.width} wide x {lay.height} tall; (x, y) with x growing "
            f"east, y growing south. Soups served: {self.soups}; steps left: {left}.",
            f"You ({agent}) stand at ({me.pos[0]}, {me.pos[1]}), {facing(me)}; you hold "
            f"{item_words(me.held)}.",
            f"Interact now would: {preview}.",
            f"{mate} stands at {where(me.pos, other.pos)}, {facing(other)}; it holds "
            f"{item_words(other.held)}.",
        ]
        for pot in lay.pots:
            lines.append(f"Pot at {where(me.pos, pot)}: {pot_words(k.pot(pot), self.cook_time)}.")
        for title, cells in (("Onion dispensers", lay.onion_dispensers),
                             ("Dish dispensers", lay.dish_dispensers),
                             ("Serving spots", lay.serving)):  # fmt: skip
            lines.append(f"{title}: " + "; ".join(where(me.pos, c) for c in cells) + ".")
        items = [
            f"{item_words(obj)} at {where(me.pos, cell)}"
            for cell, obj in sorted(k.objects.items())
            if lay.at(cell) == "X"
        ]
        lines.append("On the counters: " + ("; ".join(items) if items else "nothing") + ".")
        lines.append("Map (0/1 = robot_0/robot_1 and facing; X counter with o/d/s on it, P pot "
                     "with onions/c cooking/! ready, O onions, D dishes, S serve, . floor):")  # fmt: skip
        lines += draw_map(k)
        return "\n".join(lines)

    def picture(self, agent: str) -> str | None:
        """The whole kitchen: every chef sees all of it."""
        return self._game_render()

    def drawing(self, agent: str) -> Drawing | None:
        """The whole kitchen, as every chef sees it (:mod:`teamgym.envs.kitchen.drawing`)."""
        from teamgym.envs.kitchen.drawing import drawing

        return drawing(self, agent)

    def _game_render(self) -> str:
        k = self.kitchen
        lines = [f"kitchen-v0 {self.layout.name} step {self.num_steps} soups {self.soups}"]
        lines += draw_map(k)
        for agent, chef in zip(self.possible_agents, k.chefs, strict=True):
            lines.append(f"{agent}: ({chef.pos[0]}, {chef.pos[1]}) facing "
                         f"{FACING[chef.facing]}, holds {item_words(chef.held)}")  # fmt: skip
        return "\n".join(lines)

    # ------------------------------------------------------------------ vector view
    def _game_vector_size(self) -> int:
        return 2 * 10 + 2 * 6 + 5 * 3 + len(KINDS) + 2

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        k, lay = self.kitchen, self.layout
        w, h = lay.width, lay.height
        i = self.possible_agents.index(agent)
        me = k.chefs[i]
        out: list[float] = []
        for chef in (me, k.chefs[1 - i]):  # own features first
            held = item_name(chef.held)
            out += [chef.pos[0] / w, chef.pos[1] / h]
            out += [float(chef.facing == d) for d in DIRECTIONS.values()]
            out += [float(held == name) for name in ("", "onion", "dish", "soup")]

        def rel(cell: Cell | None) -> list[float]:
            if cell is None:
                return [0.0, 0.0, 0.0]
            return [(cell[0] - me.pos[0]) / w, (cell[1] - me.pos[1]) / h, 1.0]

        def nearest(cells: list[Cell]) -> Cell | None:
            return min(cells, key=lambda c: (abs(c[0] - me.pos[0]) + abs(c[1] - me.pos[1]), c),
                       default=None)  # fmt: skip

        for slot in range(2):  # the classic layouts have one or two pots
            pot = lay.pots[slot] if slot < len(lay.pots) else None
            soup = k.pot(pot) if pot else None
            cooking = 0.0 if soup is None or soup.tick < 0 else min(soup.tick / self.cook_time, 1.0)
            ready = float(soup is not None and soup.ready(self.cook_time))
            out += [*rel(pot), (soup.onions if soup else 0) / RECIPE_SIZE, cooking, ready]
        on_counter = {c: o for c, o in k.objects.items() if lay.at(c) == "X"}
        onions = [*lay.onion_dispensers, *(c for c, o in on_counter.items() if o == "onion")]
        dishes = [*lay.dish_dispensers, *(c for c, o in on_counter.items() if o == "dish")]
        soups = [c for c, o in on_counter.items() if isinstance(o, Soup)]
        empty = [c for c in lay.counters if c not in on_counter]
        for cells in (onions, dishes, list(lay.serving), soups, empty):
            out += rel(nearest(cells))
        kind = k.interaction(i)
        out += [float(kind == name) for name in KINDS]
        out += [(self.max_steps - self.num_steps) / self.max_steps, min(1.0, self.soups / 20.0)]
        return np.asarray(out, dtype=np.float32)
