"""``teamgym verl-data``: parquet datasets for VERL, one row per episode seed (``--layout
episode``, verl's v1 trainer) or per episode seed and trained agent (``--layout row``)."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamgym.benchmarks.commands.common import (
    add_env_arg,
    add_teammate_arg,
    bad_input,
    check_env,
    check_teammates,
    env_kwargs,
    non_negative_int,
    positive_int,
    teammates,
)

NAME = "verl-data"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(
        NAME, help="write VERL parquet datasets (one row per episode, or per episode and agent)"
    )
    p.add_argument("--env", required=True, help="env id, e.g. signal-v1")
    add_env_arg(p)
    p.add_argument(
        "--train-episodes", type=positive_int, metavar="N", required=True, help="training episodes"
    )
    p.add_argument(
        "--val-episodes",
        type=non_negative_int,
        metavar="N",
        default=64,
        help="validation episodes (disjoint seeds)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the episode-seed draw and of the shuffle",
    )
    add_teammate_arg(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--tokenizer",
        default=None,
        metavar="PATH",
        help="the model's tokenizer (path or name): measure every prompt and refuse the dataset "
        "if one exceeds --max-prompt-length (VERL would drop it and split its episode)",
    )
    p.add_argument(
        "--layout",
        choices=("episode", "row"),
        default="episode",
        help="episode: a row is an episode, one trajectory per trained agent (verl's v1 trainer, "
        "its default); row: a row is one agent of an episode (the legacy trainer, trainer.use_v1=false)",
    )
    p.add_argument(
        "--max-prompt-length",
        type=positive_int,
        default=2048,
        metavar="TOKENS",
        help="data.max_prompt_length of the run",
    )
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Check the env and teammates, write the datasets and their manifest, say what was written."""
    from teamgym.adapters.verl.dataset import PromptTooLongError, build_dataset

    kwargs, mates = env_kwargs(args), teammates(args)
    check_env(args.env, kwargs)
    check_teammates(args.env, kwargs, mates)
    with bad_input(PromptTooLongError):
        manifest = build_dataset(
            args.env,
            args.out,
            args.train_episodes,
            args.val_episodes,
            kwargs,
            args.seed,
            mates,
            tokenizer=args.tokenizer,
            max_prompt_length=args.max_prompt_length,
            layout=args.layout,
        )
    if manifest.max_prompt_tokens is not None:
        console.print(
            f"longest first prompt: {manifest.max_prompt_tokens} tokens of {manifest.tokenizer} "
            f"(limit {args.max_prompt_length})"
        )
    console.print(
        f"wrote {manifest.train_rows} train rows ({manifest.train_episodes} episodes) and "
        f"{manifest.val_rows} validation rows to {args.out} ({manifest.num_agents} agents per "
        f"episode; layout {manifest.layout})"
    )
    return 0
