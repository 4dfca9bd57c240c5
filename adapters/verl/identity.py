"""Who a trajectory is, in one place: the uid teamgym's workers write and its estimators read.

verl hands an advantage estimator only each row's ``uid``, so it carries the episode row
(``row``: verl's row uid, a UUID as verl makes them, or one named by its episode in the CPU
trainer), the agent's ``seat`` (its index in the env's ``possible_agents``) and, for GiGPO in
training, the anchor-state key per turn::

    U_k                 one agent of one episode: verl's grpo groups its rollout.n copies
    U_k~a1.a2.a3        the same with GiGPO's anchors (ANCHORED_ESTIMATORS)

verl's replay buffer groups TransferQueue keys (``U_k_{session}_0``) by the text before their
first ``_``, the row, so an episode's trajectories stay together. Nothing else spells that form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TrajectoryKey"]

#: Separates a uid from its anchor keys, and the keys from each other.
_ANCHORS, _ANCHOR = "~", "."
#: ``U_k``: a row uid (a UUID) and a seat.
_UID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_(\d+)")


@dataclass(frozen=True)
class TrajectoryKey:
    """One trained agent's trajectory of one episode row (see the module docstring).

    >>> key = TrajectoryKey("0b7e3c2a-1f2d-4c5b-9a8e-7d6c5b4a3f21", 1, ("3fa8", "9c01"))
    >>> key.uid
    '0b7e3c2a-1f2d-4c5b-9a8e-7d6c5b4a3f21_1~3fa8.9c01'
    >>> TrajectoryKey.parse(key.uid) == key
    True
    """

    row: str
    """The episode row's uid."""
    seat: int
    """The agent's index in the env's ``possible_agents``."""
    anchors: tuple[str, ...] = ()
    """GiGPO's anchor-state key per turn (empty: none carried)."""

    @property
    def agent_uid(self) -> str:
        """``U_k``: the uid verl's ``grpo`` and validation group by."""
        return f"{self.row}_{self.seat}"

    @property
    def uid(self) -> str:
        """The uid as written: ``U_k``, with ``~`` and the anchors when there are any."""
        return self.with_anchors(self.agent_uid, self.anchors) if self.anchors else self.agent_uid

    @classmethod
    def parse(cls, uid: str) -> TrajectoryKey | None:
        """The key a uid spells, None for any other uid (verl's padding rows, a row uid
        without a seat, another agent loop's)."""
        base, anchors = cls.without_anchors(uid)
        match = _UID.fullmatch(base)
        return None if match is None else cls(match.group(1), int(match.group(2)), tuple(anchors))

    @staticmethod
    def with_anchors(uid: str, anchors: list[str] | tuple[str, ...]) -> str:
        """``uid`` (any uid) carrying ``anchors``, as :attr:`uid` writes them."""
        return f"{uid}{_ANCHORS}{_ANCHOR.join(anchors)}"

    @staticmethod
    def without_anchors(uid: str) -> tuple[str, list[str]]:
        """``uid`` without its anchors, and the anchors (empty when it carries none)."""
        base, _, keys = str(uid).partition(_ANCHORS)
        return base, keys.split(_ANCHOR) if keys else []
