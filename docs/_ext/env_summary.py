"""What the summary box at the top of an env page says, read from the env built with its
registered defaults (:func:`env_summary`), and its picture as a PNG; :mod:`env_pages` writes
it into the page."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

#: Where a picture of an env comes from, best first: ``render()`` in the first of these modes that
#: the env's ``metadata["render_modes"]`` lists.
PICTURE_MODES = ("rgb_array", "ansi")
#: Width an ``rgb_array`` picture is scaled up to, at least (whole pixels, nearest neighbour).
PICTURE_WIDTH = 300


def table_cell(text: str) -> str:
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


def picture_png(image: np.ndarray) -> bytes:
    """An RGB array as a PNG, scaled up (nearest neighbour) to at least :data:`PICTURE_WIDTH`
    pixels wide: the summary block's picture beside the page."""
    from PIL import Image

    scale = max(1, -(-PICTURE_WIDTH // image.shape[1]))
    big = np.repeat(np.repeat(np.asarray(image, dtype=np.uint8), scale, 0), scale, 1)
    buf = io.BytesIO()
    Image.fromarray(big).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def picture_pixels(path: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """The RGB array of ``shape`` a picture written by :func:`picture_png` was scaled up from
    (None when the file is not such a scaling of that shape)."""
    from PIL import Image

    with Image.open(path) as png:
        big = np.asarray(png.convert("RGB"))
    height, width = shape[:2]
    scale = big.shape[1] // width
    if scale < 1 or big.shape[:2] != (height * scale, width * scale):
        return None
    return big[::scale, ::scale]
