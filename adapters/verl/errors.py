"""The error teamgym's VERL start-up checks raise (:mod:`.config`, :mod:`.resources`), in a
module of its own so that both can raise it without importing each other."""

from __future__ import annotations

__all__ = ["TeamConfigError"]


class TeamConfigError(ValueError):
    """A VERL configuration that would mis-pair or lose the agents of an episode, or that VERL
    itself rejects."""
