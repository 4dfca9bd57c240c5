"""VERL adapter: multi-agent teamgym episodes as VERL rollout batches (docs: Train with VERL).

``python -m teamgym.adapters.verl.train`` is the entry; each module's docstring says its part.
Needs the ``verl`` extra; nothing here is imported by ``import teamgym``.
"""
