"""The teamgym docs' Sphinx extension: soft breaks in the long inline code of tables
(:func:`break_table_literals`).

The env pages' generated parts (summary box, an observation, the baselines, the arguments) are
not directives: :mod:`env_pages` writes them into the Markdown, between ``<!-- generated: ...
-->`` markers, so that a page reads the same on a Git host as here.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes

#: Where a long word of an inline literal may break: after a dot, an underscore or a slash that
#: a letter follows (``actor_rollout_ref.model``, not ``-1.0``).
_LITERAL_BREAK = re.compile(r"(?<=[._/])(?=[A-Za-z])")
#: Words of inline literals longer than this get soft breaks; shorter ones stay whole.
LONG_LITERAL_WORD = 24


def break_table_literals(app: Any, doctree: nodes.document, docname: str) -> None:
    """Give each long word of an inline literal in a table soft breaks (``<wbr>``) after its dots,
    underscores and slashes, so that a long key (``actor_rollout_ref.actor.ppo_mini_batch_size``)
    can wrap there: without a place to break (dots and underscores are none) its column cannot
    get narrower than the key, and the theme scrolls a table too wide for the page sideways."""
    if app.builder.format != "html":
        return
    for table in doctree.findall(nodes.table):
        for literal in list(table.findall(nodes.literal)):
            if len(literal) != 1 or not isinstance(literal[0], nodes.Text):
                continue
            pieces: list[nodes.Node] = []
            for word in filter(None, re.split(r"(\s+)", literal.astext())):
                parts = _LITERAL_BREAK.split(word) if len(word) > LONG_LITERAL_WORD else [word]
                for i, part in enumerate(parts):
                    if i:
                        pieces.append(nodes.raw("", "<wbr>", format="html"))
                    pieces.append(nodes.Text(part))
            if any(isinstance(p, nodes.raw) for p in pieces):
                literal.children = []
                literal.extend(pieces)


def setup(app: Any) -> dict[str, Any]:
    """Register the table literals' soft breaks."""
    app.connect("doctree-resolved", break_table_literals)
    return {"parallel_read_safe": True}
