# SPDX-License-Identifier: Apache-2.0
"""KernelBackend: xpud's Backend over xpu.ko's /dev/xpuctl (ctl.py).

It maps what xpud speaks to what the kernel speaks:

    GPU UUID        <-> the driver's minor (XPU_IOC_GPU_LIST's uuid field)
    slice name      <-> the kernel's slice id (XPU_IOC_SLICE_LIST + _GET)
    period_ms       <-> period_us
    priority name   <-> XPU_PRIO_*

and makes each slice's device nodes in the node directory (/dev):

    xpuN      char 195:<the GPU's minor>   role XPU_NODE_GPU
    xpuN-ctl  char 195:255                 role XPU_NODE_CTL
    xpuN-uvm  char <xpu-uvm's numbers>     role XPU_NODE_UVM

The third is made where xpu.ko has its UVM node (the misc device xpu-uvm,
its numbers in /sys/class/misc/xpu-uvm/dev): an open of it is a UVM file
of the host's driver that xpu.ko holds for the slice (docs/security.md,
class 39); `xpuctl run` puts it at /dev/nvidia-uvm.

N is the kernel's slice id.  A node is made under a temporary name, mode 0600,
attached to its slice (XPU_IOC_NODE_ATTACH binds the inode), then given its
owner (root, group `xpu` when that group exists, else root's) and mode 0660,
and renamed into place: nobody can open it before it is in the slice.  Nodes
of ids that no longer name a slice are removed (a slice destroyed while xpud
was down, or an id freed and reused).

The kernel cannot list a slice's node and cgroup bindings, so the cgroups a
KernelSlice reports are those this process bound (re-binding is idempotent in
the kernel; the service binds every desired cgroup at each pass).

xpu.ko's bound on the RM handles of a slice's clients is not in the slice
interface: it is the module parameter max_handles, the same for every slice,
read from sysfs (read_max_handles) beside each slice's count.  Its bound on
their OS events (NV_ESC_ALLOC_OS_EVENT) likewise: the module parameter
max_os_events (read_max_os_events).
"""

from __future__ import annotations

import contextlib
import errno
import grp
import logging
import os
import re
import stat
import time
from collections.abc import Iterator

from . import api, ctl, sizes, uapi, usage
from .backend import (
    Backend,
    BackendError,
    GpuState,
    KernelSlice,
    NoSuchSlice,
    NotFound,
    NullBackend,
    from_ctl,
)
from .inventory import Inventory
from .model import Gpu, GpuSettings, SliceSpec

log = logging.getLogger(__name__)

DEFAULT_NODE_DIR = "/dev"
DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"
DEFAULT_MAX_HANDLES_PATH = "/sys/module/xpu/parameters/max_handles"
DEFAULT_MAX_OS_EVENTS_PATH = "/sys/module/xpu/parameters/max_os_events"
DEFAULT_MAX_RECORDS_PATH = "/sys/module/xpu/parameters/max_records"
DEFAULT_MAX_DOORBELL_FILES_PATH = \
    "/sys/module/xpu/parameters/max_doorbell_files"
DEFAULT_UVM_INTERPOSED_PATH = "/sys/module/xpu/parameters/uvm_interposed"
DEFAULT_UVM_RETENTIONS_SEEN_PATH = \
    "/sys/module/xpu/parameters/uvm_retentions_seen"
DEFAULT_UVM_RETAINS_UNWATCHED_PATH = \
    "/sys/module/xpu/parameters/uvm_retains_unwatched"
# Below it no process without CAP_SYS_RAWIO may map: xpu.ko's pages of calls
# lie there, in 15 slots from page 1 (kmod/callpage.c, docs/security.md,
# class 41)
DEFAULT_MMAP_MIN_ADDR_PATH = "/proc/sys/vm/mmap_min_addr"
CALL_PAGE_SLOTS_END = 16 * os.sysconf("SC_PAGE_SIZE")
# xpu.ko's UVM node: an open of it has xpu.ko look for UVM (kmod/uvm.c)
XPU_UVM_NODE = "/dev/xpu-uvm"
NODE_MODE = 0o660

MODES = {"shared": uapi.XPU_MODE_SHARED, "exclusive": uapi.XPU_MODE_EXCLUSIVE}
POLICIES = {"weighted": uapi.XPU_POLICY_WEIGHTED,
            "fixed": uapi.XPU_POLICY_FIXED,
            "priority": uapi.XPU_POLICY_PRIORITY,
            "native": uapi.XPU_POLICY_NATIVE}
PRIORITIES = {"low": uapi.XPU_PRIO_LOW, "normal": uapi.XPU_PRIO_NORMAL,
              "high": uapi.XPU_PRIO_HIGH}

_MODE_NAMES = {v: k for k, v in MODES.items()}
_POLICY_NAMES = {v: k for k, v in POLICIES.items()}
_PRIORITY_NAMES = {v: k for k, v in PRIORITIES.items()}

_UUID_RE = re.compile(r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                      r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_NODE_RE = re.compile(r"xpu([0-9]+)(-ctl|-uvm)?")
XPU_UVM_DEV = "/sys/class/misc/xpu-uvm/dev"


def read_uvm_numbers(path: str = XPU_UVM_DEV) -> tuple[int, int] | None:
    """(major, minor) of xpu.ko's UVM node, or None (no such device: an
    xpu.ko without it, or not loaded)."""
    try:
        with open(path) as f:
            major, minor = f.read().strip().split(":")
        return int(major), int(minor)
    except (OSError, ValueError):
        return None


def normalise_uuid(text: str) -> str | None:
    """The driver's "GPU-..." as xpud writes it (lower-case hex), or None
    when it is not one (the driver has not read it yet)."""
    text = text.strip()
    if _UUID_RE.fullmatch(text):
        return "GPU-" + text[4:].lower()
    return None


def gpu_settings(info: ctl.GpuInfo) -> GpuSettings | None:
    """The kernel's settings of a GPU as xpud's, or None when they are
    not xpud's to express (a period of no whole milliseconds, a mode or
    policy of a newer kernel): the service then sets its own."""
    if info.period_us % 1000 or info.mode not in _MODE_NAMES or \
            info.policy not in _POLICY_NAMES:
        return None
    return GpuSettings(_MODE_NAMES[info.mode], _POLICY_NAMES[info.policy],
                       info.period_us // 1000)


def slice_spec(info: ctl.SliceInfo, gpu_uuid: str) -> SliceSpec:
    return SliceSpec(info.name, gpu_uuid, info.memory_limit,
                     info.compute_share, info.weight,
                     _PRIORITY_NAMES.get(info.priority, "normal"),
                     info.host_memory_limit)


def _read_param(path: str) -> int | None:
    """The integer in a module parameter's file; None when PATH cannot be
    read (xpu.ko not loaded, or one without the parameter)."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def read_max_handles(path: str = DEFAULT_MAX_HANDLES_PATH) -> int | None:
    """xpu.ko's bound on the RM handles (clients and objects) of each
    slice's clients, its module parameter max_handles, or None."""
    return _read_param(path)


def read_max_os_events(path: str = DEFAULT_MAX_OS_EVENTS_PATH) -> int | None:
    """xpu.ko's bound on the OS events (NV_ESC_ALLOC_OS_EVENT) of each
    slice's clients, its module parameter max_os_events, or None."""
    return _read_param(path)


def read_max_records(path: str = DEFAULT_MAX_RECORDS_PATH) -> int | None:
    """xpu.ko's bound on each kind of RM object it keeps a record of for a
    slice, its module parameter max_records, or None."""
    return _read_param(path)


def read_max_doorbell_files(
        path: str = DEFAULT_MAX_DOORBELL_FILES_PATH) -> int | None:
    """xpu.ko's bound on the files a slice's doorbell page is mapped
    through, its module parameter max_doorbell_files, or None."""
    return _read_param(path)


def _read_bool_param(path: str) -> bool | None:
    """A boolean module parameter (Y or N); None when it cannot be read."""
    try:
        with open(path) as f:
            v = f.read().strip()
    except OSError:
        return None
    return {"Y": True, "N": False}.get(v)


def read_uvm_interposed(path: str = DEFAULT_UVM_INTERPOSED_PATH,
                        node: str | None = XPU_UVM_NODE) -> bool | None:
    """Whether xpu.ko interposes on the open of UVM's own node (its
    read-only parameter uvm_interposed); None when it cannot be read.  When
    it does not yet and NODE is given, NODE (xpu.ko's /dev/xpu-uvm) is
    opened and closed first: that open has xpu.ko look for UVM again (a
    UVM file of no slice, which goes with the close)."""
    got = _read_bool_param(path)
    if got is False and node:
        try:
            os.close(os.open(node, os.O_RDWR | os.O_CLOEXEC))
        except OSError as e:
            log.debug("%s: %s", node, e)
        got = _read_bool_param(path)
    return got


def read_uvm_retentions_seen(
        path: str = DEFAULT_UVM_RETENTIONS_SEEN_PATH) -> bool | None:
    """Whether xpu.ko sees every retention of a channel by UVM (its probes
    on the driver, read-only parameter uvm_retentions_seen); None when it
    cannot be read (an xpu.ko before session 51)."""
    return _read_bool_param(path)


def read_uvm_retains_unwatched(
        path: str = DEFAULT_UVM_RETAINS_UNWATCHED_PATH) -> int | None:
    """How many of the driver's retains of a channel xpu.ko could not
    watch to their return (every instance of uvm_probe_maxactive taken:
    read-only parameter uvm_retains_unwatched); None when it cannot be
    read (an xpu.ko before session 54)."""
    try:
        with open(path) as f:
            v = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return v if v >= 0 else None


def read_call_pages_guarded(
        path: str = DEFAULT_MMAP_MIN_ADDR_PATH) -> bool | None:
    """Whether vm.mmap_min_addr keeps tenants from mapping where xpu.ko
    puts the pages of the calls it makes for them (all its slots below
    it); None when it cannot be read."""
    try:
        with open(path) as f:
            v = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return v >= CALL_PAGE_SLOTS_END


def node_names(id: int) -> tuple[str, str, str]:
    """The file names of slice ID's nodes: the GPU node, the control
    node, the UVM node."""
    return f"xpu{id}", f"xpu{id}-ctl", f"xpu{id}-uvm"


class KernelBackend(Backend):
    """The kernel side of xpud, through DEVICE (/dev/xpuctl).  Each call
    opens the device and closes it again: an xpud that holds it open would
    keep xpu.ko from being unloaded."""

    def __init__(self, inventory: Inventory, device: str = ctl.DEFAULT_PATH,
                 node_dir: str = DEFAULT_NODE_DIR,
                 cgroup_root: str = DEFAULT_CGROUP_ROOT,
                 node_group: str = api.SOCKET_GROUP,
                 max_handles_path: str = DEFAULT_MAX_HANDLES_PATH,
                 max_os_events_path: str = DEFAULT_MAX_OS_EVENTS_PATH,
                 max_records_path: str = DEFAULT_MAX_RECORDS_PATH,
                 max_doorbell_files_path: str =
                 DEFAULT_MAX_DOORBELL_FILES_PATH,
                 uvm_dev_path: str = XPU_UVM_DEV,
                 uvm_interposed_path: str = DEFAULT_UVM_INTERPOSED_PATH,
                 uvm_node: str | None = XPU_UVM_NODE,
                 uvm_retentions_seen_path: str =
                 DEFAULT_UVM_RETENTIONS_SEEN_PATH,
                 uvm_retains_unwatched_path: str =
                 DEFAULT_UVM_RETAINS_UNWATCHED_PATH,
                 mmap_min_addr_path: str = DEFAULT_MMAP_MIN_ADDR_PATH):
        self.inventory = inventory
        self.mmap_min_addr_path = mmap_min_addr_path
        self.uvm_dev_path = uvm_dev_path
        self.uvm_interposed_path = uvm_interposed_path
        self.uvm_retentions_seen_path = uvm_retentions_seen_path
        self.uvm_retains_unwatched_path = uvm_retains_unwatched_path
        self.uvm_node = uvm_node
        self.device = device
        self.node_dir = node_dir
        self.cgroup_root = cgroup_root.rstrip("/") or "/"
        self.node_group = node_group
        self.max_handles_path = max_handles_path
        self.max_os_events_path = max_os_events_path
        self.max_records_path = max_records_path
        self.max_doorbell_files_path = max_doorbell_files_path
        # slice id -> (its name, the cgroups this process bound to it)
        self._bound: dict[int, tuple[str, set[str]]] = {}

    # -- plumbing

    @contextlib.contextmanager
    def _ctl(self) -> Iterator[ctl.Ctl]:
        """The open device; a CtlError inside becomes a BackendError."""
        try:
            with ctl.Ctl(self.device) as c:
                yield c
        except ctl.CtlError as e:
            raise from_ctl(e) from None

    def _gpus(self, c: ctl.Ctl) -> list[tuple[ctl.GpuInfo, str | None]]:
        """The kernel's GPUs with their UUIDs as xpud writes them; a UUID
        the kernel lacks is taken from the inventory, by minor."""
        out = []
        inv = None
        for g in c.gpu_list():
            uuid = normalise_uuid(g.uuid)
            if uuid is None:
                if inv is None:
                    inv = {i.minor: i.uuid for i in self.inventory.list()}
                uuid = inv.get(g.minor)
            out.append((g, uuid))
        return out

    def _minor(self, c: ctl.Ctl, gpu_uuid: str) -> int:
        for g, uuid in self._gpus(c):
            if uuid == gpu_uuid:
                return g.minor
        raise NotFound(f"xpu.ko serves no GPU {gpu_uuid} (xpuctl gpus lists "
                       "the GPUs; a GPU the driver added after xpu.ko was "
                       "loaded needs xpu.ko reloaded)")

    def _find(self, c: ctl.Ctl, name: str) -> ctl.SliceInfo:
        for s in c.slices():
            if s.name == name:
                return s
        raise NoSuchSlice(f"xpu.ko has no slice '{name}'")

    def _node_paths(self, id: int) -> tuple[str, ...]:
        return tuple(os.path.join(self.node_dir, n) for n in node_names(id))

    def _bounds(self) -> dict:
        """xpu.ko's bounds on every slice, as KernelSlice's and
        KernelRead's fields (each None when its parameter cannot be
        read)."""
        return {"rm_handles_limit": read_max_handles(self.max_handles_path),
                "os_events_limit": read_max_os_events(
                    self.max_os_events_path),
                "records_limit": read_max_records(self.max_records_path),
                "doorbell_files_limit": read_max_doorbell_files(
                    self.max_doorbell_files_path)}

    def _kernel_slice(self, info: ctl.SliceInfo, gpu_uuid: str,
                      bounds: dict) -> KernelSlice:
        nodes = []
        uvm = read_uvm_numbers(self.uvm_dev_path)
        for path, numbers in zip(self._node_paths(info.id),
                                 ((ctl.NV_MAJOR, info.gpu_minor),
                                  (ctl.NV_MAJOR, ctl.NV_CTL_MINOR), uvm)):
            if numbers is not None and _is_node(path, numbers):
                nodes.append(path)
        name, cgroups = self._bound.get(info.id, (info.name, set()))
        if name != info.name:
            cgroups = set()
        return KernelSlice(slice_spec(info, gpu_uuid), tuple(nodes),
                           tuple(sorted(cgroups)), info.memory_used,
                           id=info.id, processes=info.processes,
                           denied_allocs=info.denied_allocs,
                           share_obtained=info.share_obtained,
                           host_memory_used_bytes=info.host_memory_used,
                           rm_handles=info.rm_handles,
                           os_events=info.os_events,
                           records=usage.records_of(info),
                           doorbell_files=info.doorbell_files, **bounds)

    def _group(self) -> int:
        try:
            return grp.getgrnam(self.node_group).gr_gid
        except KeyError:
            return 0

    # -- Backend

    def kernel_version(self) -> tuple[str, int]:
        with self._ctl() as c:
            v = c.version()
        return str(v), v.api

    def uvm_interposed(self) -> bool | None:
        return read_uvm_interposed(self.uvm_interposed_path,
                                   self.uvm_node)

    def uvm_retentions_seen(self) -> bool | None:
        return read_uvm_retentions_seen(self.uvm_retentions_seen_path)

    def uvm_retains_unwatched(self) -> int | None:
        return read_uvm_retains_unwatched(self.uvm_retains_unwatched_path)

    def call_pages_guarded(self) -> bool | None:
        return read_call_pages_guarded(self.mmap_min_addr_path)

    def list_gpus(self) -> list[GpuState]:
        with self._ctl() as c:
            kernel = self._gpus(c)
        inv = self.inventory.list()
        by_uuid = {g.uuid: g for g in inv if g.uuid}
        by_minor = {g.minor: g for g in inv}
        states: dict[int, GpuState] = {}   # by minor
        extra = []
        for k, uuid in kernel:
            g = by_uuid.get(uuid) if uuid else None
            g = g or by_minor.get(k.minor)
            gpu = Gpu(index=g.index if g else -1,
                      uuid=uuid or (g.uuid if g else None),
                      name=g.name if g else "unknown",
                      minor=k.minor,
                      bus_id=g.bus_id if g else "",
                      # The kernel's size: it checks the limits against it.
                      memory_total_bytes=k.memory_total or (
                          g.memory_total_bytes if g else None),
                      memory_used_bytes=g.memory_used_bytes if g else None)
            if g is None:
                extra.append(k.minor)
            states[k.minor] = GpuState(gpu, gpu_settings(k),
                                       k.channel_ids or None,
                                       k.memory_orphaned)
        for g in inv:  # GPUs xpu.ko does not serve: listed, no settings
            if g.minor not in states:
                states[g.minor] = GpuState(g, None)
        # The inventory's order (nvidia-smi's); GPUs it lacks after it, in
        # minor order, numbered on.
        ordered = sorted((s for s in states.values() if s.gpu.index >= 0),
                         key=lambda s: s.gpu.index)
        n = max((s.gpu.index for s in ordered), default=-1) + 1
        for i, minor in enumerate(sorted(extra)):
            s = states[minor]
            ordered.append(GpuState(Gpu(n + i, s.gpu.uuid, s.gpu.name,
                                        s.gpu.minor, s.gpu.bus_id,
                                        s.gpu.memory_total_bytes),
                                    s.settings, s.channel_ids,
                                    s.memory_orphaned_bytes))
        return ordered

    def set_gpu(self, gpu_uuid: str, settings: GpuSettings) -> None:
        with self._ctl() as c:
            minor = self._minor(c, gpu_uuid)
            c.gpu_set(minor, mode=MODES[settings.mode],
                      policy=POLICIES[settings.policy],
                      period_us=settings.period_ms * 1000)

    def list_slices(self) -> list[KernelSlice]:
        with self._ctl() as c:
            infos = c.slices()
            uuids = {g.minor: uuid for g, uuid in self._gpus(c)}
        live = {s.id: s.name for s in infos}
        for id in list(self._bound):
            if live.get(id) != self._bound[id][0]:
                del self._bound[id]
        self._sweep_nodes(set(live))
        bounds = self._bounds()
        return [self._kernel_slice(s, uuids.get(s.gpu_minor) or "", bounds)
                for s in infos]

    def read_usage(self) -> usage.KernelRead:
        # Its own open of the device (and reads of xpu.ko's bounds),
        # nothing of self's but the paths: safe beside a
        # reconcile in another thread.
        with self._ctl() as c:
            gpus = c.gpu_list()
            slices = c.slices()
        return usage.KernelRead(time.time(), tuple(gpus), tuple(slices),
                                **self._bounds())

    def create_slice(self, spec: SliceSpec) -> KernelSlice:
        with self._ctl() as c:
            minor = self._minor(c, spec.gpu_uuid)
            info = c.slice_create(spec.name, minor, spec.memory_limit_bytes,
                                  spec.compute_share, spec.weight,
                                  PRIORITIES[spec.priority],
                                  spec.host_memory_limit_bytes)
        self._bound.pop(info.id, None)
        # Files left under the new id are another slice's (destroyed while
        # xpud was down): never this one's.
        self._remove_nodes(info.id)
        return self._kernel_slice(info, spec.gpu_uuid, self._bounds())

    def update_slice(self, spec: SliceSpec) -> KernelSlice:
        with self._ctl() as c:
            old = self._find(c, spec.name)
            prio = PRIORITIES[spec.priority]
            changes = {
                "memory_limit": spec.memory_limit_bytes,
                "compute_share": spec.compute_share,
                "weight": spec.weight,
                "priority": prio,
                "host_memory_limit": spec.host_memory_limit_bytes}
            # Only what changes: xpu.ko waits (at most 1 s) for a slice's
            # calls into the driver to lower its memory limit or its bound
            # on system memory.
            changes = {k: v for k, v in changes.items()
                       if getattr(old, k) != v}
            try:
                info = c.slice_set(old.id, name=spec.name, **changes) \
                    if changes else old
            except ctl.Busy as e:
                why = _host_memory_busy(c, old, changes, e)
                if why is None:
                    raise
                raise why from e
        return self._kernel_slice(info, spec.gpu_uuid, self._bounds())

    def destroy_slice(self, name: str, force: bool = False) -> None:
        with self._ctl() as c:
            info = self._find(c, name)
            c.slice_destroy(info.id, force=force, name=name)
        self._bound.pop(info.id, None)
        self._remove_nodes(info.id)

    def make_nodes(self, name: str) -> tuple[str, ...]:
        with self._ctl() as c:
            info = self._find(c, name)
            gid = self._group()
            paths = self._node_paths(info.id)
            nodes = [(paths[0], uapi.XPU_NODE_GPU,
                      (ctl.NV_MAJOR, info.gpu_minor)),
                     (paths[1], uapi.XPU_NODE_CTL,
                      (ctl.NV_MAJOR, ctl.NV_CTL_MINOR))]
            uvm = read_uvm_numbers(self.uvm_dev_path)
            if uvm is not None:
                nodes.append((paths[2], uapi.XPU_NODE_UVM, uvm))
            for path, role, numbers in nodes:
                self._make_node(c, info, path, role, numbers, gid)
        return tuple(n[0] for n in nodes)

    def bind_cgroup(self, name: str, cgroup: str) -> None:
        path = self._cgroup_path(cgroup)
        with self._ctl() as c:
            info = self._find(c, name)
            c.cgroup_bind(info.id, path, name=name)
        rec = self._bound.setdefault(info.id, (name, set()))
        rec[1].add(cgroup)

    def unbind_cgroup(self, name: str, cgroup: str) -> None:
        path = self._cgroup_path(cgroup)
        with self._ctl() as c:
            info = self._find(c, name)
            if os.path.isdir(path):
                try:
                    c.cgroup_unbind(info.id, path, name=name)
                except ctl.NotFound:
                    pass  # not bound: as wanted
            else:
                # Removed: it has no tasks left, and no fd can name it any
                # more; the kernel drops the binding with the slice.
                log.debug("cgroup %s is gone: nothing to unbind from slice "
                          "'%s'", cgroup, name)
        rec = self._bound.get(info.id)
        if rec is not None:
            rec[1].discard(cgroup)

    # -- nodes

    def _cgroup_path(self, cgroup: str) -> str:
        """CGROUP as /proc/PID/cgroup names it, under the cgroup2 mount."""
        rel = cgroup.lstrip("/")
        if ".." in rel.split("/"):
            raise BackendError(f"cgroup {cgroup} must not hold '..'")
        return os.path.join(self.cgroup_root, rel)

    def _make_node(self, c: ctl.Ctl, info: ctl.SliceInfo, path: str,
                   role: int, numbers: tuple[int, int], gid: int) -> None:
        major, minor = numbers
        expect = minor if role != uapi.XPU_NODE_UVM else None
        if _is_node(path, numbers):
            try:
                c.node_attach(info.id, path, role, name=info.name,
                              expect=expect)
            except ctl.Conflict:
                log.warning("%s belonged to another slice: replaced", path)
            else:
                _set_owner(path, gid)
                return
        tmp = os.path.join(os.path.dirname(path),
                           f".{os.path.basename(path)}.{os.getpid()}.tmp")
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            os.mknod(tmp, stat.S_IFCHR | 0o600, os.makedev(major, minor))
        except OSError as e:
            raise BackendError(f"cannot make the node {path}: "
                               f"{e.strerror}") from None
        try:
            c.node_attach(info.id, tmp, role, name=info.name, expect=expect)
            _set_owner(tmp, gid)
            try:
                os.replace(tmp, path)
            except OSError as e:
                raise BackendError(f"cannot make the node {path}: "
                                   f"{e.strerror}") from None
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _remove_nodes(self, id: int) -> None:
        uvm = read_uvm_numbers(self.uvm_dev_path)
        for path in self._node_paths(id):
            _remove_node(path, uvm)

    def _sweep_nodes(self, live: set[int]) -> None:
        """Remove nodes of ids that name no slice now."""
        try:
            names = os.listdir(self.node_dir)
        except OSError as e:
            log.debug("cannot list %s: %s", self.node_dir, e.strerror)
            return
        uvm = read_uvm_numbers(self.uvm_dev_path)
        for n in names:
            m = _NODE_RE.fullmatch(n)
            path = os.path.join(self.node_dir, n)
            if m and int(m.group(1)) not in live and \
                    _remove_node(path, uvm):
                log.info("removed %s: slice %s does not exist", path,
                         m.group(1))


def _host_memory_busy(c: ctl.Ctl, old: ctl.SliceInfo, changes: dict,
                      e: ctl.Busy) -> ctl.Busy | None:
    """The error for E, EBUSY from a SET of CHANGES, when it was the bound
    on system memory that the slice holds more than: ctl's message speaks
    of the memory limit.  None when E stands as it is."""
    bound = changes.get("host_memory_limit")
    if e.errno != errno.EBUSY or not bound:
        return None
    if "memory_limit" in changes:
        # Either may be the one: xpu.ko's figures after the refusal say.
        try:
            used = c.slice_get(old.id, name=old.name).host_memory_used
        except ctl.CtlError:
            return None
        if used <= bound:
            return None
    else:
        used = old.host_memory_used
    figures = (f" ({sizes.format_size(used)} held, "
               f"{sizes.format_size(bound)} asked)" if used > bound else
               f" of {sizes.format_size(bound)}")
    return ctl.Busy(
        f"changing slice '{old.name}': the slice holds more system memory "
        "allocated by the driver (pinned host pages) now than the new "
        f"host-memory bound{figures}: free that memory first (or stop the "
        "slice's processes), or ask for more", e.errno)


def _is_node(path: str, numbers: tuple[int, int]) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(*numbers)


def _remove_node(path: str, uvm: tuple[int, int] | None = None) -> bool:
    """Remove PATH if it is a character device of the NVIDIA driver, or of
    xpu.ko's UVM node (numbers UVM): what a slice node is, never anything
    else."""
    try:
        st = os.lstat(path)
        if not stat.S_ISCHR(st.st_mode) or (
                os.major(st.st_rdev) != ctl.NV_MAJOR and
                (uvm is None or st.st_rdev != os.makedev(*uvm))):
            return False
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        raise BackendError(f"cannot remove the node {path}: "
                           f"{e.strerror}") from None


def _set_owner(path: str, gid: int) -> None:
    try:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) != (0, gid):
            os.chown(path, 0, gid, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) != NODE_MODE:
            os.chmod(path, NODE_MODE)
    except OSError as e:
        raise BackendError(f"cannot set the owner and mode of {path}: "
                           f"{e.strerror}") from None


def select(inventory: Inventory, device: str = ctl.DEFAULT_PATH,
           node_dir: str = DEFAULT_NODE_DIR,
           cgroup_root: str = DEFAULT_CGROUP_ROOT,
           max_handles_path: str = DEFAULT_MAX_HANDLES_PATH,
           max_os_events_path: str = DEFAULT_MAX_OS_EVENTS_PATH) -> Backend:
    """KernelBackend when DEVICE exists and speaks the slice interface,
    else NullBackend; one log line says which, and why."""
    if not os.path.exists(device):
        log.warning("null backend: %s does not exist (xpu.ko is not "
                    "loaded); GPUs are listed, slices stay pending", device)
        return NullBackend(inventory, device, (
            f"xpu.ko is not loaded ({device} does not exist): load it, then "
            "restart xpud"))
    try:
        with ctl.Ctl(device) as c:
            c.gpu_count()
    except ctl.Unsupported:
        log.warning("null backend: %s has no slice interface (xpu.ko is too "
                    "old); GPUs are listed, slices stay pending", device)
        return NullBackend(inventory, device, (
            f"the loaded xpu.ko has no slice interface ({device} does not "
            "know XPU_IOC_GPU_LIST): install the xpu.ko of this release, "
            "then restart xpud"))
    except ctl.CtlError as e:
        log.warning("kernel backend on %s, which fails now: %s", device, e)
    else:
        log.info("kernel backend: xpu.ko through %s, slice nodes in %s",
                 device, node_dir)
    return KernelBackend(inventory, device, node_dir, cgroup_root,
                         max_handles_path=max_handles_path,
                         max_os_events_path=max_os_events_path)
