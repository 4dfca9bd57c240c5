"""The error teamgym's VERL start-up checks raise (:mod:`.config`, :mod:`.resources`,
:mod:`.estimators`), in a module of its own so that each can raise it without the others."""

from __future__ import annotations

__all__ = ["TeamConfigError"]


class TeamConfigError(ValueError):
    """A VERL configuration that would mis-pair or lose the agents of an episode, or that VERL
    itself rejects."""
