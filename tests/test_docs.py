"""The docs site builds with warnings as errors, and its Python examples run; the built pages
hold what the code says (the env pages' summary boxes, the index's first steps, tables that
wrap)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from teamgym.envs import make, registry
from teamgym.envs.registration import latest_versions

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").rglob("*.md"))
#: Every env the registry holds, at its newest version: each has a page under docs/envs/.
ENV_IDS = latest_versions(sorted(registry()))


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module's checks of its pages (``sphinx-build -W``)."""
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "docs", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_docs_build_with_warnings_as_errors(built_docs: Path) -> None:
    """``sphinx-build -W docs``, the README's command: a broken link, a page outside every
    toctree or a docstring Sphinx cannot read fails here; the env pages' generated tables
    (arguments, an observation, the baselines) come out of the code."""
    foraging = (built_docs / "envs" / "foraging.html").read_text()
    assert "30955558b078d2be" in foraging  # the random baseline's fingerprint, as in the README
    assert "max_agent_level" in foraging and "You are robot_0" in foraging
    footer = re.search(r'<div class="copyright">(.*?)</div>', foraging, re.S)
    assert footer and "teamgym developers" in footer.group(1), "the footer names no holder"


def _text(fragment: str) -> str:
    """The text of an HTML fragment (tags dropped, entities decoded, spaces collapsed)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _summary_box(page: str) -> tuple[str, dict[str, list[str]]]:
    """(the picture's HTML, label -> the values of its rows) of an env page's summary box, which
    must come straight after the page's title."""
    title_end = page.index("</h1>")
    start = page.find('<div class="teamgym-env-summary', title_end)
    assert start != -1, "the page has no summary box"
    assert "<p>" not in page[title_end:start], "the summary box does not open the page"
    table = page.index("<table", start)
    body = page[table : page.index("</table>", table)]
    rows: dict[str, list[str]] = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
        cells = [_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if not cells:
            continue  # the Markdown table's empty header row (<th>), hidden by the stylesheet
        label, value = cells
        rows.setdefault(label, []).append(value)
    return page[start:table], rows


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_env_has_a_page_that_opens_with_its_summary_block(env_id: str) -> None:
    """The quick check, without a build: ``docs/envs/NAME.md`` exists, is in the index's
    toctree, and its first block after the title is the generated summary of this id (the
    Markdown itself holds it, so the page reads the same on a Git host;
    ``tests/test_env_pages.py`` checks it is up to date)."""
    name = env_id.rpartition("-v")[0]
    source = REPO / "docs" / "envs" / f"{name}.md"
    assert source.exists(), f"{env_id} has no page {source.relative_to(REPO)}"
    assert f"envs/{name}\n" in (REPO / "docs" / "index.md").read_text(), "not in the toctree"
    blocks = source.read_text().split("\n\n")
    assert blocks[0].startswith("# ")
    assert blocks[1].startswith(f"<!-- generated: summary {env_id} "), blocks[1][:80]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_env_page_opens_with_its_summary_box(built_docs: Path, env_id: str) -> None:
    """Each env's page (``docs/envs/NAME.md``) opens with the box PettingZoo's and Gymnasium's
    env pages open with, its values those the code gives: agents, spaces, render modes, and a
    picture of the env where it renders one (issue 39)."""
    name = env_id.rpartition("-v")[0]
    page = (built_docs / "envs" / f"{name}.html").read_text()
    picture, rows = _summary_box(page)
    env, vector = make(env_id), make(env_id, obs_mode="vector")
    agent = env.possible_agents[0]
    assert rows["Creation"] == [f'make("{env_id}")'], rows["Creation"]
    agents, count = rows["Agents"]
    assert agents == f"agents= {env.possible_agents!r}", agents
    assert count.split()[0] == str(len(env.possible_agents)), count
    assert f"up to {env.action_space(agent).max_length:,} characters" in rows["Actions"][0]
    assert rows["Actions (vector)"][0].startswith(repr(vector.action_space(agent))), rows
    mask = vector.observation_space(agent)["action_mask"]
    assert f"action_mask {mask!r}" in rows["Observations (vector)"][0], rows
    versions = [v for v in registry() if v.rpartition("-v")[0] == name]
    assert all(v in rows["Versions"][0] for v in versions), (versions, rows["Versions"])
    modes = env.metadata["render_modes"]
    assert rows["Render modes"] == [", ".join(modes)], rows["Render modes"]
    if "rgb_array" in modes:
        src = re.search(r'<img[^>]*src="([^"]+\.png)"', picture)
        assert src, "the env renders rgb_array but its box has no picture"
        shown = make(env_id, render_mode="rgb_array")
        shown.reset(seed=0)
        height, width = shown.render().shape[:2]
        with Image.open(built_docs / "envs" / src.group(1)) as png:
            scale = png.width // width
            assert scale >= 1 and png.size == (width * scale, height * scale), (png.size, width)
    elif "ansi" in modes:
        shown = make(env_id, render_mode="ansi")
        shown.reset(seed=0)
        pre = re.search(r"<pre>(.*?)</pre>", picture, re.S)
        assert pre, "the env renders ansi but its box shows no render"
        assert html.unescape(re.sub(r"<[^>]+>", "", pre.group(1))).strip() == shown.render()


def test_the_index_gives_the_install_line_and_a_first_episode(built_docs: Path) -> None:
    """The site's front page shows how to install (the README's own command, so they cannot
    drift) and a first episode in Python (run by ``test_python_examples_run``); the extras it
    names exist."""
    index = (built_docs / "index.html").read_text()
    shells = [_text(b) for b in re.findall(r'<div class="highlight-bash.*?</pre>', index, re.S)]
    install = "python3 -m venv .venv && .venv/bin/pip install -e ."
    assert install in shells, shells
    assert install in (REPO / "README.md").read_text()
    code = [_text(b) for b in re.findall(r'<div class="highlight-python.*?</pre>', index, re.S)]
    assert any("make(" in c and "env.step(" in c for c in code), "no first episode on the index"
    extras = re.findall(r'"\.\[(\w[\w-]*)\]"', (REPO / "docs" / "index.md").read_text())
    optional = re.search(
        r"\[project\.optional-dependencies\](.*?)\n\[", (REPO / "pyproject.toml").read_text(), re.S
    )
    assert optional and extras, "no extras named on the index"
    declared = set(re.findall(r"^([\w-]+) = ", optional.group(1), re.M))
    assert set(extras) <= declared, (
        f"the index names extras pyproject lacks: {set(extras) - declared}"
    )
    assert "toctree-wrapper" in index and "envs/foraging.html" in index  # the toctree stays


def test_wide_tables_wrap_instead_of_scrolling(built_docs: Path) -> None:
    """The VERL guide's knob table fits the page (issue 39: it was cut off at 1280 px wide, its
    scrollbar far down the page): a long dotted key has no place where a line may break, so the
    key column could not get narrower than it; long words of inline code in tables get soft
    breaks (``<wbr>``) after their dots and underscores."""
    verl = (built_docs / "guides" / "verl.html").read_text()
    key = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
    codes = re.findall(r"<td><p>(<code.*?</code>)", verl)
    cell = next((c for c in codes if _text(c) == key), None)
    assert cell and cell.count("<wbr>") >= 4, (
        f"the knob table's long key has no soft breaks: {cell}"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO / "docs")))
def test_python_examples_run(page: Path, run_python) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
    for block in blocks:
        if "MyEnv" in block or "mypkg" in block:
            continue  # placeholders for the reader's own code
        run_python(block, cwd=REPO)


def test_the_commands_shown_write_only_where_git_ignores() -> None:
    """Every ``--out``/``--json`` path a shown command writes, relative to the clone, is one git
    ignores (issue 39: ``--json paired.json`` left an untracked file in the repository root)."""
    shown: set[str] = set()
    for page in [*PAGES, REPO / "README.md"]:
        for block in re.findall(r"```(?:bash|console|sh)\n(.*?)```", page.read_text(), re.DOTALL):
            shown |= set(re.findall(r"--(?:out|json) ([^\s`]+)", block))
    relative = sorted(p for p in shown if not p.startswith(("/", "~", "$")) and not p.isupper())
    assert "runs/paired.json" in relative, relative  # the pages still show the commands checked
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", *relative], cwd=REPO, capture_output=True, text=True
    )
    ignored = set(proc.stdout.split())
    assert not set(relative) - ignored, f"not ignored by git: {sorted(set(relative) - ignored)}"
