"""What a person types, turned into the reply a model would write, and the valid actions as a
person is shown them: one form for the terminal (``teamgym play``) and the web page (its hub
checks a reply with :func:`typed_reply`). Plain text over the env's reply format, so both
import it from here.

A line is a full reply (anything with a ``<`` tag, sent as it is), or a short form:
an action by name or by its number in the valid-actions list, optionally followed by
``say: WORDS`` to send a message too. ``say: WORDS`` alone means the ``say`` action when it is
valid (or the only valid action when there is one). Where actions hold numbers that are not
their place in the list (Hanabi's ``play 1`` is 6th), a bare number would misfire, so the list
is not numbered and actions are typed by name (:func:`numbered`).

>>> typed_reply("2", ["say", "pass"])
'<action>pass</action>'
>>> typed_reply("say: small blue", ["say", "pass"])
'<say>small blue</say><action>say</action>'
>>> typed_reply("Pick 3 say: thanks", ["pick 1", "pick 2", "pick 3"])
'<say>thanks</say><action>pick 3</action>'
>>> typed_reply("play 1", ["discard 1", "play 1"])
'<action>play 1</action>'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from teamgym.envs.parsing import normalize_action

__all__ = ["HOW_TO_REPLY", "choices", "how_to_reply", "numbered", "typed_reply"]


def how_to_reply(talk: bool = True, by_number: bool = True) -> str:
    """The short help shown before the first turn and on ``?``: the message example only in
    an env with talk (Hanabi has none), numbers only where the actions are :func:`numbered`."""
    type_it = "Type an action by name or number" if by_number else "Type an action by name"
    if talk:
        example = "'1 say: small blue'" if by_number else "'wait say: small blue'"
        type_it += f", add 'say: WORDS' to send a message too (e.g. {example}),"
    else:
        type_it += " (this game has no talk: no messages),"
    full = "or a full reply such as <action>wait</action>"
    return f"{type_it} {full}. '?' shows this help, 'q' quits."


#: The help of an env with talk and numbered actions (signal's, foraging's).
HOW_TO_REPLY = how_to_reply()

_SAY = re.compile(r"\bsay:", re.IGNORECASE)
_NUMBER = re.compile(r"\b\d+\b")


def numbered(valid: Sequence[str]) -> bool:
    """Whether the valid actions may be chosen by number: every number an action holds is its
    own place in the list (``pick 3`` third), so typing ``3`` cannot mean another action."""
    return all(int(n) == i for i, a in enumerate(valid, 1) for n in _NUMBER.findall(a))


def choices(valid: Sequence[str]) -> str:
    """The valid actions as the person is shown them: ``1) a  2) b`` when :func:`numbered`,
    else ``a | b`` (typed by name)."""
    if numbered(valid):
        return "  ".join(f"{i}) {a}" for i, a in enumerate(valid, 1))
    return " | ".join(valid)


def typed_reply(line: str, valid: Sequence[str]) -> str:
    """The reply ``line`` stands for, given the valid actions; a ``ValueError`` says what was
    wrong with a short form (the person types again)."""
    line = line.strip()
    if "<" in line:
        return line
    found = _SAY.search(line)
    head, words = (line[: found.start()], line[found.end() :]) if found else (line, "")
    head, words = head.strip(), " ".join(words.split())
    action = _action(head, words, valid)
    return f"<say>{words}</say><action>{action}</action>" if words else f"<action>{action}</action>"


def _action(head: str, words: str, valid: Sequence[str]) -> str:
    """The valid action ``head`` names (a number or a name); with no head, the one ``say: WORDS``
    implies."""
    listed = choices(valid)
    if not head:
        if not words:
            raise ValueError(f"type an action: {listed}")
        if "say" in valid:
            return "say"
        if len(valid) == 1:
            return valid[0]
        raise ValueError(f"also name the action to take with the message: {listed}")
    if head.isdigit():
        if not numbered(valid):
            raise ValueError(
                f"type the action by name: numbers here are part of actions, e.g. "
                f"'{next(a for a in valid if _NUMBER.search(a))}': {listed}"
            )
        if 1 <= int(head) <= len(valid):
            return valid[int(head) - 1]
        raise ValueError(f"{head} is not a number from the list: {listed}")
    wanted = normalize_action(head)
    match = next((a for a in valid if normalize_action(a) == wanted), None)
    if match is None:
        raise ValueError(
            f"{head!r} is not a valid action now: {listed} "
            "(type a full reply, e.g. <action>...</action>, to send it anyway)"
        )
    return match
