"""The env pages (``docs/envs/*.md``) carry their generated parts in the Markdown itself, so
they read the same on a Git host as on the docs site (issue: the Sphinx directives rendered
nothing on GitHub): every env page has its four blocks (summary, an observation, the
baselines, the arguments), and each block (and the summary's picture) is what
``docs/_ext/env_pages.py`` renders from the code now. A failure here says: run
``python docs/_ext/env_pages.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from teamgym.envs import registry
from teamgym.envs.registration import latest_versions

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs" / "_ext"))

import env_pages  # noqa: E402

ENV_IDS = latest_versions(sorted(registry()))
PAGES = sorted((REPO / "docs" / "envs").glob("*.md"))


def page_of(env_id: str) -> Path:
    return REPO / "docs" / "envs" / f"{env_id.rpartition('-v')[0]}.md"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_env_page_has_its_generated_blocks(env_id: str) -> None:
    """The page opens (after its title) with the summary, and has an observation, the
    baselines and the arguments of its env, each once."""
    text = page_of(env_id).read_text()
    found = [(kind, env) for kind, env, _ in env_pages.blocks(text)]
    assert sorted(found) == sorted((kind, env_id) for kind in env_pages.KINDS), found
    title, first = text.split("\n\n", 2)[:2]
    assert title.startswith("# ") and first.startswith(env_pages.opening("summary", env_id))
    assert "{teamgym-env" not in text, "a Sphinx directive left: it renders empty on a Git host"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_generated_blocks_are_up_to_date(page: Path) -> None:
    stale = env_pages.stale(page)
    assert not stale, f"out of date: {stale}; run: python docs/_ext/env_pages.py"


def test_a_stale_block_and_picture_are_found_and_rewritten(tmp_path: Path, monkeypatch) -> None:
    """The check is not vacuous: a block edited by hand, or a picture missing, is reported;
    writing the page mends both."""
    page = tmp_path / "thor-assembly.md"
    whole = page_of("thor-assembly-v0").read_text()
    text = "# A page\n\n" + env_pages.BLOCK.search(whole)[0] + "\n"  # its summary: no baselines
    page.write_text(text.replace("| Creation |", "| Made with |", 1))
    monkeypatch.setattr(env_pages, "PICTURES", tmp_path / "images")
    assert env_pages.stale(page) == [str(page), str(tmp_path / "images" / "thor-assembly-v0.png")]
    env_pages.write(page)
    assert env_pages.stale(page) == [] and page.read_text() == text


def test_the_script_checks_without_writing(capsys) -> None:
    assert env_pages.main(["--check", str(page_of("signal-v1"))]) == 0
    with pytest.raises(ValueError, match="unknown generated block"):
        env_pages.blocks("<!-- generated: nonsense signal-v1 -->\n<!-- /generated -->")
