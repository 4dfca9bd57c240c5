"""The episode loop's settings: one frozen type, from the YAML VERL reads to the reward rule.

:class:`AgentLoopSettings` owns every setting of ``TeamEpisodeLoop`` and its defaults; the shipped
``config/agent_loop.yaml`` is :func:`render_yaml` of them (``python -m
teamgym.adapters.verl.settings`` rewrites it), and :meth:`~AgentLoopSettings.entry` and
:meth:`~AgentLoopSettings.from_entry` are the one dict form a run's file and the GPU path use.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf

from teamgym.docstrings import field_docs
from teamgym.envs.sharing import RewardSharing
from teamgym.names import DEFAULT_FORCED_MOVES, EPISODE_LOOP_NAME

__all__ = [
    "AGENT_LOOP_CONFIG",
    "LOOP_TARGET",
    "AgentLoopSettings",
    "render_yaml",
    "write_agent_loop_yaml",
]

#: The shipped agent-loop registry file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``).
AGENT_LOOP_CONFIG = Path(__file__).resolve().parent / "config" / "agent_loop.yaml"
#: What VERL instantiates for our registry entry (a string: importing it here would load verl).
LOOP_TARGET = "teamgym.adapters.verl.episode_loop.TeamEpisodeLoop"
#: How the dict form's scalars are read (a hand-written file may say 60 for 60.0, or 0 for false).
_CASTS = {
    "max_reply_tokens": int,
    "turn_timeout": float,
    "mask_stop": bool,
    "seed_requests": bool,
}
#: Settings of the retired per-agent loop (its episode hub), refused with the reason.
_RETIRED = ("hub", "join_timeout")
#: Keys of a registry entry that are VERL's and Hydra's, not settings of ours.
_ENTRY_KEYS = {
    "name": "the dataset rows' agent_name",
    "_target_": "the loop class VERL instantiates",
    "_recursive_": "VERL builds a loop per trajectory: skip Hydra's walk over its arguments",
}


@dataclasses.dataclass(frozen=True)
class AgentLoopSettings:
    """Settings of ``TeamEpisodeLoop``: the keys of its agent-loop YAML entry, checked and typed.

    >>> s = AgentLoopSettings.from_dict({"sharing": {"weight": 0.25}, "stop": ["</action>"]})
    >>> s.sharing.weight, s.stop, s.forced_moves
    (0.25, ('</action>',), 'auto')
    >>> AgentLoopSettings.from_dict(s.to_dict()) == s
    True
    """

    sharing: RewardSharing = dataclasses.field(default_factory=RewardSharing)
    """How individual rewards mix into each agent's (RewardSharing fields)."""
    max_reply_tokens: int = 256
    """Cap on one turn's reply (the trajectory's cap is rollout.response_length)."""
    turn_timeout: float = 600.0
    """Seconds a turn waits for the slowest reply before ending the episode."""
    forced_moves: Literal["model", "auto"] = DEFAULT_FORCED_MOVES
    """auto: a turn with one valid action is played without the model (response_mask 0)."""
    stop: tuple[str, ...] = ()
    """Stop strings, e.g. ["</action>"]: a reply ends with its command (vLLM stop, kept in the output)."""
    mask_stop: bool = True
    """The tokens that spell a stop string get response_mask 0: context, not trained."""
    seed_requests: bool = True
    """vLLM: each request its own sampling seed, so runs repeat (false: faster sampling on GPU)."""

    def __post_init__(self) -> None:
        if self.forced_moves not in ("model", "auto"):
            raise ValueError(f"forced_moves must be 'model' or 'auto', got {self.forced_moves!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentLoopSettings:
        """Settings from their dict form (a YAML entry's keys, JSON, Hydra nodes); missing keys
        take their defaults, an unknown key raises ``TypeError`` listing the known ones."""
        if isinstance(data, DictConfig):  # `_recursive_: false` hands nodes over as they are
            data = OmegaConf.to_container(data, resolve=True)  # type: ignore[assignment]
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(known))
        retired = sorted(set(unknown) & set(_RETIRED))
        if retired:
            raise TypeError(
                f"agent-loop settings {retired} are gone with the per-agent rows (one row is one "
                "episode now, played by one coroutine): delete them from the YAML, or rewrite it "
                "with `teamgym.adapters.verl.settings.write_agent_loop_yaml`"
            )
        if unknown:
            raise TypeError(f"unknown agent-loop settings {unknown}; known: {sorted(known)}")
        values = dict(data)
        if values.get("sharing") is None:
            values.pop("sharing", None)
        elif not isinstance(values["sharing"], RewardSharing):
            values["sharing"] = RewardSharing(**_plain(values["sharing"]))
        for name in set(values) & set(_CASTS):
            values[name] = _CASTS[name](values[name])
        if "stop" in values:
            values["stop"] = tuple(str(s) for s in (_plain(values["stop"]) or []) if s)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The dict form (JSON- and YAML-ready): what :meth:`from_dict` reads."""
        out = dataclasses.asdict(self)
        out["stop"] = list(self.stop)
        return out

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> AgentLoopSettings:
        """Settings from a whole registry entry (VERL's and Hydra's keys left out)."""
        return cls.from_dict({k: v for k, v in entry.items() if k not in _ENTRY_KEYS})

    def entry(self, target: str = LOOP_TARGET) -> dict[str, Any]:
        """Our agent-loop registry entry with these settings: the item of the YAML file, and
        what the GPU path ships to Ray workers as JSON. ``target``: the loop class VERL
        instantiates (a user's subclass of ``TeamEpisodeLoop`` named in their YAML)."""
        return {
            "name": EPISODE_LOOP_NAME,
            "_target_": target,
            "_recursive_": False,
            **self.to_dict(),
        }

    def to_json(self, target: str = LOOP_TARGET) -> str:
        """:meth:`entry` as JSON (the environment variable of the GPU path)."""
        return json.dumps(self.entry(target))

    @classmethod
    def from_json(cls, text: str) -> tuple[AgentLoopSettings, str]:
        """The inverse of :meth:`to_json`: (settings, loop class)."""
        entry = json.loads(text)
        return cls.from_entry(entry), str(entry.get("_target_", LOOP_TARGET))


def render_yaml(settings: AgentLoopSettings | None = None) -> str:
    """The agent-loop registry file for ``settings`` (the defaults: the shipped file), each key
    commented with its field's docstring."""
    settings = settings or AgentLoopSettings()
    notes = {**_ENTRY_KEYS, **field_docs(AgentLoopSettings)}
    shared = field_docs(RewardSharing)
    lines = [
        "# VERL agent-loop registry entry for teamgym (actor_rollout_ref.rollout.agent.agent_loop_config_path).",
        "# Generated from teamgym.adapters.verl.settings.AgentLoopSettings: edit the class, then run",
        "# `python -m teamgym.adapters.verl.settings`. Keys besides name/_target_/_recursive_ are",
        "# passed to the loop as keyword arguments.",
    ]
    entries = [settings.entry()]
    for line in OmegaConf.to_yaml(entries).splitlines():
        depth = len(line) - len(line.lstrip(" -"))  # 2: a key of the entry, 4: of sharing
        key = line.lstrip(" -").split(":", 1)[0]
        note = {2: notes, 4: shared}.get(depth, {}).get(key)
        lines.append(f"{line:<28}  # {note}" if note else line)
    return "\n".join(lines) + "\n"


def write_agent_loop_yaml(
    path: str | Path, settings: AgentLoopSettings | None = None, **changes: Any
) -> Path:
    """Write an agent-loop registry file for ``settings`` (the defaults) with ``changes`` (dict
    forms, e.g. ``sharing={"weight": 0.5}``) applied; returns ``path``. The one way to make one."""
    base = (settings or AgentLoopSettings()).to_dict()
    final = AgentLoopSettings.from_dict({**base, **changes})  # an unknown key raises TypeError
    path = Path(path)
    path.write_text(render_yaml(final))
    return path


def _plain(value: Any) -> Any:
    """Hydra nodes as plain containers (anything else as it is)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


if __name__ == "__main__":
    AGENT_LOOP_CONFIG.write_text(render_yaml())
    print(f"wrote {AGENT_LOOP_CONFIG}")
