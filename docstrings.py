"""Reading the words the code already holds, so flags, YAML comments, ``teamgym envs ID`` and the
docs say what the docstrings say instead of a copy that drifts.

:func:`field_docs` reads the docstring under each field of a dataclass (Python keeps none at run
time, so they come from the source); :func:`args_section` reads a Google-style ``Args:``
section. Both give one line per name, without reST quotes.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap

__all__ = ["args_section", "field_docs"]


def _one_line(text: str) -> str:
    return " ".join(text.replace("``", "").split())


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of ``cls``, on one line and without reST quotes."""
    class_def = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(class_def, ast.ClassDef), f"{cls.__name__}'s source is not a class"
    docs = {}
    for node, doc in itertools.pairwise(class_def.body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(doc, ast.Expr)
            and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)
        ):
            docs[node.target.id] = _one_line(doc.value.value)
    return docs


def args_section(doc: str) -> dict[str, str]:
    """``name -> words`` from the ``Args:`` section of a docstring (continuation lines joined;
    inline code keeps single backquotes)."""
    lines = doc.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return {}
    meanings: dict[str, str] = {}
    indent, current = None, None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        if depth < indent:
            break
        match = re.match(r"(\w+)(?: \([^)]*\))?: ?(.*)", line.strip())
        if depth == indent and match:
            current = match.group(1)
            meanings[current] = match.group(2)
        elif current is not None:
            meanings[current] += " " + line.strip()
    return {name: re.sub(r"``([^`]+)``", r"`\1`", words) for name, words in meanings.items()}
