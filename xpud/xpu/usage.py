# SPDX-License-Identifier: Apache-2.0
"""What each slice uses, from one read of xpu.ko's slice list.

`xpuctl top` (the API's `top` op) and the Prometheus endpoint (xpu/metrics/)
both show these figures, and both get them from figures() alone, so that the
two never disagree: one read of the kernel (KernelRead: XPU_IOC_GPU_LIST,
then XPU_IOC_SLICE_LIST and XPU_IOC_SLICE_GET of each slice) becomes one
Usage, in the units people read (bytes, seconds, per mille of the GPU).

figures() is pure.  The read itself is the backend's (Backend.read_usage),
which may be called from any thread: it opens /dev/xpuctl on its own and
touches nothing of the service's, so a reader never waits for a reconcile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import ctl, model, sizes

NS = 1_000_000_000


@dataclass(frozen=True)
class KernelRead:
    """One read of xpu.ko: its GPUs and its slices, at TIME (seconds since
    the epoch), its bound on each slice's RM handles (the module
    parameter max_handles) and on each slice's OS events (the module
    parameter max_os_events); each None when it cannot be read."""

    time: float
    gpus: tuple[ctl.GpuInfo, ...]
    slices: tuple[ctl.SliceInfo, ...]
    rm_handles_limit: int | None = None
    os_events_limit: int | None = None
    # xpu.ko's bounds on each kind of record and on the doorbell files
    # (max_records, max_doorbell_files)
    records_limit: int | None = None
    doorbell_files_limit: int | None = None


# The kinds of RM object xpu.ko keeps a record of, as the API names them,
# and SliceInfo's field for each.
RECORD_KINDS = (("devices", "devices"), ("va_spaces", "vaspaces"),
                ("virtual_allocations", "virtuals"), ("tsgs", "tsgs"),
                ("channels", "channels"), ("usermode_objects", "usermode"))


def records_of(s: ctl.SliceInfo) -> dict[str, int] | None:
    """The records' counts of S by kind, as the API names them; None from
    an xpu.ko that does not give them."""
    if s.devices is None:
        return None
    return {kind: getattr(s, field) for kind, field in RECORD_KINDS}


@dataclass(frozen=True)
class GpuUsage:
    """A GPU xpu.ko serves.  index, uuid and name are the inventory's
    (nvidia-smi's index, NVML's UUID and model name), matched by minor;
    None (name "unknown") for a GPU the inventory does not know yet."""

    index: int | None
    uuid: str | None
    minor: int
    name: str
    memory_total_bytes: int     # as the driver says, what limits are checked against
    memory_sliced_bytes: int    # the sum of its slices' memory limits
    slices: int
    channel_ids: int = 0        # its slices share them out; 0: not said
    # destroyed slices' memory something outside every slice keeps
    memory_orphaned_bytes: int = 0

    def to_api(self) -> dict:
        return {"index": self.index, "gpu_uuid": self.uuid,
                "gpu_minor": self.minor, "name": self.name,
                "memory_total_bytes": self.memory_total_bytes,
                "memory_sliced_bytes": self.memory_sliced_bytes,
                "memory_orphaned_bytes": self.memory_orphaned_bytes,
                "slices": self.slices, "channel_ids": self.channel_ids}


@dataclass(frozen=True)
class SliceUsage:
    """A slice as xpu.ko holds and measures it."""

    name: str
    id: int
    gpu: GpuUsage
    memory_limit_bytes: int
    memory_used_bytes: int      # RM's own count for the slice's processes
    memory_peak_bytes: int      # the most it held since it was made
    denied_allocs: int          # allocations refused at the limit
    killed: int                 # processes killed for cheating the limit
    compute_share: int          # configured, per mille of the GPU's time
    compute_obtained: int       # obtained over the last second, per mille
    run_seconds: float          # time it held the GPU with work to do
    gated_seconds: float        # time it had work and was held back
    runnable_seconds: float     # time it had work
    processes: int              # processes that used its files
    open_files: int             # driver files open in it
    channels: int               # GPU channels its clients own
    # System memory the driver allocated for its clients (pinned host
    # pages), as xpu.ko charges it, and its bound (0: none).
    host_memory_used_bytes: int = 0
    host_memory_limit_bytes: int = 0
    # RM handles (clients and objects) its clients hold, as xpu.ko counts
    # them, and xpu.ko's bound on them (max_handles, the same for every
    # slice; None when it cannot be read).
    rm_handles: int = 0
    rm_handles_limit: int | None = None
    # OS events (NV_ESC_ALLOC_OS_EVENT) its clients hold, as xpu.ko counts
    # them, and xpu.ko's bound on them (max_os_events, the same for every
    # slice; None when it cannot be read).
    os_events: int = 0
    os_events_limit: int | None = None
    # The RM objects xpu.ko keeps a record of, by kind (RECORD_KINDS), and
    # the files its doorbell page is mapped through, with xpu.ko's bounds
    # (max_records, each kind; max_doorbell_files); None when not known.
    records: dict[str, int] | None = None
    records_limit: int | None = None
    doorbell_files: int | None = None
    doorbell_files_limit: int | None = None

    def to_api(self) -> dict:
        """The `top` op's fields (docs/api.md, Usage); shares in percent,
        as everywhere in the API."""
        return {
            "name": self.name,
            "id": self.id,
            "gpu_index": self.gpu.index,
            "gpu_uuid": self.gpu.uuid,
            "gpu_minor": self.gpu.minor,
            "gpu_name": self.gpu.name,
            "memory_limit_bytes": self.memory_limit_bytes,
            "memory_used_bytes": self.memory_used_bytes,
            "memory_peak_bytes": self.memory_peak_bytes,
            "host_memory_used_bytes": self.host_memory_used_bytes,
            "host_memory_limit_bytes": self.host_memory_limit_bytes,
            "rm_handles": self.rm_handles,
            "rm_handles_limit": self.rm_handles_limit,
            "os_events": self.os_events,
            "os_events_limit": self.os_events_limit,
            "records": dict(self.records) if self.records is not None
            else None,
            "records_limit": self.records_limit,
            "doorbell_files": self.doorbell_files,
            "doorbell_files_limit": self.doorbell_files_limit,
            "denied_allocs": self.denied_allocs,
            "killed": self.killed,
            "compute_share": sizes.share_percent(self.compute_share),
            "compute_obtained": sizes.share_percent(self.compute_obtained),
            "run_seconds": self.run_seconds,
            "gated_seconds": self.gated_seconds,
            "runnable_seconds": self.runnable_seconds,
            "processes": self.processes,
            "open_files": self.open_files,
            "channels": self.channels,
        }


@dataclass(frozen=True)
class Usage:
    time: float
    gpus: tuple[GpuUsage, ...]
    slices: tuple[SliceUsage, ...]

    def to_api(self) -> dict:
        return {"time": round(self.time, 3),
                "gpus": [g.to_api() for g in self.gpus],
                "slices": [s.to_api() for s in self.slices]}


def _gpu(info: ctl.GpuInfo, known: dict[int, model.Gpu]) -> GpuUsage:
    g = known.get(info.minor)
    uuid = g.uuid if g is not None and g.uuid else (info.uuid or None)
    return GpuUsage(index=g.index if g is not None and g.index >= 0 else None,
                    uuid=uuid, minor=info.minor,
                    name=g.name if g is not None else "unknown",
                    memory_total_bytes=info.memory_total,
                    memory_sliced_bytes=info.memory_sliced,
                    slices=info.nr_slices, channel_ids=info.channel_ids,
                    memory_orphaned_bytes=info.memory_orphaned)


def figures(read: KernelRead, gpus: Sequence[model.Gpu]) -> Usage:
    """The Usage of READ.  GPUS (the service's inventory, any order) name
    the kernel's GPUs by minor; a slice on a GPU the kernel did not list
    (one that went between the two ioctls) gets a GPU of that minor alone."""
    known = {g.minor: g for g in gpus}
    by_minor = {i.minor: _gpu(i, known) for i in read.gpus}
    out = []
    for s in sorted(read.slices, key=lambda s: s.name):
        gpu = by_minor.get(s.gpu_minor)
        if gpu is None:
            gpu = _gpu(ctl.GpuInfo(s.gpu_minor, "", 0, 0, 0, 0, "", 0, 0),
                       known)
        out.append(SliceUsage(
            name=s.name, id=s.id, gpu=gpu,
            memory_limit_bytes=s.memory_limit,
            memory_used_bytes=s.memory_used,
            memory_peak_bytes=s.memory_peak,
            denied_allocs=s.denied_allocs, killed=s.killed,
            compute_share=s.compute_share,
            compute_obtained=s.share_obtained,
            run_seconds=s.run_ns / NS, gated_seconds=s.gated_ns / NS,
            runnable_seconds=s.runnable_ns / NS,
            processes=s.processes, open_files=s.open_files,
            channels=s.channels,
            host_memory_used_bytes=s.host_memory_used,
            host_memory_limit_bytes=s.host_memory_limit,
            rm_handles=s.rm_handles,
            rm_handles_limit=read.rm_handles_limit,
            os_events=s.os_events,
            os_events_limit=read.os_events_limit,
            records=records_of(s),
            records_limit=read.records_limit,
            doorbell_files=s.doorbell_files,
            doorbell_files_limit=read.doorbell_files_limit))
    ordered = sorted(by_minor.values(),
                     key=lambda g: (g.index is None, g.index or 0, g.minor))
    return Usage(read.time, tuple(ordered), tuple(out))
