"""What the web page shows and takes: the people at the table, their open turns, their episodes.

The hub holds no web code (``teamgym.web.server`` serves it) and no env (the human agent,
``teamgym.web.agent``, posts turns to it and awaits the replies). It lives in the event loop
that plays the episodes, so every change happens in that loop's thread: no locks.

A reply is checked before it is taken (:meth:`Hub.reply`): the person's token, a turn that is
still open, the seat and step the page showed, the size, and a short form that names a valid
action. A refused reply raises :class:`Refused` with the HTTP status and the reason, and
changes nothing: the turn stays open for the next try.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from teamgym.envs.typed_replies import choices, typed_reply

__all__ = ["MAX_REPLY_CHARS", "EpisodeView", "Hub", "Person", "Refused", "Turn"]

#: The longest reply the page may send, in characters (the env's parser caps an action at 200;
#: a message is cut by the env's ``message_max_tokens``). Longer ones are refused, not cut.
MAX_REPLY_CHARS = 2000
#: Past turns each episode keeps for the page (what the seat saw and sent).
HISTORY = 50


class Refused(Exception):
    """A request the hub will not take: ``status`` is its HTTP status, the message the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class Turn:
    """One open turn: a seat of one episode waits for its person's reply."""

    id: int
    episode: str
    seat: str
    step: int
    observation: str
    valid_actions: list[str]
    future: asyncio.Future[str]

    def public(self) -> dict[str, Any]:
        """What the page is sent (the future stays here)."""
        return {
            "turn": self.id,
            "seat": self.seat,
            "step": self.step,
            "observation": self.observation,
            "valid_actions": self.valid_actions,
            "choices": choices(self.valid_actions),
        }


@dataclass
class EpisodeView:
    """One episode as its people see it."""

    key: str
    env_id: str
    seed: int
    partner: str
    status: str = "playing"
    instructions: dict[str, str] = field(default_factory=dict)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per seat: :func:`~teamgym.web.agent.seat_view` at its latest turn (observation, step,
    valid actions, the text picture and the SVG drawing, whether it may send a message)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None

    seats: dict[str, str] = field(default_factory=dict)
    """Seat -> the person who plays it."""

    def public(self, turns: list[Turn], person: str) -> dict[str, Any]:
        """The episode's JSON for ``person``'s page: their seats only (another person's seat
        may see what theirs must not, e.g. their own Hanabi cards)."""
        mine = {seat for seat, who in self.seats.items() if who == person}
        return {
            "key": self.key,
            "env_id": self.env_id,
            "seed": self.seed,
            "partner": self.partner,
            "status": self.status,
            "instructions": {s: t for s, t in self.instructions.items() if s in mine},
            "last": {s: v for s, v in self.last.items() if s in mine},
            "history": [
                {k: v for k, v in h.items() if k != "observation"}
                for h in self.history
                if h["seat"] in mine
            ][-HISTORY:],
            "result": self.result,
            "turns": [t.public() for t in turns if t.episode == self.key and t.seat in mine],
        }


@dataclass
class Person:
    """A person at the table: their name, the token their link carries, what waits for them."""

    name: str
    token: str
    turns: dict[int, Turn] = field(default_factory=dict)
    episodes: dict[str, EpisodeView] = field(default_factory=dict)
    ended: float = 0.0
    """When an episode of theirs last ended (``time.monotonic``)."""
    polled: float = 0.0
    """When their page last read the state."""

    def unseen(self, over_at: float) -> bool:
        """Whether their page has not looked since an episode of theirs ended, or since the
        session ended at ``over_at`` (so it has not shown that yet)."""
        return self.polled < max(self.ended, over_at)


class Hub:
    """The people, their open turns and their episodes (see the module docstring)."""

    def __init__(self) -> None:
        self.people: dict[str, Person] = {}
        self.over = False
        """The session has ended (the page says so and stops polling)."""
        self.over_at = 0.0
        self._next_turn = 0

    def person(self, name: str, token: str | None = None) -> Person:
        """The person ``name``, added on first use with ``token`` (a fresh one if None)."""
        if name not in self.people:
            self.people[name] = Person(name, token or secrets.token_urlsafe(16))
        return self.people[name]

    def end(self) -> None:
        """Mark the session over (pages say so on their next poll)."""
        self.over, self.over_at = True, time.monotonic()

    def check(self, name: str, token: str | None) -> Person:
        """The person ``name`` if ``token`` is theirs; else :class:`Refused` (401)."""
        if not token:
            raise Refused(401, "this request carries no token; open the link you were given")
        person = self.people.get(name)
        expected = person.token if person is not None else secrets.token_urlsafe(16)
        if not hmac.compare_digest(token, expected) or person is None:
            # one answer for an unknown name and a wrong token: names are not revealed
            raise Refused(401, "unknown player or wrong token; open the link you were given")
        return person

    def state(self, name: str, token: str | None) -> dict[str, Any]:
        """What ``name``'s page shows: their episodes (newest last) with their open turns."""
        person = self.check(name, token)
        person.polled = time.monotonic()
        turns = list(person.turns.values())
        return {
            "name": person.name,
            "over": self.over,
            "episodes": [e.public(turns, person.name) for e in person.episodes.values()],
        }

    def open_episode(self, name: str, view: EpisodeView) -> EpisodeView:
        """Show ``view`` on ``name``'s page (kept when the same episode is played again)."""
        return self.person(name).episodes.setdefault(view.key, view)

    def ask(
        self,
        name: str,
        episode: str,
        seat: str,
        step: int,
        observation: str,
        valid_actions: list[str],
    ) -> asyncio.Future[str]:
        """Open a turn for ``name``; the future is set with the reply the page sends."""
        person = self.person(name)
        self._next_turn += 1
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        turn = Turn(self._next_turn, episode, seat, step, observation, list(valid_actions), future)
        person.turns[turn.id] = turn
        future.add_done_callback(lambda _: person.turns.pop(turn.id, None))
        return future

    def reply(self, name: str, token: str | None, body: dict[str, Any]) -> str:
        """Take the reply in ``body`` (``turn``, ``seat``, ``step``, and ``action`` with an
        optional ``say``, or a full ``text`` reply) for an open turn; returns the reply text the
        env gets. Anything wrong raises :class:`Refused` and leaves the turn open."""
        person = self.check(name, token)
        turn_id = body.get("turn")
        turn = person.turns.get(turn_id) if type(turn_id) is int else None
        if turn is None or turn.future.done():
            raise Refused(
                409,
                "this turn is no longer open (answered, or the episode moved on); reload the page",
            )
        if body.get("seat") != turn.seat:
            raise Refused(403, f"turn {turn.id} is {turn.seat}'s, not {body.get('seat')!r}'s")
        if body.get("step") != turn.step:
            raise Refused(
                409,
                f"stale step {body.get('step')!r}: the episode is at step "
                f"{turn.step}; reload the page",
            )
        text = _reply_text(body, turn.valid_actions)
        del person.turns[turn.id]  # now, not when the loop runs the future's callbacks
        turn.future.set_result(text)
        return text

    def cancel(self, episode: str) -> None:
        """Close the open turns of ``episode`` (it ended or was stopped)."""
        for person in self.people.values():
            if episode in person.episodes:
                person.ended = time.monotonic()
            for turn in list(person.turns.values()):
                if turn.episode == episode and not turn.future.done():
                    turn.future.cancel()


def _reply_text(body: dict[str, Any], valid: list[str]) -> str:
    """The reply ``body`` stands for; :class:`Refused` (413, 422) when it is too long or does
    not name a valid action."""
    parts = {k: body.get(k) for k in ("action", "say", "text")}
    for key, value in parts.items():
        if value is not None and not isinstance(value, str):
            raise Refused(422, f"{key!r} must be a string, got {type(value).__name__}")
    size = sum(len(v or "") for v in parts.values())
    if size > MAX_REPLY_CHARS:
        raise Refused(413, f"the reply has {size} characters; at most {MAX_REPLY_CHARS}")
    if parts["text"]:
        if parts["action"] or parts["say"]:
            raise Refused(422, "send either a full reply ('text') or 'action' and 'say', not both")
        return parts["text"].strip()
    action = " ".join((parts["action"] or "").split())
    say = " ".join((parts["say"] or "").split())
    if "<" in action or "<" in say:
        raise Refused(422, "'action' and 'say' are plain words; send a full reply as 'text'")
    line = f"{action} say: {say}" if say else action
    try:
        return typed_reply(line, valid)
    except ValueError as exc:
        raise Refused(422, str(exc)) from None
