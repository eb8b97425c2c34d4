# SPDX-License-Identifier: Apache-2.0
"""The metric families of /metrics, built from one Usage per scrape.

Every metric is listed once, in SLICE, GPU and DAEMON below, with its type,
help and the figure it shows; docs/xpud.md (Metrics) has the same table,
and deploy/grafana/xpu-dashboard.json queries only these names (both are
checked by tests/unit/xpud/test_xpud_metrics.py).

Labels are dcgm-exporter's, so that its series and ours join:
`gpu` (nvidia-smi's index), `UUID`, `device` (nvidiaN), `modelName`,
`Hostname` (NODE_NAME, else the host name, as dcgm-exporter takes it); the
per-slice metrics add `slice`, and an Attribution's labels when one is
plugged in (attribution.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..backend import BackendError
from ..usage import GpuUsage, SliceUsage, Usage
from .attribution import Attribution, check_label_names

log = logging.getLogger(__name__)

GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")
SLICE_LABELS = GPU_LABELS + ("slice",)

GAUGE = "gauge"
COUNTER = "counter"


@dataclass(frozen=True)
class Metric:
    name: str          # as scraped: a counter's ends in _total
    kind: str          # GAUGE or COUNTER
    help: str
    # The figure, from a SliceUsage, a GpuUsage, or None; a figure of None
    # (not known) is left out of the family.
    value: Callable
    # A label of the family's own: the figure is then a mapping of that
    # label's values to figures (or None: none known).
    by: str = ""


SLICE = (
    Metric("xpu_slice_memory_limit_bytes", GAUGE,
           "The slice's video-memory limit.",
           lambda s: s.memory_limit_bytes),
    Metric("xpu_slice_memory_used_bytes", GAUGE,
           "Video memory the slice's processes hold, by the driver's own "
           "count.",
           lambda s: s.memory_used_bytes),
    Metric("xpu_slice_memory_peak_bytes", GAUGE,
           "The most video memory the slice has held since it was made.",
           lambda s: s.memory_peak_bytes),
    Metric("xpu_slice_host_memory_limit_bytes", GAUGE,
           "The slice's bound on the system memory the driver allocates "
           "for its clients (pinned host pages); 0: no bound.",
           lambda s: s.host_memory_limit_bytes),
    Metric("xpu_slice_host_memory_used_bytes", GAUGE,
           "System memory the driver allocated for the slice's clients "
           "(pinned host pages), as xpu.ko charges it.",
           lambda s: s.host_memory_used_bytes),
    Metric("xpu_slice_rm_handles", GAUGE,
           "RM handles (clients and objects) the slice's clients hold, as "
           "xpu.ko counts them.",
           lambda s: s.rm_handles),
    Metric("xpu_slice_rm_handles_limit", GAUGE,
           "xpu.ko's bound on the RM handles of the slice's clients (the "
           "module parameter max_handles, the same for every slice); a "
           "call past it is refused. Absent when it cannot be read.",
           lambda s: s.rm_handles_limit),
    Metric("xpu_slice_os_events", GAUGE,
           "OS events (NV_ESC_ALLOC_OS_EVENT) the slice's clients hold, as "
           "xpu.ko counts them.",
           lambda s: s.os_events),
    Metric("xpu_slice_os_events_limit", GAUGE,
           "xpu.ko's bound on the OS events of the slice's clients (the "
           "module parameter max_os_events, the same for every slice); a "
           "call past it is refused. Absent when it cannot be read.",
           lambda s: s.os_events_limit),
    Metric("xpu_slice_records", GAUGE,
           "RM objects xpu.ko keeps a record of for the slice, by kind "
           "(devices, va_spaces, virtual_allocations, tsgs, channels, "
           "usermode_objects).",
           lambda s: s.records, by="kind"),
    Metric("xpu_slice_records_limit", GAUGE,
           "xpu.ko's bound on the records of each kind (the module "
           "parameter max_records, the same for every slice); a call past "
           "it is refused. Absent when it cannot be read.",
           lambda s: s.records_limit),
    Metric("xpu_slice_doorbell_files", GAUGE,
           "Files the slice's doorbell page is mapped through, each zapped "
           "at every switch.",
           lambda s: s.doorbell_files),
    Metric("xpu_slice_doorbell_files_limit", GAUGE,
           "xpu.ko's bound on them (the module parameter "
           "max_doorbell_files, the same for every slice); an mmap past it "
           "fails. Absent when it cannot be read.",
           lambda s: s.doorbell_files_limit),
    Metric("xpu_slice_denied_allocations_total", COUNTER,
           "Allocations refused at the slice's video-memory limit or "
           "host-memory bound.",
           lambda s: s.denied_allocs),
    Metric("xpu_slice_killed_processes_total", COUNTER,
           "Processes killed for getting around the slice's memory limit.",
           lambda s: s.killed),
    Metric("xpu_slice_compute_share_ratio", GAUGE,
           "The slice's configured compute share: the fraction of its "
           "GPU's time guaranteed to it.",
           lambda s: s.compute_share / 1000),
    Metric("xpu_slice_compute_obtained_ratio", GAUGE,
           "The fraction of its GPU's time the slice held over the last "
           "second.",
           lambda s: s.compute_obtained / 1000),
    Metric("xpu_slice_run_seconds_total", COUNTER,
           "Time the slice held its GPU with work to do.",
           lambda s: s.run_seconds),
    Metric("xpu_slice_gated_seconds_total", COUNTER,
           "Time the slice had work and xpu's scheduler held it back.",
           lambda s: s.gated_seconds),
    Metric("xpu_slice_runnable_seconds_total", COUNTER,
           "Time the slice had work for its GPU (running or held back).",
           lambda s: s.runnable_seconds),
    Metric("xpu_slice_processes", GAUGE,
           "Processes that use the slice's device files.",
           lambda s: s.processes),
)

GPU = (
    Metric("xpu_gpu_memory_total_bytes", GAUGE,
           "The GPU's video memory, as the driver reports it.",
           lambda g: g.memory_total_bytes),
    Metric("xpu_gpu_memory_sliced_bytes", GAUGE,
           "The sum of the memory limits of the GPU's slices.",
           lambda g: g.memory_sliced_bytes),
    Metric("xpu_gpu_memory_orphaned_bytes", GAUGE,
           "Video memory of destroyed slices that something outside every "
           "slice still keeps (an export or dma-buf fd passed out), charged "
           "to the GPU: new memory limits get what is neither sliced nor "
           "this.",
           lambda g: g.memory_orphaned_bytes),
    Metric("xpu_gpu_slices", GAUGE, "Slices on the GPU.",
           lambda g: g.slices),
    Metric("xpu_gpu_channel_ids", GAUGE,
           "The GPU's channel ids its slices share out: half in equal "
           "floors owed to each slice and to the processes outside them "
           "(0: xpu.ko does not say).",
           lambda g: g.channel_ids),
)

# value: from the scrape's (up, Health).
DAEMON = (
    Metric("xpu_up", GAUGE,
           "1 when xpud read xpu.ko's slices for this scrape, 0 when it "
           "could not (xpu.ko not loaded, or failing: xpud's log says why).",
           lambda up, h: up),
    Metric("xpud_reconciles_total", COUNTER,
           "Passes xpud made to bring xpu.ko to the desired state.",
           lambda up, h: h.reconciles),
    Metric("xpud_reconcile_errors_total", COUNTER,
           "What those passes could not apply: each pending slice, slice "
           "not removed or GPU not set counts once per pass.",
           lambda up, h: h.reconcile_errors),
    Metric("xpud_slices_pending", GAUGE,
           "Slices xpud wants that are not in force, after its last pass.",
           lambda up, h: h.slices_pending),
    Metric("xpu_uvm_retains_unwatched_total", COUNTER,
           "The driver's retains of a channel for UVM whose return xpu.ko "
           "could not watch (its probe's uvm_probe_maxactive instances all "
           "taken): what they pinned stays charged until xpu.ko is "
           "reloaded (docs/security.md, class 44); as of xpud's last pass.",
           lambda up, h: h.uvm_retains_unwatched),
)

ALL = SLICE + GPU + DAEMON


class Source(Protocol):
    """What the exporter asks of the daemon (the Service)."""

    def usage(self) -> Usage: ...

    def health(self): ...


def _family(m: Metric, labels: tuple[str, ...] = ()):
    if m.kind == COUNTER:
        return CounterMetricFamily(m.name, m.help, labels=labels)
    return GaugeMetricFamily(m.name, m.help, labels=labels)


def gpu_labels(g: GpuUsage, hostname: str) -> list[str]:
    return ["" if g.index is None else str(g.index), g.uuid or "",
            f"nvidia{g.minor}", g.name, hostname]


class XpuCollector(Collector):
    """Reads SOURCE once per scrape and builds every family from that
    one Usage."""

    def __init__(self, source: Source, hostname: str,
                 attribution: Attribution | None = None):
        self.source = source
        self.hostname = hostname
        self._attribution: Attribution | None = None
        self._said: dict[str, str] = {}
        self._said_lock = threading.Lock()
        if attribution is not None:
            self.set_attribution(attribution)

    def set_attribution(self, attribution: Attribution | None) -> None:
        """Plug in (or, with None, take out) who uses each slice."""
        if attribution is not None:
            check_label_names(tuple(attribution.label_names), SLICE_LABELS)
        self._attribution = attribution

    def describe(self) -> Iterator:
        # The names, for the registry; without this it would scrape once.
        for m in ALL:
            yield _family(m)

    def _say(self, subject: str, level: int, message: str) -> None:
        """Log MESSAGE once until it changes ('' when well again):
        Prometheus scrapes every few seconds."""
        with self._said_lock:
            if self._said.get(subject, "") == message:
                return
            before = self._said.pop(subject, "")
            if message:
                self._said[subject] = message
        if message:
            log.log(level, "%s", message)
        elif before:
            log.info("metrics: %s again", subject)

    def _read(self) -> Usage | None:
        try:
            u = self.source.usage()
        except BackendError as e:
            self._say("xpu.ko's slices are read", logging.WARNING,
                      f"metrics: cannot read xpu.ko's slices: {e}")
            return None
        except Exception as e:  # noqa: BLE001 -- a scrape must answer
            self._say("xpu.ko's slices are read", logging.ERROR,
                      f"metrics: reading xpu.ko's slices failed: "
                      f"{type(e).__name__}: {e}")
            return None
        self._say("xpu.ko's slices are read", logging.INFO, "")
        return u

    def _attribute(self, u: Usage) -> tuple[tuple[str, ...], dict]:
        a = self._attribution
        if a is None:
            return (), {}
        names = tuple(a.label_names)
        try:
            got = a.labels(u)
            values = {name: tuple(str(got[name].get(n, "")) for n in names)
                      for name in got}
        except Exception as e:  # noqa: BLE001 -- labels are not worth a scrape
            self._say("slices are attributed", logging.WARNING,
                      f"metrics: the slices' {', '.join(names)} labels "
                      f"are empty: {type(e).__name__}: {e}")
            return names, {}
        self._say("slices are attributed", logging.INFO, "")
        return names, values

    def collect(self) -> Iterator:
        u = self._read()
        health = self.source.health()
        slices: tuple[SliceUsage, ...] = u.slices if u else ()
        gpus: tuple[GpuUsage, ...] = u.gpus if u else ()
        extra, who = self._attribute(u) if u else ((), {})
        blank = ("",) * len(extra)
        for m in SLICE:
            own = (m.by,) if m.by else ()
            fam = _family(m, SLICE_LABELS + extra + own)
            for s in slices:
                value = m.value(s)
                if value is None:
                    continue
                labels = (gpu_labels(s.gpu, self.hostname) + [s.name]
                          + list(who.get(s.name, blank)))
                if not m.by:
                    fam.add_metric(labels, value)
                    continue
                for key, v in value.items():
                    fam.add_metric(labels + [key], v)
            yield fam
        for m in GPU:
            fam = _family(m, GPU_LABELS)
            for g in gpus:
                fam.add_metric(gpu_labels(g, self.hostname), m.value(g))
            yield fam
        for m in DAEMON:
            fam = _family(m)
            value = m.value(1 if u else 0, health)
            if value is not None:       # not known: no sample
                fam.add_metric([], value)
            yield fam
