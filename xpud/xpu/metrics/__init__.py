# SPDX-License-Identifier: Apache-2.0
"""xpud's Prometheus endpoint (docs/xpud.md, Metrics).

    server.py        MetricsServer: GET /metrics, in a thread of its own
    collector.py     the metric families, from one Usage per scrape
    attribution.py   the extension point for the Kubernetes labels

It depends on the daemon's API alone: Service.usage() (the figures `xpuctl
top` shows too, usage.py) and Service.health().
"""

from .attribution import Attribution
from .collector import ALL, DAEMON, GPU, GPU_LABELS, SLICE, SLICE_LABELS, XpuCollector
from .server import MetricsServer, node_name

__all__ = ["ALL", "DAEMON", "GPU", "GPU_LABELS", "SLICE", "SLICE_LABELS",
           "Attribution", "MetricsServer", "XpuCollector", "node_name"]
