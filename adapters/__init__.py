"""How trainers reach teamgym environments: the VERL adapter, the CPU GRPO trainer, local
models, frozen checkpoints as teammates.

Each adapter lives in its own module and imports its heavy dependencies (torch, verl) only when
it is used, so ``import teamgym.adapters`` stays cheap and offline. Importing it registers the
``checkpoint:PATH`` baseline family with ``teamgym.envs.baselines``.
"""

from teamgym.adapters import checkpoint_policy as _checkpoint_policy  # noqa: F401  (registers checkpoint:)
