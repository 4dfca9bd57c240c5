"""Messages between agents: the observation charset, the token cap and delivery to inboxes.

A ``<say>`` text accepted in one step is cut to the env's ``message_max_tokens`` (whitespace
tokens unless a tokenizer is given), shown with a visible marker when cut, and appears in each
recipient's next observation. Everything a model writes passes :func:`sanitize_text`, so text
observations always lie in their :class:`gymnasium.spaces.Text` space.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from teamgym.envs import events as ev

__all__ = [
    "CHARS_PER_TOKEN",
    "OBS_CHARSET",
    "Inbox",
    "Tokenizer",
    "deliver",
    "format_inbox",
    "sanitize_text",
    "truncate_message",
]

#: Characters an observation may contain: printable ASCII, newline and tab. Anything else a
#: model writes in a message is shown as "?" so observations always lie in their space.
OBS_CHARSET = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\n", "\t"}
_OUTSIDE_CHARSET = re.compile(r"[^\t\n\x20-\x7e]")
#: Upper bound on a delivered message's characters per token of the cap (keeps spaces finite).
CHARS_PER_TOKEN = 16

#: Recipient -> the (sender, text) messages it reads in its next observation.
Inbox = dict[str, list[tuple[str, str]]]


class Tokenizer(Protocol):
    """Anything with Hugging Face style ``encode``/``decode`` can count message tokens."""

    def encode(self, text: str, /) -> Sequence[int]: ...
    def decode(self, ids: Sequence[int], /) -> str: ...


def sanitize_text(text: str) -> str:
    """Replace characters outside :data:`OBS_CHARSET` with ``?``."""
    return _OUTSIDE_CHARSET.sub("?", text)


def truncate_message(
    text: str, max_tokens: int, tokenizer: Tokenizer | None = None
) -> tuple[str, int, bool]:
    """Cap a message at ``max_tokens`` (whitespace tokens unless a tokenizer is given).

    Returns ``(text, tokens, truncated)``; the text is one sanitized line, and a cut message ends
    with a visible ``[truncated: N more tokens]`` marker so the reader knows something is missing.
    """
    text = sanitize_text(text)
    if tokenizer is None:
        words = text.split()
        kept, dropped = words[:max_tokens], max(0, len(words) - max_tokens)
        out = " ".join(kept)
        n = len(kept)
    else:
        ids = list(tokenizer.encode(text))
        dropped = max(0, len(ids) - max_tokens)
        n = min(len(ids), max_tokens)
        out = " ".join(sanitize_text(tokenizer.decode(ids[:max_tokens])).split())
    limit = max_tokens * CHARS_PER_TOKEN
    if len(out) > limit:  # very long "tokens": cap characters too
        out = out[:limit]
        dropped = max(dropped, 1)
    if dropped:
        out = f"{out} [truncated: {dropped} more tokens]"
    return out, n, bool(dropped)


def deliver(
    outbox: Sequence[tuple[str, str]],
    agents: Sequence[str],
    recipients: Callable[[str], list[str]],
    max_tokens: int,
    tokenizer: Tokenizer | None = None,
) -> tuple[Inbox, list[dict[str, Any]]]:
    """The next inboxes of ``agents`` and one ``message`` event per sent message.

    Each (sender, text) of ``outbox`` is capped by :func:`truncate_message` and handed to every
    name ``recipients(sender)`` returns that is among ``agents``; the event lists them all.
    """
    inbox: Inbox = {a: [] for a in agents}
    events = []
    for sender, text in outbox:
        to = recipients(sender)
        shown, tokens, cut = truncate_message(text, max_tokens, tokenizer)
        for r in to:
            if r in inbox:
                inbox[r].append((sender, shown))
        events.append(ev.message_sent(sender, to, tokens, cut))
    return inbox, events


def format_inbox(messages: Sequence[tuple[str, str]]) -> str:
    """The ``Messages:`` block of a text observation, one ``- sender: text`` line each."""
    return "Messages:\n" + "\n".join(f"- {s}: {t}" for s, t in messages)
