"""Sphinx directive of the teamgym docs: ``teamgym-env-args ID`` renders an env's constructor
arguments (effective defaults, types, meanings, presets) from the code, as ``teamgym envs ID``
prints them, so an env page cannot drift from its constructor."""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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


def setup(app: Any) -> dict[str, Any]:
    """Register the directives."""
    app.add_directive("teamgym-env-args", EnvArgs)
    app.add_directive("teamgym-env-observation", EnvObservation)
    app.add_directive("teamgym-env-baselines", EnvBaselines)
    return {"parallel_read_safe": True}
