"""The CPU GRPO trainer's settings: one frozen dataclass, torch-free so the CLI can read it.

``teamgym train`` generates its flags and their help from these fields and their docstrings,
and the learning benchmarks are ``dataclasses.replace`` overrides of it. The trainer's parts
take the slices they use, read from it: ``args.rollout`` (:class:`RolloutArgs`),
``args.update`` (:class:`UpdateArgs`), ``args.evaluation`` (:class:`EvalArgs`),
``args.warmup`` (:class:`WarmupArgs`), ``args.guard`` (:class:`GuardArgs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from teamgym.envs.partners import PartnerPool
from teamgym.names import DEFAULT_FORCED_MOVES, DEFAULT_SHARING_WEIGHT, DEFAULT_STOP

__all__ = [
    "EvalArgs",
    "GuardArgs",
    "RolloutArgs",
    "TrainArgs",
    "UpdateArgs",
    "WarmupArgs",
    "check_warmup_teachers",
]


#: The advantage estimators the CPU trainer takes (VERL's names).
Estimator = Literal["grpo", "team_grpo", "at_grpo", "team_at_grpo", "gigpo", "team_gigpo"]


@dataclass(frozen=True)
class TrainArgs:
    """Everything a run needs; saved as ``args.json`` in the run directory."""

    model: str
    """Local model directory (teamgym model init)."""
    out: str
    """Run directory: metrics.jsonl, checkpoints, curve.png."""
    env: str = "signal-v0"
    """Environment id."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Environment constructor arguments."""
    teammates: dict[str, str] = field(default_factory=dict)
    """Agents played by a baseline (``{"robot_0": "expert"}``), not trained."""
    partners: list[str] = field(default_factory=list)
    """Frozen partners of the ``partner_seats`` (``SPEC[=WEIGHT]``): a pool, one partner an
    episode, drawn from its seed with the weights (:class:`~teamgym.envs.partners.PartnerPool`);
    baselines, ``checkpoint:DIR`` and LLM servers (``openai:MODEL@URL``, asked each turn by the
    episode loop, as under ``main_ppo``)."""
    partner_seats: list[str] = field(default_factory=list)
    """The agents the partners play (not trained)."""
    eval_partners: list[str] = field(default_factory=list)
    """Partners held out of training (``SPEC[=WEIGHT]``, the same seats): every evaluation
    also plays with them, cross-play, logged as ``eval_crossplay_*`` with the gap
    ``eval_crossplay_gap`` (held-out success with the training partners minus with these)."""
    policy: dict[str, list[str]] = field(default_factory=dict)
    """Policies trained side by side, each on its own seats (``{"speaker": ["robot_0"],
    "listener": ["robot_1"]}``): each its own model, optimiser and GRPO update over its seats'
    trajectories only, the reward still shared through the env; every trained seat in exactly
    one (:func:`~teamgym.adapters.cpu.seats.check_policies`). Empty: one model shared by every trained seat."""
    policy_model: dict[str, str] = field(default_factory=dict)
    """Where a ``policy`` starts (``{"listener": "DIR"}``): a model directory, a full copy of
    its own (with ``model``'s tokenizer), or ``lora:RANK``, a LoRA adapter of that rank over
    ``model``, which stays frozen and shared; a policy not named: a full copy of ``model``."""
    steps: int = 50
    """GRPO updates."""
    episodes_per_step: int = 8
    """Distinct episode seeds per update."""
    group_size: int = 8
    """Rollouts per (seed, agent): the GRPO group (VERL's rollout.n)."""
    lr: float = 3e-4
    """AdamW learning rate."""
    lr_warmup_steps: int = 0
    """Optimiser steps over which the learning rate ramps linearly from 0 to ``lr`` (VERL's
    ``actor.optim.lr_warmup_steps``): Adam's first steps move every weight by about the
    learning rate, which a small model's reply format may not survive; 0: no ramp."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts (evaluation is greedy)."""
    sharing_weight: float = DEFAULT_SHARING_WEIGHT
    """RewardSharing weight (mixed mode)."""
    sharing_mode: Literal["mixed", "proportional", "difference"] = "mixed"
    """RewardSharing mode: ``mixed``, ``proportional``, or ``difference`` (each agent's reward
    is the team score minus the team score had it idled that step: difference rewards)."""
    adv_estimator: Estimator = "grpo"
    """GRPO groups: ``grpo`` one per (seed, agent), ``team_grpo`` one per seed (all agents);
    turn-level: ``at_grpo`` (per agent and turn), ``gigpo`` (episode plus anchor-state steps),
    and their ``team_`` variants (all agents of a seed in one group)."""
    gamma: float = 1.0
    """Discount of the turn-level estimators' returns to go (VERL's ``algorithm.gamma``)."""
    kl_coef: float = 0.01
    """Weight of the KL-to-reference loss (VERL's low_var_kl)."""
    kl_target: float = 0.02
    """Warn when the step's KL exceeds it."""
    kl_limit: float = 0.2
    """The guard rolls back when KL stays above it for ``guard_patience`` steps."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus."""
    ppo_epochs: int = 1
    """Passes over each rollout batch (VERL's ppo_epochs)."""
    mini_batches: int = 1
    """Optimiser steps per pass: the batch is split into this many shuffled mini-batches."""
    micro_batch: int = 2
    """Trajectories per forward and backward pass (VERL's ppo_micro_batch_size_per_gpu): an
    optimiser step accumulates the gradients of its mini-batch's micro-batches, weighted so the
    loss is the mini-batch's token mean; the update's memory grows with it, its result does not
    (2 keeps SmolLM2's step under 6 GB: docs/speed.md). Copies of one prompt (a GRPO group's)
    fill micro-batches together and run that prompt once: at the group size, once a group."""
    clip_ratio: float = 0.2
    """PPO clip range."""
    max_reply_tokens: int = 16
    """Tokens per reply."""
    forced_moves: Literal["auto", "model"] = DEFAULT_FORCED_MOVES
    """``auto``: turns with one valid action are played without the model (no gradient)."""
    stop: list[str] = field(default_factory=lambda: list(DEFAULT_STOP))
    """Stop strings ending a reply, so the model never learns where to stop (at a high
    learning rate its end-of-reply token fades and a junk tail swamps the update)."""
    prompt_length: int = 512
    """VERL rollout.prompt_length: at least the env's first turn in tokens."""
    response_length: int = 256
    """VERL rollout.response_length (all of one agent's later turns)."""
    eval_every: int = 10
    """Held-out evaluation every N steps and at the end (0: never)."""
    eval_episodes: int = 64
    """Held-out episodes per evaluation."""
    guard_patience: int = 3
    """Consecutive bad steps before the guard restores the stable checkpoint (0: no guard, as
    for a learning curve: with few episodes a step, success swings with the batch's targets)."""
    seed: int = 0
    """Seeds sampling, episode draws and initialisation."""
    resume: bool = False
    """Continue the run in ``out`` from its last checkpoint."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on 127.0.0.1:PORT."""
    warmup_steps: int = 300
    """Supervised format warm-up steps before GRPO (0 skips it)."""
    warmup_policy: str = "random"
    """Teacher of the warm-up: ``random`` (format only) or a baseline such as ``expert``
    (behaviour cloning: the supervised upper bound for this model)."""
    warmup_teachers: dict[str, str] = field(default_factory=dict)
    """Per-agent teachers of the warm-up (``{"robot_1": "checkpoint:DIR"}``), overriding
    ``warmup_policy`` for those agents: a curriculum warms one role's format while another
    role replays its own policy, so a shared model keeps what that role learned."""
    warmup_lr: float = 1e-3
    """AdamW learning rate of the warm-up."""
    warmup_episodes: int = 0
    """Episodes the teacher plays for the warm-up's examples; 0: one per 8 examples the
    warm-up draws (each example is seen about 8 times)."""
    warmup_prompts: bool = False
    """Score the prompt tokens too in the warm-up (language-model pretraining on the env's
    text, with the teacher's replies): lines that repeat earlier ones, such as the valid
    actions after the list of objects, train copying, which a loss on the replies alone may
    never do; it teaches no strategy, and it is no sure way to the listener's copy (the runs
    are in the README's Learning benchmarks section, listener stage)."""

    @property
    def rollout(self) -> RolloutArgs:
        """How this run's episodes are played and its replies sampled."""
        return RolloutArgs(
            model=self.model,
            env=self.env,
            env_kwargs=self.env_kwargs,
            teammates=self.teammates,
            partners=tuple(self.partners),
            partner_seats=tuple(self.partner_seats),
            sharing_weight=self.sharing_weight,
            sharing_mode=self.sharing_mode,
            temperature=self.temperature,
            max_reply_tokens=self.max_reply_tokens,
            forced_moves=self.forced_moves,
            stop=tuple(self.stop),
            prompt_length=self.prompt_length,
            response_length=self.response_length,
        )

    @property
    def update(self) -> UpdateArgs:
        """This run's GRPO update and optimiser."""
        return UpdateArgs(
            adv_estimator=self.adv_estimator,
            gamma=self.gamma,
            lr=self.lr,
            lr_warmup_steps=self.lr_warmup_steps,
            kl_coef=self.kl_coef,
            entropy_coef=self.entropy_coef,
            clip_ratio=self.clip_ratio,
            ppo_epochs=self.ppo_epochs,
            mini_batches=self.mini_batches,
            micro_batch=self.micro_batch,
        )

    @property
    def evaluation(self) -> EvalArgs:
        """This run's held-out evaluation."""
        return EvalArgs(
            rollout=self.rollout, out=self.out, every=self.eval_every, episodes=self.eval_episodes
        )

    @property
    def warmup(self) -> WarmupArgs:
        """This run's supervised warm-up."""
        return WarmupArgs(
            rollout=self.rollout,
            seed=self.seed,
            steps=self.warmup_steps,
            lr=self.warmup_lr,
            teacher=self.warmup_policy,
            teachers=self.warmup_teachers,
            episodes=self.warmup_episodes,
            prompts=self.warmup_prompts,
        )

    @property
    def guard(self) -> GuardArgs:
        """This run's watch on KL and success."""
        return GuardArgs(
            kl_target=self.kl_target, kl_limit=self.kl_limit, patience=self.guard_patience
        )


# The slices of ``TrainArgs`` the trainer's parts take (``args.rollout``, ``args.update``, ...):
# read from it, never set on their own, so ``TrainArgs`` stays the one record of a run.


@dataclass(frozen=True)
class RolloutArgs:
    """How episodes are played and replies sampled: the env and its teammates, VERL's rollout
    config and the agent loop's reply rules (training rollouts, evaluation, the warm-up's
    teachers). Each field is the :class:`TrainArgs` field of the same name."""

    model: str
    env: str
    env_kwargs: dict[str, Any]
    teammates: dict[str, str]
    partners: tuple[str, ...]
    partner_seats: tuple[str, ...]
    sharing_weight: float
    sharing_mode: str
    temperature: float
    max_reply_tokens: int
    forced_moves: Literal["auto", "model"]
    stop: tuple[str, ...]
    prompt_length: int
    response_length: int

    @property
    def pool(self) -> PartnerPool | None:
        """The partner pool of ``partners`` and ``partner_seats`` (None without partners)."""
        if not self.partners and not self.partner_seats:
            return None
        return PartnerPool.parse(self.partners, self.partner_seats)

    def with_partners(self, partners: tuple[str, ...]) -> RolloutArgs:
        """The same rollouts with another pool in the same seats (held-out partners)."""
        return replace(self, partners=partners)


@dataclass(frozen=True)
class UpdateArgs:
    """The GRPO update and its optimiser. Each field is the :class:`TrainArgs` field of the
    same name (``clip_ratio`` reaches the update through VERL's actor config)."""

    adv_estimator: Estimator
    gamma: float
    lr: float
    lr_warmup_steps: int
    kl_coef: float
    entropy_coef: float
    clip_ratio: float
    ppo_epochs: int
    mini_batches: int
    micro_batch: int

    def __post_init__(self) -> None:
        for name in ("ppo_epochs", "mini_batches", "micro_batch"):
            if getattr(self, name) < 1:
                flag = name.replace("_", "-")
                raise ValueError(f"--{flag} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class EvalArgs:
    """The held-out evaluation: greedy episodes on the evaluation seeds, played by ``rollout``."""

    rollout: RolloutArgs
    """How the episodes are played."""
    out: str
    """``TrainArgs.out``: the run directory, where the evaluation writes its agent-loop YAML."""
    every: int
    """``TrainArgs.eval_every``."""
    episodes: int
    """``TrainArgs.eval_episodes``."""

    def due(self, step: int, last: int) -> bool:
        """Whether GRPO step ``step`` of ``last`` ends with an evaluation: every ``every``
        steps and at the last (never when ``every`` is 0)."""
        return bool(self.every) and (step % self.every == 0 or step == last)


@dataclass(frozen=True)
class WarmupArgs:
    """The supervised warm-up before GRPO: a teacher plays, the model learns its replies."""

    rollout: RolloutArgs
    """How the teacher's episodes are played (the model warmed up is ``rollout.model``)."""
    seed: int
    """``TrainArgs.seed``."""
    steps: int
    """``TrainArgs.warmup_steps``."""
    lr: float
    """``TrainArgs.warmup_lr``."""
    teacher: str
    """``TrainArgs.warmup_policy``."""
    teachers: dict[str, str]
    """``TrainArgs.warmup_teachers``."""
    episodes: int
    """``TrainArgs.warmup_episodes``."""
    prompts: bool
    """``TrainArgs.warmup_prompts``."""
    seats: tuple[str, ...] = ()
    """The trained agents whose turns are examples (one policy's seats: ``TrainArgs.policy``);
    empty: every trained agent's. The teachers play every trained agent either way."""

    def check_teachers(self, agents: list[str]) -> None:
        """Refuse ``teachers`` for an agent the env lacks or a teammate plays (its turns are
        never warm-up examples), so a typo does not silently warm up the default teacher."""
        teammates = self.rollout.teammates
        for agent in self.teachers:
            if agent not in agents:
                raise ValueError(f"warm-up teacher for {agent!r}: the env's agents are {agents}")
            if agent in teammates:
                raise ValueError(
                    f"warm-up teacher for {agent!r}: {teammates[agent]!r} plays it as a "
                    "teammate, so it is not trained; drop one of the two"
                )
            if agent in self.rollout.partner_seats:
                raise ValueError(
                    f"warm-up teacher for {agent!r}: it is a partner seat, so it is not "
                    "trained; drop one of the two"
                )


@dataclass(frozen=True)
class GuardArgs:
    """The watch on a run's KL and success."""

    kl_target: float
    """``TrainArgs.kl_target``: a step's KL above it is a warning."""
    kl_limit: float
    """``TrainArgs.kl_limit``."""
    patience: int
    """``TrainArgs.guard_patience`` (0: no guard)."""


def check_warmup_teachers(args: TrainArgs, agents: list[str]) -> None:
    """Refuse ``warmup_teachers`` for an agent the env lacks or a teammate plays: the rule of
    :meth:`WarmupArgs.check_teachers`, for a whole ``TrainArgs`` (the command line's check)."""
    args.warmup.check_teachers(agents)
