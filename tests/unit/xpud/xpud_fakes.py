# SPDX-License-Identifier: Apache-2.0
"""An in-memory xpu.ko for xpud's unit tests.

FakeBackend stands in for the kernel so that the daemon's own logic --
desired state, reconciling, the API, xpuctl -- is tested on the host.  What
the kernel does is tested in the VM.
"""

from __future__ import annotations

import dataclasses

from xpu import ctl, model, sizes
from xpu.backend import Backend, BackendError, Busy, GpuState, KernelSlice
from xpu.kernel import PRIORITIES
from xpu.usage import RECORD_KINDS, KernelRead

# the records' kinds, as the API names them
KINDS = tuple(kind for kind, _ in RECORD_KINDS)

UUID0 = "GPU-00000000-1111-2222-3333-444444444444"
UUID1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
MAX_HANDLES = 131072  # xpu.ko's default max_handles (XPU_MAX_HANDLES)
MAX_OS_EVENTS = 1024  # xpu.ko's default max_os_events (XPU_MAX_OS_EVENTS)
MAX_RECORDS = 1024  # xpu.ko's default max_records
MAX_DOORBELL_FILES = 1024  # xpu.ko's default max_doorbell_files


def two_gpus() -> list[model.Gpu]:
    return [model.Gpu(0, UUID0, "NVIDIA H200", 0, "0000:18:00.0",
                      80 * sizes.GIB),
            model.Gpu(1, UUID1, "NVIDIA H200", 1, "0000:19:00.0",
                      80 * sizes.GIB)]


class FakeBackend(Backend):
    """xpu.ko in a dict.  fail[method] = exception makes that method
    raise; busy holds the names of slices in use."""

    def __init__(self, gpus=None):
        self.gpus = two_gpus() if gpus is None else gpus
        self.settings: dict[str, model.GpuSettings] = {}
        self.slices: dict[str, KernelSlice] = {}
        self.minors: dict[str, int] = {}
        self.busy: set[str] = set()
        self.fail: dict[str, Exception] = {}
        self.calls: list[tuple] = []
        # What read_usage() reports beyond the KernelSlice: per slice name,
        # fields of ctl.SliceInfo (memory_peak, gated_ns, ...).
        self.usage: dict[str, dict] = {}
        self.read_time = 1700000000.0
        # The module parameter max_handles; None: it cannot be read.
        self.max_handles: int | None = MAX_HANDLES
        # The module parameter max_os_events; None: it cannot be read.
        self.max_os_events: int | None = MAX_OS_EVENTS
        # max_records and max_doorbell_files; None: they cannot be read.
        self.max_records: int | None = MAX_RECORDS
        # by minor: memory of destroyed slices kept outside them
        self.orphaned: dict[int, int] = {}
        self.max_doorbell_files: int | None = MAX_DOORBELL_FILES
        # The channel ids the kernel says it shares out, by GPU UUID.
        self.channel_ids: dict[str, int] = {}

    def _call(self, name, *args):
        self.calls.append((name,) + args)
        if name in self.fail:
            raise self.fail[name]

    def kernel_version(self):
        self._call("kernel_version")
        return "0.1.0", 1

    def list_gpus(self):
        self._call("list_gpus")
        return [GpuState(g, self.settings.get(g.uuid),
                         self.channel_ids.get(g.uuid),
                         self.orphaned.get(g.minor, 0)) for g in self.gpus]

    def set_gpu(self, gpu_uuid, settings):
        self._call("set_gpu", gpu_uuid, settings)
        self.settings[gpu_uuid] = settings

    def list_slices(self):
        self._call("list_slices")
        return list(self.slices.values())

    def create_slice(self, spec):
        self._call("create_slice", spec)
        if spec.name in self.slices:
            raise BackendError(f"slice '{spec.name}' exists")
        self.slices[spec.name] = KernelSlice(
            spec, memory_used_bytes=0, host_memory_used_bytes=0,
            rm_handles=0, rm_handles_limit=self.max_handles,
            os_events=0, os_events_limit=self.max_os_events,
            records=dict.fromkeys(KINDS, 0), records_limit=self.max_records,
            doorbell_files=0, doorbell_files_limit=self.max_doorbell_files)
        return self.slices[spec.name]

    def update_slice(self, spec):
        self._call("update_slice", spec)
        k = self.slices[spec.name]
        # As xpu.ko: a bound on system memory below what the slice holds
        # is refused (EBUSY).
        bound = spec.host_memory_limit_bytes
        if bound and (k.host_memory_used_bytes or 0) > bound:
            raise Busy(f"changing slice '{spec.name}': the slice holds more "
                       "system memory than the new host-memory bound")
        k = dataclasses.replace(k, spec=spec)
        self.slices[spec.name] = k
        return k

    def destroy_slice(self, name, force=False):
        self._call("destroy_slice", name, force)
        if name in self.busy and not force:
            raise Busy(f"slice '{name}' has processes: stop them or use "
                       "--force")
        del self.slices[name]
        self.minors.pop(name, None)

    def make_nodes(self, name):
        # Idempotent: a repeated call checks the nodes and changes nothing.
        again = self.slices[name].nodes != ()
        self._call("nodes_checked" if again else "make_nodes", name)
        if name not in self.minors:
            self.minors[name] = min(set(range(len(self.minors) + 1))
                                    - set(self.minors.values()))
        n = self.minors[name]
        nodes = (f"/dev/xpu{n}", f"/dev/xpu{n}-ctl")
        self.slices[name] = dataclasses.replace(self.slices[name],
                                                nodes=nodes)
        return nodes

    def bind_cgroup(self, name, cgroup):
        self._call("bind_cgroup", name, cgroup)
        k = self.slices[name]
        self.slices[name] = dataclasses.replace(
            k, cgroups=tuple(sorted(set(k.cgroups) | {cgroup})))

    def unbind_cgroup(self, name, cgroup):
        self._call("unbind_cgroup", name, cgroup)
        k = self.slices[name]
        self.slices[name] = dataclasses.replace(
            k, cgroups=tuple(c for c in k.cgroups if c != cgroup))

    def read_usage(self):
        self._call("read_usage")
        minors = {g.uuid: g.minor for g in self.gpus}
        infos = []
        for i, k in enumerate(self.slices.values()):
            spec = k.spec
            fields = {"memory_used": k.memory_used_bytes or 0,
                      "processes": k.processes or 0,
                      "denied_allocs": k.denied_allocs or 0,
                      "share_obtained": k.share_obtained or 0,
                      "host_memory_used": k.host_memory_used_bytes or 0,
                      "rm_handles": k.rm_handles or 0,
                      "os_events": k.os_events or 0}
            if k.records is not None:   # as an xpu.ko that counts them
                fields.update({field: k.records.get(kind, 0)
                               for kind, field in RECORD_KINDS})
                fields["doorbell_files"] = k.doorbell_files or 0
            fields.update(self.usage.get(spec.name, {}))
            infos.append(ctl.SliceInfo(
                id=k.id if k.id is not None else i, name=spec.name,
                gpu_minor=minors[spec.gpu_uuid],
                memory_limit=spec.memory_limit_bytes,
                compute_share=spec.compute_share, weight=spec.weight,
                priority=PRIORITIES[spec.priority],
                host_memory_limit=spec.host_memory_limit_bytes, **fields))
        gpus = []
        for g in self.gpus:
            mine = [s for s in infos if s.gpu_minor == g.minor]
            gpus.append(ctl.GpuInfo(
                minor=g.minor, uuid=g.uuid or "", mode=0, policy=0,
                period_us=20000, nr_slices=len(mine),
                driver_version="580.126.20",
                memory_total=g.memory_total_bytes or 0,
                memory_sliced=sum(s.memory_limit for s in mine),
                channel_ids=2048,
                memory_orphaned=self.orphaned.get(g.minor, 0)))
        return KernelRead(self.read_time, tuple(gpus), tuple(infos),
                          self.max_handles, self.max_os_events,
                          records_limit=self.max_records,
                          doorbell_files_limit=self.max_doorbell_files)

    def changes(self):
        """The calls that change the kernel, in order."""
        return [c for c in self.calls
                if c[0] not in ("kernel_version", "list_gpus", "list_slices",
                                "nodes_checked", "read_usage")]
