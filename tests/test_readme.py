"""The README is a newcomer's path: its commands and examples must stay true."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


README = (REPO / "README.md").read_text()


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    commands = re.findall(r"^(python3 -m venv .*)$", README, re.MULTILINE)
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


def test_python_examples_run(run_python) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    assert blocks
    for block in blocks:
        if "MyEnv" in block or "mypkg" in block:
            continue  # placeholders for the reader's own code
        run_python(block, cwd=REPO)


def test_the_main_job_prints_the_readme_table(tmp_path) -> None:
    """``teamgym bench run smoke`` (the first command) reproduces the README's table exactly."""
    import subprocess
    import sys

    block = README.split("The first command\nprints", 1)[1].split("```", 2)[1]
    expected = [line.split() for line in block.splitlines() if re.search(r"[0-9a-f]{16}$", line)]
    assert len(expected) >= 10, block
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "bench", "run", "smoke", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = [
        line.split() for line in proc.stdout.splitlines() if re.search(r"[0-9a-f]{16}\s*$", line)
    ]
    assert printed == expected
    assert (tmp_path / "runs" / "smoke" / "report.md").is_file()
    assert (tmp_path / "runs" / "smoke" / "success.png").is_file()


def _table(title: str) -> tuple[list[str], list[str]]:
    """The header cells and the first data row of the README table whose header starts with
    ``title``."""
    lines = README.split(f"| {title}", 1)[1].splitlines()
    head = [c.strip() for c in lines[0].split("|")[1:-1]]
    row = [c.strip() for c in lines[2].split("|")[1:-1]]
    return head, row[1:]


def test_the_canonical_games_baselines_score_as_the_readme_says() -> None:
    """Hanabi's conventions player (mean points per team size, 100 evaluation seeds) and
    kitchen's planner (soups per layout; the kitchen is deterministic) as the README states."""
    from teamgym.envs import make
    from teamgym.envs.baselines import make_baseline
    from teamgym.envs.lineup import run_episode
    from teamgym.envs.seeds import eval_seeds

    players, points = _table("`hanabi-v0` players")
    for n, stated in zip(players, points, strict=True):
        env = make("hanabi-v0", num_agents=int(n))
        runs = [
            run_episode(env, make_baseline("hanabi-v0", "expert"), s) for s in eval_seeds(0, 100)
        ]
        assert f"{sum(m.extras['points'] for m in runs) / len(runs):.2f}" == stated, n
    layouts, soups = _table("`kitchen-v0` layout")
    for layout, stated in zip(layouts, soups, strict=True):
        env = make("kitchen-v0", layout=layout)
        metrics = run_episode(env, make_baseline("kitchen-v0", "expert"), seed=0)
        assert str(int(metrics.extras["soups"])) == stated, layout


def _layout_block() -> str:
    """The folder table, in docs/development.md (the README links to it)."""
    text = (REPO / "docs" / "development.md").read_text()
    return text.split("<!-- layout -->", 1)[1].split("<!-- /layout -->", 1)[0]


def test_the_layout_names_every_package_folder() -> None:
    """Every subpackage of ``envs/``, ``adapters/`` and ``benchmarks/`` is named in the Layout
    table as ``name/`` (issue 39: it omitted ``hanabi/``, ``kitchen/`` and ``marl/``)."""
    layout = _layout_block()
    missing = []
    assert "`web/`" in layout and "`cli/`" in layout
    for top in ("envs", "adapters", "benchmarks"):
        assert f"`{top}/`" in layout, top
        for init in sorted((REPO / top).glob("*/__init__.py")):
            if f"`{init.parent.name}/`" not in layout:
                missing.append(f"{top}/{init.parent.name}/")
    assert not missing, f"docs/development.md's Layout does not name {missing}"


def test_the_env_lists_match_the_registry() -> None:
    """The README's and the docs' env tables list the newest version of every registered env,
    and the envs said to take ``difficulty=`` are those whose constructor takes it."""
    import inspect

    from teamgym.envs import registry, spec
    from teamgym.envs.registration import latest_versions

    newest = set(latest_versions(registry()))
    with_presets = {
        e for e in newest if "difficulty" in inspect.signature(spec(e).load()).parameters
    }
    index = (REPO / "docs" / "envs" / "index.md").read_text()
    for name, text in (("README.md", README), ("docs/envs/index.md", index)):
        listed = set(re.findall(r"^\| \[`([a-z0-9-]+)`\]", text, re.MULTILINE))
        assert listed == newest, f"{name}: {sorted(listed ^ newest)}"
        sentence = text.split('take `difficulty="easy"', 1)[0].rsplit("\n\n", 1)[1]
        said = set(re.findall(r"`([a-z0-9-]+-v\d+)`", sentence))
        assert said == with_presets, f"{name}: difficulty= {sorted(said ^ with_presets)}"
