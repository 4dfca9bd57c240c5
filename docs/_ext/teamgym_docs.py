"""Sphinx directives of the teamgym docs, each rendering part of an env page from the code so that
the page cannot drift from it:

- ``teamgym-env-summary ID``: the box at the top of the page (ids and versions, how to build it,
  agents, action and observation spaces, reward, render modes and a picture of the env), as
  PettingZoo's and Gymnasium's env pages open;
- ``teamgym-env-args ID``: the constructor arguments (effective defaults, types, meanings,
  presets), as ``teamgym envs ID`` prints them;
- ``teamgym-env-observation ID``: what ``robot_0`` sees and may do at the start of an episode;
- ``teamgym-env-baselines ID``: the scripted baselines' figures on the evaluation seeds.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from env_summary import env_summary, png_data_uri, table_cell
from sphinx.util.docutils import SphinxDirective


class EnvSummaryBox(SphinxDirective):
    """The box at the top of an env page: a picture of the env (``render()`` at the start of
    seed 0) above a table of what the code says it is (see :class:`EnvSummary`)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        summary = env_summary(self.arguments[0])
        box = nodes.container(classes=["teamgym-env-summary"])
        if summary.picture is not None:
            picture = nodes.container(classes=["teamgym-env-picture"])
            if summary.picture_mode == "rgb_array":
                uri = png_data_uri(summary.picture)
                alt = f"{summary.env_id} at the start of seed 0 (render_mode='rgb_array')"
                picture += nodes.image(uri=uri, alt=alt)
            else:
                block = nodes.literal_block(str(summary.picture), str(summary.picture))
                block["language"] = "text"
                picture += block
            caption = (
                f'`env.render()` after `reset(seed=0)`, `render_mode="{summary.picture_mode}"`'
                + (f": {summary.picture_doc}" if summary.picture_doc else "")
            )
            self.state.nested_parse(self.content.__class__([caption], source=""), 0, picture)
            box += picture
        box += self._table(summary.rows())
        return [box]

    def _table(self, rows: list[tuple[str, str]]) -> nodes.table:
        """A two-column table without a header row (label, value), each cell Markdown."""
        body = nodes.tbody()
        for label, value in rows:
            row = nodes.row()
            for text in (label, value):
                entry = nodes.entry()
                self.state.nested_parse(self.content.__class__([text], source=""), 0, entry)
                row += entry
            body += row
        group = nodes.tgroup(cols=2)
        group += [nodes.colspec(colwidth=1), nodes.colspec(colwidth=3), body]
        table = nodes.table(classes=["teamgym-env-summary-table"])
        table += group
        return table


class EnvArgs(SphinxDirective):
    """The arguments table of one registered env."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from teamgym.envs.describe import env_arguments

        arguments = env_arguments(self.arguments[0])
        difficulties = list(dict.fromkeys(d for a in arguments for d in a.presets))
        head = ["argument", "default", "type", "meaning", *difficulties]
        rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for a in arguments:
            cells = [f"`{a.name}`", f"`{a.default}`", f"`{a.type}`" if a.type else "", a.meaning]
            cells += [f"`{a.presets[d]}`" if d in a.presets else "" for d in difficulties]
            rows.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
        container = nodes.container()
        self.state.nested_parse(self.content.__class__(rows, source=""), 0, container)
        return container.children


class EnvObservation(SphinxDirective):
    """What ``robot_0`` sees and may do at the start of an episode (seed 0, defaults)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from teamgym.envs import make

        env = make(self.arguments[0])
        obs, infos = env.reset(seed=0)
        text = f"{obs['robot_0']}\n\n# infos['robot_0']['valid_actions']\n"
        text += repr(infos["robot_0"]["valid_actions"])
        env.close()
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


class EnvBaselines(SphinxDirective):
    """The env's scripted baselines on the 100 evaluation seeds, as ``teamgym baselines --env
    ID`` prints them (fingerprints included)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from teamgym.benchmarks.baselines import run_baselines

        rows = ["| baseline | success | score | steps | team return | collab. | fingerprint |"]
        rows.append("|" + " --- |" * 7)
        for r in run_baselines([self.arguments[0]], episodes=100):
            collab = "-" if r.collaboration_index is None else f"{r.collaboration_index:.3f}"
            rows.append(
                f"| `{r.baseline}` | {r.success_rate:.0%} | {r.mean_score:.3f} | "
                f"{r.mean_length:.1f} | {r.mean_team_return:.3f} | {collab} | "
                f"`{r.fingerprint}` |"
            )
        container = nodes.container()
        self.state.nested_parse(self.content.__class__(rows, source=""), 0, container)
        return container.children


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
    """Register the directives and the table literals' soft breaks."""
    app.connect("doctree-resolved", break_table_literals)
    app.add_directive("teamgym-env-summary", EnvSummaryBox)
    app.add_directive("teamgym-env-args", EnvArgs)
    app.add_directive("teamgym-env-observation", EnvObservation)
    app.add_directive("teamgym-env-baselines", EnvBaselines)
    return {"parallel_read_safe": True}
