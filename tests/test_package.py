"""Packaging: the folder layout installs as ``teamgym.*`` in editable and wheel installs, the
core imports light, and the docstring examples run."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import teamgym

REPO = Path(__file__).resolve().parents[1]

SUBPACKAGES = [
    "teamgym.envs",
    "teamgym.envs.signal",
    "teamgym.envs.wrappers",
    "teamgym.adapters",
    "teamgym.benchmarks",
    "teamgym.cli",
    "teamgym.web",
]


def test_every_source_package_is_declared() -> None:
    """A new folder with an __init__.py must be listed in pyproject's packages."""
    import tomllib

    declared = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {"teamgym"}
    for top in ("envs", "adapters", "benchmarks", "cli", "web"):
        for init in (REPO / top).rglob("__init__.py"):
            found.add("teamgym." + ".".join(init.parent.relative_to(REPO).parts))
    assert found == declared


def test_installed_layout_maps_the_top_level_folders() -> None:
    for name in SUBPACKAGES:
        module = importlib.import_module(name)
        folder = Path(module.__file__).parent
        assert folder.name == name.rsplit(".", 1)[-1]
    editable = Path(importlib.import_module("teamgym.envs").__file__).resolve().is_relative_to(REPO)
    if editable:  # the dev install: modules come straight from the repository folders
        assert (
            Path(importlib.import_module("teamgym.envs").__file__).resolve()
            == REPO / "envs" / "__init__.py"
        )
    assert (Path(teamgym.__file__).parent / "py.typed").exists()


@pytest.mark.slow
def test_wheel_builds_and_installs(tmp_path: Path, run_python) -> None:
    """A normal (non-editable) install from the built wheel imports and runs an env."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("teamgym-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "teamgym/__init__.py",
        "teamgym/py.typed",
        "teamgym/envs/signal/env.py",
        "teamgym/cli/__init__.py",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    assert not any(n.startswith(("teamgym/tests/", "tests/", "teamgym/scripts/")) for n in names)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import json, teamgym, teamgym.envs\n"
        "from teamgym.envs import make\n"
        "env = make('signal-v0', num_agents=3); obs, _ = env.reset(seed=0)\n"
        "print(json.dumps([teamgym.__file__, teamgym.envs.__file__, sorted(obs)]))\n"
    )
    out = json.loads(run_python(code, env={"PYTHONPATH": str(target)}, cwd=tmp_path).stdout)
    assert out[0].startswith(str(target)) and out[1].startswith(str(target))
    assert out[2] == ["robot_0", "robot_1", "robot_2"]


def test_core_import_is_light(run_python) -> None:
    """``import teamgym.envs`` loads no game, no torch, no verl."""
    code = (
        "import sys, teamgym.envs\n"
        "heavy = [m for m in ('torch', 'verl', 'transformers', 'ai2thor', 'teamgym.envs.signal.env') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    assert run_python(code).stdout.strip() == ""


def _imported(path: Path) -> list[str]:
    """Every module ``path`` imports, anywhere in its body (a function's lazy import too), as
    absolute names; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module)."""
    import ast

    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, ``level - 1`` folders up
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            names += [base, *(f"{base}.{a.name}" for a in node.names)]
    return names


def _imports_of(top: str, packages: tuple[str, ...]) -> list[str]:
    """``file: module`` for each import under the folder ``top`` of a module in ``packages``."""
    return [
        f"{path.relative_to(REPO)}: {name}"
        for path in sorted((REPO / top).rglob("*.py"))
        for name in _imported(path)
        if any(name == p or name.startswith(f"{p}.") for p in packages)
    ]


@pytest.mark.parametrize(
    ("layer", "above"),
    [
        ("envs", ("teamgym.adapters", "teamgym.benchmarks", "teamgym.cli", "teamgym.web")),
        ("adapters", ("teamgym.benchmarks", "teamgym.cli")),
        ("web", ("teamgym.cli",)),
    ],
)
def test_dependencies_point_one_way(layer: str, above: tuple[str, ...]) -> None:
    """envs <- adapters <- benchmarks, web <- cli: no module imports a layer above its own (the
    checkpoint policy family is registered from adapters/ into envs, the exporter lives in
    adapters/; the command line wires the layers together, so envs, adapters and web do not
    import it)."""
    upward = _imports_of(layer, above)
    assert not upward, upward


@pytest.mark.parametrize(
    ("one", "other"), [("web", "teamgym.benchmarks"), ("benchmarks", "teamgym.web")]
)
def test_web_and_benchmarks_do_not_import_each_other(one: str, other: str) -> None:
    """The page and the benchmarks are side by side (issue 58): what both need lives below
    them (a person's typed replies in ``teamgym.envs.typed_replies``), and the command line
    wires the runner to the page (``run_suite``'s ``on_people`` hook)."""
    crossing = _imports_of(one, (other,))
    assert not crossing, crossing


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(["teamgym", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def _import_graph() -> dict[str, set[str]]:
    """Package module -> the package modules it imports, anywhere in its body (a function's
    import too: it still ties the two together), except under ``if TYPE_CHECKING:``, which
    never runs."""
    import ast

    paths = {
        _module_name(p): p
        for d in ("envs", "adapters", "benchmarks", "cli", "web")
        for p in (REPO / d).rglob("*.py")
    }
    paths["teamgym.names"] = REPO / "names.py"
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
            for n in ast.walk(node)
        }
        edges = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in paths:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def test_no_import_cycles() -> None:
    """No two package modules import each other, directly or through others: every module
    can be read after the ones it imports (a package's ``__init__`` re-exporting its modules
    counts, so modules inside a package import their siblings, not the package)."""
    graph = _import_graph()
    assert len(graph) > 100 and "teamgym.envs.text_env" in graph["teamgym.envs.signal.env"]
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append(" -> ".join([*path[path.index(module) :], module]))
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not cycles, "\n".join(cycles)


def test_checkpoint_names_need_the_adapters_layer(run_python) -> None:
    """``checkpoint:PATH`` is a policy family registered by ``import teamgym.adapters``."""
    code = (
        "from teamgym.envs.baselines import make_baseline\n"
        "try:\n    make_baseline('signal-v0', 'checkpoint:/nowhere')\n"
        "except KeyError as e:\n    print('before:', e)\n"
        "import teamgym.adapters\n"
        "try:\n    make_baseline('signal-v0', 'checkpoint:/nowhere')\n"
        "except FileNotFoundError as e:\n    print('after:', e)\n"
    )
    out = run_python(code).stdout
    assert "before:" in out and "import teamgym.adapters" in out
    assert "after: checkpoint teammate: /nowhere is not a model directory" in out


def _modules_with_examples() -> list[str]:
    """Every package module whose source holds a ``>>>`` example (none is left out by hand)."""
    found = []
    for path in sorted(REPO.glob("*/**/*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[0] in ("envs", "adapters", "benchmarks", "cli", "web") and (
            ">>> " in path.read_text()
        ):
            parts = rel.with_suffix("").parts
            found.append(".".join(("teamgym", *parts[: -1 if parts[-1] == "__init__" else None])))
    return found


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples(module: str) -> None:
    """The runnable examples in docstrings run and print what they say."""
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has no examples"
    assert result.failed == 0
