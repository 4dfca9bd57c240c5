"""The seed plan: every seed teamgym derives from another, in one place.

A run names one seed (a suite's first episode, ``TrainArgs.seed``, ``--seed``); everything else
comes from it through the functions below, so a reader sees the whole plan at once and two
layers can never derive the same seed differently. The fingerprints of ``teamgym baselines``
and ``teamgym bench run`` depend on these numbers: changing one is a behaviour change.

Two ranges never meet: training episodes are drawn below :data:`EVAL_SEED_BASE`, evaluation and
validation episodes lie at or above it.

====================  ==========================================================================
seed                  derived by
====================  ==========================================================================
episodes of a run     :func:`episode_seeds`: consecutive from the first (baselines, suites,
                      the tokenizer corpus)
warm-up episodes      :func:`warmup_seeds`: ``0 .. n-1``
training episodes     :func:`train_seeds` (CPU trainer, drawn per step), :func:`dataset_seeds`
                      (VERL dataset's train split)
evaluation episodes   :func:`eval_seeds`: evaluation set ``s`` is ``EVAL_SEED_BASE + s * 100_000
                      + k``; :func:`dataset_seeds`' validation split
repeated runs         :func:`run_seeds`: a learning stage run on several seeds (``sharing``)
update step           :func:`update_seed`: the GRPO update of step ``t``
scripted policies     :func:`policy_seed`: what each teammate resets with (see its rules)
partner of a pool     :func:`partner_draw`: which partner of a pool plays episode ``s``
====================  ==========================================================================
"""

from __future__ import annotations

import numpy as np

from teamgym.names import EVAL_SEED_BASE

__all__ = [
    "EVAL_SEED_BASE",
    "EVAL_SET_STRIDE",
    "HELD_OUT_SET",
    "POLICY_STREAM_STRIDE",
    "UPDATE_STRIDE",
    "dataset_seeds",
    "episode_seeds",
    "eval_seeds",
    "partner_draw",
    "policy_seed",
    "run_seeds",
    "train_seeds",
    "update_seed",
    "warmup_seeds",
]

#: Evaluation sets are this far apart: set ``s`` holds up to this many episodes.
EVAL_SET_STRIDE = 100_000
#: The evaluation set the CPU trainer, its warm-up and the learning stages score on.
HELD_OUT_SET = 1
#: Episode ``s``'s scripted policies reset with ``s * POLICY_STREAM_STRIDE + stream`` (evaluation).
POLICY_STREAM_STRIDE = 1000
#: Run seed ``r``'s update of step ``t`` is seeded ``r * UPDATE_STRIDE + t`` (a prime, so two
#: runs' update seeds do not line up step for step).
UPDATE_STRIDE = 100_003
#: The stream of partner draws (:func:`partner_draw`), apart from every other use of a seed.
PARTNER_STREAM = 0x7EA3
#: Gymnasium's view draws teammate seeds below this (the int32 range ``np.random`` accepts).
_DRAWN_SEED_LIMIT = 2**31 - 1


def episode_seeds(first: int, count: int) -> range:
    """The seeds of ``count`` consecutive episodes from ``first``: how ``teamgym baselines``, a
    suite entry and the tokenizer corpus number their episodes."""
    return range(first, first + count)


def warmup_seeds(episodes: int) -> range:
    """The episodes the warm-up teacher plays: ``0 .. episodes - 1`` (below the evaluation
    range, so the warm-up never sees a held-out episode)."""
    return episode_seeds(0, episodes)


def train_seeds(rng: np.random.Generator, count: int) -> list[int]:
    """``count`` training episode seeds drawn from ``rng`` (the CPU trainer's run generator, one
    batch per step), all below :data:`EVAL_SEED_BASE`; repeats are allowed."""
    return [int(s) for s in rng.integers(0, EVAL_SEED_BASE, size=count)]


def eval_seeds(eval_set: int, episodes: int) -> list[int]:
    """The first ``episodes`` seeds of evaluation set ``eval_set``:
    ``EVAL_SEED_BASE + eval_set * EVAL_SET_STRIDE + k``. Set 0 starts at ``EVAL_SEED_BASE``
    (the team and sharing stages' probes); :data:`HELD_OUT_SET` is the trainer's held-out set."""
    start = EVAL_SEED_BASE + eval_set * EVAL_SET_STRIDE
    return list(episode_seeds(start, episodes))


def dataset_seeds(seed: int, train: int, val: int) -> tuple[list[int], list[int]]:
    """The VERL dataset's (train, validation) episode seeds: distinct draws from
    ``default_rng(seed)``, train below :data:`EVAL_SEED_BASE`, validation from it upwards."""
    rng = np.random.default_rng(seed)
    train_part = rng.choice(EVAL_SEED_BASE, size=train, replace=False).tolist()
    val_part = (EVAL_SEED_BASE + rng.choice(EVAL_SEED_BASE, size=val, replace=False)).tolist()
    return train_part, val_part


def run_seeds(first: int, runs: int = 3) -> tuple[int, ...]:
    """The seeds of ``runs`` repeated runs of one stage: ``first``, ``first + 1``, ..."""
    return tuple(range(first, first + runs))


def update_seed(run_seed: int, step: int) -> int:
    """The seed of the CPU trainer's GRPO update at ``step`` (its minibatch shuffling)."""
    return run_seed * UPDATE_STRIDE + step


def policy_seed(episode: int | np.random.Generator, stream: int | None) -> int:
    """The seed a scripted policy (a teammate, a baseline under test, a warm-up teacher) resets
    with at the start of an episode; :class:`teamgym.envs.lineup.Lineup` is its one caller.

    Three rules, each kept because results depend on it:

    * ``stream`` a number (evaluation: ``teamgym baselines``, ``bench run``, ``play``):
      ``episode * POLICY_STREAM_STRIDE + stream``. Every distinct policy of an episode has its own
      stream, and no two episodes share one. In a benchmark run the agent under test is stream 0
      and its teammates streams 1, 2, ... in agent-name order; the fingerprints depend on it.
    * ``stream`` None (training: the episode loop, the warm-up, the tokenizer corpus): the
      episode seed itself, for every policy. The trained models and the tokenizer were built
      with it; changing it would change them.
    * ``episode`` a generator (the Gymnasium view): a draw from it for each policy in turn, so
      ``reset(seed=None)`` gives fresh teammates, the Gymnasium way; ``stream`` is not used.
    """
    if isinstance(episode, np.random.Generator):
        return int(episode.integers(_DRAWN_SEED_LIMIT))
    if stream is None:
        return episode
    if not 0 <= stream < POLICY_STREAM_STRIDE:
        raise ValueError(f"policy stream must be in 0..{POLICY_STREAM_STRIDE - 1}, got {stream}")
    return episode * POLICY_STREAM_STRIDE + stream


def partner_draw(episode: int) -> float:
    """A number in [0, 1) fixed by the episode seed alone: a partner pool picks episode
    ``episode``'s partner with it (:class:`teamgym.envs.partners.PartnerPool`), so the same seed
    has the same partner on every machine and in every split of a dataset. NumPy's PCG64 from a
    ``SeedSequence`` of ``(PARTNER_STREAM, episode)``, which NumPy keeps stable across releases."""
    return float(np.random.default_rng([PARTNER_STREAM, int(episode)]).random())
