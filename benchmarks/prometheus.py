"""The Prometheus exporter, re-exported: it lives in :mod:`teamgym.adapters.prometheus`, below
both the trainer and the benchmark runner that use it."""

from __future__ import annotations

from teamgym.adapters.prometheus import GAUGES, MetricsExporter

__all__ = ["GAUGES", "MetricsExporter"]
