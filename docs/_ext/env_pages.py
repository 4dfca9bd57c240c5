"""The generated parts of the env pages (``docs/envs/*.md``), written into the Markdown itself
so that a page reads the same on a Git host (GitHub, GitLab) as on the docs site: each part
sits between marker comments,

    <!-- generated: KIND ENV_ID (python docs/_ext/env_pages.py writes this; do not edit) -->
    ...
    <!-- /generated -->

and is rendered from the code by :data:`KINDS`:

- ``summary``: the box at the top of the page (ids and versions, how to build it, agents,
  action and observation spaces, reward, render modes and a picture of the env), as
  PettingZoo's and Gymnasium's env pages open (:func:`env_summary.env_summary`); a picture
  ``render_mode="rgb_array"`` draws goes to ``docs/images/envs/ENV_ID.png``;
- ``observation``: what ``robot_0`` sees and may do at the start of seed 0;
- ``baselines``: the scripted baselines on the 100 evaluation seeds, as ``teamgym baselines
  --env ENV_ID`` prints them (fingerprints included);
- ``args``: the constructor arguments (effective defaults, types, meanings, presets), as
  ``teamgym envs ENV_ID`` prints them.

``python docs/_ext/env_pages.py`` rewrites every page's blocks (and pictures);
``--check`` only says which are out of date (exit 1). ``tests/test_env_pages.py`` fails when
one is, so a change to an env that the pages show cannot land without them. Sphinx renders the
blocks as the Markdown they are: there is one rendering, this module's.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from env_summary import env_summary, picture_pixels, picture_png, table_cell

DOCS = Path(__file__).resolve().parents[1]
PAGES = DOCS / "envs"
PICTURES = DOCS / "images" / "envs"
"""Where a ``summary`` block's ``rgb_array`` picture is written (``ENV_ID.png``)."""

BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<kind>[a-z]+) (?P<env>[A-Za-z0-9_.:-]+)[^\n]*-->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /generated -->)",
    re.S,
)
"""A generated block: its opening marker (kind and env id), its body, its closing marker."""


def opening(kind: str, env_id: str) -> str:
    """The marker line a block of ``kind`` for ``env_id`` opens with."""
    return (
        f"<!-- generated: {kind} {env_id} "
        "(python docs/_ext/env_pages.py writes this; do not edit) -->\n"
    )


def picture_path(env_id: str) -> Path:
    """Where the ``summary`` block of ``env_id`` keeps its ``rgb_array`` picture."""
    return PICTURES / f"{env_id}.png"


def summary(env_id: str) -> str:
    """The box at the top of an env page: a picture of the env (``render()`` at the start of
    seed 0: a PNG beside the page, or the ``ansi`` text) above a label | value table of what
    the code says it is, in a ``<div>`` the docs' stylesheet draws as a box."""
    s = env_summary(env_id)
    out = ['<div class="teamgym-env-summary">', ""]
    if s.picture is not None:
        out += ['<div class="teamgym-env-picture">', ""]
        if s.picture_mode == "rgb_array":
            alt = f"{s.env_id} at the start of seed 0 (render_mode='rgb_array')"
            out += [f"![{alt}](../images/envs/{env_id}.png)", ""]
        else:
            out += ["```text", str(s.picture).rstrip("\n"), "```", ""]
        doc = f": {s.picture_doc}" if s.picture_doc else ""
        out += [f'`env.render()` after `reset(seed=0)`, `render_mode="{s.picture_mode}"`{doc}']
        out += ["", "</div>", ""]
    out += ["| | |", "| --- | --- |"]
    out += [f"| {table_cell(label)} | {table_cell(value)} |" for label, value in s.rows()]
    out += ["", "</div>"]
    return "\n".join(out)


def observation(env_id: str) -> str:
    """What ``robot_0`` sees and may do at the start of seed 0 (registered defaults)."""
    from teamgym.envs import make

    env = make(env_id)
    obs, infos = env.reset(seed=0)
    env.close()
    text = f"{obs['robot_0']}\n\n# infos['robot_0']['valid_actions']\n"
    text += repr(infos["robot_0"]["valid_actions"])
    return f"```text\n{text}\n```"


def baselines(env_id: str) -> str:
    """The env's scripted baselines on the 100 evaluation seeds, as ``teamgym baselines --env
    ENV_ID`` prints them."""
    from teamgym.benchmarks.baselines import run_baselines

    rows = ["| baseline | success | score | steps | team return | collab. | fingerprint |"]
    rows.append("|" + " --- |" * 7)
    for r in run_baselines([env_id], episodes=100):
        collab = "-" if r.collaboration_index is None else f"{r.collaboration_index:.3f}"
        rows.append(
            f"| `{r.baseline}` | {r.success_rate:.0%} | {r.mean_score:.3f} | "
            f"{r.mean_length:.1f} | {r.mean_team_return:.3f} | {collab} | `{r.fingerprint}` |"
        )
    return "\n".join(rows)


def args(env_id: str) -> str:
    """The arguments table of a registered env (``teamgym envs ENV_ID``'s)."""
    from teamgym.envs.describe import env_arguments

    arguments = env_arguments(env_id)
    difficulties = list(dict.fromkeys(d for a in arguments for d in a.presets))
    head = ["argument", "default", "type", "meaning", *difficulties]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for a in arguments:
        cells = [f"`{a.name}`", f"`{a.default}`", f"`{a.type}`" if a.type else "", a.meaning]
        cells += [f"`{a.presets[d]}`" if d in a.presets else "" for d in difficulties]
        rows.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    return "\n".join(rows)


KINDS: dict[str, Callable[[str], str]] = {
    "summary": summary,
    "observation": observation,
    "baselines": baselines,
    "args": args,
}
"""What each kind of block is rendered by: env id -> its Markdown."""


def blocks(text: str) -> list[tuple[str, str, str]]:
    """The generated blocks of a page: (kind, env id, body), in order."""
    out = []
    for m in BLOCK.finditer(text):
        if m["kind"] not in KINDS:
            raise ValueError(f"unknown generated block {m['kind']!r}; kinds: {', '.join(KINDS)}")
        out.append((m["kind"], m["env"], m["body"]))
    return out


def regenerate(text: str) -> str:
    """``text`` with every generated block rendered anew from the code."""

    def fresh(m: re.Match[str]) -> str:
        body = KINDS[m["kind"]](m["env"])
        return opening(m["kind"], m["env"]) + body.rstrip("\n") + "\n" + m["close"]

    blocks(text)  # an unknown kind raises before anything is rendered
    return BLOCK.sub(fresh, text)


def pictures(text: str) -> dict[Path, np.ndarray]:
    """The pictures a page's ``summary`` blocks show: file -> the ``rgb_array`` render (not
    yet scaled up) it must hold."""
    out = {}
    for kind, env_id, _ in blocks(text):
        if kind == "summary":
            s = env_summary(env_id)
            if s.picture_mode == "rgb_array":
                out[picture_path(env_id)] = np.asarray(s.picture)
    return out


def stale(page: Path) -> list[str]:
    """What of ``page`` is out of date: its Markdown, and pictures that are missing or draw
    something else than the env renders now; [] when everything is current."""
    text = page.read_text()
    out = [_shown(page)] if regenerate(text) != text else []
    for path, image in pictures(text).items():
        if not path.exists() or not np.array_equal(picture_pixels(path, image.shape), image):
            out.append(_shown(path))
    return out


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it is in it."""
    return str(path.relative_to(DOCS.parent) if path.is_relative_to(DOCS.parent) else path)


def write(page: Path) -> None:
    """Rewrite ``page``'s generated blocks and pictures from the code."""
    text = page.read_text()
    new = regenerate(text)
    if new != text:
        page.write_text(new)
    for path, image in pictures(new).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(picture_png(image))


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` only check) the generated blocks of the env pages."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="default: docs/envs/*.md")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    given = parser.parse_args(argv)
    pages = given.pages or sorted(PAGES.glob("*.md"))
    if given.check:
        old = [s for page in pages for s in stale(page)]
        for what in old:
            print(f"out of date: {what}")
        if old:
            print("run: python docs/_ext/env_pages.py")
        return 1 if old else 0
    for page in pages:
        write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
