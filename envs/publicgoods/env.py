"""``publicgoods-v0``: a repeated public-goods game, where free-riding pays each agent and
contributing pays the team."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from teamgym.envs import events as ev
from teamgym.envs.drawing import Drawing
from teamgym.envs.presets import int_in, resolve
from teamgym.envs.text_env import GameStep, TextParallelEnv

__all__ = ["DIFFICULTIES", "PublicGoodsEnv"]

#: Named settings (explicit keyword arguments override them).
DIFFICULTIES: dict[str, dict[str, Any]] = {
    "easy": {"num_rounds": 3, "multiplier": 1.8, "multiplier_spread": 0.1, "endowment": 4},
    "medium": {"num_rounds": 5, "multiplier": 1.6, "multiplier_spread": 0.2, "endowment": 10},
    "hard": {"num_rounds": 10, "multiplier": 1.2, "multiplier_spread": 0.1, "endowment": 10},
}
_REPLY_FORMAT = (
    "Reply format: think if you like, then give exactly one command as "
    "<action>COMMAND</action>; in the talk phase you may add <say>TEXT</say> for your team."
)


class PublicGoodsEnv(TextParallelEnv):
    """Repeated public-goods game: free-riding under shared reward.

    Every round each agent receives ``endowment`` coins and chooses how many to put in a common
    pot (``contribute K``); the pot is multiplied by the round's multiplier (drawn from the seed,
    uniform on ``multiplier +- multiplier_spread`` in steps of 0.1, and shown to the agents) and
    split evenly, so agent ``i`` earns ``endowment - c_i + m * sum(c) / n`` coins (its
    individual reward is that divided by ``endowment``). With ``1 < multiplier < n`` this is the classic dilemma:
    each coin an agent keeps pays it ``1 - multiplier / n > 0`` more, so free-riding is
    individually rational, while each coin contributed adds ``multiplier - 1 > 0`` to the team.
    Under ``RewardSharing(weight=0)`` free-riding pays; under ``weight=1`` full contribution is
    optimal. With ``communication`` each round opens with a talk phase (``wait``, with an
    optional ``<say>`` message); agents see last round's contributions, never a full history.

    Each agent-round is a subtask (``round:agent``), completed when the agent contributed at
    least half its endowment, so ``collaboration_index`` is the share of cooperative choices and
    ``contribution_gini`` how unevenly they were spread. The outcome ``score`` is the share of
    all endowments contributed (0: everyone free-rode, 1: the team optimum); success means
    ``score >= 0.9``; extras: ``mean_contribution`` and ``free_riding_rate`` (zero
    contributions).

    Args:
        num_agents: team size, 2..8.
        difficulty: a named setting of the arguments below (default ``medium``); explicit
            arguments override it.
        num_rounds: rounds per episode.
        multiplier: the pot's mean multiplier (the dilemma needs 1 < multiplier < team size).
        multiplier_spread: each round's multiplier is drawn from ``multiplier`` +- this, in
            steps of 0.1; 0 keeps it fixed.
        endowment: coins each agent receives per round, 1..20.

    >>> env = PublicGoodsEnv(num_agents=2, num_rounds=1, multiplier_spread=0, communication=False)
    >>> obs, infos = env.reset(seed=0)
    >>> infos["robot_0"]["valid_actions"][:3]
    ['contribute 0', 'contribute 1', 'contribute 2']
    >>> _, rewards, *_ = env.step(
    ...     {"robot_0": "<action>contribute 10</action>", "robot_1": "<action>contribute 0</action>"})
    >>> rewards
    {'robot_0': 0.8, 'robot_1': 1.8}
    """

    metadata: ClassVar[dict[str, Any]] = {**TextParallelEnv.metadata, "name": "publicgoods_v0"}
    max_game_observation_chars = 1024
    success_criterion = "score >= 0.9: at least 90% of all endowments contributed"
    idle_actions = frozenset({"wait", "contribute 0"})

    def __init__(
        self,
        num_agents: int = 4,
        *,
        difficulty: Literal["easy", "medium", "hard"] | None = None,
        num_rounds: int | None = None,
        multiplier: float | None = None,
        multiplier_spread: float | None = None,
        endowment: int | None = None,
        **base: Any,
    ) -> None:
        """Rules in the class docstring; ``base`` takes the common options of ``TextParallelEnv``
        (``communication`` adds a talk phase to every round)."""
        super().__init__(num_agents, **base)
        given = {"num_rounds": num_rounds, "multiplier": multiplier, "endowment": endowment,
                 "multiplier_spread": multiplier_spread}  # fmt: skip
        preset = resolve(DIFFICULTIES, difficulty, given)
        num_rounds, multiplier = preset["num_rounds"], preset["multiplier"]
        endowment, spread = preset["endowment"], preset["multiplier_spread"]
        if not isinstance(num_rounds, int) or num_rounds < 1:
            raise ValueError(f"num_rounds must be a positive int, got {num_rounds!r}")
        int_in("endowment", endowment, 1, 20)
        if not isinstance(multiplier, (int, float)) or multiplier <= 0:
            raise ValueError(f"multiplier must be a positive number, got {multiplier!r}")
        if not isinstance(spread, (int, float)) or not 0 <= spread < multiplier:
            raise ValueError(f"multiplier_spread must be in [0, multiplier), got {spread!r}")
        self.num_rounds, self.multiplier, self.endowment = num_rounds, float(multiplier), endowment
        self.multiplier_spread = float(spread)
        steps = round(self.multiplier_spread * 10)
        self._multipliers = [round(self.multiplier + k / 10, 1) for k in range(-steps, steps + 1)]
        self.round_multiplier = self.multiplier
        self._contribute = [f"contribute {k}" for k in range(endowment + 1)]
        self._actions: list[tuple[str, str | None]] = [("wait", None)]
        if self.obs_mode == "vector" and self.communication:  # canned pledges stand for <say>
            self._actions += [("wait", f"I will contribute {k}") for k in range(endowment + 1)]
        self._actions += [(a, None) for a in self._contribute]
        self.round_index = 0
        self.phase: Literal["talk", "contribute"] = "contribute"
        self.last: dict[str, int] = {}
        #: (multiplier, contributions) of every round played: what each round's next
        #: observation showed everyone (the page draws them; observations show the last only).
        self.history: list[tuple[float, dict[str, int]]] = []
        self.earned: dict[str, float] = {}
        self.contributed: dict[str, int] = {}
        self.zeros = 0

    # ------------------------------------------------------------------ rules
    def _game_default_max_steps(self) -> int:
        return self.num_rounds * (2 if self.communication else 1)

    def _game_reset(self, options: dict[str, Any] | None) -> None:
        self.round_index = 0
        self.phase = "talk" if self.communication else "contribute"
        self.last = {}
        self.history = []
        self.earned = dict.fromkeys(self.possible_agents, 0.0)
        self.contributed = dict.fromkeys(self.possible_agents, 0)
        self.zeros = 0
        self._draw_multiplier()

    def _draw_multiplier(self) -> None:
        """This round's multiplier, from the seed's stream."""
        pick = int(self.np_random.integers(len(self._multipliers)))
        self.round_multiplier = self._multipliers[pick]

    def _game_valid_actions(self, agent: str) -> list[str]:
        return ["wait"] if self.phase == "talk" else list(self._contribute)

    def _game_action_names(self, agent: str) -> list[tuple[str, str | None]]:
        return self._actions

    def can_speak(self, agent: str) -> bool:
        return self.phase == "talk"

    def _game_step(self, actions: dict[str, str | None]) -> GameStep:
        if self.phase == "talk":
            self.phase = "contribute"
            return GameStep(rewards={})
        chosen = {a: self._amount(actions.get(a)) for a in self.possible_agents}
        pot = self.round_multiplier * sum(chosen.values())
        share = pot / len(self.possible_agents)
        rewards, feedback, events = {}, {}, []
        for agent, coins in chosen.items():
            earned = self.endowment - coins + share
            rewards[agent] = earned / self.endowment
            self.earned[agent] += earned
            self.contributed[agent] += coins
            self.zeros += coins == 0
            feedback[agent] = (
                f"You contributed {coins} of {self.endowment}; the pot of {pot:g} paid "
                f"{share:g} to each; you earned {earned:g} coins this round."
            )
            subtask = f"round{self.round_index + 1}:{agent}"
            events.append(ev.subtask_attempted(subtask, [agent]))
            if 2 * coins >= self.endowment:
                events.append(ev.subtask_completed(subtask, [agent]))
            else:
                events.append(ev.subtask_failed(subtask, [agent], "free-rode"))
        self.last = chosen
        self.history.append((self.round_multiplier, chosen))
        self.round_index += 1
        done = self.round_index >= self.num_rounds
        if done:
            events.append(self._outcome())
        else:
            self.phase = "talk" if self.communication else "contribute"
            self._draw_multiplier()
        return GameStep(rewards=rewards, feedback=feedback, events=events, done=done)

    def _amount(self, action: str | None) -> int:
        """Coins of a valid ``contribute K`` (an unusable reply contributes nothing)."""
        return 0 if action is None else int(action.split()[1])

    def _outcome(self) -> dict[str, Any]:
        """Share of all endowments contributed (the score), and how often agents gave nothing."""
        choices = self.num_rounds * len(self.possible_agents)
        score = sum(self.contributed.values()) / (self.endowment * choices)
        return ev.outcome(
            score >= 0.9, score, mean_contribution=score, free_riding_rate=self.zeros / choices
        )

    # ------------------------------------------------------------------ views
    def _game_instructions(self, agent: str) -> str:
        n = len(self.possible_agents)
        talk = (
            "Each round starts with a talk phase ('wait', optionally with <say>...</say> to the "
            "team), then a contribute phase. "
            if self.communication
            else ""
        )
        return (
            f"You are {agent} in a team of {n} playing {self.num_rounds} round(s) of a "
            f"public-goods game. Every round you get {self.endowment} coins and choose how many "
            f"to put in a common pot ('contribute K', K from 0 to {self.endowment}); the pot is "
            f"multiplied by the round's multiplier (about {self.multiplier:g}, announced each "
            f"round) and split evenly among all {n} players, and you keep what you did not "
            f"contribute. {talk}Your score is your coins earned.\n" + _REPLY_FORMAT
        )

    def _game_observation(self, agent: str) -> str:
        head = (
            f"Round {min(self.round_index + 1, self.num_rounds)}/{self.num_rounds}; "
            f"this round the pot is multiplied by {self.round_multiplier:g}."
        )
        last = (
            "Last round's contributions: "
            + ", ".join(f"{a} {c}" for a, c in self.last.items())
            + "."
            if self.last
            else "This is the first round."
        )
        mine = f"You have earned {self.earned.get(agent, 0.0):g} coins so far."
        if self.phase == "talk":
            return f"{head} Talk phase: say what you will do if you like, then wait. {last} {mine}"
        return (
            f"{head} Contribute phase: you have {self.endowment} coins; choose "
            f"'contribute K' (0..{self.endowment}). {last} {mine}"
        )

    def drawing(self, agent: str) -> Drawing | None:
        """The contributions round by round, this round's multiplier and ``agent``'s coins
        (:mod:`teamgym.envs.publicgoods.drawing`)."""
        from teamgym.envs.publicgoods.drawing import drawing

        return drawing(self, agent)

    def _game_render(self) -> str:
        rows = [
            f"publicgoods-v0 round {min(self.round_index + 1, self.num_rounds)}/{self.num_rounds} "
            f"phase={self.phase} multiplier={self.round_multiplier:g} endowment={self.endowment}"
        ]
        for agent in self.possible_agents:
            rows.append(
                f"  {agent}: last {self.last.get(agent, '-')} contributed "
                f"{self.contributed.get(agent, 0)} earned {self.earned.get(agent, 0.0):g}"
            )
        return "\n".join(rows)

    def _game_vector_size(self) -> int:
        return 5 + len(self.possible_agents) + len(self._actions)

    def _game_vector_observation(self, agent: str) -> np.ndarray:
        out = np.zeros(self._game_vector_size(), dtype=np.float32)
        out[0 if self.phase == "talk" else 1] = 1.0
        out[2] = min(self.round_index, self.num_rounds) / self.num_rounds
        top = self.multiplier + self.multiplier_spread
        most = self.endowment * self.num_rounds * (1.0 + top)  # keeps it below 1
        out[3] = self.earned.get(agent, 0.0) / most
        out[4] = self.round_multiplier / (self.multiplier + self.multiplier_spread)
        for i, other in enumerate(self.possible_agents):
            out[5 + i] = self.last.get(other, 0) / self.endowment
        base = 5 + len(self.possible_agents)
        for _, text in self.inbox.get(agent, []):  # pledges heard (canned messages)
            for i, (_, message) in enumerate(self._actions):
                if message is not None and message == text:
                    out[base + i] = 1.0
        return out
