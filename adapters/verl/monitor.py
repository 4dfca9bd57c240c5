"""``teamgym verl-kl-watch FILE``: follow VERL's file-logger JSONL and warn when the actor's KL
to the reference passes its target (0.02 by default), so a drifting run is seen while it runs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["KL_KEYS", "kl_alerts"]

#: Metrics VERL logs for the actor's divergence from the reference policy.
KL_KEYS = ("actor/kl_loss", "actor/ppo_kl")


def kl_alerts(
    path: str | Path, target: float = 0.02, follow: bool = False, poll: float = 2.0
) -> Iterator[str]:
    """Yield one message per logged step whose KL exceeds ``target``; with ``follow``, keep reading."""
    with Path(path).open("r", encoding="utf-8") as handle:
        while True:
            line = handle.readline()
            if not line:
                if not follow:
                    return
                time.sleep(poll)
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            data = record.get("data", {})
            for key in KL_KEYS:
                value = data.get(key)
                if isinstance(value, (int, float)) and value > target:
                    yield f"step {record.get('step')}: {key}={value:.4f} > target {target} (lower lr or raise kl_loss_coef)"
