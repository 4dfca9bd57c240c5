"""``teamgym verl-data``: parquet datasets for VERL, one row per episode seed, played whole by
teamgym's episode loop."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from teamgym.cli.common import (
    CommandError,
    add_env_arg,
    add_teammate_arg,
    bad_input,
    check_baselines,
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
    p = sub.add_parser(NAME, help="write VERL parquet datasets (one row per episode)")
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
        "--partner",
        action="append",
        default=[],
        metavar="SPEC[=WEIGHT]",
        help="a frozen partner for the --partner-seat agents (repeatable: a pool, one partner "
        "per episode, drawn from its seed with the weights): a baseline, checkpoint:DIR, "
        "openai:MODEL@URL (an OpenAI-compatible server) or transformers:DIR",
    )
    p.add_argument(
        "--partner-seat",
        action="append",
        default=[],
        metavar="AGENT",
        help="an agent the partners play (repeatable)",
    )
    p.add_argument(
        "--val-partner",
        action="append",
        default=[],
        metavar="SPEC[=WEIGHT]",
        help="the validation episodes' partners instead (repeatable): partners held out of "
        "training, for cross-play; `self` draws self-play episodes beside them (default: the "
        "--partner pool)",
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
    pool, val_pool = partner_pools(args)
    with bad_input(PromptTooLongError, ValueError):
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
            partners=pool,
            val_partners=val_pool,
        )
    if manifest.max_prompt_tokens is not None:
        console.print(
            f"longest first prompt: {manifest.max_prompt_tokens} tokens of {manifest.tokenizer} "
            f"(limit {args.max_prompt_length})"
        )
    console.print(
        f"wrote {manifest.train_rows} train rows and {manifest.val_rows} validation rows, one "
        f"per episode, to {args.out} ({manifest.num_agents} agents per episode, "
        f"{manifest.agents_per_row} trained)"
    )
    return 0


def partner_pools(args: argparse.Namespace) -> tuple[Any, Any]:
    """The training and validation partner pools of ``--partner``, ``--partner-seat`` and
    ``--val-partner`` (None where none is given); each spec is parsed and each baseline built
    once, so a typo fails here, not in a worker."""
    from teamgym.adapters.agents.kinds import parse_agent_spec
    from teamgym.adapters.verl.llm_partners import partner_spec
    from teamgym.envs.partners import SELF, PartnerPool

    if not args.partner and not args.val_partner:
        if args.partner_seat:
            raise CommandError("--partner-seat needs at least one --partner")
        return None, None
    if not args.partner:
        raise CommandError("--val-partner needs a training pool too (--partner)")
    if not args.partner_seat:
        raise CommandError("--partner needs --partner-seat AGENT: the seats the partners play")
    with bad_input(ValueError):
        pools = [
            PartnerPool.parse(specs, args.partner_seat) if specs else None
            for specs in (args.partner, args.val_partner)
        ]
        specs = [s for pool in pools if pool is not None for s in pool.specs if s != SELF]
        parsed = [parse_agent_spec(partner_spec(s)) for s in specs]
    check_baselines(args.env, [p.options["name"] for p in parsed if p.kind == "baseline"])
    return pools[0], pools[1]
