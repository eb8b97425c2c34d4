# SPDX-License-Identifier: Apache-2.0
"""xpud's side of /dev/xpuctl without a kernel: the structs ctl.py packs and
unpacks, the errno -> error mapping and its messages, and KernelBackend on an
in-memory xpu.ko (FakeXpu, which answers ctl's ioctls as kmod/slice.c does).

What the real kernel does is tested in the VM (tests/vmtests/test_xpu_ctl.py).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat

import pytest
from xpu import api, backend, config, ctl, inventory, kernel, model, uapi
from xpu.service import Service
from xpu.state import StateStore

MIB = 1 << 20
GIB = 1 << 30
UUID0 = "GPU-00000000-1111-2222-3333-444444444444"
UUID1 = "GPU-AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee"  # the driver's case
UUID1_LOWER = UUID1[:4] + UUID1[4:].lower()


# -- structs ------------------------------------------------------------------

# xpu-uvm's numbers in the fake (misc major 10)
FAKE_UVM = (10, 121)

def test_slice_info_packs_at_the_header_offsets():
    arg = ctl.slice_info_arg("train", gpu_minor=1, memory_limit=8 * GIB,
                             compute_share=250, weight=200,
                             priority=uapi.XPU_PRIO_HIGH)
    raw = bytes(arg)
    assert len(raw) == ctypes.sizeof(uapi.XpuSliceInfo) == 224
    le = int.from_bytes
    assert le(raw[0:4], "little") == 224          # argsz
    assert le(raw[4:8], "little") == 0            # flags
    assert le(raw[12:16], "little") == 1          # gpu_minor
    assert raw[16:48] == b"train".ljust(32, b"\0")
    assert le(raw[48:56], "little") == 8 * GIB
    assert le(raw[56:60], "little") == 250
    assert le(raw[60:64], "little") == 200
    assert le(raw[64:68], "little") == uapi.XPU_PRIO_HIGH
    assert raw[68:] == bytes(224 - 68)            # pad, usage, records, UVM


def test_slice_info_unpacks():
    arg = ctl.slice_info_arg("a.b-c_1", gpu_minor=3, memory_limit=MIB,
                             compute_share=1000, weight=1,
                             priority=uapi.XPU_PRIO_LOW, id=7)
    arg.memory_used, arg.memory_peak = 5, 9
    arg.denied_allocs, arg.killed = 2, 1
    arg.open_files, arg.processes = 4, 3
    arg.rm_handles, arg.os_events = 57, 6
    again = uapi.XpuSliceInfo.from_buffer_copy(bytes(arg))
    assert ctl.SliceInfo.from_struct(again) == ctl.SliceInfo(
        id=7, name="a.b-c_1", gpu_minor=3, memory_limit=MIB,
        compute_share=1000, weight=1, priority=uapi.XPU_PRIO_LOW,
        memory_used=5, memory_peak=9, denied_allocs=2, killed=1,
        open_files=4, processes=3, rm_handles=57, os_events=6,
        devices=0, vaspaces=0, virtuals=0, tsgs=0, usermode=0,
        doorbell_files=0, uvm_files=0, uvm_channels=0, uvm_tsgs=0,
        uvm_retained=0)
    # rm_handles and os_events, as the header lays them out.
    raw = bytes(arg)
    assert int.from_bytes(raw[168:172], "little") == 57   # rm_handles
    assert int.from_bytes(raw[172:176], "little") == 6    # os_events


def test_slice_info_records_are_read_only_where_the_kernel_wrote_them():
    """The records' counts (since session 46) end the struct: an xpu.ko
    that writes back an argsz ending at os_events does not know them, and
    they are None then, not 0."""
    arg = ctl.slice_info_arg("r", id=1)
    for i, f in enumerate(ctl.RECORD_FIELDS):
        setattr(arg, f, 10 + i)
    got = ctl.SliceInfo.from_struct(
        uapi.XpuSliceInfo.from_buffer_copy(bytes(arg)))
    assert (got.devices, got.vaspaces, got.virtuals, got.tsgs,
            got.usermode, got.doorbell_files) == (10, 11, 12, 13, 14, 15)
    raw = bytes(arg)
    assert [int.from_bytes(raw[o:o + 4], "little")
            for o in range(176, 200, 4)] == list(range(10, 16))
    arg.argsz = 176
    got = ctl.SliceInfo.from_struct(
        uapi.XpuSliceInfo.from_buffer_copy(bytes(arg)))
    assert got.devices is None and got.doorbell_files is None


def test_slice_info_uvm_fields_are_read_only_where_the_kernel_wrote_them():
    """What xpu.ko holds for the slice's UVM files (session 48) ends the
    struct, after a pad: None from an xpu.ko whose argsz ends before."""
    arg = ctl.slice_info_arg("u", id=1)
    arg.uvm_files, arg.uvm_channels, arg.uvm_tsgs = 2, 3, 4
    arg.uvm_retained = 5 << 32
    raw = bytes(arg)
    assert [int.from_bytes(raw[o:o + 4], "little")
            for o in range(200, 212, 4)] == [2, 3, 4]
    assert int.from_bytes(raw[216:224], "little") == 5 << 32
    got = ctl.SliceInfo.from_struct(uapi.XpuSliceInfo.from_buffer_copy(raw))
    assert (got.uvm_files, got.uvm_channels, got.uvm_tsgs,
            got.uvm_retained) == (2, 3, 4, 5 << 32)
    arg.argsz = 200
    got = ctl.SliceInfo.from_struct(
        uapi.XpuSliceInfo.from_buffer_copy(bytes(arg)))
    assert got.uvm_files is None and got.uvm_retained is None
    assert got.doorbell_files == 0


def test_names_fill_their_field_with_a_nul():
    ok = ctl.slice_info_arg("x" * 31)
    assert bytes(ok.name) == b"x" * 31 + b"\0"
    with pytest.raises(ValueError):
        ctl.slice_info_arg("x" * 32)
    raw = ctl.slice_info_arg(b"ab\0cd")       # bytes go as they are
    assert bytes(raw.name)[:6] == b"ab\0cd\0"
    assert uapi.unpack_str(raw.name) == "ab"


def test_unpack_str_never_fails():
    field = (ctypes.c_uint8 * 8)(*b"\xffab\0zz\0\0")
    assert uapi.unpack_str(field) == "\ufffdab"
    full = (ctypes.c_uint8 * 4)(*b"abcd")      # no NUL: all of it
    assert uapi.unpack_str(full) == "abcd"


def test_gpu_info_unpacks():
    s = uapi.XpuGpuInfo(minor=2, mode=uapi.XPU_MODE_EXCLUSIVE,
                        policy=uapi.XPU_POLICY_FIXED, period_us=50000,
                        nr_slices=3, driver_major=580, driver_minor=126,
                        driver_patch=20, memory_total=80 * GIB,
                        memory_sliced=GIB, channel_ids=2048,
                        memory_orphaned=32 * MIB)
    uapi.pack_str(s.uuid, UUID0.encode())
    assert ctl.GpuInfo.from_struct(s) == ctl.GpuInfo(
        minor=2, uuid=UUID0, mode=uapi.XPU_MODE_EXCLUSIVE,
        policy=uapi.XPU_POLICY_FIXED, period_us=50000, nr_slices=3,
        driver_version="580.126.20", memory_total=80 * GIB,
        memory_sliced=GIB, channel_ids=2048, memory_orphaned=32 * MIB)
    assert ctypes.sizeof(s) == 128
    assert uapi.XpuGpuInfo.uuid.offset == 48
    assert uapi.XpuGpuInfo.channel_ids.offset == 96
    assert uapi.XpuGpuInfo.memory_orphaned.offset == 104
    # the third part keeps its leading zero, as NVIDIA writes it
    s.driver_major, s.driver_minor, s.driver_patch = 535, 288, 1
    assert ctl.GpuInfo.from_struct(s).driver_version == "535.288.01"


@pytest.mark.parametrize("kw, flags", [
    ({}, 0),
    ({"memory_limit": GIB}, uapi.XPU_SLICE_SET_MEMORY),
    ({"compute_share": 0}, uapi.XPU_SLICE_SET_SHARE),
    ({"weight": 5, "priority": 0},
     uapi.XPU_SLICE_SET_WEIGHT | uapi.XPU_SLICE_SET_PRIORITY),
    ({"host_memory_limit": 0}, uapi.XPU_SLICE_SET_HOST_MEMORY),
    ({"memory_limit": GIB, "compute_share": 1, "weight": 1, "priority": 2,
      "host_memory_limit": GIB}, uapi.XPU_SLICE_SET_FLAGS_ALL),
])
def test_slice_set_flags_name_what_is_given(kw, flags):
    arg = ctl.slice_set_arg(4, **kw)
    assert (arg.id, arg.flags) == (4, flags)
    for k, v in kw.items():
        assert getattr(arg, k) == v


def test_gpu_set_flags_name_what_is_given():
    arg = ctl.gpu_set_arg(1, period_us=20000)
    assert (arg.argsz, arg.flags, arg.minor, arg.period_us) == (
        24, uapi.XPU_GPU_SET_PERIOD, 1, 20000)
    arg = ctl.gpu_set_arg(0, mode=0, policy=3, period_us=1000)
    assert arg.flags == uapi.XPU_GPU_SET_FLAGS_ALL


def test_node_and_cgroup_fds_are_signed():
    node = uapi.XpuNode(fd=-1)
    assert node.fd == -1 and bytes(node)[16:20] == b"\xff" * 4
    assert uapi.XpuCgroup(fd=-100).fd == -100


def test_ioctl_numbers():
    # _IOWR(0xE6, nr, size): dir 3 << 30 | size << 16 | type << 8 | nr
    def iowr(nr, cls):
        return 3 << 30 | ctypes.sizeof(cls) << 16 | 0xE6 << 8 | nr
    assert uapi.XPU_IOC_GPU_LIST == iowr(0x01, uapi.XpuGpuList)
    assert uapi.XPU_IOC_SLICE_CREATE == iowr(0x10, uapi.XpuSliceInfo)
    assert uapi.XPU_IOC_SLICE_DESTROY == iowr(0x13, uapi.XpuSliceRef)
    assert uapi.XPU_IOC_CGROUP_UNBIND == iowr(0x23, uapi.XpuCgroup)


# -- errors -------------------------------------------------------------------

CREATE = {"name": "train", "minor": 0, "memory_limit": GIB,
          "compute_share": 0, "weight": 100, "priority": 1}

ERRORS = [
    # op, errno, ctx, class, words in the message
    ("slice_create", errno.EEXIST, CREATE, ctl.Exists,
     ["a slice named 'train' exists"]),
    ("slice_create", errno.ENOSPC, CREATE, ctl.Conflict,
     ["creating slice 'train'", "GPU 0", "no memory or compute left to give"]),
    ("slice_create", errno.ENOSPC, {**CREATE, "nospace": "WHY"},
     ctl.Conflict, ["GPU 0 (/dev/nvidia0): WHY"]),
    ("slice_create", errno.ENODEV, CREATE, ctl.NotFound,
     ["xpu.ko has no GPU 0", "xpuctl gpus"]),
    ("slice_create", errno.EPERM, CREATE, ctl.PermissionDenied,
     ["creating slice 'train': needs root (CAP_SYS_ADMIN)"]),
    ("slice_create", errno.EINVAL, {**CREATE, "name": ".x"}, ctl.Invalid,
     ["starts with '.' or '-'"]),
    ("slice_create", errno.EINVAL, {**CREATE, "memory_limit": 5},
     ctl.Invalid, ["below 1MiB"]),
    ("slice_create", errno.EINVAL, {**CREATE, "compute_share": 1001},
     ctl.Invalid, ["100.1%", "above 100%"]),
    ("slice_create", errno.EINVAL, {**CREATE, "weight": 0}, ctl.Invalid,
     ["weight 0 is not between 1 and 10000"]),
    ("slice_create", errno.EINVAL, {**CREATE, "priority": 3}, ctl.Invalid,
     ["priority 3"]),
    ("slice_create", errno.EINVAL, CREATE, ctl.Invalid,
     ["out of range"]),
    ("slice_create", errno.ENOMEM, CREATE, ctl.CtlError, ["out of memory"]),
    ("slice_destroy", errno.EBUSY, {"name": "a", "id": 3}, ctl.Busy,
     ["slice 'a' is in use", "pass --force"]),
    ("slice_destroy", errno.ENOENT, {"id": 3}, ctl.NotFound,
     ["destroying slice 3", "no such slice"]),
    ("slice_get", errno.ENOENT, {"id": 9}, ctl.NotFound, ["slice 9"]),
    ("slice_set", errno.EBUSY, {"name": "a", "memory_limit": MIB}, ctl.Busy,
     ["changing slice 'a'", "free memory first"]),
    ("slice_set", errno.EAGAIN, {"name": "a", "memory_limit": MIB}, ctl.Busy,
     ["changing slice 'a'", "has not ended in 1 s", "try again"]),
    ("slice_set", errno.ENOSPC, {"name": "a", "minor": 1}, ctl.Conflict,
     ["GPU 1"]),
    ("slice_set", errno.EPERM, {"name": "a"}, ctl.PermissionDenied,
     ["needs root (CAP_SYS_ADMIN)"]),
    ("gpu_set", errno.ENODEV, {"minor": 7}, ctl.NotFound,
     ["setting GPU 7", "no GPU 7"]),
    ("gpu_set", errno.EINVAL, {"minor": 0}, ctl.Invalid, ["1 to 1000 ms"]),
    ("gpu_list", errno.EINVAL, {}, ctl.CtlError,
     ["XPU_IOC_GPU_LIST", "update them together"]),
    ("gpu_list", errno.ENOTTY, {"device": "/dev/null"}, ctl.Unsupported,
     ["/dev/null does not know XPU_IOC_GPU_LIST"]),
    ("node_attach", errno.EINVAL, {"path": "/dev/xpu3", "id": 3,
                                   "expect": 1}, ctl.Invalid,
     ["attaching /dev/xpu3 to slice 3", "must be 195:1"]),
    ("node_attach", errno.ENODEV, {"path": "/tmp/f", "id": 3}, ctl.Invalid,
     ["not a character device of the NVIDIA driver"]),
    ("node_attach", errno.EEXIST, {"path": "/dev/xpu3", "id": 3},
     ctl.Conflict, ["belongs to another slice"]),
    ("node_attach", errno.ENOSPC, {"path": "/dev/xpu3", "id": 3},
     ctl.Conflict, ["bindings"]),
    ("node_detach", errno.ENOENT, {"path": "/dev/xpu3", "id": 3},
     ctl.NotFound, ["not a node of slice 3"]),
    ("cgroup_bind", errno.EBADF, {"path": "/tmp", "name": "a"}, ctl.Invalid,
     ["binding cgroup /tmp to slice 'a'", "not a cgroup v2 directory"]),
    ("cgroup_bind", errno.EEXIST, {"path": "/x", "name": "a"}, ctl.Conflict,
     ["bound to another slice"]),
    ("cgroup_unbind", errno.ENOENT, {"path": "/x", "name": "a"},
     ctl.NotFound, ["not bound to slice 'a'"]),
    ("slice_list", errno.EFAULT, {}, ctl.CtlError, ["EFAULT"]),
    ("slice_get", errno.EIO, {"id": 1}, ctl.CtlError,
     ["reading slice 1", "XPU_IOC_SLICE_GET", os.strerror(errno.EIO)]),
]


@pytest.mark.parametrize("op, err, ctx, cls, words", ERRORS,
                         ids=[f"{e[0]}-{errno.errorcode[e[1]]}-{i}"
                              for i, e in enumerate(ERRORS)])
def test_errno_becomes_an_error_for_a_person(op, err, ctx, cls, words):
    e = ctl.error(op, err, **ctx)
    assert type(e) is cls
    assert e.errno == err
    msg = str(e)
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_error_codes_are_api_codes():
    for cls in (ctl.CtlError, ctl.Invalid, ctl.NotFound, ctl.Exists,
                ctl.Conflict, ctl.Busy, ctl.PermissionDenied,
                ctl.Unsupported):
        assert cls.code in api.ERRORS
        assert cls("x").exit_status == api.ERRORS[cls.code].exit_status
    assert ctl.NotFound("x").exit_status == 5
    assert ctl.PermissionDenied("x").exit_status == 4


def test_backend_errors_keep_code_and_message():
    for cls in (ctl.CtlError, ctl.Invalid, ctl.NotFound, ctl.Exists,
                ctl.Conflict, ctl.Busy, ctl.PermissionDenied,
                ctl.Unsupported):
        b = backend.from_ctl(cls("one line"))
        assert isinstance(b, backend.BackendError)
        assert (b.code, str(b)) == (cls.code, "one line")
    assert isinstance(backend.from_ctl(ctl.Busy("x")), backend.Busy)


@pytest.mark.parametrize("name, problem", [
    ("", "empty"),
    ("a" * 32, "32 bytes long"),
    (".a", "starts with"),
    ("-a", "starts with"),
    ("a b", "' '"),
    ("a/b", "'/'"),
    ("é", "byte 0xc3"),
    (b"ab\0c", "after its NUL"),
    ("a" * 31, None),
    ("a.b-c_D9", None),
])
def test_name_problem_is_the_kernel_rule(name, problem):
    got = ctl.name_problem(name)
    if problem is None:
        assert got is None
        model.check_name(name)  # xpud's rule agrees
    else:
        assert problem in got


def test_open_errors():
    e = ctl.open_error("binding", "/nope", FileNotFoundError(
        errno.ENOENT, "x"))
    assert isinstance(e, ctl.NotFound) and "/nope does not exist" in str(e)
    e = ctl.open_error("binding", "/f", NotADirectoryError(errno.ENOTDIR, "x"))
    assert isinstance(e, ctl.Invalid)


# -- an in-memory xpu.ko ------------------------------------------------------

def _raise(err):
    raise OSError(err, os.strerror(err))


class FakeXpu:
    """The kernel's side of the ioctls, after kmod/slice.c and ctl.c."""

    def __init__(self, gpus=((0, UUID0), (1, UUID1)), memory=80 * GIB):
        self.gpus = {m: {"uuid": u, "memory_total": memory, "mode": 0,
                         "policy": 0, "period_us": 20000}
                     for m, u in gpus}
        self.slices: dict[int, dict] = {}
        self.nodes: dict[tuple, int] = {}     # (st_dev, st_ino) -> id
        self.cgroups: dict[str, int] = {}
        self.calls: list[tuple] = []
        self.root = True
        self.open_files: dict[int, int] = {}
        # An xpu.ko before session 46: its slice info ends at os_events.
        self.old_kernel = False

    def ioctl(self, fd, cmd, arg, *rest):
        handlers = {
            uapi.XPU_IOC_VERSION: self.version,
            uapi.XPU_IOC_GPU_LIST: self.gpu_list,
            uapi.XPU_IOC_GPU_SET: self.gpu_set,
            uapi.XPU_IOC_SLICE_CREATE: self.create,
            uapi.XPU_IOC_SLICE_GET: self.get,
            uapi.XPU_IOC_SLICE_SET: self.set,
            uapi.XPU_IOC_SLICE_DESTROY: self.destroy,
            uapi.XPU_IOC_SLICE_LIST: self.list,
            uapi.XPU_IOC_NODE_ATTACH: self.attach,
            uapi.XPU_IOC_CGROUP_BIND: self.bind,
            uapi.XPU_IOC_CGROUP_UNBIND: self.unbind,
        }
        if cmd not in handlers:
            _raise(errno.ENOTTY)
        self.calls.append((cmd, bytes(arg)))
        handlers[cmd](arg)
        return 0

    def admin(self):
        if not self.root:
            _raise(errno.EPERM)

    def version(self, a):
        a.api, a.major, a.minor, a.patch = 1, 0, 2, 0

    def gpu_list(self, a):
        for i, (minor, g) in enumerate(sorted(self.gpus.items())):
            if i >= a.count:
                break
            e = uapi.XpuGpuInfo.from_address(a.gpus + i * a.gpu_argsz)
            e.minor, e.mode, e.policy = minor, g["mode"], g["policy"]
            e.period_us, e.memory_total = g["period_us"], g["memory_total"]
            e.channel_ids = g.get("channel_ids", 0)
            e.memory_orphaned = g.get("memory_orphaned", 0)
            e.driver_major, e.driver_minor, e.driver_patch = 580, 126, 20
            uapi.pack_str(e.uuid, g["uuid"].encode())
        a.count = len(self.gpus)

    def gpu_set(self, a):
        self.admin()
        if a.minor not in self.gpus:
            _raise(errno.ENODEV)
        g = self.gpus[a.minor]
        if a.flags & uapi.XPU_GPU_SET_MODE:
            g["mode"] = a.mode
        if a.flags & uapi.XPU_GPU_SET_POLICY:
            g["policy"] = a.policy
        if a.flags & uapi.XPU_GPU_SET_PERIOD:
            g["period_us"] = a.period_us

    def _fill(self, id, a):
        s = self.slices[id]
        a.id, a.gpu_minor = id, s["gpu_minor"]
        uapi.pack_str(a.name, s["name"].encode())
        for k in ("memory_limit", "compute_share", "weight", "priority",
                  "host_memory_limit"):
            setattr(a, k, s[k])
        a.memory_used = s.get("memory_used", 0)
        a.host_memory_used = s.get("host_memory_used", 0)
        a.rm_handles = s.get("rm_handles", 0)
        a.os_events = s.get("os_events", 0)
        a.open_files = self.open_files.get(id, 0)
        a.channels = s.get("channels", 0)
        for f in ctl.RECORD_FIELDS:
            setattr(a, f, s.get(f, 0))
        if self.old_kernel:     # an xpu.ko before the records' counts
            a.argsz = min(a.argsz, uapi.XpuSliceInfo.os_events.offset + 4)

    def create(self, a):
        self.admin()
        name = uapi.unpack_str(a.name)
        if ctl.name_problem(bytes(a.name).rstrip(b"\0")) or \
                ctl.settings_problem(a.memory_limit, a.compute_share,
                                     a.weight, a.priority):
            _raise(errno.EINVAL)
        if a.gpu_minor not in self.gpus:
            _raise(errno.ENODEV)
        if any(s["name"] == name for s in self.slices.values()):
            _raise(errno.EEXIST)
        used = sum(s["memory_limit"] for s in self.slices.values()
                   if s["gpu_minor"] == a.gpu_minor)
        g = self.gpus[a.gpu_minor]
        if (used + g.get("memory_orphaned", 0) + a.memory_limit
                > g["memory_total"]):
            _raise(errno.ENOSPC)
        id = min(set(range(len(self.slices) + 1)) - set(self.slices))
        self.slices[id] = {"name": name, "gpu_minor": a.gpu_minor,
                           "memory_limit": a.memory_limit,
                           "compute_share": a.compute_share,
                           "weight": a.weight, "priority": a.priority,
                           "host_memory_limit": a.host_memory_limit}
        self._fill(id, a)

    def get(self, a):
        if a.id not in self.slices:
            _raise(errno.ENOENT)
        self._fill(a.id, a)

    def set(self, a):
        self.admin()
        if a.id not in self.slices:
            _raise(errno.ENOENT)
        s = self.slices[a.id]
        # A bound on system memory below what the slice holds: EBUSY, as
        # a memory limit below what it uses (xpu_mem_set_host_limit).
        if a.flags & uapi.XPU_SLICE_SET_HOST_MEMORY and \
                a.host_memory_limit and \
                s.get("host_memory_used", 0) > a.host_memory_limit:
            _raise(errno.EBUSY)
        if a.flags & uapi.XPU_SLICE_SET_MEMORY and \
                s.get("memory_used", 0) > a.memory_limit:
            _raise(errno.EBUSY)
        for flag, k in ((uapi.XPU_SLICE_SET_MEMORY, "memory_limit"),
                        (uapi.XPU_SLICE_SET_SHARE, "compute_share"),
                        (uapi.XPU_SLICE_SET_WEIGHT, "weight"),
                        (uapi.XPU_SLICE_SET_PRIORITY, "priority"),
                        (uapi.XPU_SLICE_SET_HOST_MEMORY,
                         "host_memory_limit")):
            if a.flags & flag:
                s[k] = getattr(a, k)
        self._fill(a.id, a)

    def destroy(self, a):
        self.admin()
        if a.id not in self.slices:
            _raise(errno.ENOENT)
        if self.open_files.get(a.id) and not a.flags & uapi.XPU_DESTROY_FORCE:
            _raise(errno.EBUSY)
        del self.slices[a.id]
        self.nodes = {k: v for k, v in self.nodes.items() if v != a.id}
        self.cgroups = {k: v for k, v in self.cgroups.items() if v != a.id}

    def list(self, a):
        ids = sorted(self.slices)
        out = (ctypes.c_uint32 * max(a.count, 1)).from_address(a.ids) \
            if a.count else []
        for i, id in enumerate(ids[:a.count]):
            out[i] = id
        a.count = len(ids)

    def attach(self, a):
        self.admin()
        st = os.fstat(a.fd)
        uvm = a.role == uapi.XPU_NODE_UVM
        if not stat.S_ISCHR(st.st_mode) or (
                st.st_rdev != os.makedev(*FAKE_UVM) if uvm
                else os.major(st.st_rdev) != 195):
            _raise(errno.ENODEV)
        if a.id not in self.slices:
            _raise(errno.ENOENT)
        want = 255 if a.role == uapi.XPU_NODE_CTL else \
            self.slices[a.id]["gpu_minor"]
        if not uvm and os.minor(st.st_rdev) != want:
            _raise(errno.EINVAL)
        key = (st.st_dev, st.st_ino)
        if self.nodes.get(key, a.id) != a.id:
            _raise(errno.EEXIST)
        self.nodes[key] = a.id

    def _cgroup_key(self, a):
        # The fake takes any directory as a cgroup.
        return os.readlink(f"/proc/self/fd/{a.fd}")

    def bind(self, a):
        self.admin()
        if a.id not in self.slices:
            _raise(errno.ENOENT)
        key = self._cgroup_key(a)
        if self.cgroups.get(key, a.id) != a.id:
            _raise(errno.EEXIST)
        self.cgroups[key] = a.id

    def unbind(self, a):
        self.admin()
        key = self._cgroup_key(a)
        if self.cgroups.get(key) != a.id:
            _raise(errno.ENOENT)
        del self.cgroups[key]


class ListInventory(inventory.Inventory):
    def __init__(self, gpus):
        super().__init__([])
        self.gpus = gpus

    def list(self):
        return list(self.gpus)


def inv_gpus():
    # Bus order puts minor 1 first: indexes are the inventory's.
    return [model.Gpu(0, UUID1_LOWER, "NVIDIA H200", 1, "0000:18:00.0"),
            model.Gpu(1, UUID0, "NVIDIA H200", 0, "0000:19:00.0")]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    x = FakeXpu()
    (tmp_path / "xpuctl").touch()
    monkeypatch.setattr(ctl.fcntl, "ioctl", x.ioctl)
    return x


@pytest.fixture
def nodes(tmp_path):
    d = tmp_path / "dev"
    d.mkdir()
    return d


@pytest.fixture
def kb(fake, tmp_path, nodes):
    cg = tmp_path / "cgroup"
    (cg / "jobs" / "a").mkdir(parents=True)
    # /sys/module/xpu/parameters/max_handles, as the kernel writes it.
    (tmp_path / "max_handles").write_text("131072\n")
    # /sys/module/xpu/parameters/max_os_events, likewise.
    (tmp_path / "max_os_events").write_text("1024\n")
    # max_records and max_doorbell_files, likewise.
    (tmp_path / "max_records").write_text("1024\n")
    (tmp_path / "max_doorbell_files").write_text("512\n")
    return kernel.KernelBackend(ListInventory(inv_gpus()),
                                str(tmp_path / "xpuctl"), str(nodes),
                                str(cg), node_group="no-such-group-xpu",
                                max_handles_path=str(tmp_path / "max_handles"),
                                max_os_events_path=str(
                                    tmp_path / "max_os_events"),
                                max_records_path=str(tmp_path / "max_records"),
                                max_doorbell_files_path=str(
                                    tmp_path / "max_doorbell_files"),
                                uvm_dev_path=str(tmp_path / "xpu-uvm-dev"))


def can_mknod(path):
    try:
        os.mknod(path / ".probe", stat.S_IFCHR | 0o600, os.makedev(195, 0))
    except PermissionError:
        return False
    os.unlink(path / ".probe")
    return True


@pytest.fixture
def mknod_ok(nodes):
    if not can_mknod(nodes):
        pytest.skip("mknod is not allowed here (needs CAP_MKNOD)")


def spec(name="a", uuid=UUID0, memory=GIB, share=0, weight=100,
         priority="normal", host=0):
    return model.SliceSpec(name, uuid, memory, share, weight, priority, host)


def test_ctl_lists_gpus_and_slices(fake, tmp_path):
    with ctl.Ctl(str(tmp_path / "xpuctl")) as c:
        assert c.gpu_count() == 2
        gpus = c.gpu_list()
        assert [(g.minor, g.uuid) for g in gpus] == [(0, UUID0), (1, UUID1)]
        assert gpus[0].driver_version == "580.126.20"
        assert c.slice_list() == []
        for i in range(20):  # more than the first guess of room
            c.slice_create(f"s{i}", 0, MIB)
        assert c.slice_list() == list(range(20))
        assert [s.name for s in c.slices()] == [f"s{i}" for i in range(20)]


def test_ctl_explains_enospc_with_the_kernels_numbers(fake, tmp_path):
    with ctl.Ctl(str(tmp_path / "xpuctl")) as c:
        c.slice_create("big", 0, 79 * GIB)
        with pytest.raises(ctl.Conflict) as e:
            c.slice_create("more", 0, 2 * GIB)
    assert str(e.value) == (
        "creating slice 'more': GPU 0 (/dev/nvidia0): it has 1GiB of 80GiB "
        "memory left to give, 2GiB asked: shrink or destroy a slice, or ask "
        "for less")
    assert e.value.errno == errno.ENOSPC


def test_ctl_explains_enospc_with_memory_a_destroyed_slice_left_kept(
        fake, tmp_path):
    fake.gpus[0]["memory_orphaned"] = 512 * MIB
    with ctl.Ctl(str(tmp_path / "xpuctl")) as c:
        c.slice_create("big", 0, 79 * GIB)
        assert c.gpu_list()[0].memory_orphaned == 512 * MIB
        with pytest.raises(ctl.Conflict) as e:
            c.slice_create("more", 0, GIB)
    assert str(e.value) == (
        "creating slice 'more': GPU 0 (/dev/nvidia0): it has 512MiB of "
        "80GiB memory left to give (another 512MiB is kept outside every "
        "slice after its slice went: an export or dma-buf fd still open), "
        "1GiB asked: shrink or destroy a slice, or ask for less")


def test_ctl_refuses_a_long_name_before_the_kernel(fake, tmp_path):
    with ctl.Ctl(str(tmp_path / "xpuctl")) as c, \
            pytest.raises(ctl.Invalid) as e:
        c.slice_create("n" * 32, 0, GIB)
    assert "32 bytes long; at most 31" in str(e.value)
    assert fake.calls == []


def test_list_gpus_joins_the_kernel_and_the_inventory(kb, fake):
    fake.gpus[1]["period_us"] = 1500           # no whole ms
    fake.gpus[0]["mode"] = uapi.XPU_MODE_EXCLUSIVE
    states = kb.list_gpus()
    assert [(s.gpu.index, s.gpu.uuid, s.gpu.minor) for s in states] == [
        (0, UUID1_LOWER, 1), (1, UUID0, 0)]
    assert all(s.gpu.memory_total_bytes == 80 * GIB for s in states)
    assert states[0].settings is None
    assert states[1].settings == model.GpuSettings("exclusive", "weighted",
                                                   20)
    assert states[0].gpu.bus_id == "0000:18:00.0"
    # the channel ids xpu.ko shares out; 0 (an older xpu.ko): not said
    assert [s.channel_ids for s in states] == [None, None]
    fake.gpus[1]["channel_ids"] = 2048
    assert [s.channel_ids for s in kb.list_gpus()] == [2048, None]
    # memory of destroyed slices kept outside them, charged to the GPU
    assert [s.memory_orphaned_bytes for s in states] == [0, 0]
    fake.gpus[0]["memory_orphaned"] = 32 * MIB
    assert [s.memory_orphaned_bytes for s in kb.list_gpus()] == [0, 32 * MIB]


def test_list_gpus_keeps_the_kernels_figures_of_a_gpu_not_in_the_inventory(
        kb, fake):
    kb.inventory = ListInventory([])
    fake.gpus[1]["channel_ids"] = 2048
    fake.gpus[1]["memory_orphaned"] = 32 * MIB
    s = next(s for s in kb.list_gpus() if s.gpu.minor == 1)
    assert (s.channel_ids, s.memory_orphaned_bytes) == (2048, 32 * MIB)


def test_list_gpus_without_an_inventory(kb, fake):
    kb.inventory = ListInventory([])
    states = kb.list_gpus()
    assert [(s.gpu.index, s.gpu.uuid, s.gpu.minor, s.gpu.name)
            for s in states] == [(0, UUID0, 0, "unknown"),
                                 (1, UUID1_LOWER, 1, "unknown")]


def test_set_gpu_sends_microseconds(kb, fake):
    kb.set_gpu(UUID1_LOWER, model.GpuSettings("shared", "priority", 7))
    g = fake.gpus[1]
    assert (g["mode"], g["policy"], g["period_us"]) == (
        uapi.XPU_MODE_SHARED, uapi.XPU_POLICY_PRIORITY, 7000)
    with pytest.raises(backend.NotFound) as e:
        kb.set_gpu("GPU-99999999-1111-2222-3333-444444444444",
                   model.GpuSettings())
    assert e.value.code == "not_found"


def test_slices_by_name(kb, fake):
    k = kb.create_slice(spec("a", UUID1_LOWER, GIB, 125, 7, "high"))
    assert k.spec == spec("a", UUID1_LOWER, GIB, 125, 7, "high")
    assert fake.slices[0]["gpu_minor"] == 1
    assert fake.slices[0]["priority"] == uapi.XPU_PRIO_HIGH
    kb.create_slice(spec("b"))
    fake.slices[1]["memory_used"] = 5 * MIB
    got = {s.spec.name: s for s in kb.list_slices()}
    assert got["b"].memory_used_bytes == 5 * MIB
    assert got["a"].spec.gpu_uuid == UUID1_LOWER
    fake.calls.clear()
    k = kb.update_slice(spec("b", weight=9))
    assert k.spec.weight == 9
    [set_call] = [c for c in fake.calls if c[0] == uapi.XPU_IOC_SLICE_SET]
    sent = uapi.XpuSliceInfo.from_buffer_copy(set_call[1])
    assert sent.flags == uapi.XPU_SLICE_SET_WEIGHT  # only what changed
    kb.destroy_slice("a")
    assert [s.spec.name for s in kb.list_slices()] == ["b"]
    with pytest.raises(backend.NoSuchSlice):
        kb.destroy_slice("a")


def sent_sets(fake):
    """The XPU_IOC_SLICE_SET arguments sent, in order."""
    return [uapi.XpuSliceInfo.from_buffer_copy(c[1]) for c in fake.calls
            if c[0] == uapi.XPU_IOC_SLICE_SET]


def test_host_memory_limit(kb, fake):
    k = kb.create_slice(spec("a", host=2 * GIB))
    assert fake.slices[0]["host_memory_limit"] == 2 * GIB
    assert k.spec == spec("a", host=2 * GIB)
    assert k.host_memory_used_bytes == 0
    fake.slices[0]["host_memory_used"] = 300 * MIB
    [got] = kb.list_slices()
    assert got.spec.host_memory_limit_bytes == 2 * GIB
    assert got.host_memory_used_bytes == 300 * MIB
    # Created without one: none sent.
    kb.create_slice(spec("b"))
    assert fake.slices[1]["host_memory_limit"] == 0
    # Only the bound changes: only its flag goes.
    fake.calls.clear()
    k = kb.update_slice(spec("a", host=GIB))
    [sent] = sent_sets(fake)
    assert (sent.flags, sent.host_memory_limit) == (
        uapi.XPU_SLICE_SET_HOST_MEMORY, GIB)
    assert k.spec.host_memory_limit_bytes == GIB
    assert fake.slices[0]["host_memory_limit"] == GIB
    # Other changes leave it alone; 0 takes it away.
    fake.calls.clear()
    kb.update_slice(spec("a", weight=5, host=GIB))
    assert [s.flags for s in sent_sets(fake)] == [uapi.XPU_SLICE_SET_WEIGHT]
    fake.calls.clear()
    kb.update_slice(spec("a", weight=5))
    [sent] = sent_sets(fake)
    assert (sent.flags, sent.host_memory_limit) == (
        uapi.XPU_SLICE_SET_HOST_MEMORY, 0)
    assert fake.slices[0]["host_memory_limit"] == 0


def test_a_host_memory_limit_below_use_is_busy(kb, fake):
    kb.create_slice(spec("a", host=2 * GIB))
    fake.slices[0]["host_memory_used"] = 300 * MIB
    with pytest.raises(backend.Busy) as e:
        kb.update_slice(spec("a", host=256 * MIB))
    assert e.value.code == "busy"
    assert str(e.value) == (
        "changing slice 'a': the slice holds more system memory allocated by "
        "the driver (pinned host pages) now than the new host-memory bound "
        "(300MiB held, 256MiB asked): free that memory first (or stop the "
        "slice's processes), or ask for more")
    assert fake.slices[0]["host_memory_limit"] == 2 * GIB
    # With the memory limit lowered too, xpu.ko's figures say which.
    with pytest.raises(backend.Busy) as e:
        kb.update_slice(spec("a", memory=512 * MIB, host=256 * MIB))
    assert "(300MiB held, 256MiB asked)" in str(e.value)
    fake.slices[0]["memory_used"] = 768 * MIB
    fake.slices[0]["host_memory_used"] = 0
    with pytest.raises(backend.Busy) as e:
        kb.update_slice(spec("a", memory=512 * MIB, host=256 * MIB))
    assert "the slice uses more memory now than the new limit" in \
        str(e.value)
    assert "host-memory" not in str(e.value)


def test_read_max_handles(tmp_path):
    path = tmp_path / "max_handles"
    path.write_text("131072\n")
    assert kernel.read_max_handles(str(path)) == 131072
    path.write_text("64\n")  # root wrote another bound
    assert kernel.read_max_handles(str(path)) == 64
    path.write_text("")
    assert kernel.read_max_handles(str(path)) is None
    # An xpu.ko without the parameter, or none loaded.
    assert kernel.read_max_handles(str(tmp_path / "none")) is None
    assert kernel.DEFAULT_MAX_HANDLES_PATH == \
        "/sys/module/xpu/parameters/max_handles"


def test_read_uvm_interposed(tmp_path, monkeypatch):
    """xpu.ko's read-only uvm_interposed: Y or N; when N, xpu.ko's UVM
    node is opened once (xpu.ko looks for UVM again) and it is read
    again."""
    path = tmp_path / "uvm_interposed"
    node = tmp_path / "xpu-uvm"
    node.write_text("")
    path.write_text("Y\n")
    assert kernel.read_uvm_interposed(str(path), str(node)) is True
    path.write_text("N\n")
    assert kernel.read_uvm_interposed(str(path), None) is False
    opened = []
    real_open = os.open

    def open_(p, flags, *a):
        fd = real_open(p, flags, *a)
        if p == str(node):
            opened.append(p)
            path.write_text("Y\n")     # xpu.ko found UVM at this open
        return fd
    monkeypatch.setattr(kernel.os, "open", open_)
    assert kernel.read_uvm_interposed(str(path), str(node)) is True
    assert opened == [str(node)]
    # found nothing: still N; no node: the open fails quietly
    path.write_text("N\n")
    node.unlink()
    assert kernel.read_uvm_interposed(str(path), str(node)) is False
    # an xpu.ko without the parameter, or none loaded: unknown, no open
    path.unlink()
    node.write_text("")
    assert kernel.read_uvm_interposed(str(path), str(node)) is None
    assert opened == [str(node)]
    assert kernel.DEFAULT_UVM_INTERPOSED_PATH == \
        "/sys/module/xpu/parameters/uvm_interposed"
    assert kernel.XPU_UVM_NODE == "/dev/xpu-uvm"


def test_read_call_pages_guarded(tmp_path):
    """vm.mmap_min_addr at or above the end of xpu.ko's slots for the pages
    of calls (16 pages: 65536, the x86-64 default) keeps tenants from
    mapping there; below it does not; unknown when unreadable."""
    path = tmp_path / "mmap_min_addr"
    assert kernel.CALL_PAGE_SLOTS_END == 16 * os.sysconf("SC_PAGE_SIZE")
    path.write_text(f"{kernel.CALL_PAGE_SLOTS_END}\n")
    assert kernel.read_call_pages_guarded(str(path)) is True
    path.write_text(f"{kernel.CALL_PAGE_SLOTS_END - 4096}\n")
    assert kernel.read_call_pages_guarded(str(path)) is False
    path.write_text("0\n")
    assert kernel.read_call_pages_guarded(str(path)) is False
    path.write_text("many\n")
    assert kernel.read_call_pages_guarded(str(path)) is None
    path.unlink()
    assert kernel.read_call_pages_guarded(str(path)) is None
    assert kernel.DEFAULT_MMAP_MIN_ADDR_PATH == "/proc/sys/vm/mmap_min_addr"


def test_read_uvm_retains_unwatched(tmp_path):
    """xpu.ko's read-only uvm_retains_unwatched: a count, or unknown (an
    xpu.ko without it, none loaded, or not a count)."""
    path = tmp_path / "uvm_retains_unwatched"
    path.write_text("0\n")
    assert kernel.read_uvm_retains_unwatched(str(path)) == 0
    path.write_text("12\n")
    assert kernel.read_uvm_retains_unwatched(str(path)) == 12
    path.write_text("-1\n")
    assert kernel.read_uvm_retains_unwatched(str(path)) is None
    path.write_text("Y\n")
    assert kernel.read_uvm_retains_unwatched(str(path)) is None
    path.unlink()
    assert kernel.read_uvm_retains_unwatched(str(path)) is None
    assert kernel.DEFAULT_UVM_RETAINS_UNWATCHED_PATH == \
        "/sys/module/xpu/parameters/uvm_retains_unwatched"


def test_read_uvm_retentions_seen(tmp_path):
    """xpu.ko's read-only uvm_retentions_seen: Y, N, or unknown (an
    xpu.ko without it, none loaded, or a value that is neither)."""
    path = tmp_path / "uvm_retentions_seen"
    path.write_text("Y\n")
    assert kernel.read_uvm_retentions_seen(str(path)) is True
    path.write_text("N\n")
    assert kernel.read_uvm_retentions_seen(str(path)) is False
    path.write_text("1\n")
    assert kernel.read_uvm_retentions_seen(str(path)) is None
    path.unlink()
    assert kernel.read_uvm_retentions_seen(str(path)) is None
    assert kernel.DEFAULT_UVM_RETENTIONS_SEEN_PATH == \
        "/sys/module/xpu/parameters/uvm_retentions_seen"
    k = kernel.KernelBackend(None, uvm_retentions_seen_path=str(path))
    path.write_text("Y\n")
    assert k.uvm_retentions_seen() is True


def test_rm_handles_and_their_bound(kb, fake, tmp_path):
    k = kb.create_slice(spec("a"))
    assert (k.rm_handles, k.rm_handles_limit) == (0, 131072)
    fake.slices[0]["rm_handles"] = 57
    [got] = kb.list_slices()
    assert (got.rm_handles, got.rm_handles_limit) == (57, 131072)
    read = kb.read_usage()
    assert read.rm_handles_limit == 131072
    assert [s.rm_handles for s in read.slices] == [57]
    # The bound is read again each time: root may change it.
    (tmp_path / "max_handles").write_text("4096\n")
    assert kb.update_slice(spec("a", weight=5)).rm_handles_limit == 4096
    assert kb.read_usage().rm_handles_limit == 4096
    # Not readable: None, the count still there.
    (tmp_path / "max_handles").unlink()
    [got] = kb.list_slices()
    assert (got.rm_handles, got.rm_handles_limit) == (57, None)
    assert kb.read_usage().rm_handles_limit is None


def test_read_max_os_events(tmp_path):
    path = tmp_path / "max_os_events"
    path.write_text("1024\n")
    assert kernel.read_max_os_events(str(path)) == 1024
    path.write_text("16\n")  # root wrote another bound
    assert kernel.read_max_os_events(str(path)) == 16
    path.write_text("")
    assert kernel.read_max_os_events(str(path)) is None
    # An xpu.ko without the parameter, or none loaded.
    assert kernel.read_max_os_events(str(tmp_path / "none")) is None
    assert kernel.DEFAULT_MAX_OS_EVENTS_PATH == \
        "/sys/module/xpu/parameters/max_os_events"


def test_os_events_and_their_bound(kb, fake, tmp_path):
    k = kb.create_slice(spec("a"))
    assert (k.os_events, k.os_events_limit) == (0, 1024)
    fake.slices[0]["os_events"] = 9
    fake.slices[0]["rm_handles"] = 57
    [got] = kb.list_slices()
    assert (got.os_events, got.os_events_limit) == (9, 1024)
    # Each figure from its own field and parameter.
    assert (got.rm_handles, got.rm_handles_limit) == (57, 131072)
    read = kb.read_usage()
    assert read.os_events_limit == 1024
    assert [s.os_events for s in read.slices] == [9]
    # The bound is read again each time: root may change it.
    (tmp_path / "max_os_events").write_text("16\n")
    assert kb.update_slice(spec("a", weight=5)).os_events_limit == 16
    assert kb.read_usage().os_events_limit == 16
    # Not readable: None, the count still there; max_handles unaffected.
    (tmp_path / "max_os_events").unlink()
    [got] = kb.list_slices()
    assert (got.os_events, got.os_events_limit) == (9, None)
    assert got.rm_handles_limit == 131072
    read = kb.read_usage()
    assert (read.os_events_limit, read.rm_handles_limit) == (None, 131072)


def test_records_and_doorbell_files_and_their_bounds(kb, fake, tmp_path):
    """The records' counts by kind and the doorbell files, from the slice
    info, each with its bound (max_records, max_doorbell_files), read
    again each time; an xpu.ko that does not give the counts (its argsz
    ends at os_events) gives None, not 0."""
    k = kb.create_slice(spec("a"))
    assert k.records == dict.fromkeys(
        ("devices", "va_spaces", "virtual_allocations", "tsgs", "channels",
         "usermode_objects"), 0)
    assert (k.records_limit, k.doorbell_files, k.doorbell_files_limit) == \
        (1024, 0, 512)
    fake.slices[0].update(devices=1, vaspaces=2, virtuals=3, tsgs=4,
                          channels=5, usermode=6, doorbell_files=7)
    [got] = kb.list_slices()
    assert got.records == {"devices": 1, "va_spaces": 2,
                           "virtual_allocations": 3, "tsgs": 4,
                           "channels": 5, "usermode_objects": 6}
    assert got.doorbell_files == 7
    read = kb.read_usage()
    assert (read.records_limit, read.doorbell_files_limit) == (1024, 512)
    assert [s.doorbell_files for s in read.slices] == [7]
    (tmp_path / "max_records").write_text("256\n")
    (tmp_path / "max_doorbell_files").unlink()
    got = kb.update_slice(spec("a", weight=5))
    assert (got.records_limit, got.doorbell_files_limit) == (256, None)
    fake.old_kernel = True
    [got] = kb.list_slices()
    assert (got.records, got.doorbell_files) == (None, None)
    assert got.rm_handles == 0 and got.os_events == 0
    [s] = kb.read_usage().slices
    assert s.devices is None and s.channels == 5


def test_kernel_refusals_become_backend_errors(kb, fake):
    kb.create_slice(spec("a"))
    with pytest.raises(backend.Exists) as e:
        kb.create_slice(spec("a"))
    assert str(e.value).startswith("a slice named 'a' exists")
    with pytest.raises(backend.Conflict):
        kb.create_slice(spec("huge", memory=80 * GIB))
    fake.open_files[0] = 1
    with pytest.raises(backend.Busy) as e:
        kb.destroy_slice("a")
    assert "pass --force" in str(e.value)
    kb.destroy_slice("a", force=True)
    fake.root = False
    with pytest.raises(backend.PermissionDenied) as e:
        kb.create_slice(spec("b"))
    assert str(e.value) == "creating slice 'b': needs root (CAP_SYS_ADMIN)"


def test_make_nodes(kb, fake, nodes, mknod_ok):
    kb.create_slice(spec("a"))
    kb.create_slice(spec("b", UUID1_LOWER))
    paths = kb.make_nodes("b")
    assert paths == (str(nodes / "xpu1"), str(nodes / "xpu1-ctl"))
    for path, minor in zip(paths, (1, 255)):
        st = os.lstat(path)
        assert stat.S_ISCHR(st.st_mode)
        assert st.st_rdev == os.makedev(195, minor)
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert (st.st_uid, st.st_gid) == (0, 0)  # no group xpu here
    assert sorted(fake.nodes.values()) == [1, 1]
    inodes = [os.lstat(p).st_ino for p in paths]
    assert kb.make_nodes("b") == paths                   # idempotent
    assert [os.lstat(p).st_ino for p in paths] == inodes
    assert {k.spec.name: k.nodes for k in kb.list_slices()}["b"] == paths
    assert sorted(os.listdir(nodes)) == ["xpu1", "xpu1-ctl"]  # no tmp
    kb.destroy_slice("b")
    assert os.listdir(nodes) == []


def test_make_nodes_makes_the_uvm_node_where_xpu_has_one(kb, fake, nodes,
                                                        mknod_ok, tmp_path):
    """With xpu.ko's UVM node (its numbers in sysfs), a slice gets a third
    node, xpuN-uvm, attached as XPU_NODE_UVM (class 39); it is listed,
    and removed with the slice."""
    (tmp_path / "xpu-uvm-dev").write_text("{}:{}\n".format(*FAKE_UVM))
    kb.create_slice(spec("a"))
    paths = kb.make_nodes("a")
    assert paths == tuple(str(nodes / n)
                          for n in ("xpu0", "xpu0-ctl", "xpu0-uvm"))
    st = os.lstat(paths[2])
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(*FAKE_UVM)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert len(fake.nodes) == 3
    assert kb.make_nodes("a") == paths                   # idempotent
    assert kb.list_slices()[0].nodes == paths
    kb.destroy_slice("a")
    assert os.listdir(nodes) == []


def test_make_nodes_replaces_what_is_not_the_slices(kb, fake, nodes,
                                                   mknod_ok):
    kb.create_slice(spec("a"))
    (nodes / "xpu0").write_text("not a node")
    os.mknod(nodes / "xpu0-ctl", stat.S_IFCHR | 0o666, os.makedev(195, 3))
    kb.make_nodes("a")
    assert os.lstat(nodes / "xpu0").st_rdev == os.makedev(195, 0)
    assert os.lstat(nodes / "xpu0-ctl").st_rdev == os.makedev(195, 255)


def test_stale_nodes_are_swept(kb, fake, nodes, mknod_ok):
    for n in ("xpu5", "xpu5-ctl", "xpuctl", "xpu6"):
        os.mknod(nodes / n, stat.S_IFCHR | 0o600, os.makedev(195, 0))
    (nodes / "xpu7").write_text("a file: not ours")
    kb.create_slice(spec("a"))   # id 0
    kb.list_slices()
    assert sorted(os.listdir(nodes)) == ["xpu7", "xpuctl"]


def test_cgroups_are_remembered(kb, fake, tmp_path):
    kb.create_slice(spec("a"))
    kb.bind_cgroup("a", "/jobs/a")
    assert fake.cgroups == {str(tmp_path / "cgroup" / "jobs" / "a"): 0}
    assert kb.list_slices()[0].cgroups == ("/jobs/a",)
    kb.unbind_cgroup("a", "/jobs/a")
    assert fake.cgroups == {}
    kb.unbind_cgroup("a", "/jobs/a")          # not bound: as wanted
    kb.unbind_cgroup("a", "/jobs/gone")       # removed: nothing to do
    with pytest.raises(backend.NotFound):
        kb.bind_cgroup("a", "/jobs/gone")
    assert kb.list_slices()[0].cgroups == ()


def test_the_service_on_the_kernel_backend(kb, fake, tmp_path, mknod_ok):
    svc = Service(kb, StateStore(str(tmp_path / "state")),
                  config.parse("", str(tmp_path / "xpud.toml")),
                  cgroup_root=str(tmp_path / "cgroup"))
    assert svc.start() == "0 slices ready, 2 GPUs"
    s = svc.op_create(name="train", gpu=1, memory_limit_bytes=GIB,
                      compute_share=12.5)
    assert (s["gpu_uuid"], s["gpu_minor"], s["state"]) == (UUID0, 0, "ready")
    assert s["nodes"] == [str(tmp_path / "dev" / "xpu0"),
                          str(tmp_path / "dev" / "xpu0-ctl")]
    assert s["memory_used_bytes"] == 0
    assert fake.slices[0]["compute_share"] == 125
    svc.op_bind("train", "/jobs/a")
    assert svc.reconcile() == "1 slice ready, 2 GPUs"
    svc.op_destroy("train")
    assert fake.slices == {} and os.listdir(tmp_path / "dev") == []


def test_the_service_passes_the_host_memory_limit(kb, fake, tmp_path,
                                                  mknod_ok):
    svc = Service(kb, StateStore(str(tmp_path / "state")),
                  config.parse("", str(tmp_path / "xpud.toml")),
                  cgroup_root=str(tmp_path / "cgroup"))
    svc.start()
    s = svc.op_create(name="a", gpu=1, memory_limit_bytes=GIB,
                      host_memory_limit_bytes=4 * GIB)
    assert fake.slices[0]["host_memory_limit"] == 4 * GIB
    assert (s["host_memory_limit_bytes"], s["host_memory_used_bytes"]) == (
        4 * GIB, 0)
    # The kernel holds it as wanted: a pass sets nothing.
    fake.calls.clear()
    svc.reconcile()
    assert sent_sets(fake) == []
    fake.slices[0]["host_memory_used"] = 3 * GIB
    assert svc.op_show("a")["host_memory_used_bytes"] == 3 * GIB
    [u] = svc.op_top()["slices"]
    assert (u["host_memory_used_bytes"], u["host_memory_limit_bytes"]) == (
        3 * GIB, 4 * GIB)
    # RM handles, and xpu.ko's bound on them, the same way.
    fake.slices[0]["rm_handles"] = 12
    assert (svc.op_show("a")["rm_handles"],
            svc.op_show("a")["rm_handles_limit"]) == (12, 131072)
    [u] = svc.op_top()["slices"]
    assert (u["rm_handles"], u["rm_handles_limit"]) == (12, 131072)
    # OS events, and xpu.ko's bound on them, too.
    fake.slices[0]["os_events"] = 4
    assert (svc.op_show("a")["os_events"],
            svc.op_show("a")["os_events_limit"]) == (4, 1024)
    [u] = svc.op_top()["slices"]
    assert (u["os_events"], u["os_events_limit"]) == (4, 1024)
    with pytest.raises(api.ApiError) as e:
        svc.op_set(name="a", host_memory_limit_bytes=2 * GIB)
    assert e.value.code == "busy"
    assert "(3GiB held, 2GiB asked)" in e.value.message
    assert svc.op_show("a")["host_memory_limit_bytes"] == 4 * GIB
    svc.op_set(name="a", host_memory_limit_bytes=0)
    assert fake.slices[0]["host_memory_limit"] == 0


def test_select(tmp_path, monkeypatch, caplog):
    inv = ListInventory([])
    with caplog.at_level(logging.INFO, logger="xpu"):
        b = kernel.select(inv, str(tmp_path / "none"), str(tmp_path))
    assert type(b) is backend.NullBackend
    assert "null backend" in caplog.text and "does not exist" in caplog.text
    with pytest.raises(backend.Unsupported) as e:
        b.create_slice(spec())
    assert str(e.value).startswith("xpu.ko is not loaded")
    dev = tmp_path / "xpuctl"
    dev.touch()

    def enotty(fd, cmd, arg):
        _raise(errno.ENOTTY)

    monkeypatch.setattr(ctl.fcntl, "ioctl", enotty)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="xpu"):
        b = kernel.select(inv, str(dev), str(tmp_path))
    assert type(b) is backend.NullBackend
    assert "no slice interface" in caplog.text
    with pytest.raises(backend.Unsupported) as e:
        b.make_nodes("a")
    assert "has no slice interface" in str(e.value)
    monkeypatch.setattr(ctl.fcntl, "ioctl", FakeXpu().ioctl)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="xpu"):
        b = kernel.select(inv, str(dev), str(tmp_path / "nodes"))
    assert type(b) is kernel.KernelBackend
    assert b.node_dir == str(tmp_path / "nodes")
    assert "kernel backend" in caplog.text


@pytest.mark.parametrize("text, uuid", [
    (UUID0, UUID0), (UUID1, UUID1_LOWER), ("???", None), ("", None),
    ("GPU-1234", None)])
def test_normalise_uuid(text, uuid):
    assert kernel.normalise_uuid(text) == uuid


def test_gpu_settings():
    info = ctl.GpuInfo(0, UUID0, uapi.XPU_MODE_SHARED, uapi.XPU_POLICY_NATIVE,
                       1000000, 0, "1.2.3", GIB, 0)
    assert kernel.gpu_settings(info) == model.GpuSettings("shared", "native",
                                                          1000)
    assert set(kernel.POLICIES) == set(model.POLICIES)
    assert set(kernel.MODES) == set(model.MODES)
    assert set(kernel.PRIORITIES) == set(model.PRIORITIES)
