"""Prometheus exporter of the trainer's step records (``prometheus_client``).

Episode metrics (success, team reward, collaboration index, communication frequency,
invalid-action rate) and training metrics (KL, entropy, loss, episodes/s) as gauges named
``teamgym_<metric>``, served on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["EPISODE_GAUGES", "GAUGES", "MetricsExporter", "record_exporter"]

#: record key -> (gauge name, help text)
GAUGES = {
    "success": ("teamgym_success", "Episode success rate of the last step"),
    "team_return": (
        "teamgym_team_reward",
        "Mean team return (sum of individual rewards) of the last step",
    ),
    "collaboration_index": ("teamgym_collaboration_index", "Completed / attempted subtasks"),
    "communication_frequency": ("teamgym_communication_frequency", "Messages per agent-step"),
    "invalid_action_rate": ("teamgym_invalid_action_rate", "Invalid replies per agent-step"),
    "kl": ("teamgym_kl", "KL of the policy to the reference model"),
    "entropy": ("teamgym_entropy", "Policy entropy per response token"),
    "loss": ("teamgym_loss", "Training loss"),
    "episodes_per_s": ("teamgym_episodes_per_second", "Rollout episodes per second"),
    "step": ("teamgym_step", "Training step"),
}


#: The gauges of a benchmark run (``bench run --metrics-port``): the episode metrics only, so a
#: scrape shows no training gauges that would sit at 0.
EPISODE_GAUGES = {
    key: GAUGES[key]
    for key in (
        "success",
        "team_return",
        "collaboration_index",
        "communication_frequency",
        "invalid_action_rate",
    )
}


class MetricsExporter:
    """Gauges on their own registry, served over HTTP at ``host:port`` (``/metrics``);
    ``gauges``: which of :data:`GAUGES` (record key -> name and help) it serves."""

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        gauges: Mapping[str, tuple[str, str]] = GAUGES,
    ) -> None:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        self.registry = CollectorRegistry()
        self.gauges = {
            key: Gauge(name, doc, registry=self.registry) for key, (name, doc) in gauges.items()
        }
        self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = self.server.server_port

    def update(self, record: Mapping[str, Any]) -> None:
        """Set every gauge whose key is in ``record``."""
        for key, gauge in self.gauges.items():
            value = record.get(key)
            if isinstance(value, (int, float)):
                gauge.set(float(value))

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()


def record_exporter(
    port: int | None, gauges: Mapping[str, tuple[str, str]] = GAUGES
) -> Callable[[Mapping[str, Any]], None]:
    """``MetricsExporter(port, gauges=gauges).update``, or a no-op without a port (no server,
    no import)."""
    if port is None:
        return lambda record: None
    return MetricsExporter(port, gauges=gauges).update
