# SPDX-License-Identifier: Apache-2.0
"""The admin device of xpu.ko, /dev/xpuctl: one typed method per ioctl of
kmod/include/uapi/xpu.h.

A refused ioctl raises a CtlError subclass whose code is one of the API's
error codes (api.ERRORS: invalid, not_found, exists, conflict, busy,
permission, unsupported, backend) and whose message is one line for a person:
what was wrong and what to do.  error() makes it from the operation, the errno
and what the call was about; it is pure, so the unit tests check every
message without a kernel.

Nothing here decides policy: values go to the kernel as given (the kernel
checks them), and names, minors and ids are the kernel's.  The daemon's
KernelBackend (kernel.py) maps GPUs, names and units on top.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
from dataclasses import dataclass
from typing import Union

from . import api, sizes, uapi
from .errors import XpuError

DEFAULT_PATH = "/dev/" + uapi.XPU_CTL_NAME

# The driver's character-device major, and the minor of /dev/nvidiactl.
NV_MAJOR = 195
NV_CTL_MINOR = 255

# A path, or a file descriptor the caller owns.
PathOrFd = Union[str, "os.PathLike[str]", int]


class CtlError(XpuError):
    """The device could not be opened or refused a command.

    The message is one line, fit to show to the user as it is; code is an
    API error code (api.ERRORS), errno the kernel's answer (None when the
    failure was not an ioctl's)."""

    code = "backend"

    def __init__(self, message: str, err: int | None = None):
        super().__init__(message)
        self.errno = err

    @property
    def exit_status(self) -> int:  # xpuctl's, as for the API error
        return api.ERRORS[self.code].exit_status


class Invalid(CtlError):
    code = "invalid"


class NotFound(CtlError):
    code = "not_found"


class Exists(CtlError):
    code = "exists"


class Conflict(CtlError):
    code = "conflict"


class Busy(CtlError):
    code = "busy"


class PermissionDenied(CtlError):
    code = "permission"


class Unsupported(CtlError):
    code = "unsupported"


# -- what the kernel returns, as Python values --------------------------------

@dataclass(frozen=True)
class ModuleVersion:
    """The version of the loaded xpu.ko, as XPU_IOC_VERSION reports it."""

    api: int
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True)
class GpuInfo:
    """struct xpu_gpu_info: a GPU of the driver and how xpu.ko shares it."""

    minor: int
    uuid: str                  # "GPU-...", as the driver reports it
    mode: int                  # XPU_MODE_*
    policy: int                # XPU_POLICY_*
    period_us: int
    nr_slices: int
    driver_version: str        # "580.126.20"
    memory_total: int          # bytes
    memory_sliced: int         # bytes: the sum of its slices' limits
    # the channel ids its slices share out (0 from an xpu.ko before
    # session 50, which did not say)
    channel_ids: int = 0
    # bytes destroyed slices freed that something outside every slice
    # keeps: held by xpu.ko, charged to the GPU, out of what new limits get
    memory_orphaned: int = 0

    @classmethod
    def from_struct(cls, s: uapi.XpuGpuInfo) -> GpuInfo:
        return cls(minor=s.minor, uuid=uapi.unpack_str(s.uuid), mode=s.mode,
                   policy=s.policy, period_us=s.period_us,
                   nr_slices=s.nr_slices,
                   # NVIDIA's third part has two digits: 535.288.01
                   driver_version=(f"{s.driver_major}.{s.driver_minor}."
                                   f"{s.driver_patch:02d}"),
                   memory_total=s.memory_total,
                   memory_sliced=s.memory_sliced,
                   channel_ids=s.channel_ids,
                   memory_orphaned=s.memory_orphaned)


@dataclass(frozen=True)
class SliceInfo:
    """struct xpu_slice_info: a slice's settings and what it uses."""

    id: int
    name: str
    gpu_minor: int
    memory_limit: int          # bytes
    compute_share: int         # tenths of a percent, 0..XPU_SHARE_MAX
    weight: int
    priority: int              # XPU_PRIO_*
    memory_used: int = 0
    memory_peak: int = 0
    denied_allocs: int = 0
    killed: int = 0
    open_files: int = 0
    processes: int = 0
    run_ns: int = 0            # compute: time the slice held its GPU
    gated_ns: int = 0          # time it wanted the GPU and was held back
    runnable_ns: int = 0       # time it wanted the GPU
    gate_faults: int = 0       # doorbell writes that had to wait
    share_obtained: int = 0    # per mille of the GPU over the last second
    channels: int = 0          # GPU channels of the slice's clients
    host_memory_limit: int = 0  # bytes of RM's system memory; 0: no bound
    host_memory_used: int = 0   # RM's system memory the slice holds
    rm_handles: int = 0         # RM handles of the slice's clients
    os_events: int = 0          # OS events of the slice's clients
    # The RM objects xpu.ko keeps a record of, by kind (each bounded by
    # max_records), and the files its doorbell page is mapped through
    # (max_doorbell_files); None from an xpu.ko that does not say.
    devices: int | None = None
    vaspaces: int | None = None
    virtuals: int | None = None
    tsgs: int | None = None
    usermode: int | None = None
    doorbell_files: int | None = None
    # UVM files xpu.ko holds for the slice, and the channels, TSGs and
    # bytes it keeps charged for what UVM may retain (class 39); None from
    # an xpu.ko that does not say.
    uvm_files: int | None = None
    uvm_channels: int | None = None
    uvm_tsgs: int | None = None
    uvm_retained: int | None = None

    @classmethod
    def from_struct(cls, s: uapi.XpuSliceInfo) -> SliceInfo:
        return cls(id=s.id, name=uapi.unpack_str(s.name),
                   gpu_minor=s.gpu_minor, memory_limit=s.memory_limit,
                   compute_share=s.compute_share, weight=s.weight,
                   priority=s.priority, memory_used=s.memory_used,
                   memory_peak=s.memory_peak, denied_allocs=s.denied_allocs,
                   killed=s.killed, open_files=s.open_files,
                   processes=s.processes, run_ns=s.run_ns,
                   gated_ns=s.gated_ns, runnable_ns=s.runnable_ns,
                   gate_faults=s.gate_faults,
                   share_obtained=s.share_obtained, channels=s.channels,
                   host_memory_limit=s.host_memory_limit,
                   host_memory_used=s.host_memory_used,
                   rm_handles=s.rm_handles, os_events=s.os_events,
                   **_records(s), **_uvm(s))


RECORD_FIELDS = ("devices", "vaspaces", "virtuals", "tsgs", "usermode",
                 "doorbell_files")


def _records(s: uapi.XpuSliceInfo) -> dict:
    """The records' counts of S, if the kernel's argsz written back covers
    them (an older xpu.ko's ends at os_events)."""
    end = (getattr(uapi.XpuSliceInfo, RECORD_FIELDS[-1]).offset
           + ctypes.sizeof(ctypes.c_uint32))
    if s.argsz < end:
        return {}
    return {f: getattr(s, f) for f in RECORD_FIELDS}


UVM_FIELDS = ("uvm_files", "uvm_channels", "uvm_tsgs", "uvm_retained")


def _uvm(s: uapi.XpuSliceInfo) -> dict:
    """What xpu.ko holds for S's UVM files, if the kernel's argsz written
    back covers it (since session 48)."""
    if s.argsz < ctypes.sizeof(uapi.XpuSliceInfo):
        return {}
    return {f: getattr(s, f) for f in UVM_FIELDS}


# -- building arguments (pure) ------------------------------------------------

def _sized(cls, **fields):
    return cls(argsz=ctypes.sizeof(cls), **fields)


def slice_info_arg(name: str | bytes = b"", gpu_minor: int = 0,
                   memory_limit: int = 0, compute_share: int = 0,
                   weight: int = 0, priority: int = 0, id: int = 0,
                   flags: int = 0,
                   host_memory_limit: int = 0) -> uapi.XpuSliceInfo:
    """A struct xpu_slice_info with argsz set.  A str name is encoded as
    UTF-8; ValueError when it does not fit XPU_NAME_LEN with its NUL."""
    arg = _sized(uapi.XpuSliceInfo, flags=flags, id=id, gpu_minor=gpu_minor,
                 memory_limit=memory_limit, compute_share=compute_share,
                 weight=weight, priority=priority,
                 host_memory_limit=host_memory_limit)
    raw = name.encode() if isinstance(name, str) else bytes(name)
    uapi.pack_str(arg.name, raw)
    return arg


def slice_set_arg(id: int, memory_limit: int | None = None,
                  compute_share: int | None = None, weight: int | None = None,
                  priority: int | None = None,
                  host_memory_limit: int | None = None) -> uapi.XpuSliceInfo:
    """The argument of XPU_IOC_SLICE_SET: flags name the values given."""
    flags = 0
    arg = slice_info_arg(id=id)
    for flag, field, value in (
            (uapi.XPU_SLICE_SET_MEMORY, "memory_limit", memory_limit),
            (uapi.XPU_SLICE_SET_SHARE, "compute_share", compute_share),
            (uapi.XPU_SLICE_SET_WEIGHT, "weight", weight),
            (uapi.XPU_SLICE_SET_PRIORITY, "priority", priority),
            (uapi.XPU_SLICE_SET_HOST_MEMORY, "host_memory_limit",
             host_memory_limit)):
        if value is not None:
            flags |= flag
            setattr(arg, field, value)
    arg.flags = flags
    return arg


def gpu_set_arg(minor: int, mode: int | None = None,
                policy: int | None = None,
                period_us: int | None = None) -> uapi.XpuGpuSet:
    """The argument of XPU_IOC_GPU_SET: flags name the values given."""
    flags = 0
    arg = _sized(uapi.XpuGpuSet, minor=minor)
    for flag, field, value in (
            (uapi.XPU_GPU_SET_MODE, "mode", mode),
            (uapi.XPU_GPU_SET_POLICY, "policy", policy),
            (uapi.XPU_GPU_SET_PERIOD, "period_us", period_us)):
        if value is not None:
            flags |= flag
            setattr(arg, field, value)
    arg.flags = flags
    return arg


# -- errors (pure) ------------------------------------------------------------

_IOC_NAMES = {
    "version": "XPU_IOC_VERSION",
    "gpu_list": "XPU_IOC_GPU_LIST",
    "gpu_set": "XPU_IOC_GPU_SET",
    "slice_create": "XPU_IOC_SLICE_CREATE",
    "slice_get": "XPU_IOC_SLICE_GET",
    "slice_set": "XPU_IOC_SLICE_SET",
    "slice_destroy": "XPU_IOC_SLICE_DESTROY",
    "slice_list": "XPU_IOC_SLICE_LIST",
    "node_attach": "XPU_IOC_NODE_ATTACH",
    "node_detach": "XPU_IOC_NODE_DETACH",
    "cgroup_bind": "XPU_IOC_CGROUP_BIND",
    "cgroup_unbind": "XPU_IOC_CGROUP_UNBIND",
}

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_.-")
_PRIO_NAMES = {uapi.XPU_PRIO_LOW: "low", uapi.XPU_PRIO_NORMAL: "normal",
               uapi.XPU_PRIO_HIGH: "high"}


def name_problem(name: str | bytes) -> str | None:
    """Why xpu.ko refuses NAME as a slice name, or None: the kernel's
    rule (kmod/slice.c), to say what was wrong after an EINVAL."""
    raw = name.encode() if isinstance(name, str) else bytes(name)
    text = raw.split(b"\0", 1)[0]
    if not text:
        return "the name is empty"
    if len(raw) >= uapi.XPU_NAME_LEN:
        return (f"the name is {len(raw)} bytes long; at most "
                f"{uapi.XPU_NAME_LEN - 1}")
    if len(text) != len(raw):
        return "the name has bytes after its NUL"
    if text[:1] in (b".", b"-"):
        return "the name starts with '.' or '-'"
    bad = sorted({c for c in text if chr(c) not in _NAME_CHARS})
    if bad:
        shown = (repr(chr(c)) if 32 <= c < 127 else f"byte 0x{c:02x}"
                 for c in bad)
        return ("the name holds " + ", ".join(shown)
                + "; use letters, digits, '_', '.' and '-'")
    return None


def settings_problem(memory_limit: int | None = None,
                     compute_share: int | None = None,
                     weight: int | None = None,
                     priority: int | None = None) -> str | None:
    """Why xpu.ko refuses these slice settings, or None (kmod/slice.c)."""
    if memory_limit is not None and memory_limit < sizes.MIB:
        return (f"the memory limit {memory_limit} bytes is below 1MiB (sizes "
                "without a unit are bytes)")
    if compute_share is not None and compute_share > uapi.XPU_SHARE_MAX:
        return (f"the compute share {sizes.format_share(compute_share)} is "
                "above 100%")
    if weight is not None and not 1 <= weight <= uapi.XPU_WEIGHT_MAX:
        return (f"the weight {weight} is not between 1 and "
                f"{uapi.XPU_WEIGHT_MAX}")
    if priority is not None and priority not in _PRIO_NAMES:
        return (f"the priority {priority} is not one of 0 (low), 1 (normal), "
                "2 (high)")
    return None


def _slice_label(ctx: dict) -> str:
    if ctx.get("name"):
        return f"slice '{ctx['name']}'"
    if ctx.get("id") is not None:
        return f"slice {ctx['id']}"
    return "the slice"


def _what(op: str, ctx: dict) -> str:
    """What the call was doing, for the start of a message."""
    s = _slice_label(ctx)
    return {
        "version": "asking xpu.ko's version",
        "gpu_list": "listing the GPUs",
        "gpu_set": f"setting GPU {ctx.get('minor')}",
        "slice_create": f"creating {s}",
        "slice_get": f"reading {s}",
        "slice_set": f"changing {s}",
        "slice_destroy": f"destroying {s}",
        "slice_list": "listing the slices",
        "node_attach": f"attaching {ctx.get('path')} to {s}",
        "node_detach": f"detaching {ctx.get('path')} from {s}",
        "cgroup_bind": f"binding cgroup {ctx.get('path')} to {s}",
        "cgroup_unbind": f"unbinding cgroup {ctx.get('path')} from {s}",
    }.get(op, op)


def _nospace(ctx: dict) -> str:
    """The end of an ENOSPC message: which budget ran out, when the caller
    could tell (ctx['nospace'], from the kernel's own numbers)."""
    why = ctx.get("nospace")
    if why:
        return why
    return ("it has no memory or compute left to give (the slices' memory "
            "limits may add up to its memory at most, their compute shares "
            "to 100%), or xpu.ko holds its maximum of "
            f"{uapi.XPU_MAX_SLICES} slices: shrink or destroy a slice, or "
            "ask for less")


def _einval(op: str, ctx: dict) -> CtlError:
    what = _what(op, ctx)
    if op in ("slice_create", "slice_set"):
        problem = None
        if op == "slice_create" and "name" in ctx:
            problem = name_problem(ctx.get("raw_name", ctx["name"]))
        problem = problem or settings_problem(
            ctx.get("memory_limit"), ctx.get("compute_share"),
            ctx.get("weight"), ctx.get("priority"))
        if problem:
            return Invalid(f"{what}: {problem}", errno.EINVAL)
        return Invalid(f"{what}: xpu.ko refused a value as out of range "
                       "(name: 1 to 31 letters, digits, '_', '.', '-', not "
                       "starting with '.' or '-'; memory at least 1MiB; "
                       "compute 0 to 100%; weight 1 to 10000; priority "
                       "low, normal or high)", errno.EINVAL)
    if op == "gpu_set":
        return Invalid(f"{what}: xpu.ko refused a value as out of range "
                       "(mode shared or exclusive; policy weighted, fixed, "
                       "priority or native; period "
                       f"{uapi.XPU_PERIOD_MIN_US // 1000} to "
                       f"{uapi.XPU_PERIOD_MAX_US // 1000} ms)", errno.EINVAL)
    if op == "node_attach":
        want = ctx.get("expect")
        want = (f"195:{want}" if want is not None else
                "195:<the slice's GPU minor> for a GPU node, 195:255 for a "
                "control node")
        return Invalid(f"{what}: its device numbers do not fit the slice "
                       f"and role: it must be {want}", errno.EINVAL)
    return CtlError(f"{what}: xpu.ko refused the argument of "
                    f"{_IOC_NAMES.get(op, op)} (EINVAL): xpud and xpu.ko "
                    "disagree on the interface; update them together",
                    errno.EINVAL)


def error(op: str, err: int, **ctx) -> CtlError:
    """The error for ERR (an errno) from the ioctl of OP (a Ctl method's
    name).  CTX says what the call was about, for the message: path (the
    device, or the node or cgroup given), name, id, minor, expect (a node's
    minor), memory_limit, compute_share, weight, priority, raw_name (the
    name's bytes as sent), nospace (why ENOSPC, when known)."""
    device = ctx.get("device", DEFAULT_PATH)
    ioc = _IOC_NAMES.get(op, op)
    what = _what(op, ctx)
    s = _slice_label(ctx)
    gpu = f"GPU {ctx.get('minor')} (/dev/nvidia{ctx.get('minor')})"

    if err == errno.ENOTTY:
        return Unsupported(f"{device} does not know {ioc}: not an xpu "
                           "device, or xpu.ko is too old", err)
    if err in (errno.EPERM, errno.EACCES):
        return PermissionDenied(f"{what}: needs root (CAP_SYS_ADMIN)", err)
    if err == errno.EINVAL:
        return _einval(op, ctx)
    if err == errno.EFAULT:
        return CtlError(f"{what}: xpu.ko could not read or write the "
                        f"argument of {ioc} (EFAULT): a bug in xpud or "
                        "xpu.ko", err)
    if err == errno.ENOMEM:
        return CtlError(f"{what}: the kernel is out of memory", err)

    if op == "slice_create":
        if err == errno.EEXIST:
            return Exists(f"a slice named '{ctx.get('name')}' exists "
                          f"(xpuctl show {ctx.get('name')}); choose another "
                          "name", err)
        if err == errno.ENODEV:
            return NotFound(f"{what}: xpu.ko has no {gpu} (xpuctl gpus "
                            "lists the GPUs)", err)
        if err == errno.ENOSPC:
            return Conflict(f"{what}: {gpu}: {_nospace(ctx)}", err)
    if op == "gpu_set" and err == errno.ENODEV:
        return NotFound(f"{what}: xpu.ko has no {gpu} (xpuctl gpus lists "
                        "the GPUs)", err)
    if op in ("slice_get", "slice_set", "slice_destroy", "node_attach",
              "node_detach", "cgroup_bind", "cgroup_unbind") and \
            err == errno.ENOENT:
        if op == "node_detach":
            return NotFound(f"{what}: it is not a node of {s}, or there is "
                            "no such slice", err)
        if op == "cgroup_unbind":
            return NotFound(f"{what}: it is not bound to {s}, or there is "
                            "no such slice", err)
        return NotFound(f"{what}: xpu.ko has no such slice (xpuctl list "
                        "shows the slices)", err)
    if op == "slice_set":
        if err == errno.EBUSY:
            return Busy(f"{what}: the slice uses more memory now than the "
                        "new limit: free memory first (or stop the slice's "
                        "processes), or ask for more", err)
        if err == errno.ENOSPC:
            return Conflict(f"{what}: {gpu}: {_nospace(ctx)}", err)
        if err == errno.EAGAIN:
            return Busy(f"{what}: a lower memory limit waits for the "
                        "slice's calls into the driver, and one of them "
                        "has not ended in 1 s (a process may be stalling "
                        "it on its own memory): try again, or stop the "
                        "slice's processes; a higher limit waits for "
                        "nothing", err)
    if op == "slice_destroy" and err == errno.EBUSY:
        return Busy(f"{s} is in use: processes have its driver files open; "
                    "stop them, or pass --force (which kills them)", err)
    if op == "node_attach":
        if err == errno.ENODEV:
            return Invalid(f"{what}: it is not a character device of the "
                           f"NVIDIA driver (major {NV_MAJOR})", err)
        if err == errno.EEXIST:
            return Conflict(f"{what}: the node belongs to another slice "
                            "already: detach it there, or make a new node",
                            err)
    if op == "node_detach" and err == errno.ENODEV:
        return Invalid(f"{what}: it is not a character device of the "
                       f"NVIDIA driver (major {NV_MAJOR})", err)
    if op in ("cgroup_bind", "cgroup_unbind") and err == errno.EBADF:
        return Invalid(f"{what}: it is not a cgroup v2 directory (cgroup2 "
                       "is mounted at /sys/fs/cgroup)", err)
    if op == "cgroup_bind" and err == errno.EEXIST:
        return Conflict(f"{what}: the cgroup is bound to another slice; a "
                        "cgroup belongs to one slice at most: unbind it "
                        "there first", err)
    if op in ("node_attach", "cgroup_bind") and err == errno.ENOSPC:
        return Conflict(f"{what}: xpu.ko holds its maximum of node and "
                        "cgroup bindings: unbind some, or destroy unused "
                        "slices", err)
    return CtlError(f"{what}: {ioc}: {os.strerror(err)}", err)


def open_error(what: str, path: str, e: OSError) -> CtlError:
    """The error for a failed open of PATH (a node or a cgroup)."""
    if isinstance(e, FileNotFoundError):
        return NotFound(f"{what}: {path} does not exist", e.errno)
    if isinstance(e, NotADirectoryError):
        return Invalid(f"{what}: {path} is not a directory", e.errno)
    if isinstance(e, PermissionError):
        return PermissionDenied(f"{what}: {path}: permission denied", e.errno)
    return CtlError(f"{what}: {path}: {e.strerror}", e.errno)


# -- the device ---------------------------------------------------------------

class Ctl:
    """An open /dev/xpuctl.  Use as a context manager, or call close()."""

    def __init__(self, path: str = DEFAULT_PATH):
        self.path = path
        self._fd = -1
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError as e:
            raise CtlError(f"{path} does not exist: is xpu.ko loaded?",
                           e.errno) from e
        except PermissionError as e:
            raise PermissionDenied(f"{path}: permission denied (it is "
                                   "root's)", e.errno) from e
        except OSError as e:
            raise CtlError(f"{path}: {e.strerror}", e.errno) from e

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def fileno(self) -> int:
        return self._fd

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ioctl(self, op: str, cmd: int, arg, **ctx) -> None:
        try:
            fcntl.ioctl(self._fd, cmd, arg)
        except OSError as e:
            if e.errno is None:
                raise
            raise error(op, e.errno, device=self.path, **ctx) from e

    # -- version and GPUs

    def version(self) -> ModuleVersion:
        arg = _sized(uapi.XpuVersion)
        self._ioctl("version", uapi.XPU_IOC_VERSION, arg)
        return ModuleVersion(api=arg.api, major=arg.major, minor=arg.minor,
                             patch=arg.patch)

    def gpu_count(self) -> int:
        """How many GPUs xpu.ko serves (XPU_IOC_GPU_LIST with count 0)."""
        arg = _sized(uapi.XpuGpuList,
                     gpu_argsz=ctypes.sizeof(uapi.XpuGpuInfo))
        self._ioctl("gpu_list", uapi.XPU_IOC_GPU_LIST, arg)
        return arg.count

    def gpu_list(self) -> list[GpuInfo]:
        """Every GPU xpu.ko serves, in its order."""
        room = self.gpu_count()
        while True:
            entries = (uapi.XpuGpuInfo * max(room, 1))()
            arg = _sized(uapi.XpuGpuList, count=room,
                         gpu_argsz=ctypes.sizeof(uapi.XpuGpuInfo),
                         gpus=ctypes.addressof(entries))
            self._ioctl("gpu_list", uapi.XPU_IOC_GPU_LIST, arg)
            if arg.count <= room:
                return [GpuInfo.from_struct(entries[i])
                        for i in range(arg.count)]
            room = arg.count  # a GPU came meanwhile: again, with room

    def gpu_set(self, minor: int, mode: int | None = None,
                policy: int | None = None,
                period_us: int | None = None) -> None:
        """Set what is given of a GPU's mode, policy and period."""
        arg = gpu_set_arg(minor, mode, policy, period_us)
        self._ioctl("gpu_set", uapi.XPU_IOC_GPU_SET, arg, minor=minor)

    # -- slices

    def slice_create(self, name: str, gpu_minor: int, memory_limit: int,
                     compute_share: int = 0, weight: int = 100,
                     priority: int = uapi.XPU_PRIO_NORMAL,
                     host_memory_limit: int = 0) -> SliceInfo:
        ctx = {"name": name, "minor": gpu_minor,
               "memory_limit": memory_limit, "compute_share": compute_share,
               "weight": weight, "priority": priority}
        try:
            arg = slice_info_arg(name, gpu_minor, memory_limit,
                                 compute_share, weight, priority,
                                 host_memory_limit=host_memory_limit)
        except ValueError:
            raise error("slice_create", errno.EINVAL, **ctx) from None
        try:
            self._ioctl("slice_create", uapi.XPU_IOC_SLICE_CREATE, arg, **ctx)
        except CtlError as e:
            if e.errno == errno.ENOSPC:
                ctx["nospace"] = self._nospace(gpu_minor, memory_limit,
                                               compute_share, None)
                raise error("slice_create", e.errno, device=self.path,
                            **ctx) from e
            raise
        return SliceInfo.from_struct(arg)

    def slice_get(self, id: int, name: str | None = None) -> SliceInfo:
        arg = slice_info_arg(id=id)
        self._ioctl("slice_get", uapi.XPU_IOC_SLICE_GET, arg, id=id,
                    name=name)
        return SliceInfo.from_struct(arg)

    def slice_set(self, id: int, memory_limit: int | None = None,
                  compute_share: int | None = None, weight: int | None = None,
                  priority: int | None = None,
                  name: str | None = None,
                  host_memory_limit: int | None = None) -> SliceInfo:
        """Change what is given; returns the slice as it now is."""
        arg = slice_set_arg(id, memory_limit, compute_share, weight, priority,
                            host_memory_limit)
        ctx = {"id": id, "name": name, "memory_limit": memory_limit,
               "compute_share": compute_share, "weight": weight,
               "priority": priority}
        try:
            self._ioctl("slice_set", uapi.XPU_IOC_SLICE_SET, arg, **ctx)
        except CtlError as e:
            if e.errno == errno.ENOSPC:
                ctx["nospace"] = self._nospace_set(id, memory_limit,
                                                   compute_share)
                raise error("slice_set", e.errno, device=self.path,
                            **ctx) from e
            raise
        return SliceInfo.from_struct(arg)

    def slice_destroy(self, id: int, force: bool = False,
                      name: str | None = None) -> None:
        arg = _sized(uapi.XpuSliceRef, id=id,
                     flags=uapi.XPU_DESTROY_FORCE if force else 0)
        self._ioctl("slice_destroy", uapi.XPU_IOC_SLICE_DESTROY, arg, id=id,
                    name=name)

    def slice_list(self) -> list[int]:
        """The ids of every slice."""
        room = 16
        while True:
            ids = (ctypes.c_uint32 * room)()
            arg = _sized(uapi.XpuSliceList, count=room,
                         ids=ctypes.addressof(ids))
            self._ioctl("slice_list", uapi.XPU_IOC_SLICE_LIST, arg)
            if arg.count <= room:
                return list(ids[:arg.count])
            room = min(max(arg.count, room * 2), uapi.XPU_MAX_SLICES)

    def slices(self) -> list[SliceInfo]:
        """Every slice, read one by one (one destroyed meanwhile is left
        out)."""
        out = []
        for id in self.slice_list():
            try:
                out.append(self.slice_get(id))
            except NotFound:
                continue
        return out

    # -- nodes and cgroups

    def _with_fd(self, what: str, target: PathOrFd, flags: int, call) -> None:
        if isinstance(target, int):
            call(target)
            return
        path = os.fspath(target)
        try:
            fd = os.open(path, flags | os.O_CLOEXEC)
        except OSError as e:
            raise open_error(what, path, e) from e
        try:
            call(fd)
        finally:
            os.close(fd)

    def _node(self, op: str, cmd: int, id: int, node: PathOrFd, role: int,
              name: str | None, expect: int | None) -> None:
        path = node if isinstance(node, int) else os.fspath(node)
        label = f"fd {path}" if isinstance(path, int) else path
        ctx = {"id": id, "name": name, "path": label, "expect": expect}

        def call(fd: int) -> None:
            arg = _sized(uapi.XpuNode, id=id, role=role, fd=fd)
            self._ioctl(op, cmd, arg, **ctx)

        # O_PATH: no open of the device itself (the driver is not called);
        # O_NOFOLLOW: a symlink is refused as not a character device.
        self._with_fd(_what(op, ctx), node, os.O_PATH | os.O_NOFOLLOW, call)

    def node_attach(self, id: int, node: PathOrFd,
                    role: int = uapi.XPU_NODE_GPU, name: str | None = None,
                    expect: int | None = None) -> None:
        """Make the character device NODE (a path, or an fd the caller
        owns) a node of slice ID in ROLE (XPU_NODE_GPU: 195:<the slice's
        GPU minor>, XPU_NODE_CTL: 195:255).  Attaching it again to the
        same slice succeeds.  NAME and EXPECT (the minor it should have)
        are for messages only."""
        self._node("node_attach", uapi.XPU_IOC_NODE_ATTACH, id, node, role,
                   name, expect)

    def node_detach(self, id: int, node: PathOrFd,
                    role: int = uapi.XPU_NODE_GPU,
                    name: str | None = None) -> None:
        self._node("node_detach", uapi.XPU_IOC_NODE_DETACH, id, node, role,
                   name, None)

    def _cgroup(self, op: str, cmd: int, id: int, cgroup: PathOrFd,
                name: str | None) -> None:
        path = cgroup if isinstance(cgroup, int) else os.fspath(cgroup)
        label = f"fd {path}" if isinstance(path, int) else path
        ctx = {"id": id, "name": name, "path": label}

        def call(fd: int) -> None:
            arg = _sized(uapi.XpuCgroup, id=id, fd=fd)
            self._ioctl(op, cmd, arg, **ctx)

        self._with_fd(_what(op, ctx), cgroup, os.O_RDONLY | os.O_DIRECTORY,
                      call)

    def cgroup_bind(self, id: int, cgroup: PathOrFd,
                    name: str | None = None) -> None:
        """Bind slice ID to the cgroup v2 directory CGROUP (a path under
        the cgroup2 mount, or an fd the caller owns)."""
        self._cgroup("cgroup_bind", uapi.XPU_IOC_CGROUP_BIND, id, cgroup,
                     name)

    def cgroup_unbind(self, id: int, cgroup: PathOrFd,
                      name: str | None = None) -> None:
        self._cgroup("cgroup_unbind", uapi.XPU_IOC_CGROUP_UNBIND, id, cgroup,
                     name)

    # -- why ENOSPC, from the kernel's own numbers (best effort)

    def _nospace(self, minor: int, memory_limit: int, compute_share: int,
                 exclude: int | None) -> str | None:
        try:
            gpu = next((g for g in self.gpu_list() if g.minor == minor), None)
            if gpu is None:
                return None
            others = [s for s in self.slices()
                      if s.gpu_minor == minor and s.id != exclude]
        except CtlError:
            return None
        mem_free = max(gpu.memory_total - gpu.memory_orphaned
                       - sum(s.memory_limit for s in others), 0)
        share_free = max(uapi.XPU_SHARE_MAX - sum(s.compute_share
                                                  for s in others), 0)
        if memory_limit > mem_free:
            kept = ""
            if gpu.memory_orphaned:
                kept = (f" (another {sizes.format_size(gpu.memory_orphaned)}"
                        " is kept outside every slice after its slice went: "
                        "an export or dma-buf fd still open)")
            return (f"it has {sizes.format_size(mem_free)} of "
                    f"{sizes.format_size(gpu.memory_total)} memory left to "
                    f"give{kept}, {sizes.format_size(memory_limit)} asked: "
                    "shrink or destroy a slice, or ask for less")
        if compute_share > share_free:
            return (f"it has {sizes.format_share(share_free)} compute left "
                    f"to give, {sizes.format_share(compute_share)} asked: "
                    "shrink or destroy a slice, or ask for less")
        return (f"xpu.ko holds its maximum of {uapi.XPU_MAX_SLICES} slices: "
                "destroy one first")

    def _nospace_set(self, id: int, memory_limit: int | None,
                     compute_share: int | None) -> str | None:
        try:
            s = self.slice_get(id)
        except CtlError:
            return None
        return self._nospace(
            s.gpu_minor,
            s.memory_limit if memory_limit is None else memory_limit,
            s.compute_share if compute_share is None else compute_share, id)
