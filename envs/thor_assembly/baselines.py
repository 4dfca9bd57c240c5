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

    def act(self, agent: str, observation: str, info: Mapping[str, Any]) -> str:
        """This robot's command for the current step."""
        env = self.env
        if env is None:
            raise RuntimeError("ThorExpert needs bind(env) before act(); run_episode does it")
        if env.num_steps != self._step:
            self._step = env.num_steps
            self._replies = self._plan_step() if env.phase == "plan" else self._decide()
        reply = self._replies.get(agent, "wait")
        valid = info.get("valid_actions", [])
        if reply.split("\n", 1)[0] not in valid and valid and not reply.startswith("plan"):
            reply = "wait" if "wait" in valid else valid[0]
        if reply.startswith("plan"):
            return "<action>plan</action>\n" + reply.split("\n", 1)[1]
        return f"<action>{reply}</action>"

    # ------------------------------------------------------------------ planning turn
    def _plan_step(self) -> dict[str, str]:
        env = self.env
        robots = env.possible_agents
        subtasks = subtask_names(env.recipe.parts, env.connections)
        lines = []
        for i, subtask in enumerate(subtasks):
            who = [robots[i % len(robots)]]
            if subtask.startswith("connect") or subtask.split()[-1] in env.heavy:
                who.append(robots[(i + 1) % len(robots)])
            lines.append(f"{subtask} -> {', '.join(who)}")
        return {robots[0]: "plan\n" + "\n".join(lines)}

    # ------------------------------------------------------------------ acting
    def _free(self) -> list[str]:
        return [a for a in self.env.agents if a not in self.jobs]

    def _nearest(self, place: str, candidates: list[str], k: int) -> list[str]:
        env = self.env
        return sorted(
            candidates,
            key=lambda a: (env.scene.distance(env.view[a]["cell"], env.place_cell[place]), a),
        )[:k]

    def _part_place(self, part: str) -> str | None:
        env = self.env
        parents = env.obj[env.part_ids[part]]["parentReceptacles"] or []
        return parents[0] if parents else None

    def _assign(self) -> None:
        env = self.env
        # drop finished jobs
        for agent, job in list(self.jobs.items()):
            kind = job[0]
            if (
                agent not in env.agents
                or (kind == "fetch" and job[1] in env.placed)
                or (kind == "connect" and env.conn_state[job[1]] != "todo")
                or (
                    kind == "inspect"
                    and (
                        env.inspection_passed
                        or any(env.conn_state[c] == "todo" for c in env.connections)
                    )
                )
            ):
                del self.jobs[agent]
        taken = {job[1] for job in self.jobs.values() if len(job) > 1}
        # 1. fetches: heavy ones need two robots
        for part in sorted(
            env.recipe.parts, key=lambda p: (p not in env.heavy, env.recipe.parts.index(p))
        ):
            if part in env.placed or part in taken:
                continue
            need = 2 if part in env.heavy else 1
            place = self._part_place(part)
            free = self._free()
            if len(free) < need or place is None:
                continue
            for a in self._nearest(place, free, need):
                self.jobs[a] = ("fetch", part)
            taken.add(part)
        # 2. connections whose parts are both placed
        for pair in env.connections:
            if (
                env.conn_state[pair] != "todo"
                or pair in taken
                or not {pair[0], pair[1]} <= env.placed
            ):
                continue
            free = self._free()
            if len(free) < 2:
                break
            pick = self._nearest(env.workbench, free, 2)
            self.jobs[pick[0]] = ("connect", pair, "hold")
            self.jobs[pick[1]] = ("connect", pair, "attach")
            taken.add(pair)
        # 3. inspection when everything is placed and connected
        if (
            set(env.recipe.parts) <= env.placed
            and all(env.conn_state[c] == "fixed" for c in env.connections)
            and not any(j[0] == "inspect" for j in self.jobs.values())
        ):
            free = self._free()
            if free:
                self.jobs[self._nearest(env.workbench, free, 1)[0]] = ("inspect",)

    def _decide(self) -> dict[str, str]:
        env = self.env
        self._assign()
        replies: dict[str, str] = {}
        bench = env.names[env.workbench]
        # connections: both robots at the workbench -> hold + attach in the same step
        pairs: dict[tuple, list[str]] = {}
        for agent, job in self.jobs.items():
            if job[0] == "connect":
                pairs.setdefault(job[1], []).append(agent)
        for pair, robots in pairs.items():
            ready = (
                all(env.at[a] == env.workbench and a not in env.travel for a in robots)
                and len(robots) == 2
            )
            for a in robots:
                role = self.jobs[a][2]
                if a in env.travel:
                    replies[a] = "wait"
                elif env.at[a] != env.workbench:
                    replies[a] = f"goto {bench}"
                elif not ready:
                    replies[a] = "wait"
                else:
                    x, y = env.names[env.part_ids[pair[0]]], env.names[env.part_ids[pair[1]]]
                    replies[a] = f"hold {x}" if role == "hold" else f"attach {y} to {x}"
        # fetches
        groups: dict[str, list[str]] = {}
        for agent, job in self.jobs.items():
            if job[0] == "fetch":
                groups.setdefault(job[1], []).append(agent)
        for part, robots in groups.items():
            self._fetch(part, sorted(robots), replies, bench)
        for agent, job in self.jobs.items():
            if job[0] == "inspect":
                replies[agent] = (
                    "wait"
                    if agent in env.travel
                    else ("inspect" if env.at[agent] == env.workbench else f"goto {bench}")
                )
        # idle robots wait at the workbench, ready for connections
        for agent in env.agents:
            if agent not in replies:
                replies[agent] = (
                    "wait"
                    if agent in env.travel
                    or env.at[agent] == env.workbench
                    or env._holding_part(agent)
                    else f"goto {bench}"
                )
        return replies

    def _fetch(self, part: str, robots: list[str], replies: dict[str, str], bench: str) -> None:
        env = self.env
        oid = env.part_ids[part]
        carriers = env.carry.get(part)
        holding = [a for a in robots if env._holding_part(a) == part]
        if carriers or holding:
            movers = list(carriers) if carriers else holding
            for a in robots:
                if a not in movers:
                    replies[a] = "wait"
            if any(a in env.travel for a in movers):
                for a in movers:
                    replies[a] = "wait"
            elif all(env.at[a] == env.workbench for a in movers):
                replies[movers[0]] = f"put {bench}"
                for a in movers[1:]:
                    replies[a] = "wait"
            else:
                for a in movers:
                    replies[a] = f"goto {bench}"
            return
        place = self._part_place(part)
        if place is None:
            for a in robots:
                replies[a] = "wait"
            return
        there = [a for a in robots if env.at[a] == place and a not in env.travel]
        for a in robots:
            if a in env.travel:
                replies[a] = "wait"
            elif env.at[a] != place:
                replies[a] = f"goto {env.names[place]}"
        if not there:
            return
        o = env.obj[place]
        if o["openable"] and not o["isOpen"]:
            replies[there[0]] = f"open {env.names[place]}"
            for a in there[1:]:
                replies[a] = "wait"
            return
        name = env.names.get(oid)
        if name is None:
            for a in there:
                replies[a] = "wait"
            return
        if part in env.heavy:
            if len(there) == 2:
                for a in there:
                    replies[a] = f"pickup {name}"
            else:
                for a in there:
                    replies[a] = "wait"
        else:
            replies[there[0]] = f"pickup {name}"
