"""Build the parquet files VERL's ``RLHFDataset`` reads: one row per episode seed.

A row is played whole by the episode loop; its ``extra_info`` holds the episode (env, kwargs,
seed, trained agents, teammates) and every trained agent's first messages (``prompts``), and its
``prompt`` is the longest of them (``RLHFDataset`` needs one). With ``tokenizer`` (the model's), a
dataset with a prompt over ``max_prompt_length`` tokens as VERL's agent loop renders it is refused
whole, not cut by VERL mid-run; ``manifest.json`` records the longest, for the train entry's check.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from teamgym.adapters.verl.llm_partners import check_partner_pools, partner_source
from teamgym.envs.lineup import check_teammates
from teamgym.envs.partners import PartnerPool
from teamgym.envs.registration import make
from teamgym.envs.seeds import dataset_seeds
from teamgym.names import EPISODE_LOOP_NAME

__all__ = [
    "DatasetManifest",
    "DatasetMismatchError",
    "PromptTooLongError",
    "build_dataset",
    "check_dataset",
    "check_files",
    "episode_rows",
    "prompt_token_lengths",
]

#: The one layout a dataset has now (``manifest.json``'s ``layout``; ``row`` datasets, one row
#: per agent, are refused with the command that rebuilds them).
LAYOUT = "episode"


@dataclass(frozen=True)
class DatasetManifest:
    """What a dataset directory holds (``manifest.json``)."""

    env_id: str
    env_kwargs: dict[str, Any]
    num_agents: int
    rows_per_episode: int
    """Rows per episode: 1."""
    teammates: dict[str, str]
    train_episodes: int
    val_episodes: int
    train_rows: int
    val_rows: int
    max_prompt_chars: int
    train_seeds_sha256: str
    val_seeds_sha256: str
    tokenizer: str | None = None
    """The tokenizer the prompt lengths were measured with (None: not measured)."""
    max_prompt_tokens: int | None = None
    """The longest first prompt in tokens of ``tokenizer`` (chat template, generation prompt)."""
    layout: str = LAYOUT
    """``episode``: a row is an episode, played by ``teamgym_episode`` (``row``, one row per
    agent, was the legacy trainer's)."""
    agents_per_row: int = 1
    """Trajectories each row yields per copy: the trained agents."""
    partners: dict[str, Any] | None = None
    """The training episodes' partner pool (seats, specs, weights), or None."""
    val_partners: dict[str, Any] | None = None
    """The validation episodes' partner pool, or None."""


class PromptTooLongError(ValueError):
    """Some rows' first prompt exceeds the token budget; nothing was written."""


def _first_prompts(row: dict[str, Any]) -> list[list[dict[str, str]]]:
    """The first prompts a row's loop renders: each trained agent's."""
    return list(json.loads(row["extra_info"]["prompts"]).values())


def prompt_token_lengths(rows: Sequence[dict[str, Any]], tokenizer: Any) -> list[int]:
    """Each row's longest first prompt in tokens, rendered as VERL's agent loop renders it."""
    return [
        max(
            len(
                tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=True
                )["input_ids"]
            )
            for messages in _first_prompts(r)
        )
        for r in rows
    ]


def _kwargs_key(env_kwargs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(env_kwargs, sort_keys=True).encode()).hexdigest()[:8]


def episode_rows(
    env_id: str,
    env_kwargs: dict[str, Any],
    seeds: Sequence[int],
    split: str,
    start_index: int = 0,
    teammates: dict[str, str] | None = None,
    partners: PartnerPool | None = None,
) -> list[dict[str, Any]]:
    """The dataset rows of the episodes ``seeds``, one per seed. Agents in ``teammates`` (agent ->
    spec) are not trained; with ``partners``, each episode's partner seats go to the partner the
    pool picks for its seed, written into ``teammates`` and ``partner``."""
    env = make(env_id, **{**env_kwargs, "obs_mode": "text"})
    kwargs_json = json.dumps(env_kwargs, sort_keys=True)
    teammates = dict(teammates or {})
    if partners is not None:
        partners.check(env.possible_agents, teammates)
        check_teammates({**teammates, **dict.fromkeys(partners.seats)}, env.possible_agents)
    check_teammates(teammates, env.possible_agents)
    rows = []
    for index, seed in enumerate(seeds, start_index):
        obs, infos = env.reset(seed=int(seed))
        seated = teammates | (partners.seats_for(int(seed)) if partners is not None else {})
        partner = partners.pick(int(seed)) if partners is not None else ""
        prompts = {
            agent: [
                {"role": "system", "content": infos[agent]["instructions"]},
                {"role": "user", "content": obs[agent]},
            ]
            for agent in env.possible_agents
            if agent not in seated
        }
        longest = max(prompts.values(), key=lambda ms: sum(len(m["content"]) for m in ms))
        rows.append(
            {
                "data_source": partner_source(env_id, partner),
                "prompt": longest,
                "ability": "multi-agent",
                "reward_model": {"style": "env", "ground_truth": ""},
                "extra_info": {
                    "index": index,
                    "split": split,
                    "env_id": env_id,
                    "env_kwargs": kwargs_json,
                    "seed": int(seed),
                    "episode": f"{env_id}/{_kwargs_key(env_kwargs)}/{split}/{int(seed)}",
                    "num_agents": len(env.possible_agents),
                    "teammates": json.dumps(seated, sort_keys=True),
                    "partner": partner,
                    "agents": json.dumps(list(prompts)),
                    "prompts": json.dumps(prompts),
                },
                "agent_name": EPISODE_LOOP_NAME,
            }
        )
    env.close()
    return rows


def _longest_prompt(rows: list[dict[str, Any]], tokenizer: str, limit: int) -> int:
    """The longest first prompt in tokens of ``tokenizer``; refuses rows over ``limit``."""
    from transformers import AutoTokenizer

    lengths = prompt_token_lengths(rows, AutoTokenizer.from_pretrained(tokenizer))
    over = [n for n in lengths if n > limit]
    if over:
        raise PromptTooLongError(
            f"{len(over)} of {len(lengths)} rows have a first prompt over {limit} tokens of "
            f"{tokenizer} (longest: {max(lengths)}); VERL would drop them one by one and split "
            "their episodes. Raise --max-prompt-length (and data.max_prompt_length), or shorten "
            "the observation (e.g. --env-arg message_max_tokens=...). Nothing written."
        )
    return max(lengths)


def build_dataset(
    env_id: str,
    out_dir: str | Path,
    train_episodes: int,
    val_episodes: int,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    teammates: dict[str, str] | None = None,
    tokenizer: str | None = None,
    max_prompt_length: int = 2048,
    partners: PartnerPool | None = None,
    val_partners: PartnerPool | None = None,
) -> DatasetManifest:
    """Write ``train.parquet``, ``val.parquet`` and ``manifest.json`` into ``out_dir``; with
    ``tokenizer``, refuse prompts over ``max_prompt_length`` (:class:`PromptTooLongError`).
    ``partners``: a pool for the partner seats of every episode (``val_partners``: of the
    validation episodes instead, e.g. partners held out of training)."""
    import pandas as pd

    if train_episodes < 1 or val_episodes < 0:
        raise ValueError("train_episodes must be >= 1 and val_episodes >= 0")
    val_partners = partners if val_partners is None else val_partners
    check_partner_pools(partners, val_partners)
    env_kwargs = dict(env_kwargs or {})
    env_kwargs.pop("obs_mode", None)
    train_seeds, val_seeds = dataset_seeds(seed, train_episodes, val_episodes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train = episode_rows(
        env_id, env_kwargs, train_seeds, "train", teammates=teammates, partners=partners
    )
    val = episode_rows(
        env_id,
        env_kwargs,
        val_seeds,
        "val",
        start_index=len(train),
        teammates=teammates,
        partners=val_partners,
    )
    max_tokens = (
        None if tokenizer is None else _longest_prompt(train + val, tokenizer, max_prompt_length)
    )
    for name, rows in (("train", train), ("val", val)):
        tmp = out / f".{name}.parquet.tmp"
        pd.DataFrame(rows).to_parquet(tmp, index=False)
        tmp.replace(out / f"{name}.parquet")
    num_agents = train[0]["extra_info"]["num_agents"]
    manifest = DatasetManifest(
        env_id=env_id,
        env_kwargs=env_kwargs,
        num_agents=num_agents,
        rows_per_episode=len(train) // train_episodes,
        teammates=dict(teammates or {}),
        train_episodes=train_episodes,
        val_episodes=val_episodes,
        train_rows=len(train),
        val_rows=len(val),
        max_prompt_chars=max(
            sum(len(m["content"]) for m in ms) for r in train + val for ms in _first_prompts(r)
        ),
        train_seeds_sha256=hashlib.sha256(json.dumps(sorted(train_seeds)).encode()).hexdigest(),
        val_seeds_sha256=hashlib.sha256(json.dumps(sorted(val_seeds)).encode()).hexdigest(),
        tokenizer=tokenizer,
        max_prompt_tokens=max_tokens,
        agents_per_row=len(json.loads(train[0]["extra_info"]["agents"])),
        partners=None if partners is None else partners.to_json(),
        val_partners=None if val_partners is None else val_partners.to_json(),
    )
    (out / "manifest.json").write_text(
        json.dumps(asdict(manifest), indent=2, sort_keys=True) + "\n"
    )
    return manifest


class DatasetMismatchError(ValueError):
    """The parquet files do not match ``manifest.json`` (rows lost, reordered or split)."""


def check_dataset(dataset_dir: str | Path) -> DatasetManifest:
    """Compare ``train.parquet`` and ``val.parquet`` in ``dataset_dir`` with its
    ``manifest.json`` (see :func:`check_files`)."""
    root = Path(dataset_dir)
    return check_files([root / "train.parquet"], [root / "val.parquet"])


def _file_list(files: Any) -> list[Path]:
    """VERL's ``data.train_files`` / ``val_files``: one path or a list of them."""
    if files is None:
        return []
    if isinstance(files, str | Path):
        return [Path(files)]
    return [Path(str(f)) for f in files]


def _check_file(path: Path) -> tuple[DatasetManifest, int]:
    """One parquet file against the ``manifest.json`` beside it: its row count when it is the
    manifest's ``train``/``val`` file, and every episode's rows adjacent and complete."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DatasetMismatchError(f"{path} does not exist: build it with `teamgym verl-data`")
    meta = path.parent / "manifest.json"
    if not meta.is_file():
        raise DatasetMismatchError(
            f"{path} has no manifest.json beside it, so teamgym cannot check that its episodes "
            "are whole: point data.train_files / data.val_files at files `teamgym verl-data` wrote"
        )
    manifest = DatasetManifest(**json.loads(meta.read_text()))
    if manifest.layout != LAYOUT:
        raise DatasetMismatchError(
            f"{path} has one row per agent (layout {manifest.layout!r}), which only verl's "
            "retired legacy trainer read: rebuild it with the same `teamgym verl-data` command "
            "(one row per episode)"
        )
    infos = pq.read_table(path, columns=["extra_info"]).column("extra_info").to_pylist()
    expected = {"train.parquet": manifest.train_rows, "val.parquet": manifest.val_rows}.get(
        path.name
    )
    if expected is not None and len(infos) != expected:
        raise DatasetMismatchError(
            f"{path} has {len(infos)} rows, manifest.json says {expected}: "
            "rebuild the dataset with `teamgym verl-data` instead of editing it"
        )
    unit, seen = manifest.rows_per_episode, set()
    for key, group in itertools.groupby(info["episode"] for info in infos):
        size = len(list(group))
        if key in seen or size != unit:
            raise DatasetMismatchError(
                f"{path}: episode {key} has {size} adjacent rows "
                f"{'again ' if key in seen else ''}where manifest.json says {unit} per "
                "episode, together: rebuild the dataset with `teamgym verl-data`"
            )
        seen.add(key)
    return manifest, len(infos)


def check_files(train_files: Any, val_files: Any = None) -> DatasetManifest:
    """Check the parquet files VERL will load (``data.train_files``, ``data.val_files``: a path
    or a list) against the ``manifest.json`` beside each: row counts, every episode's rows
    adjacent and complete. Returns the first train file's manifest with the row counts of all
    the files; raises :class:`DatasetMismatchError` saying what differs."""
    train = [_check_file(p) for p in _file_list(train_files)]
    val = [_check_file(p) for p in _file_list(val_files)]
    if not train:
        raise DatasetMismatchError(
            "data.train_files is empty: point it at `teamgym verl-data` output"
        )
    units = {m.agents_per_row for m, _ in train + val}
    if len(units) > 1:
        raise DatasetMismatchError(
            f"data.train_files and data.val_files mix datasets of {len(units)} team sizes "
            f"(trained agents per row: {sorted(units)}): VERL's batches would mix them; use "
            "files of one team size"
        )
    measured = [m.max_prompt_tokens for m, _ in train + val]
    return replace(
        train[0][0],
        train_rows=sum(rows for _, rows in train),
        val_rows=sum(rows for _, rows in val),
        max_prompt_tokens=None if None in measured else max(t for t in measured if t is not None),
    )
