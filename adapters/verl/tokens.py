"""Incremental tokenisation for ``TeamEpisodeLoop``: each turn renders only what is new.

VERL's continuous-token builder renders an appended observation twice per turn (its synthetic
``[system, user]`` prefix, then prefix plus message, tokenised whole, in a thread).
:func:`observation_ids` renders the three messages as *text* once, cuts the cached prefix text off
and tokenises the suffix in the calling thread: the same ids exactly when the suffix starts with
an added special token (``<|im_start|>``), on which a tokenizer splits first. Each template is
probed once against VERL's path, which serves whatever the probe or :data:`_HOOKS` rule out.
:func:`first_prompt_ids` renders a row's first prompt once for its ``rollout.n`` copies.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from verl.utils.tokenizer.continuous_token import (
    _SYNTHETIC_SYSTEM_MESSAGE,
    _SYNTHETIC_USER_MESSAGE,
    ContinuousTokenBuilder,
)

__all__ = ["first_prompt_ids", "observation_ids"]

_HOOKS = (
    "merge_context_tokens",
    "tokenize_context_incremental_messages",
    "_tokenize_single_non_tool",
    "render_delta_token_id",
    "_render_tokens",
    "_should_fuse_generation_prompt_with_last_group",
    "_merge_context_group",
    "_iter_append_groups",
    "_assert_append_only",
)
"""The base builder's methods an appended user message goes through: a builder class that
overrides any of them is served by VERL's path."""

_PROBE = {"role": "user", "content": "probe: the teamgym observation\n  with a second line"}
_PREFIX = [_SYNTHETIC_SYSTEM_MESSAGE, _SYNTHETIC_USER_MESSAGE]
_CACHE_SIZE = 4096


class _Template:
    """One (tokenizer, chat template, template kwargs): the prefix text and the special token
    the suffix must start with, or ``usable`` False when the probe disagreed with VERL."""

    def __init__(self, builder: ContinuousTokenBuilder) -> None:
        self.tokenizer = builder.tokenizer
        self.kwargs = dict(builder.chat_template_kwargs)
        self.prefix = self._text(_PREFIX, generation=False)
        self.boundary, self.usable = "", False
        specials = sorted(
            (
                str(t.content)
                for t in self.tokenizer.added_tokens_decoder.values()
                if t.special and not t.lstrip
            ),
            key=len,
            reverse=True,
        )
        suffix = self._suffix(_PROBE)
        self.boundary = next((s for s in specials if suffix and suffix.startswith(s)), "")
        if self.boundary:
            self.usable = self.ids(_PROBE) == builder._tokenize_single_non_tool(
                _PROBE, add_generation_prompt=True
            )

    def _text(self, messages: list[dict[str, Any]], generation: bool) -> str:
        return str(
            self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=generation, **self.kwargs
            )
        )

    def _suffix(self, message: dict[str, Any]) -> str | None:
        text = self._text([*_PREFIX, message], generation=True)
        return text[len(self.prefix) :] if text.startswith(self.prefix) else None

    def ids(self, message: dict[str, Any]) -> list[int] | None:
        """The ids ``message`` adds after the prefix, generation prompt included; None when its
        suffix does not start at the boundary token."""
        suffix = self._suffix(message)
        if suffix is None or not suffix.startswith(self.boundary):
            return None
        return list(self.tokenizer.encode(suffix, add_special_tokens=False))


_Key = tuple[int, str, str, str]
_TEMPLATES: dict[_Key, _Template] = {}
"""Owned by :func:`_template`: per tokenizer object, template and kwargs."""
_FIRST: OrderedDict[tuple[_Key, str], tuple[int, ...]] = OrderedDict()
"""Owned by :func:`first_prompt_ids`: the last ``_CACHE_SIZE`` first prompts' ids."""
_TOKENIZERS: dict[int, Any] = {}
"""The tokenizers keyed by ``id``, kept alive so that no other object takes the same id."""


def _key(builder: ContinuousTokenBuilder) -> _Key:
    """Who renders: the tokenizer object, its template, the template kwargs, the builder class."""
    tokenizer = builder.tokenizer
    _TOKENIZERS.setdefault(id(tokenizer), tokenizer)
    kwargs = json.dumps(builder.chat_template_kwargs, sort_keys=True, default=str)
    template = str(getattr(tokenizer, "chat_template", ""))
    return id(tokenizer), template, kwargs, type(builder).__qualname__


def _template(builder: ContinuousTokenBuilder) -> _Template | None:
    """The probed template of ``builder``, or None when its class changes the hooks."""
    cls = type(builder)
    if any(getattr(cls, h) is not getattr(ContinuousTokenBuilder, h) for h in _HOOKS):
        return None
    if "user" not in builder.allowed_append_roles:  # VERL's path refuses it: let it say so
        return None
    key = _key(builder)
    template = _TEMPLATES.get(key)
    if template is None:
        template = _TEMPLATES[key] = _Template(builder)
    return template if template.usable else None


def observation_ids(builder: ContinuousTokenBuilder, message: dict[str, Any]) -> list[int] | None:
    """The ids VERL's builder appends for one user ``message`` (generation prompt included),
    rendered once; None when only VERL's own path can say (see the module docstring)."""
    if message.get("role") != "user" or not isinstance(message.get("content"), str):
        return None
    template = _template(builder)
    return template.ids(message) if template else None


def first_prompt_ids(builder: ContinuousTokenBuilder, messages: list[dict[str, Any]]) -> list[int]:
    """``builder.build_initial_tokens(messages)``, rendered once per conversation (the copies of
    a row share it), in the calling thread."""
    key = (_key(builder), json.dumps(messages, sort_keys=True, default=str))
    ids = _FIRST.get(key)
    if ids is None:
        ids = _FIRST[key] = tuple(builder.build_initial_tokens(messages))
        if len(_FIRST) > _CACHE_SIZE:
            _FIRST.popitem(last=False)
    else:
        _FIRST.move_to_end(key)
    return list(ids)
