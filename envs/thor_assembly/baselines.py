"""Scripted expert team for ``thor-assembly-v0``: plans, allocates, coordinates joint actions.

It is a *privileged* baseline: ``bind(env)`` gives it the true world state (where each part is,
which robot is where), so it measures what good coordination achieves, not perception. Each
step it keeps or makes assignments (heavy fetches need two robots, connections need two robots
at the workbench, one robot inspects), sends each robot toward its job by the nearest free
robots first, and answers every robot with a legal command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamgym.envs.thor_assembly.planning import subtask_names
from teamgym.envs.thor_assembly.state import AssemblyState

__all__ = ["ThorExpert"]


class ThorExpert:
    """Centralised expert; one instance plays every robot of an episode."""

    privileged = True

    def __init__(self, seed: int | None = None) -> None:
        self.env: Any = None
        self.jobs: dict[str, tuple] = {}
        self._step = -1
        self._replies: dict[str, str] = {}

    def bind(self, env: Any) -> None:
        """Attach to the env whose robots this expert plays (called by ``run_episode``)."""
        self.env = env.unwrapped

    def reset(self, seed: int | None = None) -> None:
        """Forget the previous episode's assignments."""
        self.jobs, self._step, self._replies = {}, -1, {}

    @property
    def state(self) -> AssemblyState:
        """The bound env's episode state (read afresh: each reset makes a new one)."""
        return self.env.assembly

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """This robot's command for the current step."""
        env = self.env
        if env is None:
            raise RuntimeError("ThorExpert needs bind(env) before act(); run_episode does it")
        if env.num_steps != self._step:
            self._step = env.num_steps
            self._replies = self._plan_step() if self.state.phase == "plan" else self._decide()
        reply = self._replies.get(agent, "wait")
        valid = info.get("valid_actions", [])
        if reply.split("\n", 1)[0] not in valid and valid and not reply.startswith("plan"):
            reply = "wait" if "wait" in valid else valid[0]
        if reply.startswith("plan"):  # the lines first, as the instructions ask: a reply
            # ends at `</action>` in training (the stop string), so nothing after it is read
            return reply.split("\n", 1)[1] + "\n<action>plan</action>"
        return f"<action>{reply}</action>"

    # ------------------------------------------------------------------ planning turn
    def _plan_step(self) -> dict[str, str]:
        state = self.state
        robots = state.robots
        subtasks = subtask_names(state.recipe.parts, state.connections)
        lines = []
        for i, subtask in enumerate(subtasks):
            who = [robots[i % len(robots)]]
            if subtask.startswith("connect") or subtask.split()[-1] in state.heavy:
                who.append(robots[(i + 1) % len(robots)])
            lines.append(f"{subtask} -> {', '.join(who)}")
        return {robots[0]: "plan\n" + "\n".join(lines)}

    # ------------------------------------------------------------------ assignments
    def _free(self) -> list[str]:
        return [a for a in self.env.agents if a not in self.jobs]

    def _nearest(self, place: str, candidates: list[str], k: int) -> list[str]:
        state = self.state
        return sorted(
            candidates,
            key=lambda a: (state.scene.distance(state.view[a]["cell"], state.place_cell[place]), a),
        )[:k]

    def _assign(self) -> None:
        """Keep unfinished jobs; give free robots fetches (heavy first), then connections whose
        parts are placed, then the inspection once everything is connected."""
        for agent, job in list(self.jobs.items()):
            if agent not in self.env.agents or self._finished(job):
                del self.jobs[agent]
        taken = {job[1] for job in self.jobs.values() if len(job) > 1}
        self._assign_fetches(taken)
        self._assign_connections(taken)
        self._assign_inspection()

    def _finished(self, job: tuple) -> bool:
        state = self.state
        if job[0] == "fetch":
            return job[1] in state.placed
        if job[0] == "connect":
            return state.conn_state[job[1]] != "todo"
        return state.inspection_passed or any(
            state.conn_state[c] == "todo" for c in state.connections
        )

    def _assign_fetches(self, taken: set) -> None:
        state = self.state
        parts = state.recipe.parts
        for part in sorted(parts, key=lambda p: (p not in state.heavy, parts.index(p))):
            if part in state.placed or part in taken:
                continue
            need = 2 if part in state.heavy else 1
            place = state.part_place(part)
            free = self._free()
            if len(free) < need or place is None:
                continue
            for a in self._nearest(place, free, need):
                self.jobs[a] = ("fetch", part)
            taken.add(part)

    def _assign_connections(self, taken: set) -> None:
        state = self.state
        for pair in state.connections:
            if (
                state.conn_state[pair] != "todo"
                or pair in taken
                or not {pair[0], pair[1]} <= state.placed
            ):
                continue
            free = self._free()
            if len(free) < 2:
                break
            pick = self._nearest(state.workbench, free, 2)
            self.jobs[pick[0]] = ("connect", pair, "hold")
            self.jobs[pick[1]] = ("connect", pair, "attach")
            taken.add(pair)

    def _assign_inspection(self) -> None:
        state = self.state
        if (
            set(state.recipe.parts) <= state.placed
            and all(state.conn_state[c] == "fixed" for c in state.connections)
            and not any(j[0] == "inspect" for j in self.jobs.values())
        ):
            free = self._free()
            if free:
                self.jobs[self._nearest(state.workbench, free, 1)[0]] = ("inspect",)

    def _groups(self, kind: str) -> dict[Any, list[str]]:
        """Job target -> the robots on it, for the jobs of one kind."""
        groups: dict[Any, list[str]] = {}
        for agent, job in self.jobs.items():
            if job[0] == kind:
                groups.setdefault(job[1], []).append(agent)
        return groups

    # ------------------------------------------------------------------ commands
    def _decide(self) -> dict[str, str]:
        state = self.state
        self._assign()
        replies: dict[str, str] = {}
        bench = state.names[state.workbench]
        self._connect(replies, bench)
        for part, robots in self._groups("fetch").items():
            self._fetch(part, sorted(robots), replies, bench)
        for agent, job in self.jobs.items():
            if job[0] == "inspect":
                replies[agent] = (
                    "wait"
                    if agent in state.travel
                    else ("inspect" if state.at[agent] == state.workbench else f"goto {bench}")
                )
        # idle robots wait at the workbench, ready for connections
        for agent in self.env.agents:
            if agent not in replies:
                replies[agent] = (
                    "wait"
                    if agent in state.travel
                    or state.at[agent] == state.workbench
                    or state.holding_part(agent)
                    else f"goto {bench}"
                )
        return replies

    def _connect(self, replies: dict[str, str], bench: str) -> None:
        """Both robots of a connection go to the workbench, then hold + attach in one step."""
        state = self.state
        for pair, robots in self._groups("connect").items():
            ready = (
                all(state.at[a] == state.workbench and a not in state.travel for a in robots)
                and len(robots) == 2
            )
            for a in robots:
                if a in state.travel:
                    replies[a] = "wait"
                elif state.at[a] != state.workbench:
                    replies[a] = f"goto {bench}"
                elif not ready:
                    replies[a] = "wait"
                else:
                    x, y = (
                        state.names[state.part_ids[pair[0]]],
                        state.names[state.part_ids[pair[1]]],
                    )
                    replies[a] = f"hold {x}" if self.jobs[a][2] == "hold" else f"attach {y} to {x}"

    def _fetch(self, part: str, robots: list[str], replies: dict[str, str], bench: str) -> None:
        """Robots on a fetch bring the part home once held, else go to it and take it."""
        state = self.state
        carriers = state.carry.get(part)
        holding = [a for a in robots if state.holding_part(a) == part]
        if carriers or holding:
            self._bring(list(carriers) if carriers else holding, robots, replies, bench)
            return
        place = state.part_place(part)
        if place is None:
            replies.update(dict.fromkeys(robots, "wait"))
            return
        there = [a for a in robots if state.at[a] == place and a not in state.travel]
        for a in robots:
            if a in state.travel:
                replies[a] = "wait"
            elif state.at[a] != place:
                replies[a] = f"goto {state.names[place]}"
        if there:
            self._take(part, place, there, replies)

    def _bring(
        self, movers: list[str], robots: list[str], replies: dict[str, str], bench: str
    ) -> None:
        """The robots holding a part carry it to the workbench and one puts it there."""
        state = self.state
        replies.update({a: "wait" for a in robots if a not in movers})
        if any(a in state.travel for a in movers):
            replies.update(dict.fromkeys(movers, "wait"))
        elif all(state.at[a] == state.workbench for a in movers):
            replies[movers[0]] = f"put {bench}"
            replies.update(dict.fromkeys(movers[1:], "wait"))
        else:
            replies.update(dict.fromkeys(movers, f"goto {bench}"))

    def _take(self, part: str, place: str, there: list[str], replies: dict[str, str]) -> None:
        """The robots at the part's place open it, then pick the part up (a heavy one by two)."""
        state = self.state
        o, name = state.obj[place], state.part_name(part)
        if o["openable"] and not o["isOpen"]:
            replies[there[0]] = f"open {state.names[place]}"
            replies.update(dict.fromkeys(there[1:], "wait"))
        elif name is None:
            replies.update(dict.fromkeys(there, "wait"))
        elif part in state.heavy:
            replies.update(dict.fromkeys(there, f"pickup {name}" if len(there) == 2 else "wait"))
        else:
            replies[there[0]] = f"pickup {name}"
