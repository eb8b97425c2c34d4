# SPDX-License-Identifier: Apache-2.0
"""A seeded random-ioctl fuzzer for xpu.ko (issue 17, docs/testing.md), in
the manner of syzkaller: calls built from what the ABI says, with valid
handles, classes and pointers mixed into random contents.

    fuzz.py nv --ctl NODE --gpu NODE --seed S --calls N [--nobody]
    fuzz.py xpuctl --dir DIR --seed S --calls N [--nobody]

nv: NVIDIA escapes on a slice's control and GPU nodes, from a process that
first makes a real client through them (device, subdevice, memory, a TSG
with a channel, usermode) so that the handles thrown are live ones.
xpuctl: every ioctl of kmod/include/uapi/xpu.h on /dev/xpuctl with random
argsz, flags and fields, ids of live slices, fds of nodes made in DIR.

--nobody: the files are opened as root, then the process drops to
nobody:nogroup before the first random call.

The sequence of calls is a function of the seed alone: no choice depends on
what a call returned, so a seed replays the same calls (the values of the
handles the stub hands out aside).  Before each call its index and a short
description go to --trace (one line, written before the call): after a
hang or a crash the last line names the call.  The last line of stdout is a
JSON report.
"""

import argparse
import ctypes
import errno
import json
import mmap
import os
import random
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "xpud"))

from nvclient import abi, client

NOBODY = 65534
PAGE = mmap.PAGESIZE
CALL_TIMEOUT_S = 10     # per call; a call past it is a hang
MAP_NORESERVE = 0x4000
PROT_NONE = 0

libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


class Arena:
    """The memory the calls point into: RW pages for arguments and for the
    buffers they point to, an inaccessible page right after them (a struct
    can end exactly at it), a read-only page and unmapped pages, all at the
    start of a PROT_NONE reservation of 4 GiB: a write at a pointer plus
    any 32-bit offset or stride (GPU_LIST's gpu_argsz, a paramsSize) faults,
    never lands in the interpreter.  Pointers thrown at the kernel are
    these, NULL, or addresses no user mapping has."""

    RW = 8
    RESERVE = (1 << 32) + 64 * PAGE

    def __init__(self, rng):
        base = libc.mmap(None, self.RESERVE, PROT_NONE,
                         mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS |
                         MAP_NORESERVE, -1, 0)
        assert base not in (None, ctypes.c_void_p(-1).value)
        self.base = base
        self.arg = base                       # pages 0-3: the argument
        self.inner = base + 4 * PAGE          # pages 4-7: what it points to
        self.guard = base + self.RW * PAGE    # stays PROT_NONE
        self.ro = self.guard + PAGE           # read-only, random bytes
        self.unmapped = self.ro + PAGE        # two pages, unmapped
        assert libc.mprotect(base, self.RW * PAGE,
                             mmap.PROT_READ | mmap.PROT_WRITE) == 0
        assert libc.mprotect(self.ro, PAGE,
                             mmap.PROT_READ | mmap.PROT_WRITE) == 0
        ctypes.memmove(self.ro, rng.randbytes(PAGE), PAGE)
        assert libc.mprotect(self.ro, PAGE, mmap.PROT_READ) == 0
        assert libc.munmap(self.unmapped, 2 * PAGE) == 0

    def write(self, addr, data):
        ctypes.memmove(addr, bytes(data), len(data))

    def bad_pointer(self, rng):
        return rng.choice([0, self.ro, self.unmapped, self.unmapped + 8,
                           self.guard - 4, 0xFFFF888000000000,
                           0xDEAD000000000000, (1 << 64) - PAGE, 1 << 47])

    def inner_pointer(self, rng):
        """Where an embedded pointer points: the inner buffer mostly."""
        if rng.random() < 0.7:
            return self.inner
        return self.bad_pointer(rng)


class Values:
    """Interesting values by kind."""

    def __init__(self, rng, handles, limit):
        self.rng = rng
        self.handles = handles
        self.sizes = [0, 1, PAGE, 1 << 20, limit - 1, limit, limit + 1,
                      2 * limit, 1 << 30, 1 << 32, (1 << 63), (1 << 64) - 1]

    def u32(self):
        r = self.rng
        return r.choice([0, 1, 2, 3, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000,
                         0xFFFFFFFF, r.getrandbits(32), r.randrange(64)])

    def handle(self):
        r = self.rng
        x = r.random()
        if x < 0.75:
            return r.choice(self.handles)
        if x < 0.9:
            return 0xcaf00000 + r.randrange(16)   # new handles, reused
        return self.u32()

    def hclass(self):
        return self.rng.choice(CLASSES + [self.u32()])

    def size(self):
        return self.rng.choice(self.sizes) & ((1 << 64) - 1)


CLASSES = [abi.NV01_ROOT, abi.NV01_ROOT_NON_PRIV, abi.NV01_ROOT_CLIENT,
           abi.NV01_DEVICE_0, abi.NV20_SUBDEVICE_0, abi.NV01_MEMORY_SYSTEM,
           abi.NV01_MEMORY_LOCAL_USER, abi.NV01_MEMORY_VIRTUAL,
           abi.NV01_MEMORY_LOCAL_PHYSICAL, abi.NV50_MEMORY_VIRTUAL,
           abi.FERMI_VASPACE_A, abi.KEPLER_CHANNEL_GROUP_A,
           abi.VOLTA_CHANNEL_GPFIFO_A, abi.HOPPER_CHANNEL_GPFIFO_A,
           0xC46F, 0xC56F, 0xC76F, 0xC96F, 0xCA6F,
           abi.VOLTA_USERMODE_A, 0xC461, 0xC561, abi.HOPPER_USERMODE_A,
           0xC761, abi.HOPPER_COMPUTE_A, abi.MPS_COMPUTE,
           # the classes a slice refuses (mem.c xpu_slice_class_refused)
           abi.ACCESS_COUNTER_NOTIFY_BUFFER,
           abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, abi.NV_EVENT_BUFFER,
           abi.NV01_MEMORY_LOCAL_PRIVILEGED, abi.NV01_MEMORY_HW_RESOURCES,
           abi.NVA084_KERNEL_HOST_VGPU_DEVICE]

CONTROLS = [abi.NV0041_CTRL_CMD_GET_SURFACE_INFO,
            abi.NV2080_CTRL_CMD_GPU_GET_PIDS,
            abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO,
            abi.NV2080_CTRL_CMD_FB_GET_INFO, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
            abi.NV2080_CTRL_CMD_FB_GET_NUMA_INFO,
            abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
            abi.NVA06C_CTRL_CMD_SET_TIMESLICE,
            abi.NVA06C_CTRL_CMD_GET_TIMESLICE, abi.NVA06C_CTRL_CMD_PREEMPT,
            abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
            0x201, 0x202, 0x203, 0x20800110, 0x20801304,
            abi.NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD,
            abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD,
            abi.NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD,
            abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD,
            abi.NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO,
            abi.NV0000_CTRL_CMD_IDLE_CHANNELS,
            abi.NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS,
            0xD02,                  # NV0000 CLIENT_GET_HANDLE_INFO
            abi.NV0002_CTRL_CMD_BIND_CONTEXTDMA,
            # the rest of what kmod/mem.c's xpu_mem_rm_control looks at
            abi.NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY,
            0x214,                  # NV0000 GPU_GET_PROBED_IDS
            0x2080110B,             # NV2080 FIFO_DISABLE_CHANNELS
            0x27B]                  # NV0000 GPU_GET_MEMOP_ENABLE (passed)
# the sizes RM takes for some of them: half the time a struct's size field
# after one of these commands is its own, so the call gets past RM's check
CONTROL_SIZES = {abi.NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY: 12,
                 0x2080110B: 536}

# The escapes xpu.ko looks at (kmod/file.c, kmod/mem.c, kmod/events.c), and
# two it passes on, with the struct each one's size comes from.
ESCAPES = {
    abi.NV_ESC_RM_ALLOC: [abi.NVOS21_PARAMETERS, abi.NVOS64_PARAMETERS],
    abi.NV_ESC_RM_FREE: [abi.NVOS00_PARAMETERS],
    abi.NV_ESC_RM_CONTROL: [abi.NVOS54_PARAMETERS],
    abi.NV_ESC_RM_DUP_OBJECT: [abi.NVOS55_PARAMETERS],
    abi.NV_ESC_RM_VID_HEAP_CONTROL: ["NVOS32_PARAMETERS"],
    abi.NV_ESC_RM_MAP_MEMORY: [abi.nv_ioctl_nvos33_parameters_with_fd],
    abi.NV_ESC_RM_UNMAP_MEMORY: [abi.NVOS34_PARAMETERS],
    abi.NV_ESC_RM_ALLOC_MEMORY: [abi.nv_ioctl_nvos02_parameters_with_fd],
    abi.NV_ESC_REGISTER_FD: [abi.nv_ioctl_register_fd_t],
    abi.NV_ESC_CARD_INFO: [abi.nv_ioctl_card_info_t * 8,
                           abi.nv_ioctl_card_info_t * 32],
    abi.NV_ESC_ATTACH_GPUS_TO_FD: [ctypes.c_uint32 * 1, ctypes.c_uint32 * 4],
    abi.NV_ESC_IOCTL_XFER_CMD: [abi.nv_ioctl_xfer_t],
    abi.NV_ESC_CHECK_VERSION_STR: [abi.nv_ioctl_rm_api_version_t],
    abi.NV_ESC_SYS_PARAMS: [abi.nv_ioctl_sys_params_t],
    abi.NV_ESC_NUMA_INFO: [abi.nv_ioctl_numa_info_t],
    abi.NV_ESC_ALLOC_OS_EVENT: [abi.nv_ioctl_alloc_os_event_t],
    abi.NV_ESC_FREE_OS_EVENT: [abi.nv_ioctl_alloc_os_event_t],
    abi.NV_ESC_RM_ALLOC_OBJECT: [abi.NVOS05_PARAMETERS],
    abi.NV_ESC_RM_ALLOC_CONTEXT_DMA2: [abi.NVOS39_PARAMETERS],
    abi.NV_ESC_RM_SHARE: [abi.NVOS57_PARAMETERS],
    abi.NV_ESC_RM_IDLE_CHANNELS: [abi.NVOS30_PARAMETERS],
    abi.NV_ESC_RM_ACCESS_REGISTRY: [abi.NVOS38_PARAMETERS],
    # passed on by xpu.ko (docs/security.md, "Doors read and left open")
    abi.NV_ESC_RM_BIND_CONTEXT_DMA: [abi.NVOS49_PARAMETERS],
    abi.NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO: [abi.NVOS56_PARAMETERS],
}


def _int_fields(cls, offset=0):
    """(name, offset, size) of every integer field of a ctypes struct,
    nested structs and arrays flattened."""
    if issubclass(cls, ctypes.Array):
        for i in range(cls._length_):
            yield from _int_fields(cls._type_,
                                   offset + i * ctypes.sizeof(cls._type_))
        return
    if not issubclass(cls, (ctypes.Structure, ctypes.Union)):
        yield "", offset, ctypes.sizeof(cls)
        return
    for name, ftype, *_ in cls._fields_:
        f = getattr(cls, name)
        for sub, off, size in _int_fields(ftype, offset + f.offset):
            yield (sub or name), off, size


class NvFuzzer:
    def __init__(self, rng, arena, values, fds, dev, gpu_ids):
        self.rng = rng
        self.arena = arena
        self.v = values
        self.fds = fds
        self.abi = dev.abi
        self.gpu_ids = gpu_ids
        self.mem_params = dev.memory_params
        self.cmd = None             # the command of the struct being filled

    def field(self, name, size):
        """A value for the field name, of size bytes."""
        r, v = self.rng, self.v
        if r.random() < 0.1:
            return r.getrandbits(8 * size)
        low = name.lower()
        if name in ("hClass",):
            return v.hclass()
        if name.startswith("h"):
            return v.handle()
        if name == "cmd":
            self.cmd = r.choice(CONTROLS + [v.u32()])
            return self.cmd
        if name in ("fd", "ctl_fd"):
            return r.choice(self.fds + [-1, 0, 1, 2, 1000])
        if name.startswith("p") and size == 8:
            return self.arena.inner_pointer(r)
        if name == "gpu_id" or (name == "" and size == 4):
            return r.choice(self.gpu_ids + [v.u32()])
        if "size" in low and self.cmd in CONTROL_SIZES and r.random() < 0.5:
            return CONTROL_SIZES[self.cmd]
        if "size" in low or low in ("length", "limit", "offset"):
            return v.size() if size == 8 else r.choice(
                [0, 4, 8, 12, 16, 20, 24, 64, 128, 184, 536, 652, 2128, 4096,
                 0x4000, v.u32()])
        if name == "function":     # VID_HEAP_CONTROL's: RM has 0-27
            return r.choice(list(range(12)) + [14, 15, 16, 18, 19, 20, 27,
                                               r.randrange(32)])
        if size == 8:
            return r.choice([0, v.size(), r.getrandbits(64)])
        return v.u32() & ((1 << (8 * size)) - 1)

    def struct(self, cls, nbytes):
        """nbytes of cls filled field by field (the rest random)."""
        buf = bytearray(self.rng.randbytes(nbytes))
        self.cmd = None
        if self.rng.random() < 0.15:
            return buf      # pure noise
        for name, off, size in _int_fields(cls):
            if off + size > nbytes or self.rng.random() < 0.1:
                continue
            val = self.field(name, size)
            if size in (1, 2, 4, 8):
                buf[off:off + size] = (val & ((1 << (8 * size)) - 1)) \
                    .to_bytes(size, "little")
        return buf

    def inner(self, nbytes):
        """What pAllocParms/params point to: real alloc params of a random
        size, or random words with handles in them."""
        r = self.rng
        pick = r.random()
        if pick < 0.3:
            p = self.mem_params(self.v.size() & ((1 << 64) - 1),
                                location=r.choice([0, 1, 2, 3]))
            data = bytearray(bytes(p))
        elif pick < 0.5:
            data = self.struct(self.abi.NV_CHANNEL_ALLOC_PARAMS,
                               ctypes.sizeof(self.abi.NV_CHANNEL_ALLOC_PARAMS))
        else:
            data = bytearray()
            while len(data) < 256:
                data += (self.v.handle() if r.random() < 0.4
                         else self.v.u32()).to_bytes(4, "little")
        return data[:4 * PAGE]

    def one(self, i):
        """Build call i; return (fd, cmd, addr, description)."""
        r = self.rng
        a = self.arena
        nr = r.choice(list(ESCAPES) + [r.randrange(256)])
        cls = r.choice(ESCAPES.get(nr, [ctypes.c_uint8 * 64]))
        if cls == "NVOS32_PARAMETERS":
            cls = self.abi.NVOS32_PARAMETERS
        right = ctypes.sizeof(cls)
        x = r.random()
        if x < 0.65:
            size = right
        elif x < 0.9:
            size = max(0, right + r.choice([-8, -4, -1, 1, 4, 8, 64]))
        else:
            size = r.randrange(1 << 14)
        direction = 3 if r.random() < 0.9 else r.randrange(4)
        # the driver reads neither the type nor the direction (nvidia_ioctl)
        kind = ord("F") if r.random() < 0.85 else r.choice(
            [ord("G"), 0, 0xFF, r.randrange(256)])
        cmd = (direction << 30) | (size << 16) | (kind << 8) | nr
        data = self.struct(cls, max(size, right))[:4 * PAGE]
        if nr == abi.NV_ESC_IOCTL_XFER_CMD and r.random() < 0.8:
            inner_nr = r.choice(list(ESCAPES))
            icls = r.choice(ESCAPES[inner_nr])
            if icls == "NVOS32_PARAMETERS":
                icls = self.abi.NVOS32_PARAMETERS
            isize = ctypes.sizeof(icls) if r.random() < 0.8 else \
                r.choice([0, 1, 4096, 1 << 14, 1 << 20, 0xFFFFFFFF])
            x = abi.nv_ioctl_xfer_t(cmd=inner_nr, size=isize & 0xFFFFFFFF,
                                    ptr=a.inner_pointer(r))
            data = bytearray(bytes(x)) + data[ctypes.sizeof(x):]
            a.write(a.inner, self.struct(icls, min(max(isize, 16), 4 * PAGE)))
        else:
            a.write(a.inner, self.inner(4 * PAGE))
        # Where the argument is: the RW area, ending at the guard page,
        # or a bad address.
        where = r.random()
        if where < 0.7:
            addr = a.arg
            a.write(addr, data[:4 * PAGE])
        elif where < 0.85 and size <= 4 * PAGE:
            addr = a.guard - size
            a.write(addr, data[:size])
        else:
            addr = a.bad_pointer(r)
        fd = r.choice(self.fds)
        desc = f"fd={fd} nr={nr:#x} size={size} dir={direction} " \
               f"addr={addr:#x} arg={bytes(data[:min(size, 64)]).hex()}"
        return fd, cmd, addr, desc


class CtlFuzzer:
    """/dev/xpuctl: every command of the uapi with random argsz, flags and
    fields; ids of live slices and fds of our own nodes are likely."""

    def __init__(self, rng, arena, uapi, fds, slice_ids):
        self.rng = rng
        self.arena = arena
        self.uapi = uapi
        self.fds = fds
        self.slice_ids = slice_ids
        u = uapi
        self.cmds = {
            u.XPU_IOC_VERSION: u.XpuVersion, u.XPU_IOC_GPU_LIST: u.XpuGpuList,
            u.XPU_IOC_GPU_SET: u.XpuGpuSet,
            u.XPU_IOC_SLICE_CREATE: u.XpuSliceInfo,
            u.XPU_IOC_SLICE_GET: u.XpuSliceInfo,
            u.XPU_IOC_SLICE_SET: u.XpuSliceInfo,
            u.XPU_IOC_SLICE_DESTROY: u.XpuSliceRef,
            u.XPU_IOC_SLICE_LIST: u.XpuSliceList,
            u.XPU_IOC_NODE_ATTACH: u.XpuNode, u.XPU_IOC_NODE_DETACH: u.XpuNode,
            u.XPU_IOC_CGROUP_BIND: u.XpuCgroup,
            u.XPU_IOC_CGROUP_UNBIND: u.XpuCgroup,
        }
        # Destroy rarely, create and attach often: the slices live long
        # enough for the calls on them to get past the lookup.
        often = {u.XPU_IOC_SLICE_CREATE: 3, u.XPU_IOC_SLICE_SET: 2,
                 u.XPU_IOC_SLICE_DESTROY: 0.5, u.XPU_IOC_NODE_ATTACH: 3,
                 u.XPU_IOC_CGROUP_BIND: 1.5}
        self.weights = [often.get(c, 1) for c in self.cmds]

    def field(self, cls, name, size, right):
        r = self.rng
        if r.random() < 0.05:
            return r.getrandbits(8 * size)
        if name == "argsz":
            return r.choice([right, right, right, right - 1, right + 8,
                             right + 4096, 0, 8, 0xFFFFFFFF])
        if name == "flags":
            return r.choice([0] * 6 + [1, 2, 4, 8, 0xF, 0x10, 0xFFFFFFFF])
        if name == "id":
            # ids are allocated lowest first: the low ones are likely
            # live, whichever calls created or destroyed slices before
            return r.choice(self.slice_ids + list(range(6)) +
                            [1023, 1024, 0xFFFFFFFF])
        if name == "role":
            return r.choice([0, 0, 1, 1, 2, 0xFFFFFFFF])
        if name in ("fd",):
            return r.choice(self.fds + [-1, 0, 1, 2, 1000])
        if name in ("gpu_minor", "minor"):
            return r.choice([0, 1, 0, 1, 2, 255, 0xFFFFFFFF])
        if name == "name":      # bytes of the name, one at a time
            return r.choice(b"fz-._aZ09\0\0\0/ \xff")
        if name in ("gpus", "ids"):
            return self.arena.inner_pointer(self.rng)
        if name == "memory_limit":
            return r.choice([1 << 20, 64 << 20, 1 << 30, 1 << 30, 0,
                             (1 << 20) - 1, 80 << 30, 1 << 40, (1 << 64) - 1])
        if name in ("count", "gpu_argsz"):
            return r.choice([0, 1, 2, 4, 1024, 1025, 0x10000000, 0xFFFFFFFF,
                             r.randrange(200)])
        # Each mostly in range, so that a whole struct is valid often
        # enough for a create or a set to succeed.
        ranges = {"compute_share": [0, 0, 100, 1000, 1001],
                  "weight": [1, 100, 10000, 0, 10001],
                  "priority": [0, 1, 2, 3, 0xFFFFFFFF],
                  "mode": [0, 1, 2], "policy": [0, 1, 2, 3, 4],
                  "period_us": [999, 1000, 20000, 1000000, 1000001]}
        if name in ranges:
            return r.choice(ranges[name])
        return r.choice([0, r.getrandbits(8 * size)])

    def one(self, i):
        r = self.rng
        a = self.arena
        x = r.random()
        if x < 0.85:
            cmd = r.choices(list(self.cmds), self.weights)[0]
            cls = self.cmds[cmd]
        else:   # a number, direction or size the kernel does not know
            cls = r.choice(list(self.cmds.values()))
            nr = r.choice([r.randrange(256), 0x00, 0x10, 0x20])
            cmd = (r.randrange(4) << 30) | (r.randrange(1 << 14) << 16) | \
                (self.uapi.XPU_IOC_TYPE << 8) | nr
        right = ctypes.sizeof(cls)
        buf = bytearray(r.randbytes(4 * PAGE))
        for name, off, size in _int_fields(cls):
            if size in (1, 4, 8):
                val = self.field(cls, name, size, right)
                buf[off:off + size] = (val & ((1 << (8 * size)) - 1)) \
                    .to_bytes(size, "little")
        if hasattr(cls, "name") and r.random() < 0.7:
            # a valid name mostly (a slice gets made), else the bytes above
            n = bytes(r.choice(b"fzFZ09_.-") for _ in range(r.randrange(
                1, 8))) + bytes(self.uapi.XPU_NAME_LEN)
            off = cls.name.offset
            buf[off:off + self.uapi.XPU_NAME_LEN] = \
                n[:self.uapi.XPU_NAME_LEN]
        a.write(a.inner, r.randbytes(4 * PAGE))
        where = r.random()
        if where < 0.8:
            addr = a.arg
            a.write(addr, buf)
        elif where < 0.9:
            addr = a.guard - right
            a.write(addr, buf[:right])
        else:
            addr = a.bad_pointer(r)
        fd = self.fds[0]
        desc = f"cmd={cmd:#x} addr={addr:#x} arg={bytes(buf[:right]).hex()}"
        return fd, cmd, addr, desc


def drop_privileges():
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def run(fuzzer, calls, trace):
    """Make the calls; a call that does not return in CALL_TIMEOUT_S is a
    hang (SIGALRM interrupts a waiting ioctl; one in an uninterruptible
    wait is the caller's timeout to catch)."""
    results = {}
    signal.signal(signal.SIGALRM, _alarm)
    for i in range(calls):
        fd, cmd, addr, desc = fuzzer.one(i)
        if trace:
            os.write(trace, f"{i} {desc}\n".encode())
        signal.alarm(CALL_TIMEOUT_S)
        try:
            rc = libc.ioctl(fd, cmd, addr)
            err = ctypes.get_errno() if rc < 0 else 0
        except Hang:
            print(json.dumps({"hang": i, "call": desc}), flush=True)
            sys.exit(3)
        finally:
            signal.alarm(0)
        key = f"{(cmd >> 8) & 0xFF:#x}/{cmd & 0xFF:#x} " + \
            (errno.errorcode.get(err, str(err)) if err else "ok")
        results[key] = results.get(key, 0) + 1
    return results


def nv_main(args, rng):
    ctl = client.Ctl(args.ctl)
    gpu = client.GpuFile(0, args.gpu)
    rm = client.RmClient(ctl)
    dev = rm.device(0, gpu_file=gpu)
    handles = [rm.handle, dev.hdevice, dev.hsubdevice]
    mems = [dev.alloc_vidmem(1 << 20).handle, dev.heap_alloc(1 << 20).handle,
            dev.alloc_sysmem(PAGE).handle]
    handles += mems
    ch = client.Channel(dev, schedule=False)
    handles += [ch.htsg, ch.hchannel, ch.husermode, ch.hmem]
    gpu_ids = [c.gpu_id for c in ctl.card_info() if c.valid]
    # A second control file, registered to nothing: its fd is thrown too.
    ctl2 = client.Ctl(args.ctl)
    fds = [ctl.fileno(), gpu.fileno(), ctl2.fileno()]
    if args.nobody:
        drop_privileges()
    arena = Arena(rng)
    values = Values(rng, handles, args.limit)
    fuzzer = NvFuzzer(rng, arena, values, fds, dev, gpu_ids)
    results = run(fuzzer, args.calls, args.trace_fd)
    # Nothing is freed here: the files close at exit, and what is left
    # is the kernel's and the driver's to release.
    print(json.dumps({"results": results, "handles": handles}), flush=True)
    os._exit(0)


def xpuctl_main(args, rng):
    from xpu import uapi
    ctl_fd = os.open("/dev/" + uapi.XPU_CTL_NAME, os.O_RDWR)
    fds = [ctl_fd]
    for name in sorted(os.listdir(args.dir)):
        fds.append(os.open(os.path.join(args.dir, name),
                           os.O_PATH | os.O_NOFOLLOW))
    if args.cgroup:
        fds.append(os.open(args.cgroup, os.O_RDONLY | os.O_DIRECTORY))
    if args.nobody:
        drop_privileges()
    arena = Arena(rng)
    fuzzer = CtlFuzzer(rng, arena, uapi, fds, args.slice or [])
    results = run(fuzzer, args.calls, args.trace_fd)
    print(json.dumps({"results": results}), flush=True)
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("target", choices=["nv", "xpuctl"])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--calls", type=int, required=True)
    p.add_argument("--nobody", action="store_true")
    p.add_argument("--trace", help="file for one line per call")
    p.add_argument("--ctl")
    p.add_argument("--gpu")
    p.add_argument("--limit", type=int, default=64 << 20)
    p.add_argument("--dir", help="xpuctl: the nodes whose fds to throw")
    p.add_argument("--cgroup", help="xpuctl: a cgroup whose fd to throw")
    p.add_argument("--slice", type=int, action="append",
                   help="xpuctl: a live slice id (repeatable)")
    args = p.parse_args()
    args.trace_fd = None
    if args.trace:
        args.trace_fd = os.open(args.trace, os.O_WRONLY | os.O_CREAT |
                                os.O_TRUNC | os.O_APPEND, 0o644)
    rng = random.Random(f"{args.target}-{args.nobody}-{args.seed}")
    if args.target == "nv":
        nv_main(args, rng)
    else:
        xpuctl_main(args, rng)


if __name__ == "__main__":
    main()
