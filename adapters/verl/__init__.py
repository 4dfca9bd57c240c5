"""VERL adapter: multi-agent teamgym episodes as VERL rollout batches for shared-reward GRPO.

Pieces, each one module: ``dataset`` (parquet rows, one per episode seed), ``episode_loop``
(VERL ``AgentLoopBase`` subclass playing a whole episode, registered as ``teamgym_episode``),
``workers`` (verl's workers building it by a call), ``advantage`` (the ``team_grpo`` estimator), ``config``
(start-up validation, paths of our Hydra overlay), ``server`` (CPU servers with VERL's
``generate()`` interface), ``train`` (``python -m teamgym.adapters.verl.train``).

Needs the ``verl`` extra; nothing here is imported by ``import teamgym``.
"""
