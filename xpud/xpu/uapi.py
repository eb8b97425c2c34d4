# SPDX-License-Identifier: Apache-2.0
"""The interface of /dev/xpuctl: Python's copy of kmod/include/uapi/xpu.h.

Every XPU_* name here is the header's, with the header's value, and every
struct of the header has a ctypes twin with the same fields, of the same C
types (__u8 -> c_uint8, __u32 -> c_uint32, __s32 -> c_int32, __u64 ->
c_uint64), listed in STRUCTS under its C name.  tests/unit/test_uapi.py
compiles the header and compares the two; change them together.  The rules
the structs follow (argsz, flags, explicit padding) are written down in the
header.

The name and UUID fields are __u8 arrays holding a NUL-terminated string;
pack_str() and unpack_str() convert them.
"""

from __future__ import annotations

import ctypes
import platform

from ioctl_opt import IOWR

# ioctl_opt encodes commands as asm-generic/ioctl.h does: x86_64 and arm64,
# where NVIDIA's drivers run, and most other architectures.  These lay the
# direction and size bits out differently; better to refuse than to send
# commands the kernel would read as something else.
_OTHER_IOCTL_ENCODING = ("alpha", "mips", "parisc", "ppc", "powerpc", "sparc")
if platform.machine().startswith(_OTHER_IOCTL_ENCODING):
    raise ImportError(
        f"xpu: ioctl numbers for {platform.machine()} are not supported yet")

_u8 = ctypes.c_uint8
_u32 = ctypes.c_uint32
_s32 = ctypes.c_int32
_u64 = ctypes.c_uint64

XPU_IOC_TYPE = 0xE6
XPU_API_VERSION = 1
XPU_CTL_NAME = "xpuctl"

# -------- ioctls on /dev/xpuctl --------


class XpuVersion(ctypes.Structure):
    """struct xpu_version, the argument of XPU_IOC_VERSION."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("api", _u32),
        ("major", _u32),
        ("minor", _u32),
        ("patch", _u32),
    ]


XPU_VERSION_FLAGS_ALL = 0

XPU_IOC_VERSION = IOWR(XPU_IOC_TYPE, 0x00, XpuVersion)

# -------- GPUs --------

XPU_NAME_LEN = 32
XPU_UUID_LEN = 48

XPU_MODE_SHARED = 0
XPU_MODE_EXCLUSIVE = 1

XPU_POLICY_WEIGHTED = 0
XPU_POLICY_FIXED = 1
XPU_POLICY_PRIORITY = 2
XPU_POLICY_NATIVE = 3

XPU_PERIOD_MIN_US = 1000
XPU_PERIOD_MAX_US = 1000000


class XpuGpuInfo(ctypes.Structure):
    """struct xpu_gpu_info: one GPU, as XPU_IOC_GPU_LIST fills it in."""

    _fields_ = [
        ("minor", _u32),
        ("mode", _u32),
        ("policy", _u32),
        ("period_us", _u32),
        ("nr_slices", _u32),
        ("driver_major", _u32),
        ("driver_minor", _u32),
        ("driver_patch", _u32),
        ("memory_total", _u64),
        ("memory_sliced", _u64),
        ("uuid", _u8 * XPU_UUID_LEN),
        ("channel_ids", _u32),
        ("pad0", _u32),
        # memory of destroyed slices something outside them keeps (0 from
        # an xpu.ko before session 65, where it was reserved)
        ("memory_orphaned", _u64),
        ("reserved", _u64 * 2),
    ]


class XpuGpuList(ctypes.Structure):
    """struct xpu_gpu_list, the argument of XPU_IOC_GPU_LIST."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("count", _u32),
        ("gpu_argsz", _u32),
        ("gpus", _u64),
    ]


XPU_GPU_LIST_FLAGS_ALL = 0

XPU_IOC_GPU_LIST = IOWR(XPU_IOC_TYPE, 0x01, XpuGpuList)


class XpuGpuSet(ctypes.Structure):
    """struct xpu_gpu_set, the argument of XPU_IOC_GPU_SET."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("minor", _u32),
        ("mode", _u32),
        ("policy", _u32),
        ("period_us", _u32),
    ]


XPU_GPU_SET_MODE = 1 << 0
XPU_GPU_SET_POLICY = 1 << 1
XPU_GPU_SET_PERIOD = 1 << 2
XPU_GPU_SET_FLAGS_ALL = XPU_GPU_SET_MODE | XPU_GPU_SET_POLICY | \
    XPU_GPU_SET_PERIOD

XPU_IOC_GPU_SET = IOWR(XPU_IOC_TYPE, 0x02, XpuGpuSet)

# -------- slices --------

XPU_PRIO_LOW = 0
XPU_PRIO_NORMAL = 1
XPU_PRIO_HIGH = 2

XPU_SHARE_MAX = 1000
XPU_WEIGHT_MAX = 10000
XPU_MAX_SLICES = 1024


class XpuSliceInfo(ctypes.Structure):
    """struct xpu_slice_info, the argument of XPU_IOC_SLICE_CREATE, _GET
    and _SET."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("id", _u32),
        ("gpu_minor", _u32),
        ("name", _u8 * XPU_NAME_LEN),
        ("memory_limit", _u64),
        ("compute_share", _u32),
        ("weight", _u32),
        ("priority", _u32),
        ("pad0", _u32),
        ("memory_used", _u64),
        ("memory_peak", _u64),
        ("denied_allocs", _u64),
        ("killed", _u64),
        ("open_files", _u32),
        ("processes", _u32),
        ("run_ns", _u64),
        ("gated_ns", _u64),
        ("runnable_ns", _u64),
        ("gate_faults", _u64),
        ("share_obtained", _u32),
        ("channels", _u32),
        ("host_memory_limit", _u64),
        ("host_memory_used", _u64),
        ("rm_handles", _u32),
        ("os_events", _u32),
        ("devices", _u32),
        ("vaspaces", _u32),
        ("virtuals", _u32),
        ("tsgs", _u32),
        ("usermode", _u32),
        ("doorbell_files", _u32),
        ("uvm_files", _u32),
        ("uvm_channels", _u32),
        ("uvm_tsgs", _u32),
        ("pad1", _u32),
        ("uvm_retained", _u64),
    ]


XPU_IOC_SLICE_CREATE = IOWR(XPU_IOC_TYPE, 0x10, XpuSliceInfo)
XPU_IOC_SLICE_GET = IOWR(XPU_IOC_TYPE, 0x11, XpuSliceInfo)
XPU_IOC_SLICE_SET = IOWR(XPU_IOC_TYPE, 0x12, XpuSliceInfo)

XPU_SLICE_SET_MEMORY = 1 << 0
XPU_SLICE_SET_SHARE = 1 << 1
XPU_SLICE_SET_WEIGHT = 1 << 2
XPU_SLICE_SET_PRIORITY = 1 << 3
XPU_SLICE_SET_HOST_MEMORY = 1 << 4
XPU_SLICE_CREATE_FLAGS_ALL = 0
XPU_SLICE_GET_FLAGS_ALL = 0
XPU_SLICE_SET_FLAGS_ALL = XPU_SLICE_SET_MEMORY | XPU_SLICE_SET_SHARE | \
    XPU_SLICE_SET_WEIGHT | XPU_SLICE_SET_PRIORITY | XPU_SLICE_SET_HOST_MEMORY


class XpuSliceRef(ctypes.Structure):
    """struct xpu_slice_ref, the argument of XPU_IOC_SLICE_DESTROY."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("id", _u32),
        ("pad0", _u32),
    ]


XPU_DESTROY_FORCE = 1 << 0
XPU_DESTROY_FLAGS_ALL = XPU_DESTROY_FORCE

XPU_IOC_SLICE_DESTROY = IOWR(XPU_IOC_TYPE, 0x13, XpuSliceRef)


class XpuSliceList(ctypes.Structure):
    """struct xpu_slice_list, the argument of XPU_IOC_SLICE_LIST."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("count", _u32),
        ("pad0", _u32),
        ("ids", _u64),
    ]


XPU_SLICE_LIST_FLAGS_ALL = 0

XPU_IOC_SLICE_LIST = IOWR(XPU_IOC_TYPE, 0x14, XpuSliceList)

# -------- which slice a file belongs to --------

XPU_NODE_GPU = 0
XPU_NODE_CTL = 1
XPU_NODE_UVM = 2


class XpuNode(ctypes.Structure):
    """struct xpu_node, the argument of XPU_IOC_NODE_ATTACH and _DETACH."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("id", _u32),
        ("role", _u32),
        ("fd", _s32),
        ("pad0", _u32),
    ]


XPU_NODE_FLAGS_ALL = 0

XPU_IOC_NODE_ATTACH = IOWR(XPU_IOC_TYPE, 0x20, XpuNode)
XPU_IOC_NODE_DETACH = IOWR(XPU_IOC_TYPE, 0x21, XpuNode)


class XpuCgroup(ctypes.Structure):
    """struct xpu_cgroup, the argument of XPU_IOC_CGROUP_BIND and
    _UNBIND."""

    _fields_ = [
        ("argsz", _u32),
        ("flags", _u32),
        ("id", _u32),
        ("fd", _s32),
    ]


XPU_CGROUP_FLAGS_ALL = 0

XPU_IOC_CGROUP_BIND = IOWR(XPU_IOC_TYPE, 0x22, XpuCgroup)
XPU_IOC_CGROUP_UNBIND = IOWR(XPU_IOC_TYPE, 0x23, XpuCgroup)

# Events: the generic netlink family "xpu" and its group "events".
XPU_GENL_NAME = "xpu"
XPU_GENL_VERSION = 1
XPU_GENL_MCGRP_EVENTS = "events"
XPU_EVENT_SLICE_CREATED = 1
XPU_EVENT_SLICE_DESTROYED = 2
XPU_EVENT_SLICE_CHANGED = 3
XPU_EVENT_ALLOC_DENIED = 4
XPU_EVENT_MAX = 4
XPU_EA_SLICE_ID = 1
XPU_EA_SLICE_NAME = 2
XPU_EA_GPU_MINOR = 3
XPU_EA_MEMORY_LIMIT = 4
XPU_EA_MEMORY_USED = 5
XPU_EA_PID = 6
XPU_EA_SIZE = 7
XPU_EA_PAD = 8
XPU_EA_MAX = 8

STRUCTS = {
    "xpu_version": XpuVersion,
    "xpu_gpu_info": XpuGpuInfo,
    "xpu_gpu_list": XpuGpuList,
    "xpu_gpu_set": XpuGpuSet,
    "xpu_slice_info": XpuSliceInfo,
    "xpu_slice_ref": XpuSliceRef,
    "xpu_slice_list": XpuSliceList,
    "xpu_node": XpuNode,
    "xpu_cgroup": XpuCgroup,
}


def pack_str(field: ctypes.Array, value: bytes) -> None:
    """Store VALUE in the __u8 array FIELD, NUL-padded.  ValueError when it
    does not fit with its NUL.  Bytes are stored as they are: the kernel
    judges them."""
    n = len(field)
    if len(value) >= n:
        raise ValueError(f"{len(value)} bytes do not fit a {n}-byte field "
                         "with its NUL")
    ctypes.memmove(field, value.ljust(n, b"\0"), n)


def unpack_str(field: ctypes.Array) -> str:
    """The NUL-terminated string in the __u8 array FIELD (invalid UTF-8
    replaced, never an error: it came from the kernel)."""
    data = bytes(field)
    return data.split(b"\0", 1)[0].decode("utf-8", errors="replace")
