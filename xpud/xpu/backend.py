# SPDX-License-Identifier: Apache-2.0
"""What xpud asks of the kernel, as an interface.

The service (service.py) owns the desired state and reconciles through a
Backend; only a Backend talks to xpu.ko.  KernelBackend (kernel.py) drives
xpu.ko's slice interface (kmod/include/uapi/xpu.h) through /dev/xpuctl;
NullBackend, for a node where that interface is missing (xpu.ko not loaded,
or too old), lists the GPUs and says plainly that slices cannot be made.
kernel.select() picks one at start.

A backend raises BackendError (or a subclass) with a one-line message for a
person; its code is the API error code the service answers with.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from . import ctl
from .inventory import Inventory
from .model import Gpu, GpuSettings, SliceSpec
from .usage import KernelRead


class BackendError(Exception):
    """The kernel refused or failed; str() is one line for a person."""

    code = "backend"


class Unsupported(BackendError):
    """The loaded xpu.ko cannot do this."""

    code = "unsupported"


class Busy(BackendError):
    """The slice is in use (processes hold its nodes or memory)."""

    code = "busy"


class NotFound(BackendError):
    """The slice, GPU, node or cgroup does not exist."""

    code = "not_found"


class NoSuchSlice(NotFound):
    code = "not_found"


class Invalid(BackendError):
    """xpu.ko refused a value."""

    code = "invalid"


class Exists(BackendError):
    """A slice of that name exists."""

    code = "exists"


class Conflict(BackendError):
    """The GPU's memory or compute is given away, or a node or cgroup
    belongs to another slice."""

    code = "conflict"


class PermissionDenied(BackendError):
    """xpud lacks the privilege (CAP_SYS_ADMIN) the kernel wants."""

    code = "permission"


_BY_CODE = {c.code: c for c in (BackendError, Unsupported, Busy, NotFound,
                                Invalid, Exists, Conflict, PermissionDenied)}


def from_ctl(e: ctl.CtlError) -> BackendError:
    """The BackendError for an error of /dev/xpuctl: the same message and
    API code."""
    return _BY_CODE.get(e.code, BackendError)(str(e))


@dataclass(frozen=True)
class GpuState:
    """A GPU and how the kernel shares it; settings is None when the
    kernel has none for it (or cannot say)."""

    gpu: Gpu
    settings: GpuSettings | None = None
    # The channel ids its slices share out (xpu.ko's figure, RM's by
    # default); None when the kernel does not say (docs/security.md, 40).
    channel_ids: int | None = None
    # Memory of destroyed slices something outside every slice keeps,
    # charged to the GPU (docs/memory.md); None when the kernel does not
    # say (not serving the GPU).
    memory_orphaned_bytes: int | None = None


@dataclass(frozen=True)
class KernelSlice:
    """A slice as the kernel holds it."""

    spec: SliceSpec
    nodes: tuple[str, ...] = ()       # /dev/xpuN, /dev/xpuN-ctl
    cgroups: tuple[str, ...] = ()     # as /proc/PID/cgroup names them
    memory_used_bytes: int | None = None
    id: int | None = None             # the kernel's number for it
    processes: int | None = None      # processes with files in it
    denied_allocs: int | None = None  # allocations refused at the limit
    share_obtained: int | None = None  # per mille of the GPU, last second
    # System memory the driver allocated for its clients (pinned host
    # pages), as xpu.ko charges it; its bound is spec.host_memory_limit_bytes.
    host_memory_used_bytes: int | None = None
    # RM handles (clients and objects) the slice's clients hold, as xpu.ko
    # counts them, and xpu.ko's bound on them, the same for every slice
    # (the module parameter max_handles; None when it cannot be read).
    rm_handles: int | None = None
    rm_handles_limit: int | None = None
    # OS events (NV_ESC_ALLOC_OS_EVENT) the slice's clients hold, as xpu.ko
    # counts them, and xpu.ko's bound on them, the same for every slice
    # (the module parameter max_os_events; None when it cannot be read).
    os_events: int | None = None
    os_events_limit: int | None = None
    # The RM objects xpu.ko keeps a record of for the slice, by kind (the
    # API's names: usage.RECORD_KINDS), and the files its doorbell page is
    # mapped through, with xpu.ko's bounds on them (max_records, each
    # kind; max_doorbell_files); None when not known.
    records: dict[str, int] | None = None
    records_limit: int | None = None
    doorbell_files: int | None = None
    doorbell_files_limit: int | None = None


class Backend(abc.ABC):
    """The kernel side of xpud.  Calls come from one thread at a time
    (the service holds its lock)."""

    @abc.abstractmethod
    def kernel_version(self) -> tuple[str, int]:
        """(version, api) of the loaded xpu.ko; BackendError if unknown."""

    def uvm_interposed(self) -> bool | None:
        """Whether xpu.ko interposes on the open of UVM's own node, so that
        a bound cgroup's task's /dev/nvidia-uvm file is its slice's
        (docs/security.md, class 39); None when not known."""
        return None

    def uvm_retentions_seen(self) -> bool | None:
        """Whether xpu.ko sees every retention of a channel by UVM (its
        probes on the driver), so that what UVM retains stays charged to
        the slice exactly while it does, whichever UVM file registered it
        (docs/security.md, class 39); None when not known."""
        return None

    def uvm_retains_unwatched(self) -> int | None:
        """How many of the driver's retains of a channel xpu.ko could not
        watch to their return (its probes' instances all taken): each
        charge such a call pins stays until UVM destroys the VA space the
        call named (docs/security.md, class 44); None when not known."""
        return None

    def call_pages_guarded(self) -> bool | None:
        """Whether no tenant may map where xpu.ko puts the pages of the
        calls it makes for it (vm.mmap_min_addr at its default or above;
        docs/security.md, class 41); None when not known."""
        return None

    @abc.abstractmethod
    def list_gpus(self) -> list[GpuState]:
        """The GPUs of this node, in index order."""

    @abc.abstractmethod
    def set_gpu(self, gpu_uuid: str, settings: GpuSettings) -> None:
        """Set a GPU's mode, policy and period."""

    @abc.abstractmethod
    def list_slices(self) -> list[KernelSlice]:
        """Every slice the kernel holds, made by this xpud or an earlier
        one."""

    @abc.abstractmethod
    def create_slice(self, spec: SliceSpec) -> KernelSlice:
        """Create a slice.  Its nodes are made by make_nodes()."""

    @abc.abstractmethod
    def update_slice(self, spec: SliceSpec) -> KernelSlice:
        """Change a slice's limits in place (the GPU stays); running
        processes keep running."""

    @abc.abstractmethod
    def destroy_slice(self, name: str, force: bool = False) -> None:
        """Destroy a slice and remove its nodes.  Raises Busy when it is in
        use, unless FORCE."""

    @abc.abstractmethod
    def make_nodes(self, name: str) -> tuple[str, ...]:
        """Make the slice's device nodes (/dev/xpuN, /dev/xpuN-ctl) with
        their owner and mode, register them with xpu.ko, and return their
        paths.  Idempotent."""

    @abc.abstractmethod
    def bind_cgroup(self, name: str, cgroup: str) -> None:
        """Put opens by tasks in CGROUP (or below it) into the slice."""

    @abc.abstractmethod
    def unbind_cgroup(self, name: str, cgroup: str) -> None:
        """Undo bind_cgroup."""

    def read_usage(self) -> KernelRead:
        """One read of the kernel's GPUs and slices with what each slice
        uses (usage.py).  Unlike the methods above it may be called from
        any thread, without the service's lock: it touches no state of the
        backend's.  BackendError when the kernel cannot be read."""
        raise Unsupported("this backend cannot read the slices' usage")


NOT_YET = ("xpu.ko's slice interface is not available (/dev/xpuctl is "
           "missing, or xpu.ko is too old): load xpu.ko, then restart xpud")


class NullBackend(Backend):
    """A backend for a node without xpu.ko's slice interface: GPUs come
    from the inventory, the version from /dev/xpuctl, everything else is
    Unsupported with one clear message (REASON)."""

    def __init__(self, inventory: Inventory, device: str = ctl.DEFAULT_PATH,
                 reason: str = NOT_YET):
        self.inventory = inventory
        self.device = device
        self.reason = reason

    def kernel_version(self) -> tuple[str, int]:
        try:
            with ctl.Ctl(self.device) as c:
                v = c.version()
        except ctl.CtlError as e:
            raise from_ctl(e) from None
        return str(v), v.api

    def list_gpus(self) -> list[GpuState]:
        return [GpuState(g) for g in self.inventory.list()]

    def list_slices(self) -> list[KernelSlice]:
        return []

    def set_gpu(self, gpu_uuid, settings):
        raise Unsupported(self.reason)

    def create_slice(self, spec):
        raise Unsupported(self.reason)

    def update_slice(self, spec):
        raise Unsupported(self.reason)

    def destroy_slice(self, name, force=False):
        raise Unsupported(self.reason)

    def make_nodes(self, name):
        raise Unsupported(self.reason)

    def bind_cgroup(self, name, cgroup):
        raise Unsupported(self.reason)

    def unbind_cgroup(self, name, cgroup):
        raise Unsupported(self.reason)

    def read_usage(self):
        raise Unsupported(self.reason)
