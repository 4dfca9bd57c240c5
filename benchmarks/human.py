"""What a person types at ``teamgym play``, turned into the reply a model would write.

A line is a full reply (anything with a ``<`` tag, sent as it is), or a short form:
an action by name or by its number in the valid-actions list, optionally followed by
``say: WORDS`` to send a message too. ``say: WORDS`` alone means the ``say`` action when it is
valid (or the only valid action when there is one).

>>> typed_reply("2", ["say", "pass"])
'<action>pass</action>'
>>> typed_reply("say: small blue", ["say", "pass"])
'<say>small blue</say><action>say</action>'
>>> typed_reply("Pick 3 say: thanks", ["pick 1", "pick 2", "pick 3"])
'<say>thanks</say><action>pick 3</action>'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from teamgym.envs.parsing import normalize_action

__all__ = ["HOW_TO_REPLY", "typed_reply"]

#: The short help shown before the first turn and on ``?``.
HOW_TO_REPLY = (
    "Type an action by name or number, add 'say: WORDS' to send a message too "
    "(e.g. '1 say: small blue'), or a full reply such as <action>wait</action>. "
    "'?' shows this help, 'q' quits."
)

_SAY = re.compile(r"\bsay:", re.IGNORECASE)


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
    choices = ", ".join(f"{i}) {a}" for i, a in enumerate(valid, 1))
    if not head:
        if not words:
            raise ValueError(f"type an action: {choices}")
        if "say" in valid:
            return "say"
        if len(valid) == 1:
            return valid[0]
        raise ValueError(f"also name the action to take with the message: {choices}")
    if head.isdigit():
        if 1 <= int(head) <= len(valid):
            return valid[int(head) - 1]
        raise ValueError(f"{head} is not a number from the list: {choices}")
    wanted = normalize_action(head)
    match = next((a for a in valid if normalize_action(a) == wanted), None)
    if match is None:
        raise ValueError(
            f"{head!r} is not a valid action now: {choices} "
            "(type a full reply, e.g. <action>...</action>, to send it anyway)"
        )
    return match
