"""How agents and trainers reach teamgym environments, one room each: ``agents/`` (what a
benchmark plays: LLM agents, local models, frozen checkpoints as teammates, ``teamgym serve``),
``cpu/`` (the CPU GRPO trainer), ``verl/`` (the VERL adapter), ``rl/`` (Gymnasium and TorchRL
bridges); ``prometheus`` exports the metrics of a run or a training.

Each adapter lives in its own module and imports its heavy dependencies (torch, verl) only when
it is used, so ``import teamgym.adapters`` stays cheap and offline. Importing it registers the
``checkpoint:PATH`` baseline family with ``teamgym.envs.baselines``.
"""

from teamgym.adapters.agents import checkpoint as _checkpoint  # noqa: F401  (registers checkpoint:)
