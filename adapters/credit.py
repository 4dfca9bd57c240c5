"""Turn-level credit assignment: AT-GRPO and GiGPO advantages over multi-turn trajectories.

A teamgym trajectory is one agent's whole episode in one response: its replies (``response_mask``
1) with the observations between them (mask 0). A **turn** is a run of mask-1 tokens (a reply
the model generated; forced moves and stop strings are mask 0 and belong to no turn), and its
**reward** is the sum of the token-level rewards from the turn's first token to the next turn's
(the agent loop writes each step's reward on the last token of the reply that earned it, see
:func:`place_turn_rewards`; a KL penalty in the reward spreads over the tokens and is summed the
same way).

* :func:`at_grpo_advantages`: PettingLLMs' AT-GRPO, groups of the same agent at the same turn
  across a group's copies; each turn's tokens get the normalised return from that turn.
* :func:`gigpo_advantages`: verl-agent's GiGPO, an episode advantage (the trajectory's return
  against its group's, counted once per turn as verl-agent does) plus ``step_weight`` times a
  step advantage (the return from a turn against the returns of every turn of the group that
  saw the same anchor state).

Both take the group of each row (``groups``: an agent's copies of an episode seed, or the whole
team's) and follow the reference code's arithmetic op for op (float32 torch means, unbiased
standard deviations, ``(x - mean) / (std + epsilon)``), so they agree with it to the last bit
on the same inputs (within a few float32 units in the last place where the rewards are not
dyadic: the reference reads each turn's reward as given, these read it back from the float32
token rewards): ``tests/adapters/test_credit_reference.py`` runs both. Where teamgym
differs, on purpose: a group holding one trajectory gets a zero advantage (no baseline, as
teamgym's ``grpo`` and ``team_grpo``), where PettingLLMs gives a batch of lone samples its raw
score and verl-agent a lone episode its raw return.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np
import torch

_log = logging.getLogger(__name__)
_WARNED: list[bool] = []  # whether this process warned of a trajectory's mismatched turns

__all__ = [
    "anchor_key",
    "at_grpo_advantages",
    "gigpo_advantages",
    "group_normalise",
    "place_turn_rewards",
    "returns_to_go",
    "turn_rewards",
    "turn_runs",
]


def anchor_key(observation: str) -> str:
    """GiGPO's anchor state of a turn: a short hash of the observation the agent answered (8
    hex digits; identical observations, identical keys)."""
    return hashlib.blake2b(observation.encode(), digest_size=4).hexdigest()


def turn_runs(mask: torch.Tensor) -> list[tuple[int, int]]:
    """The turns of one row: ``(start, end)`` of each run of mask-1 tokens, in order."""
    flags = mask.to(torch.int8).tolist()
    runs, start = [], None
    for i, flag in enumerate(flags):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(flags)))
    return runs


def turn_rewards(rewards: torch.Tensor, runs: list[tuple[int, int]]) -> list[float]:
    """Each turn's reward: the token-level rewards from its start to the next turn's start (the
    first turn's from the response's start, the last turn's to its end)."""
    if not runs:
        return []
    bounds = [0, *(s for s, _ in runs[1:]), rewards.shape[-1]]
    return [float(rewards[lo:hi].sum()) for lo, hi in itertools.pairwise(bounds)]


def place_turn_rewards(
    mask: Sequence[int], rewards: Sequence[float], total: float
) -> torch.Tensor | None:
    """Token-level rewards carrying ``rewards[t]`` on the last token of turn ``t`` (their sum
    made exactly ``total`` on the last turn); None when the number of turns in ``mask`` is not
    ``len(rewards)`` (the caller keeps verl's single final reward), with a warning when the
    trajectory has turns: its rewards were counted on another mask, so its turn-level credit is
    lost."""
    tensor_mask = torch.tensor(list(mask), dtype=torch.int64)
    runs = turn_runs(tensor_mask)
    if not runs or len(runs) != len(rewards):
        if runs and not _WARNED:
            _WARNED.append(True)  # once a process: a run whose masks all differ would flood
            _log.warning(
                "a trajectory has %d turns in its response mask but %d turn rewards: it gets "
                "its return on its last token, as one turn (was the mask changed after the "
                "agent loop, e.g. by rejection sampling?); further ones are not logged",
                len(runs),
                len(rewards),
            )
        return None
    scores = torch.zeros(len(tensor_mask), dtype=torch.float32)
    for (_, end), reward in zip(runs, rewards, strict=True):
        scores[end - 1] = float(reward)
    scores[runs[-1][1] - 1] += float(total) - float(scores.sum())
    return scores


def returns_to_go(rewards: Sequence[float], gamma: float) -> list[float]:
    """Discounted return from each turn (no bootstrap), in float32 as verl-agent's
    ``compute_step_discounted_returns`` computes it."""
    values = np.asarray(rewards, dtype=np.float32)
    out = np.zeros_like(values)
    running: np.floating | float = 0
    for t in reversed(range(len(values))):
        running = values[t] + gamma * running
        out[t] = running
    return [float(v) for v in out]


def group_normalise(
    scores: torch.Tensor,
    keys: Sequence[Hashable],
    epsilon: float = 1e-6,
    scale: bool = True,
    lone: str = "zero",
) -> torch.Tensor:
    """``(score - group mean) / (group std + epsilon)`` (without ``scale``: minus the mean), the
    statistics over the scores sharing a key, computed as verl's and the references' GRPO
    compute them (float32 torch, unbiased std). A key with one score: ``lone="zero"`` gives 0,
    ``lone="raw"`` the score itself (mean 0, std 1: verl-agent's lone episode)."""
    if lone not in ("zero", "raw"):
        raise ValueError(f"lone={lone!r}: choose 'zero' or 'raw'")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        members[key].append(i)
    out = scores.clone()
    for rows in members.values():
        values = torch.stack([scores[i] for i in rows])
        if len(rows) == 1:
            if lone == "zero":
                out[rows[0]] = 0.0
            continue
        mean, std = torch.mean(values), torch.std(values)
        for i in rows:
            out[i] = (scores[i] - mean) / (std + epsilon) if scale else scores[i] - mean
    return out


def _check_rows(rewards: torch.Tensor, *per_row: Sequence[object]) -> None:
    """Every per-row list names each row of the batch once."""
    for values in per_row:
        if len(values) != rewards.shape[0]:
            raise ValueError(
                f"{len(values)} groups or anchor lists for a batch of {rewards.shape[0]} rows"
            )


def _turns(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor
) -> list[tuple[list[tuple[int, int]], list[float]]]:
    """Per row: its turns and their rewards."""
    out = []
    for i in range(token_level_rewards.shape[0]):
        runs = turn_runs(response_mask[i])
        out.append((runs, turn_rewards(token_level_rewards[i], runs)))
    return out


def _scatter(
    shape: torch.Size, runs: list[list[tuple[int, int]]], values: dict[tuple[int, int], float]
) -> torch.Tensor:
    """A (rows, tokens) tensor with ``values[(i, t)]`` on the tokens of row ``i``'s turn ``t``."""
    out = torch.zeros(shape, dtype=torch.float32)
    for (i, t), value in values.items():
        start, end = runs[i][t]
        out[i, start:end] = value
    return out


@torch.no_grad()
def at_grpo_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    groups: Sequence[Hashable],
    gamma: float = 1.0,
    epsilon: float = 1e-6,
    scale: bool = True,
) -> torch.Tensor:
    """AT-GRPO: every turn ``t`` of row ``i`` is a sample keyed ``(groups[i], t)`` scored by
    its return to go; its tokens get the sample's group-normalised score (a lone sample 0)."""
    _check_rows(token_level_rewards, groups)
    turns = _turns(token_level_rewards, response_mask)
    samples = [
        (i, t, ret)
        for i, (_, rewards) in enumerate(turns)
        for t, ret in enumerate(returns_to_go(rewards, gamma))
    ]
    if not samples:
        return torch.zeros_like(token_level_rewards, dtype=torch.float32)
    scores = torch.tensor([ret for _, _, ret in samples], dtype=torch.float32)
    normalised = group_normalise(
        scores, [(groups[i], t) for i, t, _ in samples], epsilon, scale, "zero"
    )
    values = {(i, t): float(a) for (i, t, _), a in zip(samples, normalised, strict=True)}
    return _scatter(token_level_rewards.shape, [r for r, _ in turns], values)


@torch.no_grad()
def gigpo_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    groups: Sequence[Hashable],
    anchors: Sequence[Sequence[str]],
    gamma: float = 0.95,
    epsilon: float = 1e-6,
    scale: bool = True,
    step_weight: float = 1.0,
) -> torch.Tensor:
    """GiGPO: the tokens of turn ``t`` of row ``i`` get the episode advantage of row ``i`` plus
    ``step_weight`` times the step advantage of the turn (its return to go against those of the
    group's turns with the same anchor, ``anchors[i][t]``; a lone anchor 0). The episode
    statistics count each trajectory once per turn (verl-agent's default,
    ``compute_mean_std_cross_steps``); a group holding one trajectory gets no advantage at all
    (neither part)."""
    _check_rows(token_level_rewards, groups, anchors)
    turns = _turns(token_level_rewards, response_mask)
    for i, (runs, _) in enumerate(turns):
        if len(anchors[i]) != len(runs):
            raise ValueError(
                f"row {i} has {len(runs)} turns and {len(anchors[i])} anchor keys: the agent "
                "loop recorded another trajectory than the batch holds"
            )
    samples = [(i, t) for i, (runs, _) in enumerate(turns) for t in range(len(runs))]
    if not samples:
        return torch.zeros_like(token_level_rewards, dtype=torch.float32)
    totals = token_level_rewards.sum(dim=-1).to(torch.float32)
    episode = group_normalise(
        torch.stack([totals[i] for i, _ in samples]),
        [groups[i] for i, _ in samples],
        epsilon,
        scale,
        "raw",
    )
    trajectories: dict[Hashable, set[int]] = defaultdict(set)
    for i, _ in samples:
        trajectories[groups[i]].add(i)
    lone = {i for rows in trajectories.values() if len(rows) == 1 for i in rows}
    step_scores = torch.tensor(
        [ret for _, rewards in turns for ret in returns_to_go(rewards, gamma)],
        dtype=torch.float32,
    )
    keys = [(groups[i], anchors[i][t]) for i, t in samples]
    step = group_normalise(step_scores, keys, epsilon, scale, "zero")
    values = {
        (i, t): 0.0 if i in lone else float(e + step_weight * s)
        for (i, t), e, s in zip(samples, episode, step, strict=True)
    }
    return _scatter(token_level_rewards.shape, [r for r, _ in turns], values)
