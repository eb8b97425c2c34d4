# SPDX-License-Identifier: Apache-2.0
"""xpu.ko's slice interface on /dev/xpuctl (kmod/include/uapi/xpu.h), from
user space, and xpud's KernelBackend on it.

Runs as root in the VM with the simulated driver and xpu.ko loaded:

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests/test_xpu_ctl.py

The module skips when /dev/xpuctl has no slice ioctls (XPU_IOC_GPU_LIST
answers ENOTTY: an xpu.ko from before the slice interface).  Every test
leaves no slice behind and the GPUs' settings as it found them.  The rig fails
the run on any kernel warning, which is what the fuzzing tests rely on.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import grp
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nvtest
import pytest
from ioctl_opt import IOC, IOC_NONE, IOC_READ, IOC_WRITE, IOWR

TOP = Path(__file__).resolve().parents[2]

try:
    from xpu import ctl, kernel, uapi
    from xpu.client import Client
    from xpu.errors import ConnectError
except ImportError:  # xpud is not installed: use the tree's
    sys.path.insert(0, str(TOP / "xpud"))
    from xpu import ctl, kernel, uapi
    from xpu.client import Client
    from xpu.errors import ConnectError

DEV = "/dev/" + uapi.XPU_CTL_NAME
MIB = 1 << 20
GIB = 1 << 30
NV_MAJOR = 195
NV_CTL_MINOR = 255
NOBODY = 65534
WAIT = 60.0  # seconds, for xpud under software emulation; never slept

SIZES = {name: ctypes.sizeof(cls) for name, cls in uapi.STRUCTS.items()}
INFO_SIZE = SIZES["xpu_slice_info"]
# The shortest xpu_slice_info xpu.ko takes: up to os_events, what callers
# before the records' counts (session 46) pass.
INFO_MIN = uapi.XpuSliceInfo.os_events.offset + 4


# -- fixtures and helpers -----------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def slice_abi():
    """Skip the module unless /dev/xpuctl speaks the slice interface."""
    if os.geteuid() != 0:
        pytest.skip("xpu.ko's admin device is root's: run in the VM")
    if not os.path.exists(DEV):
        if os.environ.get("XPU_KO"):
            pytest.fail(f"{DEV} is missing although the rig loaded "
                        f"{os.environ['XPU_KO']}")
        pytest.skip(f"{DEV} is missing: xpu.ko is not loaded")
    fd = os.open(DEV, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, uapi.XPU_IOC_GPU_LIST, gpu_list_arg())
    except OSError as e:
        if e.errno == errno.ENOTTY:
            pytest.skip(f"{DEV} lacks the slice ioctls (XPU_IOC_GPU_LIST: "
                        "ENOTTY): this xpu.ko predates the slice interface")
        raise
    finally:
        os.close(fd)


def gpu_list_arg(count=0, gpus=0, gpu_argsz=SIZES["xpu_gpu_info"], **kw):
    kw.setdefault("argsz", SIZES["xpu_gpu_list"])
    return uapi.XpuGpuList(count=count, gpus=gpus, gpu_argsz=gpu_argsz, **kw)


def call(fd, cmd, arg) -> int:
    """0, or the errno of the ioctl."""
    try:
        fcntl.ioctl(fd, cmd, arg)
    except OSError as e:
        return e.errno
    return 0


def info_arg(name=b"t-a", minor=0, memory=GIB, share=0, weight=100,
             prio=uapi.XPU_PRIO_NORMAL, flags=0, id=0, argsz=INFO_SIZE):
    """A struct xpu_slice_info; NAME is copied raw (up to all 32 bytes)."""
    a = uapi.XpuSliceInfo(argsz=argsz, flags=flags, id=id, gpu_minor=minor,
                          memory_limit=memory, compute_share=share,
                          weight=weight, priority=prio)
    assert len(name) <= uapi.XPU_NAME_LEN
    ctypes.memmove(a.name, bytes(name), len(name))
    return a


def ref_arg(id, flags=0, argsz=SIZES["xpu_slice_ref"]):
    return uapi.XpuSliceRef(argsz=argsz, flags=flags, id=id)


def node_arg(id, fd, role=uapi.XPU_NODE_GPU, flags=0,
             argsz=SIZES["xpu_node"]):
    return uapi.XpuNode(argsz=argsz, flags=flags, id=id, role=role, fd=fd)


def cgroup_arg(id, fd, flags=0, argsz=SIZES["xpu_cgroup"]):
    return uapi.XpuCgroup(argsz=argsz, flags=flags, id=id, fd=fd)


def slice_ids(fd):
    ids = (ctypes.c_uint32 * uapi.XPU_MAX_SLICES)()
    arg = uapi.XpuSliceList(argsz=SIZES["xpu_slice_list"],
                            count=uapi.XPU_MAX_SLICES,
                            ids=ctypes.addressof(ids))
    fcntl.ioctl(fd, uapi.XPU_IOC_SLICE_LIST, arg)
    return list(ids[:arg.count])


def destroy_all(fd):
    for id in slice_ids(fd):
        if call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(id)) == errno.EBUSY:
            call(fd, uapi.XPU_IOC_SLICE_DESTROY,
                 ref_arg(id, uapi.XPU_DESTROY_FORCE))


@pytest.fixture
def fd():
    """/dev/xpuctl, raw; no slice before or after the test, and the GPUs'
    settings as they were."""
    fd = os.open(DEV, os.O_RDWR | os.O_CLOEXEC)
    destroy_all(fd)
    with ctl.Ctl(DEV) as c:
        gpus = c.gpu_list()
    yield fd
    destroy_all(fd)
    with ctl.Ctl(DEV) as c:
        for g in gpus:
            c.gpu_set(g.minor, g.mode, g.policy, g.period_us)
    os.close(fd)


@pytest.fixture
def c(fd):
    with ctl.Ctl(DEV) as c:
        yield c


@pytest.fixture
def gpus(c):
    return c.gpu_list()


@pytest.fixture
def nodedir():
    """A directory on devtmpfs, where device nodes can be opened."""
    d = tempfile.mkdtemp(prefix="xpu-test-", dir="/dev")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def mknod(path, minor, major=NV_MAJOR, mode=0o600):
    os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
    return str(path)


@contextlib.contextmanager
def opath(path):
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def create(fd, name=b"t-a", **kw) -> uapi.XpuSliceInfo:
    a = info_arg(name, **kw)
    fcntl.ioctl(fd, uapi.XPU_IOC_SLICE_CREATE, a)
    return a


def get(fd, id) -> uapi.XpuSliceInfo:
    a = info_arg(b"", id=id)
    fcntl.ioctl(fd, uapi.XPU_IOC_SLICE_GET, a)
    return a


def procfs_uuids():
    """{minor: UUID} from the driver's /proc/driver/nvidia/gpus."""
    out = {}
    for info in Path("/proc/driver/nvidia/gpus").glob("*/information"):
        fields = dict(line.split(":", 1) for line in
                      info.read_text().splitlines() if ":" in line)
        out[int(fields["Device Minor"])] = fields["GPU UUID"].strip()
    return out


# -- GPUs ---------------------------------------------------------------------

def test_gpu_count_is_a_query_with_count_0(fd, config):
    arg = gpu_list_arg(count=0, gpus=0, gpu_argsz=0)
    assert call(fd, uapi.XPU_IOC_GPU_LIST, arg) == 0
    assert arg.count == config.gpus


def test_gpu_list(c, fd, config):
    gpus = c.gpu_list()
    assert len(gpus) == config.gpus == 2
    assert [g.minor for g in gpus] == list(range(config.gpus))
    uuids = procfs_uuids()
    for g in gpus:
        assert g.uuid.startswith("GPU-")
        assert len(g.uuid) == 40
        assert g.uuid == uuids[g.minor]
        assert g.memory_total > 0
        assert g.driver_version == config.version
        assert (g.nr_slices, g.memory_sliced) == (0, 0)
        assert g.mode in (uapi.XPU_MODE_SHARED, uapi.XPU_MODE_EXCLUSIVE)
        assert uapi.XPU_PERIOD_MIN_US <= g.period_us <= uapi.XPU_PERIOD_MAX_US
    assert len({g.uuid for g in gpus}) == len(gpus)


def test_gpu_list_fills_no_more_than_count(fd, config):
    entries = (uapi.XpuGpuInfo * 2)()
    ctypes.memset(entries, 0xA5, ctypes.sizeof(entries))
    arg = gpu_list_arg(count=1, gpus=ctypes.addressof(entries))
    assert call(fd, uapi.XPU_IOC_GPU_LIST, arg) == 0
    assert arg.count == config.gpus
    assert entries[0].minor == 0
    assert bytes(entries[1]) == b"\xa5" * SIZES["xpu_gpu_info"]


def test_gpu_list_with_an_older_entry_size(fd):
    """gpu_argsz of a caller that knows the entry up to uuid: the stride is
    the caller's and nothing past its entry is written."""
    old = uapi.XpuGpuInfo.reserved.offset
    buf = ctypes.create_string_buffer(b"\x5a" * (3 * old))
    arg = gpu_list_arg(count=2, gpus=ctypes.addressof(buf), gpu_argsz=old)
    assert call(fd, uapi.XPU_IOC_GPU_LIST, arg) == 0
    first = uapi.XpuGpuInfo.from_buffer_copy(buf.raw[:old] + bytes(32))
    second = uapi.XpuGpuInfo.from_buffer_copy(buf.raw[old:2 * old]
                                              + bytes(32))
    assert (first.minor, second.minor) == (0, 1)
    assert uapi.unpack_str(second.uuid).startswith("GPU-")
    assert buf.raw[2 * old:3 * old] == b"\x5a" * old


@pytest.mark.parametrize("kw", [
    {"argsz": SIZES["xpu_gpu_list"] - 1},
    {"argsz": 0},
    {"flags": 1},
    {"flags": 1 << 31},
    {"count": 1, "gpu_argsz": uapi.XpuGpuInfo.uuid.offset},
    {"count": 1, "gpu_argsz": 0},
], ids=["argsz-1", "argsz-0", "flag-0", "flag-31", "entry-short",
        "entry-0"])
def test_gpu_list_refusals(fd, kw):
    buf = (uapi.XpuGpuInfo * 2)()
    arg = gpu_list_arg(gpus=ctypes.addressof(buf), **kw)
    assert call(fd, uapi.XPU_IOC_GPU_LIST, arg) == errno.EINVAL


def test_gpu_set(c, fd, gpus):
    c.gpu_set(1, mode=uapi.XPU_MODE_EXCLUSIVE, policy=uapi.XPU_POLICY_FIXED,
              period_us=50000)
    after = {g.minor: g for g in c.gpu_list()}
    assert (after[1].mode, after[1].policy, after[1].period_us) == (
        uapi.XPU_MODE_EXCLUSIVE, uapi.XPU_POLICY_FIXED, 50000)
    assert after[0] == gpus[0]
    c.gpu_set(1, period_us=uapi.XPU_PERIOD_MIN_US)  # only the period
    g = {g.minor: g for g in c.gpu_list()}[1]
    assert (g.mode, g.policy, g.period_us) == (
        uapi.XPU_MODE_EXCLUSIVE, uapi.XPU_POLICY_FIXED, 1000)
    c.gpu_set(1, period_us=uapi.XPU_PERIOD_MAX_US,
              policy=uapi.XPU_POLICY_NATIVE)


@pytest.mark.parametrize("kw, err", [
    ({"flags": 0}, errno.EINVAL),
    ({"flags": 1 << 3}, errno.EINVAL),
    ({"flags": uapi.XPU_GPU_SET_MODE, "mode": 2}, errno.EINVAL),
    ({"flags": uapi.XPU_GPU_SET_POLICY, "policy": 4}, errno.EINVAL),
    ({"flags": uapi.XPU_GPU_SET_PERIOD, "period_us": 999}, errno.EINVAL),
    ({"flags": uapi.XPU_GPU_SET_PERIOD, "period_us": 1000001}, errno.EINVAL),
    ({"flags": uapi.XPU_GPU_SET_MODE, "argsz": 23}, errno.EINVAL),
    ({"flags": uapi.XPU_GPU_SET_MODE, "minor": 7}, errno.ENODEV),
    ({"flags": uapi.XPU_GPU_SET_MODE, "minor": NV_CTL_MINOR}, errno.ENODEV),
])
def test_gpu_set_refusals(fd, gpus, kw, err):
    kw.setdefault("argsz", SIZES["xpu_gpu_set"])
    assert call(fd, uapi.XPU_IOC_GPU_SET, uapi.XpuGpuSet(**kw)) == err
    with ctl.Ctl(DEV) as c:
        assert c.gpu_list() == gpus


# -- slices: round trips ------------------------------------------------------

def test_create_get_list_set_destroy(fd, c):
    a = create(fd, b"t-train", minor=1, memory=8 * GIB, share=250,
               weight=200, prio=uapi.XPU_PRIO_HIGH)
    assert a.argsz == INFO_SIZE
    assert uapi.unpack_str(a.name) == "t-train"
    assert (a.gpu_minor, a.memory_limit, a.compute_share, a.weight,
            a.priority) == (1, 8 * GIB, 250, 200, uapi.XPU_PRIO_HIGH)
    assert (a.memory_used, a.open_files, a.processes, a.killed,
            a.denied_allocs) == (0, 0, 0, 0, 0)
    assert (a.run_ns, a.gated_ns, a.runnable_ns, a.gate_faults,
            a.share_obtained, a.channels) == (0, 0, 0, 0, 0, 0)
    assert (a.host_memory_limit, a.host_memory_used, a.rm_handles,
            a.os_events) == (0, 0, 0, 0)
    got = get(fd, a.id)
    assert bytes(got)[4:] == bytes(a)[4:]
    b = create(fd, b"t-b", minor=1, memory=GIB)
    assert b.id != a.id
    assert sorted(slice_ids(fd)) == sorted([a.id, b.id])
    g1 = {g.minor: g for g in c.gpu_list()}[1]
    assert (g1.nr_slices, g1.memory_sliced) == (2, 9 * GIB)

    s = info_arg(b"", id=a.id, flags=uapi.XPU_SLICE_SET_MEMORY,
                 memory=4 * GIB, share=999, weight=1, prio=0)
    assert call(fd, uapi.XPU_IOC_SLICE_SET, s) == 0
    # Only what flags name changes; the struct comes back as the slice is.
    assert (s.memory_limit, s.compute_share, s.weight, s.priority) == (
        4 * GIB, 250, 200, uapi.XPU_PRIO_HIGH)
    assert uapi.unpack_str(s.name) == "t-train"
    s = info_arg(b"", id=a.id, flags=uapi.XPU_SLICE_SET_FLAGS_ALL,
                 memory=2 * GIB, share=0, weight=10000,
                 prio=uapi.XPU_PRIO_LOW)
    assert call(fd, uapi.XPU_IOC_SLICE_SET, s) == 0
    got = get(fd, a.id)
    assert (got.memory_limit, got.compute_share, got.weight,
            got.priority) == (2 * GIB, 0, 10000, uapi.XPU_PRIO_LOW)
    assert {g.minor: g for g in c.gpu_list()}[1].memory_sliced == 3 * GIB

    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(a.id)) == 0
    assert call(fd, uapi.XPU_IOC_SLICE_GET, info_arg(b"", id=a.id)) == \
        errno.ENOENT
    assert slice_ids(fd) == [b.id]
    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(b.id)) == 0
    assert slice_ids(fd) == []
    g1 = {g.minor: g for g in c.gpu_list()}[1]
    assert (g1.nr_slices, g1.memory_sliced) == (0, 0)


def test_round_trip_through_ctl(c):
    s = c.slice_create("t-ctl", 0, GIB, compute_share=125, weight=7,
                       priority=uapi.XPU_PRIO_LOW)
    assert c.slice_get(s.id) == s
    assert c.slices() == [s]
    s2 = c.slice_set(s.id, weight=8)
    assert (s2.weight, s2.memory_limit, s2.compute_share) == (8, GIB, 125)
    with pytest.raises(ctl.Exists) as e:
        c.slice_create("t-ctl", 1, GIB)
    assert str(e.value).startswith("a slice named 't-ctl' exists")
    assert e.value.exit_status == 1
    c.slice_destroy(s.id)
    with pytest.raises(ctl.NotFound):
        c.slice_get(s.id)
    assert c.slice_list() == []


def test_edge_values_are_accepted(fd):
    for name, kw in [
            (b"n" * 31, {}),
            (b"A.b-c_9", {"memory": MIB}),
            (b"t-share", {"share": uapi.XPU_SHARE_MAX, "minor": 1}),
            (b"t-w1", {"weight": 1, "prio": uapi.XPU_PRIO_LOW}),
            (b"t-w2", {"weight": uapi.XPU_WEIGHT_MAX,
                       "prio": uapi.XPU_PRIO_HIGH})]:
        a = info_arg(name, **kw)
        assert call(fd, uapi.XPU_IOC_SLICE_CREATE, a) == 0, name
        assert uapi.unpack_str(a.name) == name.decode()


class NewerSliceInfo(ctypes.Structure):
    """struct xpu_slice_info as a newer caller might know it."""

    _fields_ = [*uapi.XpuSliceInfo._fields_,
                ("future", ctypes.c_uint64 * 4)]


def test_a_newer_caller_gets_what_the_kernel_knows(fd):
    a = NewerSliceInfo(argsz=ctypes.sizeof(NewerSliceInfo), gpu_minor=0,
                       memory_limit=GIB, weight=100)
    ctypes.memmove(a.name, b"t-new", 5)
    for i in range(4):
        a.future[i] = 0xA5A5A5A5A5A5A5A5
    cmd = IOWR(uapi.XPU_IOC_TYPE, 0x10, NewerSliceInfo)
    assert call(fd, cmd, a) == 0
    assert a.argsz == INFO_SIZE
    assert list(a.future) == [0xA5A5A5A5A5A5A5A5] * 4
    assert get(fd, a.id).memory_limit == GIB


# -- slices: refusals ---------------------------------------------------------

BAD_CREATES = [
    ({"name": b""}, errno.EINVAL),
    ({"name": b"n" * 32}, errno.EINVAL),             # no room for the NUL
    ({"name": b".hidden"}, errno.EINVAL),
    ({"name": b"-option"}, errno.EINVAL),
    ({"name": b"a b"}, errno.EINVAL),
    ({"name": b"a/b"}, errno.EINVAL),
    ({"name": b"caf\xc3\xa9"}, errno.EINVAL),
    ({"name": b"a\nb"}, errno.EINVAL),
    ({"name": b"ab\0c"}, errno.EINVAL),              # bytes after the NUL
    ({"name": b"ab" + bytes(29) + b"x"}, errno.EINVAL),
    ({"memory": MIB - 1}, errno.EINVAL),
    ({"memory": 0}, errno.EINVAL),
    ({"share": uapi.XPU_SHARE_MAX + 1}, errno.EINVAL),
    ({"weight": 0}, errno.EINVAL),
    ({"weight": uapi.XPU_WEIGHT_MAX + 1}, errno.EINVAL),
    ({"prio": 3}, errno.EINVAL),
    ({"prio": 0xFFFFFFFF}, errno.EINVAL),
    ({"flags": 1}, errno.EINVAL),
    ({"flags": 1 << 31}, errno.EINVAL),
    ({"argsz": INFO_MIN - 1}, errno.EINVAL),
    ({"argsz": 16}, errno.EINVAL),
    ({"argsz": 0}, errno.EINVAL),
    ({"minor": 7}, errno.ENODEV),
    ({"minor": NV_CTL_MINOR}, errno.ENODEV),
]


@pytest.mark.parametrize("kw, err", BAD_CREATES,
                         ids=[f"{k}-{i}" for i, (kw, _) in
                              enumerate(BAD_CREATES) for k in kw])
def test_create_refusals(fd, c, gpus, kw, err):
    assert call(fd, uapi.XPU_IOC_SLICE_CREATE, info_arg(**kw)) == err
    assert slice_ids(fd) == []
    assert c.gpu_list() == gpus


def test_duplicate_names_are_eexist(fd):
    create(fd, b"t-a", minor=0)
    assert call(fd, uapi.XPU_IOC_SLICE_CREATE,
                info_arg(b"t-a", minor=1)) == errno.EEXIST
    # Names are compared whole: a prefix or a longer name is another name.
    create(fd, b"t-", minor=1)
    create(fd, b"t-aa", minor=1)
    assert len(slice_ids(fd)) == 3


def test_memory_past_the_gpu_is_enospc(fd, gpus):
    total = gpus[0].memory_total
    create(fd, b"t-half", memory=total // 2)
    assert call(fd, uapi.XPU_IOC_SLICE_CREATE,
                info_arg(b"t-more", memory=total - total // 2 + MIB)) == \
        errno.ENOSPC
    create(fd, b"t-rest", memory=total - total // 2)   # exactly all of it
    assert call(fd, uapi.XPU_IOC_SLICE_CREATE,
                info_arg(b"t-one", memory=MIB)) == errno.ENOSPC
    create(fd, b"t-other", minor=1, memory=gpus[1].memory_total)
    assert call(fd, uapi.XPU_IOC_SLICE_CREATE,
                info_arg(b"t-huge", minor=1, memory=1 << 63)) == errno.ENOSPC


def test_memory_sums_do_not_wrap(fd, gpus):
    """A limit near 2^64 must not wrap the GPU's sum past the check."""
    create(fd, b"t-a", memory=GIB)
    for memory in ((1 << 64) - 1, (1 << 64) - GIB, (1 << 64) - GIB + MIB):
        assert call(fd, uapi.XPU_IOC_SLICE_CREATE,
                    info_arg(b"t-wrap", memory=memory)) == errno.ENOSPC, \
            hex(memory)
    b = create(fd, b"t-b", memory=GIB)
    s = info_arg(b"", id=b.id, flags=uapi.XPU_SLICE_SET_MEMORY,
                 memory=(1 << 64) - GIB + MIB)
    assert call(fd, uapi.XPU_IOC_SLICE_SET, s) == errno.ENOSPC
    assert sorted(get(fd, id).memory_limit for id in slice_ids(fd)) == \
        [GIB, GIB]


def test_compute_past_100_percent_is_enospc(fd):
    create(fd, b"t-a", share=600)
    assert call(fd, uapi.XPU_IOC_SLICE_CREATE,
                info_arg(b"t-b", share=401)) == errno.ENOSPC
    create(fd, b"t-b", share=400)
    create(fd, b"t-c", share=0)                 # no share: always fits


def test_enospc_through_ctl_says_what_is_left(c, gpus):
    total = gpus[0].memory_total
    c.slice_create("t-a", 0, total - GIB)
    with pytest.raises(ctl.Conflict) as e:
        c.slice_create("t-b", 0, 2 * GIB)
    assert str(e.value).startswith("creating slice 't-b': GPU 0 "
                                   "(/dev/nvidia0): it has 1GiB of ")
    assert "memory left to give" in str(e.value)


def test_set_refusals(fd, gpus):
    a = create(fd, b"t-a", memory=GIB, share=100)
    b = create(fd, b"t-b", memory=GIB, share=100)
    total = gpus[0].memory_total
    for kw, err in [
            ({"flags": 0}, errno.EINVAL),
            ({"flags": 1 << 5}, errno.EINVAL),
            ({"flags": uapi.XPU_SLICE_SET_MEMORY, "memory": MIB - 1},
             errno.EINVAL),
            ({"flags": uapi.XPU_SLICE_SET_SHARE, "share": 1001},
             errno.EINVAL),
            ({"flags": uapi.XPU_SLICE_SET_WEIGHT, "weight": 0},
             errno.EINVAL),
            ({"flags": uapi.XPU_SLICE_SET_PRIORITY, "prio": 3},
             errno.EINVAL),
            ({"flags": uapi.XPU_SLICE_SET_WEIGHT, "argsz": INFO_MIN - 8},
             errno.EINVAL),
            ({"flags": uapi.XPU_SLICE_SET_MEMORY, "memory": total},
             errno.ENOSPC),
            ({"flags": uapi.XPU_SLICE_SET_SHARE, "share": 901},
             errno.ENOSPC),
            ({"flags": uapi.XPU_SLICE_SET_WEIGHT, "weight": 5, "id": 999},
             errno.ENOENT)]:
        kw.setdefault("id", a.id)
        assert call(fd, uapi.XPU_IOC_SLICE_SET, info_arg(b"", **kw)) == err, kw
    after = get(fd, a.id)
    assert (after.memory_limit, after.compute_share, after.weight,
            after.priority) == (GIB, 100, 100, uapi.XPU_PRIO_NORMAL)
    # Up to exactly what the others leave.
    s = info_arg(b"", id=a.id, flags=uapi.XPU_SLICE_SET_MEMORY |
                 uapi.XPU_SLICE_SET_SHARE, memory=total - GIB, share=900)
    assert call(fd, uapi.XPU_IOC_SLICE_SET, s) == 0
    assert get(fd, b.id).memory_limit == GIB


def test_no_such_slice_is_enoent(fd):
    a = create(fd)
    for id in (a.id + 1, 1023, 1024, 0xFFFFFFFF):
        assert call(fd, uapi.XPU_IOC_SLICE_GET, info_arg(b"", id=id)) == \
            errno.ENOENT
        assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(id)) == \
            errno.ENOENT
        assert call(fd, uapi.XPU_IOC_SLICE_SET, info_arg(
            b"", id=id, flags=uapi.XPU_SLICE_SET_WEIGHT)) == errno.ENOENT
    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(a.id)) == 0
    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(a.id)) == \
        errno.ENOENT


def test_an_older_caller_s_slice_info_ends_where_it_said(fd):
    """A caller that knows xpu_slice_info up to os_events (before the
    records' counts) is answered up to there: argsz written back as it
    came, nothing written past it; a caller that knows the whole struct
    gets argsz back whole, and the counts of a fresh slice (0)."""
    s = create(fd, b"t-old", memory=GIB, share=100)
    buf = bytearray(bytes(info_arg(b"", id=s.id, argsz=INFO_MIN))[:INFO_MIN]
                    + b"\xa5" * (INFO_SIZE - INFO_MIN))
    fcntl.ioctl(fd, uapi.XPU_IOC_SLICE_GET, buf)
    got = uapi.XpuSliceInfo.from_buffer_copy(bytes(buf))
    assert got.argsz == INFO_MIN and got.id == s.id
    assert bytes(buf[INFO_MIN:]) == b"\xa5" * (INFO_SIZE - INFO_MIN)
    whole = get(fd, s.id)
    assert whole.argsz == INFO_SIZE
    assert (whole.devices, whole.vaspaces, whole.virtuals, whole.tsgs,
            whole.usermode, whole.doorbell_files) == (0,) * 6
    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(s.id)) == 0


def test_get_destroy_and_list_refusals(fd):
    a = create(fd)
    assert call(fd, uapi.XPU_IOC_SLICE_GET,
                info_arg(b"", id=a.id, flags=1)) == errno.EINVAL
    assert call(fd, uapi.XPU_IOC_SLICE_GET,
                info_arg(b"", id=a.id, argsz=8)) == errno.EINVAL
    for flags in (2, 1 << 31):
        assert call(fd, uapi.XPU_IOC_SLICE_DESTROY,
                    ref_arg(a.id, flags)) == errno.EINVAL
    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY,
                ref_arg(a.id, argsz=SIZES["xpu_slice_ref"] - 1)) == \
        errno.EINVAL
    ids = (ctypes.c_uint32 * 4)()
    for kw in ({"flags": 1}, {"argsz": SIZES["xpu_slice_list"] - 1}):
        kw.setdefault("argsz", SIZES["xpu_slice_list"])
        arg = uapi.XpuSliceList(count=4, ids=ctypes.addressof(ids), **kw)
        assert call(fd, uapi.XPU_IOC_SLICE_LIST, arg) == errno.EINVAL
    assert slice_ids(fd) == [a.id]


def test_slice_list_fills_no_more_than_count(fd):
    made = [create(fd, f"t-{i}".encode()).id for i in range(3)]
    ids = (ctypes.c_uint32 * 3)(0xEEEEEEEE, 0xEEEEEEEE, 0xEEEEEEEE)
    arg = uapi.XpuSliceList(argsz=SIZES["xpu_slice_list"], count=1,
                            ids=ctypes.addressof(ids))
    assert call(fd, uapi.XPU_IOC_SLICE_LIST, arg) == 0
    assert arg.count == 3
    assert ids[0] in made and list(ids[1:]) == [0xEEEEEEEE] * 2
    arg = uapi.XpuSliceList(argsz=SIZES["xpu_slice_list"], count=0, ids=0)
    assert call(fd, uapi.XPU_IOC_SLICE_LIST, arg) == 0
    assert arg.count == 3


# -- nodes --------------------------------------------------------------------

def test_node_attach_and_detach(fd, nodedir):
    a = create(fd, b"t-a", minor=0)
    b = create(fd, b"t-b", minor=0)
    gpu = mknod(nodedir / "gpu0", 0)
    ctl_node = mknod(nodedir / "ctl", NV_CTL_MINOR)
    with opath(gpu) as g, opath(ctl_node) as n:
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, g)) == 0
        # Again, to the same slice: nothing changes.
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, g)) == 0
        # To another slice: the node is taken.
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(b.id, g)) == \
            errno.EEXIST
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH,
                    node_arg(a.id, n, uapi.XPU_NODE_CTL)) == 0
        # Detach: only by its slice, once.
        assert call(fd, uapi.XPU_IOC_NODE_DETACH, node_arg(b.id, g)) == \
            errno.ENOENT
        assert call(fd, uapi.XPU_IOC_NODE_DETACH, node_arg(a.id, g)) == 0
        assert call(fd, uapi.XPU_IOC_NODE_DETACH, node_arg(a.id, g)) == \
            errno.ENOENT
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(b.id, g)) == 0
        # A destroyed slice's node, still held here, stays a tombstone: it
        # names no other slice and refuses opens (a bind mount of it in a
        # container must not turn into an unsliced GPU node).
        assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(b.id)) == 0
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, g)) == \
            errno.EEXIST
        with pytest.raises(OSError) as e:
            os.close(os.open(gpu, os.O_RDWR))
        assert e.value.errno == errno.ENXIO
    # Unlinked and closed everywhere, the tombstone goes: a new node of the
    # same numbers attaches.
    os.unlink(gpu)
    gpu = mknod(nodedir / "gpu0b", 0)
    with opath(gpu) as g:
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, g)) == 0


def test_node_attach_through_ctl_and_another_path(c, nodedir):
    s = c.slice_create("t-a", 1, GIB)
    gpu = mknod(nodedir / "gpu1", 1)
    c.node_attach(s.id, gpu, uapi.XPU_NODE_GPU)
    # A hard link is the same inode: the same node.
    os.link(gpu, nodedir / "link")
    c.node_attach(s.id, str(nodedir / "link"))
    other = c.slice_create("t-b", 1, GIB)
    with pytest.raises(ctl.Conflict) as e:
        c.node_attach(other.id, str(nodedir / "link"), name="t-b")
    assert "belongs to another slice" in str(e.value)
    c.node_detach(s.id, gpu)


def test_node_refusals(fd, nodedir):
    a = create(fd, b"t-a", minor=0)
    wrong_minor = mknod(nodedir / "gpu1", 1)
    other_major = mknod(nodedir / "null", 3, major=1)
    ctl_node = mknod(nodedir / "ctl", NV_CTL_MINOR)
    gpu0 = mknod(nodedir / "gpu0", 0)
    regular = nodedir / "file"
    regular.write_text("")
    os.symlink(gpu0, nodedir / "symlink")
    cases = [
        (wrong_minor, {}, errno.EINVAL),               # not the slice's GPU
        (ctl_node, {}, errno.EINVAL),                  # ctl as a GPU node
        (gpu0, {"role": uapi.XPU_NODE_CTL}, errno.EINVAL),
        (gpu0, {"role": uapi.XPU_NODE_UVM}, errno.ENODEV),  # not xpu-uvm's
        (gpu0, {"role": 3}, errno.EINVAL),
        (gpu0, {"flags": 1}, errno.EINVAL),
        (gpu0, {"argsz": SIZES["xpu_node"] - 1}, errno.EINVAL),
        (str(regular), {}, errno.ENODEV),              # not a char device
        (str(nodedir), {}, errno.ENODEV),              # a directory
        (str(nodedir / "symlink"), {}, errno.ENODEV),  # O_PATH|O_NOFOLLOW
        (other_major, {}, errno.ENODEV),               # not the driver's
        (gpu0, {"id": a.id + 1}, errno.ENOENT),        # no such slice
    ]
    for path, kw, err in cases:
        flags = os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW
        nfd = os.open(path, flags)
        try:
            kw.setdefault("id", a.id)
            got = call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(fd=nfd, **kw))
            assert got == err, (path, kw, errno.errorcode.get(got))
        finally:
            os.close(nfd)
    closed = os.open(gpu0, os.O_PATH)
    os.close(closed)
    for bad in (-1, closed, 1 << 30):
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, bad)) == \
            errno.EBADF
    assert call(fd, uapi.XPU_IOC_NODE_DETACH, node_arg(a.id, -1)) == \
        errno.EBADF


def test_node_errors_through_ctl(c, nodedir):
    s = c.slice_create("t-a", 0, GIB)
    (nodedir / "file").write_text("")
    with pytest.raises(ctl.Invalid) as e:
        c.node_attach(s.id, str(nodedir / "file"), name="t-a")
    assert "not a character device of the NVIDIA driver" in str(e.value)
    with pytest.raises(ctl.Invalid) as e:
        c.node_attach(s.id, mknod(nodedir / "g1", 1), expect=0)
    assert "must be 195:0" in str(e.value)
    with pytest.raises(ctl.NotFound):
        c.node_attach(s.id, str(nodedir / "missing"))


def hold_open(path):
    """A child that opens PATH and keeps it open until killed."""
    code = ("import os, sys\n"
            f"fd = os.open({str(path)!r}, os.O_RDWR)\n"
            "print('open', flush=True)\n"
            "sys.stdin.read()\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()
    if line != "open\n":
        p.kill()
        _, err = p.communicate()
        if "Permission denied" in err:
            pytest.skip(f"cannot open device nodes in {path.parent}: {err}")
        pytest.fail(f"the child could not open {path}: {err}")
    return p


def test_opens_through_a_node_are_in_the_slice(fd, nodedir):
    a = create(fd, b"t-a", minor=0)
    node = mknod(nodedir / "gpu0", 0, mode=0o666)
    with opath(node) as n:
        assert call(fd, uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, n)) == 0
    child = hold_open(Path(node))
    try:
        assert get(fd, a.id).open_files == 1
        # In use: destroy refuses, unless forced.
        assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(a.id)) == \
            errno.EBUSY
        with ctl.Ctl(DEV) as c, pytest.raises(ctl.Busy) as e:
            c.slice_destroy(a.id, name="t-a")
        assert str(e.value).startswith("slice 't-a' is in use")
        assert "pass --force" in str(e.value)
        assert call(fd, uapi.XPU_IOC_SLICE_DESTROY,
                    ref_arg(a.id, uapi.XPU_DESTROY_FORCE)) == 0
        assert slice_ids(fd) == []
    finally:
        child.kill()
        child.communicate()


# -- cgroups ------------------------------------------------------------------

def cgroup2_mount():
    for line in Path("/proc/self/mounts").read_text().splitlines():
        f = line.split()
        if f[2] == "cgroup2":
            return f[1]
    return None


@pytest.fixture
def cgroup_dirs(tmp_path):
    """Two fresh cgroup v2 directories (a cgroup2 mount of its own when the
    VM has none)."""
    root = cgroup2_mount()
    mounted = None
    if root is None:
        mounted = tmp_path / "cgroup2"
        mounted.mkdir()
        r = subprocess.run(["mount", "-t", "cgroup2", "none", str(mounted)],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            pytest.skip(f"no cgroup2 and none can be mounted: {r.stderr}")
        root = str(mounted)
    dirs = [Path(root) / f"xpu-test-{os.getpid()}-{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    yield dirs
    for d in dirs:
        with contextlib.suppress(OSError):
            d.rmdir()
    if mounted is not None:
        subprocess.run(["umount", str(mounted)], check=False)


def test_cgroup_bind_and_unbind(fd, cgroup_dirs):
    a = create(fd, b"t-a")
    b = create(fd, b"t-b", minor=1)
    d0 = os.open(cgroup_dirs[0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    d1 = os.open(cgroup_dirs[1], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND, cgroup_arg(a.id, d0)) == 0
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND, cgroup_arg(a.id, d0)) == 0
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND, cgroup_arg(b.id, d0)) == \
            errno.EEXIST
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND, cgroup_arg(b.id, d1)) == 0
        assert call(fd, uapi.XPU_IOC_CGROUP_UNBIND, cgroup_arg(b.id, d0)) == \
            errno.ENOENT
        assert call(fd, uapi.XPU_IOC_CGROUP_UNBIND, cgroup_arg(a.id, d0)) == 0
        assert call(fd, uapi.XPU_IOC_CGROUP_UNBIND, cgroup_arg(a.id, d0)) == \
            errno.ENOENT
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND,
                    cgroup_arg(a.id + b.id + 1, d0)) == errno.ENOENT
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND,
                    cgroup_arg(a.id, d0, flags=1)) == errno.EINVAL
        assert call(fd, uapi.XPU_IOC_CGROUP_BIND,
                    cgroup_arg(a.id, d0, argsz=12)) == errno.EINVAL
    finally:
        os.close(d0)
        os.close(d1)
    # Destroying the slice drops its bindings: the cgroup can be bound anew.
    assert call(fd, uapi.XPU_IOC_SLICE_DESTROY, ref_arg(b.id)) == 0
    with ctl.Ctl(DEV) as c:
        c.cgroup_bind(a.id, str(cgroup_dirs[1]))
        c.cgroup_unbind(a.id, str(cgroup_dirs[1]))


def test_cgroup_bind_needs_a_cgroup(fd, tmp_path):
    a = create(fd)
    (tmp_path / "file").write_text("")
    for path, flags in ((tmp_path, os.O_RDONLY | os.O_DIRECTORY),
                        (tmp_path / "file", os.O_RDONLY),
                        ("/proc", os.O_RDONLY | os.O_DIRECTORY),
                        (DEV, os.O_PATH)):
        cfd = os.open(path, flags | os.O_CLOEXEC)
        try:
            for cmd in (uapi.XPU_IOC_CGROUP_BIND, uapi.XPU_IOC_CGROUP_UNBIND):
                assert call(fd, cmd, cgroup_arg(a.id, cfd)) == errno.EBADF, \
                    path
        finally:
            os.close(cfd)
    assert call(fd, uapi.XPU_IOC_CGROUP_BIND, cgroup_arg(a.id, -1)) == \
        errno.EBADF
    with ctl.Ctl(DEV) as c, pytest.raises(ctl.Invalid) as e:
        c.cgroup_bind(a.id, str(tmp_path), name="t-a")
    assert "is not a cgroup v2 directory" in str(e.value)


# -- who may ------------------------------------------------------------------

def as_nobody(fd, calls):
    """Run CALLS ([(label, cmd, arg)]) on FD in a child with uid and gid
    65534 and no capabilities; {label: errno or 0}."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            out = {label: call(fd, cmd, arg) for label, cmd, arg in calls}
            os.write(w, json.dumps(out).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return json.loads(data)


def test_unprivileged_callers_may_read_but_not_change(fd, nodedir,
                                                     cgroup_dirs):
    a = create(fd, b"t-a")
    node = mknod(nodedir / "gpu0", 0)
    nfd = os.open(node, os.O_PATH | os.O_CLOEXEC)
    cfd = os.open(cgroup_dirs[0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    gpus = (uapi.XpuGpuInfo * 4)()
    ids = (ctypes.c_uint32 * 4)()
    try:
        got = as_nobody(fd, [
            ("version", uapi.XPU_IOC_VERSION,
             uapi.XpuVersion(argsz=SIZES["xpu_version"])),
            ("gpu_list", uapi.XPU_IOC_GPU_LIST,
             gpu_list_arg(count=4, gpus=ctypes.addressof(gpus))),
            ("slice_list", uapi.XPU_IOC_SLICE_LIST,
             uapi.XpuSliceList(argsz=SIZES["xpu_slice_list"], count=4,
                               ids=ctypes.addressof(ids))),
            ("slice_get", uapi.XPU_IOC_SLICE_GET, info_arg(b"", id=a.id)),
            ("gpu_set", uapi.XPU_IOC_GPU_SET,
             uapi.XpuGpuSet(argsz=SIZES["xpu_gpu_set"],
                            flags=uapi.XPU_GPU_SET_MODE, minor=0)),
            ("slice_create", uapi.XPU_IOC_SLICE_CREATE, info_arg(b"t-x")),
            ("slice_set", uapi.XPU_IOC_SLICE_SET,
             info_arg(b"", id=a.id, flags=uapi.XPU_SLICE_SET_WEIGHT,
                      weight=5)),
            ("slice_destroy", uapi.XPU_IOC_SLICE_DESTROY, ref_arg(a.id)),
            ("node_attach", uapi.XPU_IOC_NODE_ATTACH, node_arg(a.id, nfd)),
            ("node_detach", uapi.XPU_IOC_NODE_DETACH, node_arg(a.id, nfd)),
            ("cgroup_bind", uapi.XPU_IOC_CGROUP_BIND, cgroup_arg(a.id, cfd)),
            ("cgroup_unbind", uapi.XPU_IOC_CGROUP_UNBIND,
             cgroup_arg(a.id, cfd)),
        ])
    finally:
        os.close(nfd)
        os.close(cfd)
    reads = ("version", "gpu_list", "slice_list", "slice_get")
    assert {k: v for k, v in got.items() if k in reads} == \
        dict.fromkeys(reads, 0)
    assert {k: v for k, v in got.items() if k not in reads} == \
        {k: errno.EPERM for k in got if k not in reads}
    # Nothing changed.
    assert slice_ids(fd) == [a.id]
    assert get(fd, a.id).weight == 100
    with opath(node) as n:  # not attached by the child
        assert call(fd, uapi.XPU_IOC_NODE_DETACH, node_arg(a.id, n)) == \
            errno.ENOENT


# -- robustness ---------------------------------------------------------------

KNOWN = {  # nr: struct
    0x00: uapi.XpuVersion, 0x01: uapi.XpuGpuList, 0x02: uapi.XpuGpuSet,
    0x10: uapi.XpuSliceInfo, 0x11: uapi.XpuSliceInfo,
    0x12: uapi.XpuSliceInfo, 0x13: uapi.XpuSliceRef,
    0x14: uapi.XpuSliceList, 0x20: uapi.XpuNode, 0x21: uapi.XpuNode,
    0x22: uapi.XpuCgroup, 0x23: uapi.XpuCgroup,
}

# Addresses no user mapping can have (kernel or non-canonical): the list
# ioctls' pointers are set to these, so that the kernel's writes through a
# random pointer end in EFAULT, never in this process's memory.
NO_USER_ADDRESSES = (0, 0xFFFF888000000000, 0xDEAD000000000000,
                     0xFFFFFFFFFFFFF000, 1 << 47, (1 << 64) - 1)


def _safe(nr, buf, rng):
    """Point the list ioctls' user pointers where nothing is mapped."""
    if nr == 0x01 and len(buf) >= 24:
        ptr = rng.choice(NO_USER_ADDRESSES[1:])
        buf[16:24] = ptr.to_bytes(8, "little")
    if nr == 0x14 and len(buf) >= 24:
        ptr = rng.choice(NO_USER_ADDRESSES)
        buf[16:24] = ptr.to_bytes(8, "little")
    return buf


def test_unknown_commands_are_enotty(fd):
    arg = bytearray(256)
    known = {IOWR(uapi.XPU_IOC_TYPE, nr, cls) for nr, cls in KNOWN.items()}
    for nr in range(256):
        size = ctypes.sizeof(KNOWN.get(nr, uapi.XpuSliceInfo))
        cmds = [IOC(IOC_NONE, uapi.XPU_IOC_TYPE, nr, 0),
                IOC(IOC_READ, uapi.XPU_IOC_TYPE, nr, size),
                IOC(IOC_WRITE, uapi.XPU_IOC_TYPE, nr, size)]
        if nr not in KNOWN:
            cmds.append(IOC(IOC_READ | IOC_WRITE, uapi.XPU_IOC_TYPE, nr,
                            size))
        for cmd in cmds:
            assert cmd not in known
            assert call(fd, cmd, arg) == errno.ENOTTY, hex(cmd)
    for cmd in (0, IOWR(ord("F"), 0x10, uapi.XpuSliceInfo),
                IOWR(0xE5, 0x10, uapi.XpuSliceInfo), 0xFFFFFFFF):
        assert call(fd, cmd, arg) == errno.ENOTTY, hex(cmd)
    assert slice_ids(fd) == []


def test_bad_pointers_are_efault(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    for nr, cls in KNOWN.items():
        cmd = IOWR(uapi.XPU_IOC_TYPE, nr, cls)
        for addr in (0, 8, 0xFFFF888000000000):
            assert libc.ioctl(fd, cmd, addr) == -1
            assert ctypes.get_errno() == errno.EFAULT, (hex(nr), addr)
    entries = uapi.XpuGpuList(argsz=SIZES["xpu_gpu_list"], count=2,
                              gpu_argsz=SIZES["xpu_gpu_info"],
                              gpus=0xFFFF888000000000)
    assert call(fd, uapi.XPU_IOC_GPU_LIST, entries) == errno.EFAULT


def test_random_arguments_never_crash(fd, gpus):
    seed = nvtest.fuzz_seed(time.time_ns() % 100000)
    rng = random.Random(seed)
    print(f"XPU_FUZZ_SEED={seed}")
    for _ in range(4000):
        nr = rng.choice(list(KNOWN))
        size = ctypes.sizeof(KNOWN[nr])
        # The size in the command: the right one, or anything.
        enc = size if rng.random() < 0.6 else rng.randrange(0, 1 << 14)
        cmd = IOC(IOC_READ | IOC_WRITE, uapi.XPU_IOC_TYPE, nr, enc)
        n = rng.choice((0, 4, 8, size - 1, size, size + 8, 256))
        buf = bytearray(rng.randbytes(max(n, 0)))
        if rng.random() < 0.7 and len(buf) >= 4:
            # A plausible argsz keeps the fuzzing past the first check.
            argsz = rng.choice((size, size - 1, size + 64, 0xFFFFFFFF))
            buf[0:4] = argsz.to_bytes(4, "little")
            if rng.random() < 0.5 and len(buf) >= 8:
                buf[4:8] = bytes(4)
        # 1024 bytes: fcntl hands the kernel a copy of that size, more
        # than any struct, whatever argsz says.
        buf = _safe(nr, buf + bytes(1024 - len(buf)), rng)
        call(fd, cmd, buf)
    for _ in range(2000):
        # xpu's type, a number or direction it does not know: ENOTTY.
        nr = rng.randrange(0, 256)
        d = rng.choice((IOC_NONE, IOC_READ, IOC_WRITE, IOC_READ | IOC_WRITE))
        if nr in KNOWN and d == IOC_READ | IOC_WRITE:
            continue
        cmd = IOC(d, uapi.XPU_IOC_TYPE, nr, rng.randrange(0, 1 << 14))
        assert call(fd, cmd, bytearray(1024)) == errno.ENOTTY, hex(cmd)
    for _ in range(2000):
        # Any number at all (some are the VFS's own, as FIONBIO): whatever
        # the answer, no crash.
        call(fd, rng.randrange(0, 1 << 32), bytearray(1024))
    fcntl.fcntl(fd, fcntl.F_SETFL, 0)  # should FIONBIO have set O_NONBLOCK
    with pytest.raises(OSError):
        os.write(fd, os.urandom(64))
    with pytest.raises(OSError):
        os.read(fd, 64)
    # Still answering as before.
    with ctl.Ctl(DEV) as c:
        assert len(c.gpu_list()) == len(gpus)


# -- xpud on the kernel backend -----------------------------------------------

class Xpud:
    """xpud --foreground with its own configuration, state, socket and
    node directory, on the real /dev/xpuctl."""

    def __init__(self, tmp_path, sockdir, nodedir):
        self.config = tmp_path / "xpud.toml"
        self.config.write_text("")
        self.socket = str(sockdir / "xpud.sock")
        self.nodedir = nodedir
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                            "JOURNAL_STREAM")}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(TOP / "xpud"), env.get("PYTHONPATH")]))
        self.env = env
        self.log = tmp_path / "xpud.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "xpu.daemon", "--foreground",
                 "--config", str(self.config), "--state-dir",
                 str(tmp_path / "state"), "--socket", self.socket,
                 "--node-dir", str(nodedir)],
                env=env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + WAIT
        while True:
            assert self.proc.poll() is None, \
                f"xpud exited: {self.log.read_text()}"
            try:
                with Client(self.socket, timeout=WAIT) as c:
                    c.call("version")
                break
            except ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def xpuctl(self, *args):
        return subprocess.run(
            [sys.executable, "-m", "xpu.cli", "--socket", self.socket,
             *args], env=self.env, capture_output=True, text=True,
            timeout=WAIT, check=False)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=WAIT)
        return self.proc.returncode, self.log.read_text()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def xpud(tmp_path, nodedir, fd):
    sockdir = Path(tempfile.mkdtemp(prefix="xpud-", dir="/tmp"))
    x = Xpud(tmp_path, sockdir, nodedir)
    yield x
    x.kill()
    shutil.rmtree(sockdir, ignore_errors=True)


def test_xpud_makes_slices_with_nodes(xpud, fd, nodedir):
    r = xpud.xpuctl("create", "t-x", "--gpu", "0", "--memory", "1GiB",
                    "--compute", "12.5", "--priority", "high")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("created slice 't-x' on GPU 0")
    r = xpud.xpuctl("show", "t-x", "-o", "json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    # The kernel's view.
    [k] = [ctl.SliceInfo.from_struct(get(fd, id)) for id in slice_ids(fd)]
    assert (k.name, k.memory_limit, k.compute_share, k.priority) == (
        "t-x", GIB, 125, uapi.XPU_PRIO_HIGH)
    with ctl.Ctl(DEV) as c:
        uuids = {g.minor: g.uuid for g in c.gpu_list()}
    assert s["name"] == "t-x"
    assert s["origin"] == "api"
    assert s["state"] == "ready" and s["error"] is None
    assert s["gpu_index"] == 0
    assert s["gpu_minor"] == k.gpu_minor
    assert s["gpu_uuid"] == kernel.normalise_uuid(uuids[k.gpu_minor])
    assert s["memory_limit_bytes"] == GIB
    assert s["memory_used_bytes"] == 0
    assert s["compute_share"] == 12.5
    assert (s["weight"], s["priority"]) == (100, "high")
    # the GPU and control nodes, and the UVM node of xpu.ko's xpu-uvm
    assert s["nodes"] == [str(nodedir / f"xpu{k.id}"),
                          str(nodedir / f"xpu{k.id}-ctl"),
                          str(nodedir / f"xpu{k.id}-uvm")]
    with open("/sys/class/misc/xpu-uvm/dev") as f:
        uvm = tuple(int(n) for n in f.read().split(":"))
    try:
        gid = grp.getgrnam("xpu").gr_gid
    except KeyError:
        gid = 0
    for path, numbers, role in zip(
            s["nodes"], ((NV_MAJOR, k.gpu_minor), (NV_MAJOR, NV_CTL_MINOR),
                         uvm),
            (uapi.XPU_NODE_GPU, uapi.XPU_NODE_CTL, uapi.XPU_NODE_UVM)):
        st = os.lstat(path)
        assert stat.S_ISCHR(st.st_mode), path
        assert st.st_rdev == os.makedev(*numbers), path
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert (st.st_uid, st.st_gid) == (0, gid)
        with opath(path) as n:   # attached by xpud: again is a no-op
            assert call(fd, uapi.XPU_IOC_NODE_ATTACH,
                        node_arg(k.id, n, role)) == 0
    assert sorted(os.listdir(nodedir)) == [f"xpu{k.id}", f"xpu{k.id}-ctl",
                                           f"xpu{k.id}-uvm"]

    r = xpud.xpuctl("gpus", "-o", "json")
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)
    assert all(x["memory_total_bytes"] > 0 for x in g)
    assert g[0]["slices"] == 1
    # the channel ids xpu.ko shares out: RM's, asked at load (the stub's)
    with open("/sys/module/nvstub/parameters/channel_ids") as f:
        rm_ids = int(f.read())
    assert all(x["channel_ids"] == rm_ids for x in g), g

    # Refusals come back as one line and the documented exit status.
    r = xpud.xpuctl("create", "t-x", "--gpu", "1", "--memory", "1GiB")
    assert (r.returncode, r.stderr.count("\n")) == (1, 1)
    assert "exists" in r.stderr
    r = xpud.xpuctl("create", "t-y", "--gpu", "0", "--memory", "100TiB")
    assert r.returncode == 1 and "not given to slices" in r.stderr
    assert slice_ids(fd) == [k.id]

    r = xpud.xpuctl("set", "t-x", "--memory", "2GiB")
    assert r.returncode == 0, r.stderr
    assert get(fd, k.id).memory_limit == 2 * GIB

    r = xpud.xpuctl("destroy", "t-x")
    assert r.returncode == 0, r.stderr
    assert slice_ids(fd) == []
    assert os.listdir(nodedir) == []
    status, log = xpud.stop()
    assert status == 0, log
    assert "kernel backend" in log
    assert "Traceback" not in log
