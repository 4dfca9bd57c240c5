"""VERL adapter: multi-agent teamgym episodes as VERL rollout batches for shared-reward GRPO.

Pieces, each one module: ``dataset`` (parquet rows, one per episode seed and agent), ``hub``
(where the agents of an episode meet), ``agent_loop`` (VERL ``AgentLoopBase`` subclass,
registered as ``teamgym_agent``), ``advantage`` (the ``team_grpo`` estimator), ``config``
(start-up validation, paths of our Hydra overlay), ``server`` (CPU servers with VERL's
``generate()`` interface), ``train`` (``python -m teamgym.adapters.verl.train``).

Needs the ``verl`` extra; nothing here is imported by ``import teamgym``.
"""
