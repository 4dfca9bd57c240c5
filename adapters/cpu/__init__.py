"""The CPU GRPO trainer: shared-reward GRPO on the local model, no GPU, no VERL workers.

``args`` (``TrainArgs``: every setting of a run), ``trainer`` (the step loop), ``rollout``
(episodes through VERL's agent loop on a CPU server), ``grpo`` (the policy-gradient step),
``warmup`` (the optional format warm-up on a babbler's replies), ``policies`` (one shared model,
or a model per seat or group of seats), ``lora`` (LoRA policies over a shared base),
``run_state`` (checkpoints and resume). ``teamgym train --cpu`` and the learning stages (``teamgym learn``) run it.
"""
