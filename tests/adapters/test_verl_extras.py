"""``teamgym[vllm]`` and ``teamgym[sglang]`` pin the rollout engines as verl 0.9.1 itself pins them
in its own extras: read from verl's installed package metadata, no CUDA wheel downloaded."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytest.importorskip("verl")
tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]


def _ours(extra: str) -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["optional-dependencies"][extra]]
    assert any(r.name == "teamgym" and r.extras == {"verl"} for r in reqs), extra  # verl itself
    return {r.name: str(r.specifier) for r in reqs if r.name != "teamgym"}


def _verls(extra: str) -> dict[str, str]:
    out = {}
    for line in importlib.metadata.requires("verl") or []:
        req = Requirement(line)
        if req.marker is None or not req.marker.evaluate({"extra": extra}):
            continue
        if req.name == "verl":  # verl[verl-core]: what our `verl` extra installs
            continue
        out[req.name] = str(req.specifier)
    return out


@pytest.mark.parametrize("extra", ["vllm", "sglang"])
def test_engine_extras_pin_what_verl_pins(extra: str) -> None:
    assert importlib.metadata.version("verl") == "0.9.1"
    verl = _verls(extra)
    assert extra in verl and verl[extra].startswith("=="), verl  # the engine is pinned there
    assert _ours(extra) == verl


def test_verl_extra_pins_verl_0_9_1() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {
        Requirement(r).name: str(Requirement(r).specifier)
        for r in project["optional-dependencies"]["verl"]
    }
    assert pins["verl"] == "==0.9.1"
