"""Turn a model's reply into ``(action, message)``: the one reply parser every env uses.

Format: ``<action>…</action>`` and an optional ``<say>…</say>`` anywhere in the reply; the
reasoning around them is ignored. Rules, in order:

* Tags are case- and whitespace-tolerant (``<Action >``, ``< /ACTION>``).
* The **last** complete ``<action>`` pair wins, and so does the last ``<say>`` pair.
* An opening tag that is never closed (a reply cut by a stop string or a length limit) runs to
  the next tag or the end of the reply; an unclosed ``<action>`` stops at the end of its line.
* Fallback, when the reply has no ``<action>`` tag at all: its last non-empty line outside
  any ``<say>`` block is the action, if that line has at most ``MAX_ACTION_CHARS`` characters.
  So a bare ``pick 2`` works, and a long essay without tags does not.

Nothing here raises on what a model can write: failures come back as
``ParsedReply.error``, a sentence the env puts in ``infos[agent]["feedback"]``. The scan is a
single pass over bounded-width tag patterns, so time is linear in the reply length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_ACTION_CHARS", "ParsedReply", "normalize_action", "parse_reply"]

#: Longest action text accepted; longer ones are reported as errors (actions are short commands).
MAX_ACTION_CHARS = 200

# Bounded whitespace ({0,8}) keeps the regex free of quadratic backtracking on hostile input.
_TAG = re.compile(r"<\s{0,8}(/?)\s{0,8}(action|say)\s{0,8}>", re.IGNORECASE)
_ANY_TAG = re.compile(r"<\s{0,8}/?\s{0,8}(?:action|say)\s{0,8}>", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_EDGE_JUNK = "`'\"*.,;:!?()[]{} \t\r\n"


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """What a reply asked for.

    ``action`` is ``None`` when no action could be read, and ``error`` then says why.
    """

    action: str | None
    """The action text as written (stripped), ``None`` if none could be read."""
    message: str | None
    """The ``<say>`` text (stripped), ``None`` if the reply said nothing."""
    error: str | None = None
    """Why no action could be read, in words for the agent's feedback."""
    used_fallback: bool = False
    """True when the action came from the untagged last line rather than an ``<action>`` tag."""


def normalize_action(action: str) -> str:
    """Canonical form for comparing an action with ``valid_actions``: lower case, single spaces,
    no surrounding quotes, backticks or punctuation."""
    return _SPACE.sub(" ", action).strip(_EDGE_JUNK).lower()


def _spans(text: str) -> tuple[tuple[int, int, bool] | None, tuple[int, int, bool] | None]:
    """Last (start, end, closed) content span of ``<action>`` and of ``<say>``, in one
    left-to-right scan. Any tag ends the content of an unclosed tag of the other kind; a repeated
    opening tag restarts its span (nesting)."""
    action = say = None
    open_action = open_say = -1
    for m in _TAG.finditer(text):
        closing, name = m.group(1, 2)
        if len(name) == 6:  # action
            if open_say >= 0:
                say, open_say = (open_say, m.start(), False), -1
            if not closing:
                open_action = m.end()
            elif open_action >= 0:
                action, open_action = (open_action, m.start(), True), -1
        else:  # say
            if open_action >= 0:
                action, open_action = (open_action, m.start(), False), -1
            if not closing:
                open_say = m.end()
            elif open_say >= 0:
                say, open_say = (open_say, m.start(), True), -1
    if open_action >= 0:
        action = (open_action, len(text), False)
    if open_say >= 0:
        say = (open_say, len(text), False)
    return action, say


def parse_reply(reply: object) -> ParsedReply:
    """Read the action and the optional message from a model's reply; never raises."""
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", errors="replace")
    if not isinstance(reply, str):
        return ParsedReply(None, None, f"the reply must be text, got {type(reply).__name__}")
    action_span, say_span = _spans(reply)

    message = None
    if say_span is not None:
        start, end, _ = say_span
        message = _ANY_TAG.sub(" ", reply[start:end]).strip() or None

    if action_span is not None:
        start, end, closed = action_span
        raw = reply[start:end]
        if not closed:
            raw = raw.lstrip().split("\n", 1)[0]
        action = _ANY_TAG.sub(" ", raw).strip()
        if not action:
            return ParsedReply(None, message, "the <action> tag is empty")
        if len(action) > MAX_ACTION_CHARS:
            return ParsedReply(
                None,
                message,
                f"the action is {len(action)} characters long "
                f"(at most {MAX_ACTION_CHARS}); put only the command inside <action>…</action>",
            )
        return ParsedReply(action, message)

    # Fallback: the last non-empty line outside the <say> block.
    text = reply
    if say_span is not None:
        start, end, _ = say_span
        text = reply[:start] + "\n" + reply[end:]
    text = _ANY_TAG.sub("\n", text).rstrip()
    line = text.rsplit("\n", 1)[-1].strip()
    if not line:
        return ParsedReply(None, message, "no action found; reply with <action>…</action>")
    if len(line) > MAX_ACTION_CHARS:
        return ParsedReply(
            None,
            message,
            "no <action>…</action> tag found and the last line is too long "
            "to be a command; reply with <action>…</action>",
        )
    return ParsedReply(line, message, used_fallback=True)
