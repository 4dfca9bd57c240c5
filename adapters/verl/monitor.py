"""``teamgym verl-kl-watch FILE``: follow VERL's file-logger JSONL and warn when the actor's KL
to the reference passes its target (0.02 by default), so a drifting run is seen while it runs;
and read each validation's self-play and cross-play gap (:func:`crossplay_figures`)."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["KL_KEYS", "crossplay_figures", "kl_alerts", "kl_messages", "log_records"]

#: Metrics VERL logs for the actor's divergence from the reference policy.
KL_KEYS = ("actor/kl_loss", "actor/ppo_kl")


#: A validation figure of a partner's data source (``<env>/with:<partner>``, as
#: ``teamgym verl-data --val-partner`` names them): verl logs ``val-aux/<source>/<metric>/mean@N``.
_PARTNER_KEY = re.compile(
    r"val-(?:aux|core)/(?P<env>[^/]+)/with:(?P<partner>[^/]+)/(?P<metric>success|score|team_return)/mean@\d+"
)


def crossplay_figures(data: Mapping[str, Any], metric: str = "success") -> dict[str, Any]:
    """One validation's ``metric`` per env and partner, and per env the self-play/cross-play
    gap: self-play (``with:self``) minus the mean over the other partners (None without both);
    empty when ``data`` (one logged step) holds no partner figures."""
    found: dict[str, dict[str, float]] = {}
    for key, value in data.items():
        match = _PARTNER_KEY.fullmatch(key)
        if match and match["metric"] == metric and isinstance(value, (int, float)):
            found.setdefault(match["env"], {}).setdefault(match["partner"], float(value))
    out: dict[str, Any] = {}
    for env, partners in sorted(found.items()):
        cross = [v for p, v in partners.items() if p != "self" and not math.isnan(v)]
        mine = partners.get("self")
        mine = None if mine is None or math.isnan(mine) else mine
        gap = mine - sum(cross) / len(cross) if mine is not None and cross else None
        out[env] = {"partners": dict(sorted(partners.items())), "gap": gap}
    return out


def log_records(path: str | Path, follow: bool = False, poll: float = 2.0) -> Iterator[dict]:
    """The records of VERL's file log (``{"step": N, "data": {...}}``), as written; with
    ``follow``, keep reading (a line being written is read once it is whole)."""
    with Path(path).open("r", encoding="utf-8") as handle:
        while True:
            line = handle.readline()
            if not line:
                if not follow:
                    return
                time.sleep(poll)
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written


def kl_messages(record: Mapping[str, Any], target: float = 0.02) -> list[str]:
    """One warning per KL metric of a logged step that exceeds ``target``."""
    data = record.get("data", {})
    return [
        f"step {record.get('step')}: {key}={value:.4f} > target {target} "
        "(lower lr or raise kl_loss_coef)"
        for key in KL_KEYS
        if isinstance(value := data.get(key), (int, float)) and value > target
    ]


def kl_alerts(
    path: str | Path, target: float = 0.02, follow: bool = False, poll: float = 2.0
) -> Iterator[str]:
    """Yield one message per logged step whose KL exceeds ``target``; with ``follow``, keep reading."""
    for record in log_records(path, follow, poll):
        yield from kl_messages(record, target)
