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

import base64
import io
import re
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from docutils import nodes
from sphinx.util.docutils import SphinxDirective

#: Where a picture of an env comes from, best first: ``render()`` in the first of these modes that
#: the env's ``metadata["render_modes"]`` lists.
PICTURE_MODES = ("rgb_array", "ansi")
#: Width an ``rgb_array`` picture is scaled up to, at least (whole pixels, nearest neighbour).
PICTURE_WIDTH = 300


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@dataclass(frozen=True)
class EnvSummary:
    """What the box at the top of an env page says, read from the env built with its registered
    defaults (``make(ID)`` in text mode, ``make(ID, obs_mode="vector")`` for the vector spaces)."""

    env_id: str
    versions: list[tuple[str, str]]
    """(id, one-line description) of every registered version of the env, newest first."""
    entry_point: str
    """The registered ``"module:Class"``."""
    registered_kwargs: dict[str, Any]
    """What the registered id sets beyond the constructor's defaults."""
    gymnasium_id: str | None
    """The id in Gymnasium's registry (one learner, scripted teammates), if it has one."""
    parallel: bool
    """A ``pettingzoo.ParallelEnv``."""
    possible_agents: list[str]
    agent_range: tuple[int, int] | None
    """``num_agents`` the env accepts (its ``min_agents``, ``max_agents``), when it says."""
    reply_max_chars: int | None
    """The text action space's ``max_length`` (``Text``)."""
    vector_action_space: str
    """Vector mode's action space of ``robot_0`` (``Discrete(N)``)."""
    action_names: list[str]
    """Vector mode's actions of ``robot_0``: the index -> text action (and canned message)."""
    observation_max_chars: int | None
    """The text observation space's ``max_length`` (``Text``)."""
    vector_observation: dict[str, str]
    """Key -> space of vector mode's ``Dict`` observation."""
    vector_state: str
    """Vector mode's ``state()``: dtype and shape."""
    sharing_modes: list[str]
    """The reward-sharing modes ``SharedReward`` accepts on this env."""
    success_criterion: str | None
    """What an episode's ``success`` means, as the env says (its ``success_criterion``)."""
    render_modes: list[str]
    picture_mode: str | None
    """The render mode of ``picture`` (see :data:`PICTURE_MODES`); None: the env renders none."""
    picture: str | np.ndarray | None
    """``render()`` after ``reset(seed=0)``: text (``ansi``) or an H x W x 3 uint8 array."""
    picture_doc: str
    """What the env's class says of that render (its own ``_game_render_rgb`` or
    ``_game_render`` docstring; '' when it says nothing)."""

    @property
    def import_line(self) -> str:
        """``from module import Class`` for the env's class."""
        module, _, attr = self.entry_point.partition(":")
        return f"from {module} import {attr.split('.')[0]}"

    @property
    def class_call(self) -> str:
        """The class called as the registered id calls it:
        ``ThorAssemblyEnv(message_feedback=False)``."""
        attr = self.entry_point.partition(":")[2]
        args = ", ".join(f"{k}={v!r}" for k, v in self.registered_kwargs.items())
        return f"{attr}({args})"

    def rows(self) -> list[tuple[str, str]]:
        """(label, Markdown) rows of the box."""
        n = len(self.possible_agents)
        team = f"{n}"
        if self.agent_range is not None:
            low, high = self.agent_range
            team += " (always)" if low == high else f" (`num_agents`: {low}–{high})"
        versions = "; ".join(
            f"`{v}`" + (" (this page)" if v == self.env_id else f": {about}")
            for v, about in self.versions
        )
        rows = [
            ("Import", "`from teamgym.envs import make`"),
            ("Creation", f'`make("{self.env_id}")`'),
            ("Class", f"`{self.import_line}`, then `{self.class_call}`"),
        ]
        if self.gymnasium_id is not None:
            rows.append(
                (
                    "Gymnasium",
                    f'`gymnasium.make("{self.gymnasium_id}", obs_mode="vector")` '
                    "(one learner, scripted teammates)",
                )
            )
        rows += [
            ("Versions", versions),
            (
                "Parallel API",
                "Yes (`pettingzoo.ParallelEnv`); turn by turn: `parallel_to_aec(env)`"
                if self.parallel
                else "No",
            ),
            ("Manual control", f"`teamgym play {self.env_id}`"),
            ("Agents", f"`agents= {self.possible_agents!r}`"),
            ("Agents", team),
        ]
        if self.reply_max_chars is not None:
            rows.append(
                (
                    "Actions",
                    f"text (default): a reply, `str` (`Text`, up to {self.reply_max_chars:,} "
                    "characters) holding "
                    "`<action>…</action>` and an optional `<say>…</say>`; the action one of "
                    '`infos[agent]["valid_actions"]`',
                )
            )
        rows += [
            (
                "Actions (vector)",
                f'`{self.vector_action_space}` with `obs_mode="vector"`, named by '
                "`env.action_names(agent)`",
            ),
            ("Action values", _vocabulary(self.action_names)),
        ]
        if self.observation_max_chars is not None:
            rows.append(
                (
                    "Observations",
                    f"text (default): `str` (`Text`, up to {self.observation_max_chars:,} "
                    "characters): feedback, "
                    "the agent's view, messages, valid actions",
                )
            )
        rows += [
            (
                "Observations (vector)",
                "`Dict`: " + ", ".join(f"`{k}` `{v}`" for k, v in self.vector_observation.items()),
            ),
            ("State", f"`env.state()`: `str` (text), `{self.vector_state}` (vector)"),
            (
                "Reward",
                'individual, per agent (also `infos[agent]["individual_reward"]`); '
                "`SharedReward(env, RewardSharing(mode=...))` shares it: "
                + ", ".join(f"`{m}`" for m in self.sharing_modes),
            ),
        ]
        if self.success_criterion:
            rows.append(("Success", f"`metrics.success`: {self.success_criterion}"))
        rows.append(("Render modes", ", ".join(f"`{m}`" for m in self.render_modes) or "none"))
        return rows


def env_summary(env_id: str) -> EnvSummary:
    """The summary of a registered env, read from the code and the env itself."""
    from pettingzoo import ParallelEnv

    from teamgym.envs import RewardSharing, SharedReward, make, registry, spec
    from teamgym.envs.registration import gymnasium_id as gym_id
    from teamgym.envs.sharing import sharing_modes

    env_spec = spec(env_id)
    name = env_id.rpartition("-v")[0]
    versions = sorted(
        (v for v in registry() if v.rpartition("-v")[0] == name),
        key=lambda v: int(v.rpartition("-v")[2]),
        reverse=True,
    )
    env = make(env_id)
    vector = make(env_id, obs_mode="vector")
    agent = env.possible_agents[0]
    vector.reset(seed=0)
    modes = []
    for mode in sharing_modes():
        probe = make(env_id)
        try:
            SharedReward(probe, RewardSharing(mode=mode))
        except ValueError:
            continue  # e.g. ``difference`` without counterfactual rewards
        else:
            modes.append(mode)
        finally:
            probe.close()
    render_modes = list(env.metadata.get("render_modes", []))
    picture_mode = next((m for m in PICTURE_MODES if m in render_modes), None)
    picture, picture_doc = None, ""
    if picture_mode is not None:
        hook = {"rgb_array": "_game_render_rgb", "ansi": "_game_render"}[picture_mode]
        own = getattr(type(env), hook, None) if hook in vars(type(env)) else None
        picture_doc = " ".join((getattr(own, "__doc__", None) or "").split())
        shown = make(env_id, render_mode=picture_mode)
        shown.reset(seed=0)
        picture = shown.render()
        shown.close()
    state = np.asarray(vector.state())
    gym = gym_id(env_id)
    summary = EnvSummary(
        env_id=env_id,
        versions=[(v, spec(v).summary()) for v in versions],
        entry_point=str(env_spec.entry_point),
        registered_kwargs=dict(env_spec.kwargs),
        gymnasium_id=gym if gym in gymnasium.registry else None,
        parallel=isinstance(env, ParallelEnv),
        possible_agents=list(env.possible_agents),
        agent_range=(env.min_agents, env.max_agents) if hasattr(env, "min_agents") else None,
        reply_max_chars=getattr(env.action_space(agent), "max_length", None),
        vector_action_space=repr(vector.action_space(agent)),
        action_names=list(vector.action_names(agent)),
        observation_max_chars=getattr(env.observation_space(agent), "max_length", None),
        vector_observation={k: repr(s) for k, s in vector.observation_space(agent).items()},
        vector_state=f"{state.dtype} array of shape {state.shape}",
        sharing_modes=modes,
        success_criterion=getattr(env, "success_criterion", None),
        render_modes=render_modes,
        picture_mode=picture_mode,
        picture=picture,
        picture_doc=picture_doc,
    )
    env.close()
    vector.close()
    return summary


def _vocabulary(names: list[str]) -> str:
    """Action names grouped by their first word: ``north``, ``pick …`` ×4, ``say: …`` ×64."""
    groups: dict[str, list[str]] = {}
    for action in names:
        groups.setdefault(action.split(" ", 1)[0], []).append(action)
    shown = []
    for head, members in groups.items():
        if len(members) == 1:
            shown.append(f"`{members[0]}`")
        else:
            shown.append(f"`{head} …` ×{len(members)}")
    return ", ".join(shown)


def png_data_uri(image: np.ndarray) -> str:
    """An RGB array as a ``data:`` URI of a PNG, scaled up (nearest neighbour) to at least
    :data:`PICTURE_WIDTH` pixels wide: the page carries its picture, no file to copy or keep."""
    from PIL import Image

    scale = max(1, -(-PICTURE_WIDTH // image.shape[1]))
    big = np.repeat(np.repeat(np.asarray(image, dtype=np.uint8), scale, 0), scale, 1)
    buf = io.BytesIO()
    Image.fromarray(big).save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


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
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
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
