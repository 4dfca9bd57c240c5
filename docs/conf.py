"""Sphinx configuration of the teamgym docs (MyST Markdown, the Furo theme).

Build: ``.venv/bin/sphinx-build -W docs docs/_build`` (warnings are errors, as in CI); preview:
open ``docs/_build/index.html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

import teamgym

project = "teamgym"
release = teamgym.__version__
# The footer reads "Copyright ©" and nothing when this is unset (issue 39).
copyright = "2026, the teamgym developers; MIT license"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "teamgym_docs"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"teamgym {release}"
# teamgym.css: the env pages' summary box.
html_static_path = ["_static"]
html_css_files = ["teamgym.css"]
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# The docstrings cross-reference with RST roles that Sphinx resolves when it can; a target it
# cannot find (a private helper, a class of another package) stays plain text, not an error.
nitpicky = False
suppress_warnings = ["myst.header"]
