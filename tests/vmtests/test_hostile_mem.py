# SPDX-License-Identifier: Apache-2.0
"""Hostile tenants against memory isolation (issue 17, docs/security.md).

Each test is an attack written as a tenant would write it, from a process
inside a slice using only its slice's nodes, and fails on an xpu.ko without
the fix it names:
- class 1, memory by fork: RM charges a client's memory to the process that
  made the client; a child makes one on the inherited control file and
  exits, and the parent allocates on it.
- class 9, confused deputy: xpu.ko used to undo an over-limit allocation by
  freeing, with kernel privilege, the handles it read back from the caller's
  struct; a tenant planted another slice's client there.
- the page of a free xpu.ko makes as the caller (class 9's undo, and every
  slice's RM_FREE since the ledger): a thread of the caller's must not be
  able to change what the driver reads there.
- class 5, a stalled tenant: a tenant whose parameter page stalls (here
  userfaultfd) while xpu.ko holds its slice's lock must not block any other
  slice's open, an unsliced open or an admin call.
- class 15, the admin held by a stalled tenant: lowering the stalled slice's
  memory limit through xpud must not hold xpud (and with it every slice's
  admin) for as long as the tenant likes.
"""

import ctypes
import errno
import json
import mmap
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import nvtest
import pytest
import test_xpu_mem
import xpudtest
from nvclient import abi, client, stub
from test_xpu_mem import LIMIT, Slice

xpu_ctl = pytest.importorskip("xpu.ctl")

pytestmark = pytest.mark.usefixtures("require_xpu")

admin = test_xpu_mem.admin
uapi = test_xpu_mem.uapi
nodedir = test_xpu_mem.nodedir

MiB = 1 << 20


def start_child(code):
    return subprocess.Popen([sys.executable, "-c", nvtest.CHILD_PRELUDE + code],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd="/")


# --- class 1: memory by fork


FORK = """
import errno
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
r, w = os.pipe()
child = os.fork()
if child == 0:
    rm = client.RmClient(ctl)           # made by the child, charged to it
    os.write(w, rm.handle.to_bytes(4, "little"))
    os._exit(0)
h = int.from_bytes(os.read(r, 4), "little")
os.waitpid(child, 0)
rm = object.__new__(client.RmClient)
rm.ctl, rm.nvos64, rm.handle, rm.parents = ctl, False, h, {}
dev = rm.device(0, gpu_file=gpu)
got = denied = 0
for _ in range(32):                     # 512 MiB asked for in a 64 MiB slice
    try:
        dev.alloc_vidmem(16 << 20)
        got += 16 << 20
    except client.NvStatusError as e:
        assert e.status == abi.NV_ERR_NO_MEMORY, e
        denied += 1
# A control file of a slice may not be registered to another control file:
# clients made through it would outlive it.
other = client.Ctl(CTL)
try:
    ctl.register_fd(other)
    registered = 0
except OSError as e:
    registered = e.errno
report(got=got, denied=denied, registered=registered, child=child)
sys.stdin.readline()
"""


def test_a_forked_child_s_client_is_counted(admin, nodedir):
    """The fork escape: every byte the parent allocates on the client its
    exited child made is the slice's; the slice gives 64 MiB of the 512
    asked for, RM's heap agrees, and all of it goes when the files close."""
    sl = Slice(admin, nodedir, name="fork")
    heap0 = nvtest.heap_used(0)
    p = start_child(in_slice(FORK, sl))
    try:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        got = json.loads(line)
        assert got["got"] == LIMIT
        assert got["denied"] == 32 - LIMIT // (16 * MiB)
        assert got["registered"] == errno.EPERM
        assert sl.used() == LIMIT
        assert nvtest.heap_used(0) - heap0 == LIMIT
        # The premise: RM charges the memory to the exited child that made
        # the client, not to the parent that allocated it.
        with client.Ctl() as c, client.RmClient(c) as r:
            d = r.device(0)
            try:
                assert d.pid_vidmem(got["child"])["memPrivate"] == LIMIT
                assert d.pid_vidmem(p.pid)["memPrivate"] == 0
            finally:
                d.close()
    finally:
        p.communicate(input="\n", timeout=60)
    assert p.returncode == 0
    assert sl.used() == 0
    assert nvtest.heap_used(0) == heap0
    sl.destroy()


# --- class 2: exclusive mode and the control node


# held_by(ctl, gpu, minor, n): a device of GPU MINOR made through those
# nodes (or RM's refusal), and the video memory it then holds, 16 MiB at a
# time, at most N times.
HELD_BY = """
def held_by(ctl_path, gpu_path, minor, n):
    ctl = client.Ctl(ctl_path); gpu = client.GpuFile(minor, gpu_path)
    rm = client.RmClient(ctl)
    try:
        dev = rm.device(minor, gpu_file=gpu)
    except client.NvStatusError as e:
        return {"device": e.status, "held": 0}
    held = 0
    for _ in range(n):
        try:
            dev.alloc_vidmem(16 << 20)
            held += 16 << 20
        except client.NvStatusError as e:
            return {"device": 0, "held": held, "refused": e.status}
    return {"device": 0, "held": held}
"""

EXCLUSIVE = HELD_BY + """
import ctypes
os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
# 256 MiB, past either slice's 64
out = {"unsliced": held_by("/dev/nvidiactl", GPU0, 0, 16),
       "other_slice": held_by(CTL0, GPU1, 1, 16)}
# RM_ALLOC_OBJECT (no parameters) through a slice's control file
class NVOS05(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in
                ("hRoot", "hObjectParent", "hObjectNew", "hClass", "status")]
ctl = client.Ctl(CTL0); gpu = client.GpuFile(0, GPU0)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
p = NVOS05(rm.handle, dev.hsubdevice, 0x5a5a0001, abi.HOPPER_USERMODE_A, 0xFFFFFFFF)
client.escape(ctl.fd, abi.NV_ESC_RM_ALLOC_OBJECT, p)
out["alloc_object"] = p.status
report(**out)
"""


def test_exclusive_mode_covers_the_control_node(admin, nodedir):
    """On an exclusive GPU with slices, an unprivileged process holding a
    slice's GPU file makes no device through the unsliced control node, nor
    through another GPU's slice's control file: RM would let either reach
    the GPU (its check wants only a file of the GPU in the fd table), past
    every limit.  Root on the host still may; a slice's control file makes
    no parameterless object (RM_ALLOC_OBJECT) at all."""
    a = Slice(admin, nodedir, name="excl0", gpu=0)
    b = Slice(admin, nodedir, name="excl1", gpu=1)
    admin.gpu_set(0, mode=uapi.XPU_MODE_EXCLUSIVE)
    admin.gpu_set(1, mode=uapi.XPU_MODE_EXCLUSIVE)
    heap0, heap1 = nvtest.heap_used(0), nvtest.heap_used(1)
    try:
        got = nvtest.run_child(EXCLUSIVE.replace("CTL0", repr(a.ctl_node))
                               .replace("GPU0", repr(a.gpu_node))
                               .replace("GPU1", repr(b.gpu_node)))
        denied = {"device": abi.NV_ERR_INSUFFICIENT_PERMISSIONS, "held": 0}
        assert got["unsliced"] == denied
        assert got["other_slice"] == denied
        assert got["alloc_object"] == abi.NV_ERR_NOT_SUPPORTED
        assert (nvtest.heap_used(0), nvtest.heap_used(1)) == (heap0, heap1)
        # root on the host: the unsliced control node still reaches it
        with client.Ctl() as ctl, client.GpuFile(0, a.gpu_node) as gpu, \
                client.RmClient(ctl) as rm:
            dev = rm.device(0, gpu_file=gpu)
            dev.alloc_vidmem(128 * MiB)
            assert nvtest.heap_used(0) - heap0 == 128 * MiB
            dev.close()
        # a slice's own control file, on its own GPU, as before
        ctl, gpu, rm, dev = b.open()
        dev.alloc_vidmem(LIMIT)
        assert b.used() == LIMIT
        for o in (dev, rm, gpu, ctl):
            o.close()
    finally:
        admin.gpu_set(0, mode=uapi.XPU_MODE_SHARED)
        admin.gpu_set(1, mode=uapi.XPU_MODE_SHARED)
        a.destroy()
        b.destroy()


# An unprivileged process on the host's own control node, holding GPU0 (a
# slice's GPU node), with an RM client there.
NOBODY_UNSLICED = """
import ctypes, threading, time
os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
ctl = client.Ctl("/dev/nvidiactl"); gpu = client.GpuFile(0, GPU0)
rm = client.RmClient(ctl)
"""


RACE_DEVICE = NOBODY_UNSLICED + """
dp = abi.NV0080_ALLOC_PARAMETERS(
    deviceId=1, vaMode=abi.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES)
at = []
def race():
    time.sleep(0.15)        # inside the stub's 300 ms before RM reads dp
    dp.deviceId = 0
    at.append(time.monotonic() - t0)
t0 = time.monotonic()
t = threading.Thread(target=race); t.start()
try:
    hdev = rm.alloc(rm.handle, abi.NV01_DEVICE_0, dp)
except client.NvStatusError as e:
    hdev, status = 0, e.status
elapsed = time.monotonic() - t0
t.join()
held = refused = 0
if hdev:
    status = 0
    hsub = rm.alloc(hdev, abi.NV20_SUBDEVICE_0,
                    abi.NV2080_ALLOC_PARAMETERS(subDeviceId=0))
    for _ in range(16):             # 256 MiB, past the slice's 64
        mp = ctl.abi.NV_MEMORY_ALLOCATION_PARAMS(
            owner=0x58505521, type=abi.NVOS32_TYPE_IMAGE, size=16 << 20,
            attr=abi.nvos32_attr(abi.NVOS32_ATTR_LOCATION_VIDMEM, 0))
        try:
            rm.alloc(hdev, abi.NV01_MEMORY_LOCAL_USER, mp)
            held += 16 << 20
        except client.NvStatusError as e:
            refused = e.status
            break
report(status=status, held=held, refused=refused, wrote_at=at[0],
       elapsed=elapsed)
"""


def test_a_device_id_rewritten_before_rm_reads_it_reaches_no_exclusive_gpu(
        nodedir, reload_stub):
    """Class 2's race: through the unsliced control node, a process holding
    an exclusive GPU's slice node asks for a device on the other, shared,
    GPU, and a thread turns the deviceId into the exclusive GPU's once
    xpu.ko has read it, before RM reads it (the stub waits 300 ms).  Before,
    RM read the rewritten id and made the device on the exclusive GPU, past
    every limit.  Now RM reads xpu's copy of the params: the device it is
    asked for is on the other GPU, whose file the process does not hold."""
    reload_stub(alloc_reread_delay_us=300000)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin_:
        a = Slice(admin_, nodedir, name="excl0", gpu=0)
        admin_.gpu_set(0, mode=uapi.XPU_MODE_EXCLUSIVE)
        heap0 = nvtest.heap_used(0)
        try:
            got = nvtest.run_child(RACE_DEVICE.replace("GPU0",
                                                       repr(a.gpu_node)))
            assert got["held"] == 0, got
            # RM's refusal, not xpu's (which is the same status): xpu let
            # the call through, and it waited for the stub's read of the
            # params, which came after the rewrite
            assert got["status"] == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, got
            assert got["wrote_at"] < 0.3 <= got["elapsed"], got
            assert nvtest.heap_used(0) == heap0
        finally:
            admin_.gpu_set(0, mode=uapi.XPU_MODE_SHARED)
            a.destroy()


CLASS_TO_DEVICE = NOBODY_UNSLICED + """
dp = abi.NV0080_ALLOC_PARAMETERS(
    deviceId=0, vaMode=abi.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES)
NO_CLASS = 0x7e57
NVOS05 = type("NVOS05", (ctypes.Structure,), {"_fields_": [
    (n, ctypes.c_uint32) for n in
    ("hRoot", "hObjectParent", "hObjectNew", "hClass", "status")]})
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]

def race(p, nr):
    # libc's ioctl on P itself: the driver reads P's own memory
    at = []
    def rewrite():
        time.sleep(0.15)    # inside the stub's 300 ms before it reads P
        p.hClass = abi.NV01_DEVICE_0
        at.append(time.monotonic() - t0)
    t0 = time.monotonic()
    t = threading.Thread(target=rewrite); t.start()
    rc = libc.ioctl(ctl.fd, abi.nv_ioctl(nr, ctypes.sizeof(p)),
                    ctypes.addressof(p))
    elapsed = time.monotonic() - t0
    t.join()
    assert at[0] < 0.3 <= elapsed, (at, elapsed)    # the premise
    assert rc == 0, ctypes.get_errno()
    return p.status

p21 = abi.NVOS21_PARAMETERS(hRoot=rm.handle, hObjectParent=rm.handle,
                            hObjectNew=0x5a5a0001, hClass=NO_CLASS)
p21.pAllocParms = ctypes.addressof(dp)
alloc = race(p21, abi.NV_ESC_RM_ALLOC)
rm2 = client.RmClient(ctl)     # a client of its own: one device a GPU
p05 = NVOS05(rm2.handle, rm2.handle, 0x5a5a0002, NO_CLASS, 0xFFFFFFFF)
alloc_object = race(p05, abi.NV_ESC_RM_ALLOC_OBJECT)
made = [ctl.rm_dup(c.handle, c.handle, c.handle, h, check=False).status
        for c, h in ((rm, 0x5a5a0001), (rm2, 0x5a5a0002))]
report(alloc=alloc, alloc_object=alloc_object, made=made)
"""


def test_a_class_turned_into_a_device_reaches_no_exclusive_gpu(
        nodedir, reload_stub):
    """Class 34: through the unsliced control node, xpu.ko read an RM_ALLOC's
    or RM_ALLOC_OBJECT's class and passed the struct on unless it was a
    device; a thread turned a class RM has not into NV01_DEVICE_0 once
    xpu.ko had read it, before RM read it (the stub waits 300 ms), and an
    unprivileged process holding an exclusive GPU's slice node made a
    device on that GPU, as class 2 did before it was closed.  Now, while a
    GPU is guarded, every allocation through an unsliced control file is
    made on xpu's copy: RM reads the class xpu read, and makes nothing."""
    reload_stub(copyin_delay_us=300000)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin_:
        a = Slice(admin_, nodedir, name="excl0", gpu=0)
        admin_.gpu_set(0, mode=uapi.XPU_MODE_EXCLUSIVE)
        try:
            got = nvtest.run_child(CLASS_TO_DEVICE.replace(
                "GPU0", repr(a.gpu_node)))
            assert got == {"alloc": abi.NV_ERR_INVALID_CLASS,
                           "alloc_object": abi.NV_ERR_INVALID_CLASS,
                           "made": [abi.NV_ERR_OBJECT_NOT_FOUND] * 2}, got
        finally:
            admin_.gpu_set(0, mode=uapi.XPU_MODE_SHARED)
            a.destroy()


# --- class 46: an escape in another encoding

# Every escape of the tenant's is sent encoded as MODE says: the driver
# reads only a command's number and size (nvidia_ioctl: _IOC_NR and
# _IOC_SIZE), so another type byte, another direction or a wrapping in
# IOCTL_XFER_CMD make the same call.
ENCODED = """
import ctypes
MODE = "ENCODING"
raw = client.ioctl_raw
def encoded(fd, cmd, arg):
    nr, size = cmd & 0xFF, (cmd >> 16) & 0x3FFF
    if MODE == "type":
        cmd = (3 << 30) | (size << 16) | (ord("G") << 8) | nr
    elif MODE == "direction":
        cmd = (size << 16) | (ord("F") << 8) | nr              # _IOC_NONE
    elif nr != abi.NV_ESC_IOCTL_XFER_CMD:                       # xfer
        x = abi.nv_ioctl_xfer_t(cmd=nr, size=size, ptr=ctypes.addressof(arg))
        rc = raw(fd, abi.IOCTL_XFER_CMD, x)
        calls.append(nr)
        return rc
    return raw(fd, cmd, arg)
client.ioctl_raw = encoded
calls = []
""" + HELD_BY

ENCODED_SLICE = ENCODED + """
got = held_by(CTL_NODE, GPU_NODE, 0, 8)      # 128 MiB, past the 64
report(wrapped=abi.NV_ESC_RM_ALLOC in calls, **got)
"""

ENCODED_EXCLUSIVE = ENCODED + """
os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
got = held_by("/dev/nvidiactl", GPU_NODE, 0, 8)
report(wrapped=abi.NV_ESC_RM_ALLOC in calls, **got)
"""


@pytest.mark.parametrize("encoding", ["type", "direction"])
def test_an_escape_of_another_type_or_direction_is_a_slice_s_too(
        admin, nodedir, encoding):
    """Class 46 (session 56, found by a review of hook.c): xpu.ko looked an
    escape up only when its type byte was the driver's 'F', and passed any
    other to the driver unseen; the driver reads neither the type nor the
    direction (nvidia_ioctl, 535 to 595), so every hook -- the limit, the
    records of channels and doorbells, every refusal -- was one byte away.
    Now the number alone picks the hook.  Without it a tenant sending type
    'G' held 128 MiB in its 64 MiB slice."""
    sl = Slice(admin, nodedir, name="encoded")
    heap0 = nvtest.heap_used(0)
    try:
        got = nvtest.run_child(ENCODED_SLICE.replace("ENCODING", encoding)
                               .replace("CTL_NODE", repr(sl.ctl_node))
                               .replace("GPU_NODE", repr(sl.gpu_node)))
        assert got == {"wrapped": False, "device": 0, "held": LIMIT,
                       "refused": abi.NV_ERR_NO_MEMORY}, got
        assert nvtest.heap_used(0) == heap0
    finally:
        sl.destroy()


@pytest.mark.parametrize("encoding", ["type", "direction", "xfer"])
def test_an_escape_in_another_encoding_reaches_no_exclusive_gpu(
        admin, nodedir, encoding):
    """Class 46, and class 2 through IOCTL_XFER_CMD (session 56, found by a
    review of file.c): an unprivileged process on the unsliced control
    node, holding an exclusive GPU's slice node, makes no device there
    whatever the encoding of its RM_ALLOC.  xpu.ko read a wrapped call only
    for a slice's files, so an unsliced file's RM_ALLOC in IOCTL_XFER_CMD
    reached the driver unchecked: a device on the exclusive GPU and 128 MiB
    on it."""
    sl = Slice(admin, nodedir, name="excl0", gpu=0)
    admin.gpu_set(0, mode=uapi.XPU_MODE_EXCLUSIVE)
    heap0 = nvtest.heap_used(0)
    try:
        got = nvtest.run_child(ENCODED_EXCLUSIVE.replace("ENCODING", encoding)
                               .replace("GPU_NODE", repr(sl.gpu_node)))
        assert got == {"wrapped": encoding == "xfer",
                       "device": abi.NV_ERR_INSUFFICIENT_PERMISSIONS,
                       "held": 0}, got
        assert nvtest.heap_used(0) == heap0
    finally:
        admin.gpu_set(0, mode=uapi.XPU_MODE_SHARED)
        sl.destroy()


# --- review finding: a tiled allocation's size is height x pitch


def tiled_alloc(dev, height, pitch, size_claimed):
    """RM_VID_HEAP_CONTROL ALLOC_TILED_PITCH_HEIGHT of video memory, laid out
    as nvos.h's AllocTiledPitchHeight (owner, hMemory, type, flags, height,
    pitch, attr, ..., size at 48, ..., attr2 at 104)."""
    p = dev._heap_params(abi.NVOS32_FUNCTION_ALLOC_TILED_PITCH_HEIGHT)
    raw = memoryview(p.data._raw).cast("B")
    struct.pack_into("<IIIIIiI", raw, 0, 0x58505521, 0, abi.NVOS32_TYPE_IMAGE, 0,
                     height, pitch,
                     abi.nvos32_attr(abi.NVOS32_ATTR_LOCATION_VIDMEM, 0))
    struct.pack_into("<Q", raw, 48, size_claimed)
    r = dev.ctl.vid_heap_control(p, check=False)
    return r.status, struct.unpack_from("<I", raw, 4)[0]


def test_a_tiled_allocation_is_admitted_by_height_times_pitch(admin, nodedir):
    """RM ignores a tiled allocation's size and takes height x pitch: one
    claiming 0 bytes for 2 x the limit is refused before RM allocates
    anything (the slice's peak never passes its limit), and one of exactly
    the limit fits."""
    sl = Slice(admin, nodedir, name="tiled")
    ctl, gpu, rm, dev = sl.open()
    try:
        status, _ = tiled_alloc(dev, 2 * LIMIT // 65536, 65536, 0)
        assert status == abi.NV_ERR_NO_MEMORY
        assert sl.get().memory_peak <= LIMIT
        assert sl.used() == 0
        status, h = tiled_alloc(dev, LIMIT // 65536, 65536, 0)
        assert status == abi.NV_OK
        assert sl.used() == LIMIT
        rm.parents[h] = dev.hdevice
        rm.free(h)
        assert sl.used() == 0
    finally:
        for o in (dev, rm, gpu, ctl):
            o.close()
        sl.destroy()


# --- class 9: a planted handle


# An RM_ALLOC of ALLOC_BYTES of video memory whose NVOS21 struct is alone on
# a page, so that the page can be made read-only under the driver: its
# copy-back then fails and the struct keeps what it held.
STRUCT_PAGE = """
page = mmap.mmap(-1, mmap.PAGESIZE)
p = abi.NVOS21_PARAMETERS.from_buffer(page)
addr = ctypes.addressof(p)
mp = dev.memory_params(ALLOC_BYTES)
p.hRoot, p.hObjectParent, p.hObjectNew = rm.handle, dev.hdevice, NEW_HANDLE
p.hClass = abi.NV01_MEMORY_LOCAL_USER
p.pAllocParms = ctypes.addressof(mp); p.paramsSize = ctypes.sizeof(mp)
"""

ATTACK = nvtest.RAW_PRELUDE + STRUCT_PAGE.replace(
    "ALLOC_BYTES", "1 << 20").replace("NEW_HANDLE", "0x5c00beef") + """
import threading, time
# The slice's whole limit, held through no slice's control file: RM charges
# it to this member, xpu's figure has not read it yet, so the 1 MiB is
# admitted and found over the limit after RM made it -- and undone.
ctl2 = client.Ctl("/dev/nvidiactl"); rm2 = client.RmClient(ctl2)
dev2 = rm2.device(0, gpu_file=gpu)
held = dev2.alloc_vidmem(HELD_BYTES)
# the racing thread's writes stay in the struct
go = threading.Event()
def race():
    go.wait()
    time.sleep(0.01)        # inside the stub's 30 ms before it reads mp
    mp.size = 1 << 30       # RM allocates 1 GiB where 1 MiB was admitted
    p.hRoot = p.hObjectParent = p.hObjectNew = VICTIM
    libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ)
t = threading.Thread(target=race); t.start()
go.set()
rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_ALLOC, ctypes.sizeof(p)), addr)
t.join()
report(rc=rc, errno=ctypes.get_errno())
"""


def test_a_planted_handle_cannot_make_xpu_free_another_tenants_client(
        nodedir, reload_stub):
    """An allocation xpu.ko must undo -- over the limit once RM made it --
    whose struct, made read-only before the copy-back, names the victim's
    RM client.  xpu.ko must not free the victim's client.  Before Nov 25
    xpu read the planted handles back and freed them with its privilege;
    from Nov 25 it undoes by the handles RM wrote into xpu's own copy of
    the struct, as the caller.  Since Nov 26 RM reads xpu's copy of the
    params too, so growing the size under the driver no longer takes the
    call over the limit; memory the attacker holds through an unsliced
    control file, which xpu's figure reads only after the call, does.  The
    undo is asserted to have run (one denial), the attacker is not
    killed, and its slice holds nothing once it has gone."""
    reload_stub(alloc_reread_delay_us=30000)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin_:
        attacker = Slice(admin_, nodedir, name="attacker", limit=LIMIT)
        victim = Slice(admin_, nodedir, name="victim", limit=LIMIT)
        heap0 = nvtest.heap_used(0)
        ctl, gpu, rm, dev = victim.open()
        try:
            held = dev.alloc_vidmem(4 * MiB)
            code = (ATTACK.replace("CTL", repr(attacker.ctl_node))
                    .replace("GPU", repr(attacker.gpu_node))
                    .replace("VICTIM", hex(rm.handle))
                    .replace("HELD_BYTES", str(LIMIT)))
            child = start_child(code)
            out, err = child.communicate(timeout=120)
            info = attacker.get()
            # RM made the 1 MiB xpu.ko read, and the caller's read-only
            # struct made the call fail as the driver's copy-back would.
            assert child.returncode == 0, (out, err)
            assert json.loads(out) == {"rc": -1, "errno": errno.EFAULT}
            assert info.killed == 0
            # the premise: the 1 MiB was over the limit and undone
            assert info.denied_allocs == 1, info
            assert attacker.used() == 0
            # The victim's client and memory are intact.
            rm.free(held.handle)
            dev.alloc_vidmem(8 * MiB)
            assert dev.heap_info()[0] == victim.limit
            assert victim.used() == 8 * MiB
        finally:
            dev.close()
            rm.close()
            gpu.close()
            ctl.close()
        assert nvtest.heap_used(0) == heap0
        attacker.destroy()
        victim.destroy()
        assert nvtest.heap_used(0) == heap0


# --- races the stub's delays make wide


@contextmanager
def racer_slice(reload_stub, nodedir, limit=LIMIT, **params):
    """A slice of LIMIT on a stub reloaded with PARAMS, and RM's heap use
    before it; the heap must be back there once the slice is gone."""
    reload_stub(**params)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin_:
        sl = Slice(admin_, nodedir, name="racer", limit=limit)
        heap0 = nvtest.heap_used(0)
        try:
            yield sl, heap0
        finally:
            sl.destroy()
        assert nvtest.heap_used(0) == heap0


def in_slice(code, sl, **subs):
    """CODE with CTL and GPU naming SL's nodes, and each key of SUBS
    replaced by its value."""
    code = code.replace("CTL", repr(sl.ctl_node)).replace("GPU", repr(sl.gpu_node))
    for key, value in subs.items():
        code = code.replace(key, value)
    return code


def let_go(child):
    """Tell CHILD, waiting on its stdin, to go on; its exit status."""
    child.p.stdin.write("\n")
    child.p.stdin.flush()
    return child.finish()


# --- the page of a call made as the caller


# The page xpu.ko maps in a child for the calls it makes there (callpage.c):
# its address, or None.
CALL_PAGE = """
def call_page():
    with open("/proc/self/maps") as f:
        for line in f:
            if "xpu-call" in line:
                return int(line.split("-")[0], 16)
"""

RACE_FREE = """
import ctypes, mmap, threading
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                        ctypes.c_int, ctypes.c_void_p]
MAP_FIXED, MREMAP_MAYMOVE, MREMAP_FIXED = 0x10, 1, 2
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
uvm = Uvm(ctl.abi.version)
ctx = CudaContext(dev, uvm)
y = ctx.alloc(32 << 20)         # mapped through UVM, which keeps it past RM_FREE
x = dev.alloc_vidmem(2 << 20)

CALL_PAGE
# A tenant has no CAP_SYS_RAWIO: it may not map below mmap_min_addr.
os.setgroups([]); os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
libc.prctl(4, 1, 0, 0, 0)       # PR_SET_DUMPABLE: /proc/self stays its own
ready, got = threading.Event(), {}
def attack():
    ready.set()
    # the page xpu.ko maps for its calls (kept, or mapped for this free),
    # once it holds the free's handles
    want = bytes(abi.NVOS00_PARAMETERS(rm.handle, dev.hdevice, x.handle))
    while True:
        addr = call_page()
        if addr and ctypes.string_at(addr, len(want)) == want:
            break
    mine = bytes(abi.NVOS00_PARAMETERS(rm.handle, dev.hdevice, y.handle))
    try:
        if HOW == "write":
            fd = os.open("/proc/self/mem", os.O_RDWR)
            got["wrote"] = os.pwrite(fd, mine, addr)
        elif HOW == "store":
            libc.mprotect(addr, mmap.PAGESIZE,
                          mmap.PROT_READ | mmap.PROT_WRITE)
            ctypes.memmove(addr, mine, len(mine))
            got["wrote"] = len(mine)
        elif HOW == "move":     # a page of its own moved onto it
            mine_at = libc.mmap(None, mmap.PAGESIZE,
                                mmap.PROT_READ | mmap.PROT_WRITE,
                                mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
            ctypes.memmove(mine_at, mine, len(mine))
            at = libc.mremap(mine_at, mmap.PAGESIZE, mmap.PAGESIZE,
                             MREMAP_MAYMOVE | MREMAP_FIXED, addr)
            if at != addr:
                raise OSError(ctypes.get_errno(), "mremap")
            got["wrote"] = len(mine)
        else:               # a page of its own mapped over it
            got["addr"] = addr
            at = libc.mmap(addr, mmap.PAGESIZE,
                           mmap.PROT_READ | mmap.PROT_WRITE,
                           mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED,
                           -1, 0)
            if at != addr:      # below mmap_min_addr, or sealed
                raise OSError(ctypes.get_errno(), "mmap")
            ctypes.memmove(addr, mine, len(mine))
            got["wrote"] = len(mine)
    except OSError as e:
        got["wrote"] = -e.errno

t = threading.Thread(target=attack, daemon=True)
t.start()
ready.wait()
p = abi.NVOS00_PARAMETERS(rm.handle, dev.hdevice, x.handle)
client.escape(ctl.fd, abi.NV_ESC_RM_FREE, p)
t.join()
report(status=p.status, **got)
sys.stdin.readline()
""".replace("CALL_PAGE", CALL_PAGE)


@pytest.mark.parametrize("how", ["write", "store", "replace", "move"])
def test_the_page_of_a_free_made_as_the_caller_cannot_be_rewritten(
        nodedir, reload_stub, uvm_nodes, how):
    """xpu.ko makes a slice's RM_FREE itself, as the caller, from a page it
    maps for the call, once the ledger stands by the object named.  A thread
    of the caller's (without CAP_SYS_RAWIO, as a tenant) finds that page
    (the driver waits 300 ms before reading it) and names instead memory
    UVM maps: written through /proc/self/mem, stored after mprotect, or the
    page replaced by one of its own (mapped over it with MAP_FIXED, moved
    onto it with mremap).  Before, RM freed the UVM-mapped 32 MiB, which UVM
    kept and nothing charged.  Now the page cannot be written but by the
    driver's copy-back ("write": the write fails, the free is the one
    asked for; "store": SIGBUS), nor replaced: it lies below mmap_min_addr,
    where the tenant may not map ("replace" and "move" fail with EPERM;
    before session 53 a replaced page was seen only after the driver had
    read it, and the caller killed -- RM had acted on the tenant's page).
    A failed mremap has unmapped the page first where the kernel does not
    seal it (before 6.10): the driver then reads nothing, and the caller,
    which unmapped the page of a call, is killed; on 6.10+ the page is
    sealed and stays.  Where vm.mmap_min_addr is below xpu.ko's slots (the
    debug kernel's 4096, the upstream default) a tenant may map there: a
    replaced page is then seen only after the driver's read, as before
    session 53 -- the caller killed, what it may have hidden charged."""
    sealed = nvtest.xpu_param("call_page_guard") == 2
    with open("/proc/sys/vm/mmap_min_addr") as f:
        guarded = int(f.read()) >= 16 * mmap.PAGESIZE   # xpu.ko's 15 slots
    # replaced or moved away, seen after the driver's read: the caller killed
    killed = int(how in ("replace", "move") and not sealed and
                 (how == "move" or not guarded))
    with racer_slice(reload_stub, nodedir, copyin_delay_us=300000) as (
            sl, heap0):
        exposed = nvtest.xpu_param("call_pages_exposed")
        child = nvtest.spawn_child(in_slice(RACE_FREE, sl, HOW=repr(how)))
        if how == "store":
            assert child.finish() == -signal.SIGBUS
        elif killed:
            assert child.finish() == -signal.SIGKILL
            # what RM still holds for the tenant (once the process is gone,
            # nothing, unless RM freed what the tenant named) is charged
            assert sl.used() + 4 * MiB >= nvtest.heap_used(0) - heap0
            if not guarded:     # the 32 MiB it may have hidden stays charged
                assert sl.used() >= 32 * MiB
        else:
            r = child.report()
            # What RM holds for the tenant (the 32 MiB, its context's page
            # tables) is what the slice is charged, within 4 MiB; before,
            # the slice read 2 MiB while RM held 34.
            assert sl.used() + 4 * MiB >= nvtest.heap_used(0) - heap0
            assert sl.used() >= 32 * MiB
            if how == "replace" and guarded:
                assert r["addr"] < 16 * mmap.PAGESIZE, r
            if how in ("replace", "move"):
                assert r["wrote"] == -errno.EPERM, r
            else:
                assert r["wrote"] < 0, r
            assert r["status"] == abi.NV_OK
            assert let_go(child) == 0
        assert sl.get().killed == killed
        if guarded:
            assert nvtest.xpu_param("call_pages_exposed") == exposed


# --- the kernel log: a tenant killed in a loop

KILLED = "killed, its control file refused"

LOG_FLOOD = """
import ctypes, mmap, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_FIXED = 0x10
CALL_PAGE

def cheat():
    ctl = client.Ctl(CTL)
    client.RmClient(ctl)            # the page of this call is kept
    addr = call_page()
    before = ctypes.string_at(addr, 64)

    def replace():                  # once xpu wrote the next call there
        # A poll, not a spin: the driver sleeps 20 ms before it reads, and
        # four spinning threads on the guest's two CPUs starved the forks
        # and exits that make the kills (127 s on the debug kernel).
        while ctypes.string_at(addr, 64) == before:
            time.sleep(0.001)
        libc.mmap(addr, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE,
                  mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED, -1, 0)
    threading.Thread(target=replace, daemon=True).start()
    client.RmClient(ctl)            # the driver sleeps before it reads

def bound(seconds):                 # the kernel's: 10 lines in any 5 s
    return 10 * (int(seconds / 5) + 2)

# until the kills outnumber what the rate limit lets through (it lets 2 a
# second through in the long run).  A kill, a fork and an exit of this
# process, took 0.4 s one after another on the debug kernel of a slow
# machine, too close to the limit's pace: so four cheats are kept going at
# once (mem_lock takes their calls one at a time, the forks and exits not)
kills, running, t0 = 0, set(), time.monotonic()

def more():
    return (kills <= bound(time.monotonic() - t0) + MARGIN and
            time.monotonic() - t0 < 150)

while running or more():
    while len(running) < 4 and more():
        pid = os.fork()
        if pid == 0:
            try:
                cheat()
            finally:
                os._exit(0)
        running.add(pid)
    pid, st = os.wait()
    running.discard(pid)
    kills += os.WIFSIGNALED(st) and os.WTERMSIG(st) == 9
report(kills=kills, seconds=time.monotonic() - t0)
""".replace("CALL_PAGE", CALL_PAGE)


def test_a_tenant_killed_in_a_loop_cannot_flood_the_kernel_log(
        reload_stub, nodedir):
    """Each process xpu.ko cannot keep track of is killed with a line in
    the kernel log, and a tenant can make such processes as fast as it can
    fork: here each replaces the page of one of its calls while the driver
    sleeps before reading it, as many as it takes to outnumber the rate
    limit by 40.  A line per kill kept the console (a serial one, on many
    hosts) and journald busy at the tenant's pace.  The lines are
    rate-limited as the kernel's own (10 per 5 s a call site); the slice's
    `killed` count stays exact.  Where the page is sealed (6.10+) it
    cannot be replaced, and nothing here is killed."""
    if nvtest.xpu_param("call_page_guard") == 2:
        pytest.skip("the page of a call is sealed: nothing to kill for")
    with racer_slice(reload_stub, nodedir, copyin_delay_us=20000) as (sl, _):
        mark = f"xpu-test: log flood {time.monotonic_ns()}"
        with open("/dev/kmsg", "w") as kmsg:
            kmsg.write(mark + "\n")
        out = nvtest.run_child(
            LOG_FLOOD.replace("CTL", repr(sl.ctl_node))
            .replace("MARGIN", "40"), timeout=300)
        log = subprocess.run(["dmesg"], check=True, capture_output=True,
                             text=True).stdout
        assert mark in log, log
        lines = [ln for ln in log[log.index(mark):].splitlines()
                 if KILLED in ln]
        assert sl.get().killed == out["kills"], out
        # the kernel's bound: 10 lines in any 5 s from one call site
        bound = 10 * (int(out["seconds"] / 5) + 2)
        assert out["kills"] > bound + 20, out   # else the test tells nothing
        assert len(lines) <= bound, (len(lines), out)


# --- the handle race: class and handle rewritten around the driver's reads


RACE_CLASS = nvtest.RAW_PRELUDE + """
import threading, time
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
uvm = Uvm(ctl.abi.version)
ctx = CudaContext(dev, uvm)
rm2 = client.RmClient(ctl); dev2 = rm2.device(0, gpu_file=gpu)
H = 0x5c00beef
page = mmap.mmap(-1, mmap.PAGESIZE)
p = abi.NVOS21_PARAMETERS.from_buffer(page)
addr = ctypes.addressof(p)
mp = dev2.memory_params(32 << 20)       # video memory, claimed as system
p.hRoot, p.hObjectParent, p.hObjectNew = rm2.handle, dev2.hdevice, H
p.hClass = abi.NV01_MEMORY_SYSTEM
p.pAllocParms = ctypes.addressof(mp); p.paramsSize = ctypes.sizeof(mp)
at = []
def race():
    time.sleep(0.15)        # inside the stub's 300 ms before it copies p in
    p.hClass = abi.NV01_MEMORY_LOCAL_USER
    at.append(time.monotonic() - t0)
    time.sleep(0.3)         # inside its 300 ms before RM reads mp
    p.hObjectNew = 0x5c00dead
    libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ)
t0 = time.monotonic()
t = threading.Thread(target=race); t.start()
rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_ALLOC, ctypes.sizeof(p)),
                addr)
err = ctypes.get_errno()
elapsed = time.monotonic() - t0
t.join()
mapped = False
try:                        # UVM keeps what it maps past RM_FREE
    va = ctx.va(32 << 20)
    uvm.create_external_range(va, 32 << 20)
    uvm.map_external(va, 32 << 20, ctl.fileno(), rm2.handle, H, [ctx.uuid])
    mapped = True
except client.NvStatusError:
    pass
rm2.close()                 # the client, and what it holds, freed
report(rc=rc, errno=err, mapped=mapped, class_at=at[0], elapsed=elapsed)
sys.stdin.readline()
"""


def test_a_class_and_handle_rewritten_around_the_driver_s_reads_hide_nothing(
        nodedir, reload_stub, uvm_nodes):
    """The handle race (docs/security.md): a struct claims system memory
    when xpu.ko reads it and video memory when the driver copies it in, and
    names another handle when xpu.ko reads the result.  Before, RM made
    32 MiB of video memory that xpu.ko admitted as 0 bytes and could not
    record, and a free of the client while UVM mapped it left the 32 MiB
    held and the slice charged nothing.  Now the driver reads xpu's copy of
    the struct: it makes what xpu.ko read, and its handle comes back where
    only xpu.ko reads it."""
    with racer_slice(reload_stub, nodedir, copyin_delay_us=300000,
                     alloc_reread_delay_us=300000) as (sl, heap0):
        child = nvtest.spawn_child(in_slice(RACE_CLASS, sl))
        r = child.report()
        # The premise: the class was rewritten before the driver copied
        # the struct in (the call waited for that copy), and the handle and
        # the read-only page came before the copy-back (EFAULT).
        assert r["class_at"] < 0.3 <= r["elapsed"], r
        assert r["rc"] == -1 and r["errno"] == errno.EFAULT, r
        # RM made the system memory xpu.ko read -- which it refuses with a
        # video-memory location -- not 32 MiB of video memory under H
        assert not r["mapped"], r
        # what RM holds for the tenant is charged to its slice
        assert sl.used() + 4 * MiB >= nvtest.heap_used(0) - heap0, r
        assert let_go(child) == 0


# A member with an unsliced control file too, on the same shared GPU, holds
# XMIB MiB there when its figure is read; it frees them unsliced (nobody reads
# the slice's figure), then allocates through the slice.
SKEW_PRELUDE = nvtest.RAW_PRELUDE + """
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
uvm = Uvm(ctl.abi.version)
ctx = CudaContext(dev, uvm)
ctl2 = client.Ctl("/dev/nvidiactl"); rm2 = client.RmClient(ctl2)
dev2 = rm2.device(0, gpu_file=gpu)
x = dev2.alloc_vidmem(XMIB << 20)
rm3 = client.RmClient(ctl); dev3 = rm3.device(0, gpu_file=gpu)
report(step="x")            # the device's reading has x in it
sys.stdin.readline()
rm2.free(x.handle)
"""

SKEWED_RECORD = SKEW_PRELUDE + """
buf = ctx.alloc(32 << 20)   # its maker's figure grew by 32 - 16 MiB
rm.free(buf.handle)         # UVM keeps it: the ledger holds it
report(step="freed")
sys.stdin.readline()
uvm.free(buf.va, buf.size)  # now the ledger holds it alone
report(step="uvm")
sys.stdin.readline()
"""

SKEWED_TO_NOTHING = SKEW_PRELUDE + """
m = dev3.alloc_vidmem(32 << 20)     # its maker's figure grew by nothing
va = ctx.va(32 << 20)
uvm.create_external_range(va, 32 << 20)
uvm.map_external(va, 32 << 20, ctl.fileno(), rm3.handle, m.handle,
                 [ctx.uuid])
rm3.close()                 # the client, and its memory: UVM keeps it
report(step="freed")
sys.stdin.readline()
uvm.free(va, 32 << 20)      # now the ledger holds it alone
report(step="uvm")
sys.stdin.readline()
"""


def charged_while_uvm_holds(reload_stub, nodedir, script, x_mib):
    """SCRIPT's 32 MiB, kept by UVM past the slice's free, are charged to
    the slice in full, and once UVM lets go, not at all."""
    with racer_slice(reload_stub, nodedir, limit=256 * MiB) as (sl, heap0):
        child = nvtest.spawn_child(in_slice(script, sl, XMIB=str(x_mib)))
        assert child.report() == {"step": "x"}
        assert sl.used() >= x_mib * MiB
        assert let_go_on(child) == {"step": "freed"}
        # what RM holds for the tenant is charged to its slice
        held = nvtest.heap_used(0) - heap0
        assert held >= 32 * MiB
        assert sl.used() + 4 * MiB >= held, (sl.get(), held)
        assert let_go_on(child) == {"step": "uvm"}
        assert nvtest.wait_for(lambda: sl.used() <= 4 * MiB, 30,
                               "the slice to be charged nothing")
        assert let_go(child) == 0


def test_a_record_skewed_by_an_unsliced_free_is_charged_in_full(
        nodedir, reload_stub, uvm_nodes):
    """A record keeps what RM's figure for the slice grew by at the
    allocation, and the ledger's duplicate takes that size at the free
    (session 19).  A member that frees 16 MiB through an unsliced control
    file between two readings of its figure makes its next allocation of
    32 MiB grow the figure by 16 MiB only.  When UVM keeps the 32 MiB past
    the slice's free, the slice pays for all of it, and once UVM lets go,
    for none of it: the ledger's reading after the free measures its
    duplicate.  With a record of 16 MiB taken as the size, the slice was
    charged 16 MiB while RM held 32, and the ledger, never finding 32 MiB
    private where it looked for 16, held them until the slice went.  (A
    record now says at least what xpu admitted, 32 MiB, since session 20;
    the reading still measures it.)"""
    charged_while_uvm_holds(reload_stub, nodedir, SKEWED_RECORD, 16)


def test_an_allocation_that_grew_the_figure_by_nothing_is_recorded(
        nodedir, reload_stub, uvm_nodes):
    """The same skew, down to nothing: a member frees 32 MiB through an
    unsliced control file between two readings, so its next 32 MiB
    allocation through the slice leaves its figure where it was.  Before,
    xpu recorded only an allocation that grew the figure, so a free of its
    client while UVM mapped it went past the ledger: UVM kept 32 MiB and
    the slice read 0.  Now an allocation of video memory RM confirms is
    recorded at least at the size xpu admitted, which RM read from xpu's
    page."""
    charged_while_uvm_holds(reload_stub, nodedir, SKEWED_TO_NOTHING, 32)


def let_go_on(child):
    """Tell CHILD to go on; its next report."""
    child.p.stdin.write("\n")
    child.p.stdin.flush()
    return child.report()


# --- the results of a call made on xpu's page


# An RM_ALLOC of 32 MiB of video memory made on xpu's page while a thread of
# the caller's stores into the page (after RAW_PRELUDE).
ALLOC_RACE = CALL_PAGE + """
import threading
libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                       ctypes.c_long]
libc.pread.restype = ctypes.c_ssize_t

def vidmem_alloc(rm, dev, h):
    # NVOS21 for 32 MiB of video memory as handle H (0: RM's choice)
    mp = dev.memory_params(32 << 20)
    p = abi.NVOS21_PARAMETERS()
    p.hRoot, p.hObjectParent, p.hObjectNew = rm.handle, dev.hdevice, h
    p.hClass = abi.NV01_MEMORY_LOCAL_USER
    p.pAllocParms = ctypes.addressof(mp); p.paramsSize = ctypes.sizeof(mp)
    return p, mp

def raced_alloc(p, store, match=None):
    # P made while a thread calls STORE(addr, cur) -- the page and this
    # call's struct there (its params lie on the page too, so its
    # pAllocParms is xpu's), once it names the object made -- until that
    # says it stored (the kernel's own store: EFAULT, not SIGBUS, while
    # the page is read-only) or the call returned; the driver's return
    go, done = threading.Event(), []
    def race():
        go.set()
        while not done:
            addr = call_page()
            if not addr:
                continue
            cur = abi.NVOS21_PARAMETERS.from_buffer_copy(
                ctypes.string_at(addr, ctypes.sizeof(p)))
            if (match(cur) if match else
                    (cur.hRoot, cur.hClass) == (p.hRoot, p.hClass) and
                    cur.hObjectNew) and store(addr, cur):
                done.append(True)
    t = threading.Thread(target=race, daemon=True)
    t.start()
    go.wait()
    rc = client.ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_ALLOC,
                                               ctypes.sizeof(p)), p)
    done.append(False)      # a call refused before RM: no page to store on
    t.join()
    return rc
"""

RACE_RESULT = nvtest.RAW_PRELUDE + ALLOC_RACE + """
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
uvm = Uvm(ctl.abi.version)
ctx = CudaContext(dev, uvm)
rm2 = client.RmClient(ctl); dev2 = rm2.device(0, gpu_file=gpu)
small = dev2.alloc_vidmem(2 << 20)
D = rm2.dup(dev2.hdevice, small.handle)     # video memory xpu did not record
p, mp = vidmem_alloc(rm2, dev2, HANDLE)     # 0: RM chooses the handle
lie = abi.NVOS21_PARAMETERS.from_buffer_copy(bytes(p))
lie.hObjectNew = D                          # "RM made D"
lfd = os.memfd_create("lie")
os.write(lfd, bytes(lie))
got = {}

def store(addr, cur):
    if libc.pread(lfd, addr, ctypes.sizeof(lie), 0) != ctypes.sizeof(lie):
        return False
    # The page turns writable at the driver's copy-back, whose rest may
    # still write over the store: it counts once it stays.
    now = abi.NVOS21_PARAMETERS.from_buffer_copy(
        ctypes.string_at(addr, ctypes.sizeof(lie)))
    if now.hObjectNew != lie.hObjectNew:
        return False
    got["made"] = cur.hObjectNew
    report(wrote=addr)      # the premise, before xpu reads the page
    return True

rc = raced_alloc(p, store)
mapped = False
try:                        # UVM keeps what it maps past RM_FREE
    va = ctx.va(32 << 20)
    uvm.create_external_range(va, 32 << 20)
    uvm.map_external(va, 32 << 20, ctl.fileno(), rm2.handle, got["made"],
                     [ctx.uuid])
    mapped = True
except client.NvStatusError:
    pass
rm2.close()                 # the client, and what it holds, freed
report(rc=rc, status=p.status, new=p.hObjectNew, mapped=mapped)
sys.stdin.readline()
"""


@pytest.mark.parametrize("chosen_by", ["client", "rm"])
def test_the_results_of_an_allocation_on_xpu_s_page_cannot_be_rewritten(
        nodedir, reload_stub, uvm_nodes, chosen_by):
    """A slice's RM_ALLOC is made on xpu's page, which the driver's
    copy-back makes writable for every thread of the caller's (a PTE is the
    process's).  A thread stores into it through the kernel (pread: EFAULT,
    not SIGBUS, while it is read-only) until that succeeds -- the driver
    waits 300 ms after its copy-back -- and names as the new object a
    duplicate xpu never recorded.  Before, xpu recorded the duplicate, and a
    free of the client while UVM mapped the 32 MiB it did make left them
    held with the slice charged for none.  Now the page is write-protected
    before xpu reads it and the handles RM never changes are checked; a
    handle the caller left to RM ("rm": hObjectNew 0) xpu chooses, as RM
    would, so that it can be checked too.  The caller is killed and what it
    made charged until the slice goes."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        child = nvtest.spawn_child(in_slice(
            RACE_RESULT, sl,
            HANDLE="0x5c00beef" if chosen_by == "client" else "0"))
        alive = child.p.stdout.readline()
        # the premise: the store landed on the page, inside the window
        assert '"wrote"' in alive, alive
        alive = child.p.stdout.readline()   # what it got, had it lived
        assert child.finish() == -signal.SIGKILL, (alive, sl.used())
        assert sl.get().killed == 1
        assert sl.used() >= 32 * MiB


RACE_BOUND = nvtest.RAW_PRELUDE + ALLOC_RACE + """
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
uvm = Uvm(ctl.abi.version)
ctx = CudaContext(dev, uvm)
kept = [dev.alloc_vidmem(2 << 20) for _ in range(KEPT)]
va = ctx.va(32 << 20)
uvm.create_external_range(va, 32 << 20)
p, mp = vidmem_alloc(rm, dev, 0x5c00beef)
mapped = []
report(ready=True)
sys.stdin.readline()

def store(addr, cur):
    # UVM maps the handle as soon as RM has made it: before the call returns
    st = uvm.map_external(va, 32 << 20, ctl.fileno(), rm.handle, 0x5c00beef,
                          [ctx.uuid], check=False)
    mapped.append(st == abi.NV_OK)
    if mapped[-1] and LOWER:
        # the bound lowered while RM's call runs: xpu cannot record it
        with open("/sys/module/xpu/parameters/max_memrecs", "w") as f:
            f.write(str(LOWER))
    return mapped[-1]

rc = raced_alloc(p, store)
report(rc=rc, status=p.status, mapped=any(mapped))
sys.stdin.readline()
"""


@pytest.mark.parametrize("met", ["before", "after"])
def test_an_allocation_past_the_records_bound_is_charged_whoever_holds_it(
        nodedir, reload_stub, uvm_nodes, met):
    """A slice holds at most `max_memrecs` video-memory objects on record.
    Before, the bound was met after RM's call: an allocation past it was
    made, then freed as the caller -- and a thread of the caller's that
    mapped the new handle into UVM in between (the driver waits 300 ms
    after its copy-back here; UVM takes no lock of xpu's) kept its 32 MiB
    held by UVM, charged to no slice (found by a review in session 57).
    Now the bound is met before the call ("before": RM is never asked, so
    there is nothing to map), and an allocation xpu cannot record after
    RM made it ("after": the bound lowered by the thread once its mapping
    took) is undone through the ledger, which keeps the memory charged to
    the slice while UVM holds it."""
    kept = 3
    path = "/sys/module/xpu/parameters/max_memrecs"
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        with open(path) as f:
            old = f.read().strip()
        with open(path, "w") as f:
            f.write(str(kept if met == "before" else kept + 1))
        try:
            child = nvtest.spawn_child(in_slice(
                RACE_BOUND, sl, KEPT=str(kept),
                LOWER=str(kept if met == "after" else 0)))
            assert child.report()["ready"]
            used, heap = sl.used(), nvtest.heap_used(0)
            assert used >= kept * 2 * MiB
            r = let_go_on(child)
            assert (r["rc"], r["status"]) == (
                0, abi.NV_ERR_INSUFFICIENT_RESOURCES), r
            # the premise: RM made it and UVM mapped it, or RM never did
            assert r["mapped"] == (met == "after"), r
            # the 32 MiB RM's heap holds since, for UVM, the slice is
            # charged for (the heap has UVM's page tables for the mapping
            # beside it)
            held = 32 * MiB if met == "after" else 0
            grown = nvtest.heap_used(0) - heap
            assert sl.used() - used == held, (r, sl.used(), grown)
            assert held <= grown < held + MiB, (r, grown)
            assert let_go(child) == 0
        finally:
            with open(path, "w") as f:
                f.write(old)


RACE_SIZE = nvtest.RAW_PRELUDE + ALLOC_RACE + """
p, mp = vidmem_alloc(rm, dev, 0x5c00beef)
sfd = os.memfd_create("small")
os.write(sfd, bytes(ctypes.c_uint64(64 << 10)))

def store(addr, cur):
    # the size in xpu's copy of the params, on the same page; it counts
    # once it stays (the rest of the driver's copy-back may write over it)
    at = cur.pAllocParms + type(mp).size.offset
    return libc.pread(sfd, at, 8, 0) == 8 and \
        ctypes.c_uint64.from_address(at).value == 64 << 10

rc = raced_alloc(p, store)
# alone again (the thread's task gone, its hold on the address space
# before it): 48 MiB more does not fit the 64 MiB slice's 32 MiB left
while len(os.listdir("/proc/self/task")) > 1:
    pass
try:
    dev.alloc_vidmem(48 << 20)
    more = abi.NV_OK
except client.NvStatusError as e:
    more = e.status
report(rc=rc, status=p.status, size=mp.size, more=more)
sys.stdin.readline()
"""


def test_a_size_rewritten_on_xpu_s_page_is_not_what_the_slice_pays(
        nodedir, reload_stub):
    """RM writes back the size of the video memory it made, and after an
    allocation made alone in its address space xpu takes that size as what
    the creator's figure grew by, without asking RM.  Here a second thread
    stores 64 KiB over the size on xpu's page once the driver's copy-back
    made it writable (the driver waits 300 ms after it), so the caller is
    not alone: its slice must still pay RM's 32 MiB, read from RM, and
    refuse 48 MiB more in its 64 MiB.  Trusting the page there charged 64
    KiB, admitted the 48 MiB, and the slice held 80."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, heap0):
        child = nvtest.spawn_child(in_slice(RACE_SIZE, sl))
        r = child.report()
        # the premise: the store landed inside the window, and the caller
        # got the page as it was
        assert (r["rc"], r["status"], r["size"]) == (0, abi.NV_OK, 64 << 10)
        assert r["more"] == abi.NV_ERR_NO_MEMORY
        assert sl.get().killed == 0
        assert sl.used() == nvtest.heap_used(0) - heap0 >= 32 * MiB
        assert let_go(child) == 0


# A failure stored into RM's status on xpu's page once the driver copied
# NV_OK back (after RAW_PRELUDE and ALLOC_RACE): whether it landed.
STATUS_RACE = ALLOC_RACE + """
lfd = os.memfd_create("lie")
os.write(lfd, bytes(ctypes.c_uint32(abi.NV_ERR_GENERIC)))
OFF = abi.NVOS21_PARAMETERS.status.offset

def status_raced(p):
    p.status = 0x5c5c5c5c       # the caller's, until RM's copy-back
    stored = []

    def store(addr, cur):
        # once the driver copied RM's NV_OK back: a failure there
        at = addr + OFF
        if cur.hObjectNew != p.hObjectNew or cur.status != abi.NV_OK or \\
                libc.pread(lfd, at, 4, 0) != 4:
            return False
        stored.append(ctypes.c_uint32.from_address(at).value ==
                      abi.NV_ERR_GENERIC)
        return stored[-1]
    raced_alloc(p, store)
    return any(stored)
"""

RACE_STATUS = nvtest.RAW_PRELUDE + STATUS_RACE + """
stored = 0
for i in range(4):
    mp = dev.memory_params(4 << 20, location=abi.NVOS32_ATTR_LOCATION_PCI)
    p = abi.NVOS21_PARAMETERS()
    p.hRoot, p.hObjectParent, p.hObjectNew = rm.handle, dev.hdevice, \\
        0x5c0ff000 + i
    p.hClass = abi.NV01_MEMORY_SYSTEM
    p.pAllocParms = ctypes.addressof(mp); p.paramsSize = ctypes.sizeof(mp)
    stored += status_raced(p)
report(stored=stored)
sys.stdin.readline()
"""

RACE_STATUS_USERMODE = nvtest.RAW_PRELUDE + STATUS_RACE + """
p = abi.NVOS21_PARAMETERS()
p.hRoot, p.hObjectParent, p.hObjectNew = rm.handle, dev.hsubdevice, 0x5c0ff100
p.hClass = abi.HOPPER_USERMODE_A
report(stored=int(status_raced(p)))
sys.stdin.readline()
"""


def test_a_status_rewritten_on_xpu_s_page_hides_nothing_rm_made(
        nodedir, reload_stub):
    """The status on xpu's page after a call is RM's word only when no
    other thread of the caller's could store there (found by a review in
    session 52): the driver's copy-back makes the page writable for the
    whole process until xpu write-protects it again, and a thread's store
    through the kernel (pread) lands in that window -- the driver waits
    300 ms after its copy-back.  A thread turned RM's NV_OK into a failure
    on each of four allocations of 4 MiB of system memory in a slice bound
    to 8 MiB: before, xpu left every one out of its records, and RM held
    16 MiB with the slice reading 0.  Now a status that is not the
    driver's own word is a claim, and RM is asked what it made: two are
    recorded, the next two refused before RM."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        sl.admin.slice_set(sl.id, host_memory_limit=8 * MiB)
        denied0 = sl.get().denied_allocs
        child = nvtest.spawn_child(in_slice(RACE_STATUS, sl))
        r = child.report()
        got = sl.get()
        # the premise: the store landed, inside the window (before, on all
        # four, none recorded)
        assert r["stored"] >= 1, r
        assert got.host_memory_used == 8 * MiB, (r, got)
        assert got.denied_allocs == denied0 + 2, got
        assert r["stored"] == 2, r      # on the two RM was asked for
        assert let_go(child) == 0


def test_a_status_rewritten_on_xpu_s_page_hides_no_doorbell(
        nodedir, reload_stub):
    """As above, for a usermode object (the doorbell page xpu gates): a
    thread turned RM's NV_OK into a failure after the copy-back.  Before,
    xpu took the failure at its word, kept no record, and the slice's
    doorbell was never gated (`usermode` 0 while RM held one).  Now RM is
    asked: the object is recorded."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        child = nvtest.spawn_child(in_slice(RACE_STATUS_USERMODE, sl))
        r = child.report()
        assert r["stored"] == 1, r      # the premise
        assert sl.get().usermode == 1, sl.get()
        assert let_go(child) == 0


# After RAW_PRELUDE: lie_on_page(nr, p, made) makes escape NR on P while a
# thread of the caller's stores a failure over RM's NV_OK in P's status on
# xpu's page, once MADE(cur) says the page holds this call's copy-back (the
# driver waits after it); the driver's return and how many stores landed.
LIE_ON_PAGE = ALLOC_RACE + """
lfd = os.memfd_create("lie")
os.write(lfd, bytes(ctypes.c_uint32(abi.NV_ERR_GENERIC)))

def lie_on_page(nr, p, made, seen=abi.NV_OK, lie=abi.NV_ERR_GENERIC):
    # (SEEN: the status RM gave, LIE: the one stored over it)
    T = type(p)
    field = "status" if hasattr(T, "status") else "Status"
    off = getattr(T, field).offset
    os.pwrite(lfd, bytes(ctypes.c_uint32(lie)), 0)
    stored, done = [], []
    def race():
        while not done:
            addr = call_page()
            if not addr:
                continue
            cur = T.from_buffer_copy(ctypes.string_at(addr, ctypes.sizeof(p)))
            if getattr(cur, field) != seen or not made(cur):
                continue
            if libc.pread(lfd, addr + off, 4, 0) == 4 and \\
                    ctypes.c_uint32.from_address(addr + off).value == lie:
                stored.append(True)
                return
    t = threading.Thread(target=race, daemon=True)
    t.start()
    rc = client.ioctl_raw(ctl.fd, abi.nv_ioctl(nr, ctypes.sizeof(p)), p)
    done.append(True)
    t.join()
    return rc, len(stored)
"""

# A context DMA (NV_ESC_RM_ALLOC_CONTEXT_DMA2) on the tenant's video memory,
# its status lied about on xpu's page.
RACE_STATUS_CONTEXT_DMA = nvtest.RAW_PRELUDE + LIE_ON_PAGE + """
mem = dev.alloc_vidmem(2 << 20)
p = abi.NVOS39_PARAMETERS(
    hObjectParent=rm.handle, hObjectNew=0x5c0ff200,
    hClass=abi.NV01_CONTEXT_DMA,
    flags=abi.NVOS03_FLAGS_HASH_TABLE_DISABLE <<
    abi.NVOS03_FLAGS_HASH_TABLE_SHIFT,
    hMemory=mem.handle, limit=4095, status=0x5c5c5c5c)
report(step="ready")
sys.stdin.readline()
rc, stored = lie_on_page(
    abi.NV_ESC_RM_ALLOC_CONTEXT_DMA2, p,
    lambda cur: (cur.hClass, cur.hObjectNew) == (p.hClass, p.hObjectNew))
report(rc=rc, stored=stored)
sys.stdin.readline()
"""


def test_a_status_rewritten_on_xpu_s_page_hides_no_context_dma(
        nodedir, reload_stub):
    """Class 42 for RM_ALLOC_CONTEXT_DMA2: a thread turned RM's NV_OK on
    xpu's page into a failure after the driver's copy-back (the driver
    waits 300 ms after it).  Before, xpu took the failure at its word and
    kept no record of the handle: a context DMA past `max_handles` for
    each race won.  Now the status is RM's word only where the caller was
    alone, and RM is asked: the handle is recorded."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        child = nvtest.spawn_child(in_slice(RACE_STATUS_CONTEXT_DMA, sl))
        assert child.report() == {"step": "ready"}
        handles0 = sl.get().rm_handles
        r = let_go_on(child)
        # the premise: the store landed over RM's NV_OK
        assert r == {"rc": 0, "stored": 1}, r
        assert sl.get().rm_handles == handles0 + 1, sl.get()
        assert let_go(child) == 0


# An OS event (NV_ESC_ALLOC_OS_EVENT) of the tenant's client, its status
# lied about on xpu's page; then, when told, the same pair again and its
# free.
RACE_STATUS_OS_EVENT = nvtest.RAW_PRELUDE + LIE_ON_PAGE + """
EV = abi.nv_ioctl_alloc_os_event_t
p = EV(hClient=rm.handle, fd=77, Status=0x5c5c5c5c)

def osev(nr):
    q = EV(hClient=rm.handle, fd=77)
    assert client.ioctl_raw(ctl.fd, abi.nv_ioctl(nr, ctypes.sizeof(q)), q) == 0
    return q.Status

report(step="ready")
sys.stdin.readline()
rc, stored = lie_on_page(abi.NV_ESC_ALLOC_OS_EVENT, p,
                         lambda cur: (cur.hClient, cur.fd) == (p.hClient, p.fd))
report(rc=rc, stored=stored, status=p.Status)
sys.stdin.readline()
report(again=osev(abi.NV_ESC_ALLOC_OS_EVENT))
sys.stdin.readline()
report(free=osev(abi.NV_ESC_FREE_OS_EVENT))
sys.stdin.readline()
"""


def test_a_status_rewritten_on_xpu_s_page_hides_no_os_event(
        nodedir, reload_stub):
    """Class 42 for NV_ESC_ALLOC_OS_EVENT: a thread turned RM's NV_OK on
    xpu's page into a failure after the driver's copy-back (the driver
    waits 300 ms after it).  Before, xpu took the failure at its word and
    kept no record: an event past `max_os_events` for each race won, in
    RM's one list for the whole driver.  Now, where the caller was not
    alone, RM's answer is the one it must have given -- it refuses only a
    pair it holds -- so the event is counted, the same pair again is
    refused by RM and not counted twice, and its free gives the place
    back."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        child = nvtest.spawn_child(in_slice(RACE_STATUS_OS_EVENT, sl))
        assert child.report() == {"step": "ready"}
        assert sl.get().os_events == 0
        r = let_go_on(child)
        # the premise: the store landed over RM's NV_OK
        assert r == {"rc": 0, "stored": 1, "status": abi.NV_ERR_GENERIC}, r
        assert sl.get().os_events == 1, sl.get()
        # RM holds the pair: the same again is refused, and counted once
        assert let_go_on(child) == {
            "again": abi.NV_ERR_INSUFFICIENT_RESOURCES}
        assert sl.get().os_events == 1, sl.get()
        assert let_go_on(child) == {"free": abi.NV_OK}
        assert sl.get().os_events == 0, sl.get()
        assert let_go(child) == 0


# A client allocation that leaves the handle to RM (hRoot 0), while a thread
# of the caller's stores, once RM's copy-back is on xpu's page, the handle
# of a client the slice knows over the new client's (after RAW_PRELUDE).
RACE_CLIENT_HANDLE = nvtest.RAW_PRELUDE + ALLOC_RACE + """
lfd = os.memfd_create("lie")
os.write(lfd, bytes(ctypes.c_uint32(rm.handle)))
OFF = abi.NVOS21_PARAMETERS.hObjectNew.offset
p = abi.NVOS21_PARAMETERS(hClass=abi.NV01_ROOT_CLIENT, status=0x5c5c5c5c)
stored = []

def store(addr, cur):
    # RM's copy-back (its NV_OK, the new client's handle), written over
    if cur.status != abi.NV_OK or cur.hObjectNew in (0, rm.handle) or \
            libc.pread(lfd, addr + OFF, 4, 0) != 4:
        return False
    stored.append(cur.hObjectNew)
    return True

report(step="ready")
sys.stdin.readline()
rc = raced_alloc(p, store, match=lambda cur: cur.hClass == p.hClass)
report(rc=rc, status=p.status, hroot=p.hRoot, h=p.hObjectNew, stored=stored)
sys.stdin.readline()
"""


@pytest.mark.parametrize("hroot", [0, 0xc1d0beef], ids=["rm", "caller"])
def test_a_client_handle_rewritten_on_xpu_s_page_hides_no_client(
        nodedir, reload_stub, hroot):
    """RM takes a new client's handle from hRoot -- its own choice when the
    caller leaves it 0 -- and writes it into hObjectNew on xpu's page,
    which the driver's copy-back makes writable for the whole process (the
    driver waits 300 ms after it).  A thread stored there the handle of a
    client the slice already knows.  Before, xpu read that as the new
    client's: the new client (and every object made in it) went unrecorded
    -- rm_handles did not grow -- and the caller's struct named the old
    client.  [rm] Since session 53 (class 42) xpu names the client itself
    in hRoot, from RM's range, and records and returns that: the caller's
    struct reads as RM leaves it (hRoot 0, the new handle in hObjectNew).
    [caller] With the handle the caller's, xpu still took it from
    hObjectNew until session 57 (class 49): a stored handle of another
    tenant's client would have passed as one the caller's file made (class
    47).  Now it is hRoot's, which xpu checked unchanged."""
    code = RACE_CLIENT_HANDLE.replace(
        "p = abi.NVOS21_PARAMETERS(hClass=abi.NV01_ROOT_CLIENT,",
        f"p = abi.NVOS21_PARAMETERS(hRoot={hroot}, "
        "hClass=abi.NV01_ROOT_CLIENT,")
    assert code != RACE_CLIENT_HANDLE
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        child = nvtest.spawn_child(in_slice(code, sl))
        child.report()
        handles0 = sl.get().rm_handles
        r = let_go_on(child)
        # the premise: the store landed over RM's write-back
        assert len(r["stored"]) == 1, r
        assert sl.get().rm_handles == handles0 + 1, sl.get()
        assert (r["rc"], r["status"], r["hroot"]) == (0, abi.NV_OK, hroot), r
        assert r["h"] == r["stored"][0], r
        if hroot:
            assert r["h"] == hroot, hex(r["h"])
        else:
            assert r["h"] >> 20 == 0xC1D, hex(r["h"])   # RM's range for clients
        assert let_go(child) == 0



# A client's handle is never the caller's to name in hObjectNew: RM takes it
# from hRoot (0: its own choice) and writes it there whatever it held
# (serverAllocClient).  xpu checks on its page only the handles RM never
# changes, so it must not take that write for a thread's rewrite.
CLIENT_HANDLES = """
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
got = []
for hroot, hnew in ((0, 0), (0, 0x5c00beef), (0xc1d0beef, 0x5c00beef)):
    p = ctl.rm_alloc(hroot, 0, abi.NV01_ROOT_CLIENT, hnew=hnew)
    rm = object.__new__(client.RmClient)
    rm.ctl, rm.nvos64, rm.handle, rm.parents = ctl, False, p.hObjectNew, {}
    dev = rm.device(0, gpu_file=gpu)      # the client RM named works
    m = dev.alloc_vidmem(1 << 20)
    rm.free(m.handle)
    dev.close()
    rm.close()
    got.append([hroot, hnew, p.hObjectNew])
report(got=got)
"""


def test_a_client_handle_rm_writes_back_is_no_rewrite(admin, nodedir):
    """Clients made through a slice's control file with hObjectNew set to
    anything: RM writes the client's handle there (one of its own for
    hRoot 0, else hRoot), and the caller -- honest, if odd -- lives and
    uses them.  With the handles RM never changes checked on xpu's page
    (session 17), xpu took RM's write for a thread's rewrite and killed the
    caller (the fuzzer, on 5.10 at 535)."""
    sl = Slice(admin, nodedir, name="clients")
    try:
        got = nvtest.run_child(in_slice(CLIENT_HANDLES, sl))["got"]
        assert got[2] == [0xc1d0beef, 0x5c00beef, 0xc1d0beef]
        for hroot, hnew, h in got[:2]:
            assert h not in (0, hnew) and h >> 20 == 0xc1d, got
        assert sl.get().killed == 0
        assert sl.used() == 0
    finally:
        sl.destroy()


# --- class 5: a stalled tenant


# Two pages at BASE, the second one userfaultfd's (UFFD): a fault there
# waits until UFFD is closed.
UFFD_PAGE = """
import ctypes, mmap, select, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
PAGE = mmap.PAGESIZE
SYS_userfaultfd = 323
UFFDIO_API, UFFDIO_REGISTER = 0xc018aa3f, 0xc020aa00
uffd = libc.syscall(SYS_userfaultfd, os.O_CLOEXEC | os.O_NONBLOCK)
assert uffd >= 0, ctypes.get_errno()
api = (ctypes.c_uint64 * 3)(0xAA, 0, 0)
assert libc.ioctl(uffd, UFFDIO_API, ctypes.addressof(api)) == 0
base = libc.mmap(None, 2 * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                 mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
reg = (ctypes.c_uint64 * 4)(base + PAGE, PAGE, 1, 0)   # MODE_MISSING
assert libc.ioctl(uffd, UFFDIO_REGISTER, ctypes.addressof(reg)) == 0, ctypes.get_errno()
"""

STALL = UFFD_PAGE + """
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
# A context share: xpu.ko reads no params of this class, and holds the
# slice's mem_lock across the driver's call, in which RM copies them from
# the caller's memory (memory's, a device's, a channel's params xpu.ko
# copies itself, before it takes the lock, so a stall there holds nothing
# of xpu's; system memory's too since session 31).
hvas, _ = dev.vaspace()
tsg = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
               abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                   engineType=abi.NV2080_ENGINE_TYPE_GR0))
cp = abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas)
cls = type(cp)
# The head of the struct (hVASpace) lies on the first page; the rest (flags
# 0, SUBCONTEXT_SYNC, when the stalled page comes back zeroed), which the
# driver copies whole, on the stalled one.
head = 4
at = base + PAGE - head
ctypes.memmove(at, ctypes.addressof(cp), head)
p = abi.NVOS21_PARAMETERS()
p.hRoot, p.hObjectParent, p.hObjectNew = rm.handle, tsg, 0x5c00beef
p.hClass = abi.FERMI_CONTEXT_SHARE_A
p.pAllocParms = at; p.paramsSize = ctypes.sizeof(cls)
done = []
def alloc():
    done.append(client.ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_ALLOC,
                                                      ctypes.sizeof(p)), p))
t = threading.Thread(target=alloc); t.start()
select.select([uffd], [], [])           # the driver's copy has faulted
report(stalled=True)
sys.stdin.readline()
os.close(uffd)                          # the stalled copy goes on
t.join()
report(rc=done[0], status=p.status)
if p.status == abi.NV_OK:
    ctl.rm_free(rm.handle, tsg, p.hObjectNew)
"""

OPEN_OTHER = """
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
m = dev.alloc_vidmem(1 << 20)
rm.free(m.handle)
dev.close(); rm.close(); gpu.close(); ctl.close()
report(ok=True)
"""

ADMIN = """
from xpu import ctl as xpu_ctl
with xpu_ctl.Ctl() as a:
    a.slice_get(SLICE_A)
    a.slice_get(SLICE_B)
    a.slice_set(SLICE_B, memory_limit=B_LIMIT)
    # That the stall holds A's mem_lock, which a lower limit of A's waits
    # for (at most 1 s, class 15): else this test shows nothing.
    try:
        a.slice_set(SLICE_A, memory_limit=A_LOWER)
        held = False
    except xpu_ctl.Busy:
        held = True
report(ok=held)
"""

UNSLICED = """
ctl = client.Ctl(); rm = client.RmClient(ctl); dev = rm.device(0)
dev.close(); rm.close(); ctl.close()
report(ok=True)
"""


def have_userfaultfd():
    """Whether this kernel has userfaultfd(2) (the debug kernel's minimal
    configuration lacks it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(323, os.O_CLOEXEC | os.O_NONBLOCK)
    if fd >= 0:
        os.close(fd)
        return True
    return ctypes.get_errno() != errno.ENOSYS


def test_a_stalled_tenant_blocks_no_other_slice(admin, nodedir):
    """A tenant of slice A stalls the driver's copy of its allocation
    parameters (userfaultfd) while xpu.ko holds A's mem_lock across the
    call.  Meanwhile a new process opens slice B and allocates, an unsliced
    process opens the GPU, and the admin reads both slices and changes B:
    each finishes in a few seconds.  A lower limit for A is refused as busy
    (class 15), which shows that the stall does hold A's lock.  Released,
    the stalled call completes and nothing leaks."""
    if not have_userfaultfd():
        pytest.skip("this kernel has no userfaultfd(2) to stall a page with")
    a = Slice(admin, nodedir, name="stalled")
    b = Slice(admin, nodedir, name="other")
    try:
        _stall_against_the_others(a, b)
    finally:
        # the children have exited (or the failure was before them): the
        # slices go whatever failed, so that a failure here is not the next
        # test's too (their names are reused)
        a.destroy()
        b.destroy()


def _stall_against_the_others(a, b):
    heap0 = nvtest.heap_used(0)
    stalled = start_child(STALL.replace("CTL", repr(a.ctl_node))
                          .replace("GPU", repr(a.gpu_node)))
    others = []
    try:
        line = stalled.stdout.readline()
        assert '"stalled": true' in line, (line, stalled.stderr.read())
        others = [start_child(OPEN_OTHER.replace("CTL", repr(b.ctl_node))
                              .replace("GPU", repr(b.gpu_node))),
                  start_child(UNSLICED),
                  start_child(ADMIN.replace("B_LIMIT", str(2 * LIMIT))
                              .replace("A_LOWER", str(LIMIT // 2))
                              .replace("SLICE_A", str(a.id))
                              .replace("SLICE_B", str(b.id)))]
        # A child blocked by the stall stays blocked while the stall holds,
        # which is until this wait ends: the deadline only bounds how long a
        # failure takes.  Three Python processes starting at once on the
        # debug kernel took over 20 s on a slow hour (session 40), so it is
        # 90 s, and a child that has not answered is shown where it sleeps.
        deadline = time.monotonic() + 90
        for p in others:
            ready, _, _ = select.select([p.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            assert ready, ("blocked by another slice's stalled tenant",
                           where_it_sleeps(p.pid))
            assert '"ok": true' in p.stdout.readline(), p.stderr.read()
    finally:
        # Release the stall whatever happened, so that nothing stays stuck.
        if stalled.poll() is None:
            stalled.stdin.write("\n")
            stalled.stdin.flush()
        out, err = stalled.communicate(timeout=60)
        for p in others:
            p.communicate(timeout=60)
    assert stalled.returncode == 0, err
    assert '"status": 0' in out, out
    assert b.get().memory_limit == 2 * LIMIT
    assert a.get().memory_limit == LIMIT
    assert a.used() == 0 and b.used() == 0
    assert nvtest.heap_used(0) == heap0


def where_it_sleeps(pid):
    """A process's state and kernel stack, as /proc shows them to root."""
    out = []
    for name in ("stat", "wchan", "stack"):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                out.append(f.read().strip())
        except OSError as e:
            out.append(f"{name}: {e}")
    return out


# Fifteen threads of a tenant's hold every page of a call of its process
# (RM copies their controls' params from a page userfaultfd keeps); a
# sixteenth waits for one.  Its voluntary context switches, before and
# after another process's calls.
PARKED = UFFD_PAGE + """
import time
ctl = client.Ctl(CTL); rm = client.RmClient(ctl)
UNKNOWN = 0x5c5c    # no one's command: RM copies its params in, then refuses

def control(params):
    p = abi.NVOS54_PARAMETERS(hClient=rm.handle, hObject=rm.handle,
                              cmd=UNKNOWN, params=params, paramsSize=16)
    return client.ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_CONTROL,
                                                ctypes.sizeof(p)), p)

held = [threading.Thread(target=control, args=(base + PAGE,))
        for _ in range(15)]
for t in held:
    t.start()
faults = 0                  # one message a thread whose copy faulted
while faults < 15:
    select.select([uffd], [], [])
    faults += len(os.read(uffd, 32 * 15)) // 32
tid = []
def parked():
    tid.append(threading.get_native_id())
    control(base)           # its params are there: it waits for a page
t = threading.Thread(target=parked); t.start()

def task(field):
    with open(f"/proc/self/task/{tid[0]}/{field}") as f:
        return f.read()
def switches():
    return next(int(v.split()[1]) for v in task("status").splitlines()
                if v.startswith("voluntary_ctxt_switches"))
# where it sleeps: wchan, which reads 0 on stable kernels that disabled it
# (5.10), and the kernel stack (root's)
deadline = time.monotonic() + 60
while not (tid and "callpage" in task("wchan") + task("stack")):
    assert time.monotonic() < deadline, "the sixteenth call never waited"
report(switches=switches(), wchan=task("wchan"))
sys.stdin.readline()
report(switches=switches())
os.close(uffd)              # the stalled copies go on
for t in held + [t]:
    t.join()
"""


def test_calls_waiting_for_a_page_are_woken_by_their_process_only(
        admin, nodedir):
    """The pages of calls are a process's, 15 slots (callpage.c); a call
    that finds them all held waits for one.  Until session 56 (found by a
    review of callpage.c) those waits shared one queue for the host, woken
    at the end of every call anywhere: a tenant parked threads behind its
    own stalled calls, and every other tenant's call paid their wake-ups.
    Now a waiter is woken by its own address space's pages only: 200
    controls of another slice's process leave a parked thread asleep.
    Without that its voluntary context switches grew by about one a call."""
    if not have_userfaultfd():
        pytest.skip("this kernel has no userfaultfd(2) to stall a page with")
    att = Slice(admin, nodedir, name="parker")
    vic = Slice(admin, nodedir, name="caller")
    child = nvtest.spawn_child(in_slice(PARKED, att))
    try:
        before = child.report()
        with client.Ctl(vic.ctl_node) as ctl, client.RmClient(ctl) as rm:
            for _ in range(200):
                p = abi.NVOS54_PARAMETERS(hClient=rm.handle,
                                          hObject=rm.handle, cmd=0x5c5c)
                assert client.ioctl_raw(ctl.fd, abi.nv_ioctl(
                    abi.NV_ESC_RM_CONTROL, ctypes.sizeof(p)), p) == 0
                assert p.status != abi.NV_OK
        after = let_go_on(child)
        assert after["switches"] - before["switches"] < 20, (before, after)
        assert child.finish() == 0
    finally:
        att.destroy()
        vic.destroy()


# Behind a call that holds the slice's mem_lock (STALL's), eight threads
# each make a device in a client of their own (made before the stall: a
# client's allocation takes the lock too); once each is refused or waits
# for the lock, the stall is let go.
STALL_DEVICES = STALL.replace(
    "t = threading.Thread(target=alloc); t.start()",
    "clients = [client.RmClient(ctl) for _ in range(8)]\n"
    "t = threading.Thread(target=alloc); t.start()").replace(
    """report(stalled=True)
sys.stdin.readline()
""", """import time
got = [None] * 8
def device(i):
    try:
        clients[i].device(0, gpu_file=gpu)
        got[i] = 0
    except client.NvStatusError as e:
        got[i] = e.status
ds = [threading.Thread(target=device, args=(i,)) for i in range(8)]
for d in ds:
    d.start()
def waits(d):
    # in xpu.ko: by wchan, or the stack where wchan reads 0 (5.10); a
    # thread refused may end between is_alive() and the read: its file
    # gone, or its read ESRCH (the task gone under an open file)
    where = ""
    for field in ("wchan", "stack"):
        try:
            with open(f"/proc/self/task/{d.native_id}/{field}") as f:
                where += f.read()
        except (FileNotFoundError, ProcessLookupError):
            return not d.is_alive()
    return "xpu" in where
deadline = time.monotonic() + 60
while not all(not d.is_alive() or waits(d) for d in ds):
    assert time.monotonic() < deadline, "a device call neither refused nor waiting"
report(waiting=sum(d.is_alive() for d in ds))
""") + """
for d in ds:
    d.join()
report(got=got)
"""


def test_bounds_on_records_hold_against_calls_queued_behind_a_stall(
        admin, nodedir):
    """max_records bounds each kind of record a slice holds (devices
    here).  It was checked before a call took the slice's mem_lock and
    reserved nothing, so threads queued behind a call holding the lock
    (stalled on a page userfaultfd keeps, class 5) each passed the check
    and all were made (found by a review of sched.c in session 56): with a
    bound of 4 and one device held, eight more.  Now an admitted call
    holds its place until it is recorded or fails: three are made, five
    refused at once."""
    if not have_userfaultfd():
        pytest.skip("this kernel has no userfaultfd(2) to stall a page with")
    path = "/sys/module/xpu/parameters/max_records"
    with open(path) as f:
        bound0 = f.read().strip()
    a = Slice(admin, nodedir, name="stalled")
    try:
        with open(path, "w") as f:
            f.write("4")
        child = nvtest.spawn_child(in_slice(STALL_DEVICES, a))
        r = child.report()
        assert r["waiting"] == 3, r     # with the stall's own device, 4
        assert child.report()["status"] == abi.NV_OK   # the stalled call
        got = child.report()["got"]
        assert sorted(got) == [0] * 3 + [
            abi.NV_ERR_INSUFFICIENT_RESOURCES] * 5, got
        assert a.get().devices == 4
        assert child.finish() == 0
    finally:
        with open(path, "w") as f:
            f.write(bound0)
        a.destroy()



# A second client of the tenant's holds a device and a TSG, P, and the slice
# is filled to its limit; behind a call that holds the slice's mem_lock
# (STALL's) queue, in this order: the device's free (which takes P with it,
# and gives back P's charge), a device made under P's handle, system memory
# U on that device, and a channel under P using U -- its parent a TSG when
# it was looked up before the lock, a device by the time RM makes it.
STALL_PARENT = STALL.replace(
    "t = threading.Thread(target=alloc); t.start()",
    """from xpu import ctl as xpu_ctl
rm2 = client.RmClient(ctl); d2 = rm2.device(0, gpu_file=gpu)
P = rm2.alloc(d2.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
              abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                  engineType=abi.NV2080_ENGINE_TYPE_GR0))
U = 0x5c00f00d
# the slice filled to its limit: video memory, then channels (4 KiB each)
t3 = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
              abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                  engineType=abi.NV2080_ENGINE_TYPE_GR0))
def chan_params(userd):
    c = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
    c.hObjectBuffer = c.hUserdMemory[0] = userd
    c.gpFifoEntries = 64
    c.userdOffset[0] = 4096
    c.engineType = abi.NV2080_ENGINE_TYPE_GR0
    return c
for chunk in (2 << 20, 64 << 10):
    while True:
        try:
            dev.alloc_vidmem(chunk)
        except client.NvStatusError as e:
            assert e.status == abi.NV_ERR_NO_MEMORY, e
            break
while True:
    c = rm.alloc_raw(t3, abi.HOPPER_CHANNEL_GPFIFO_A,
                     chan_params(dev.alloc_sysmem(2 * 4096).handle))
    if c.status != abi.NV_OK:
        assert c.status == abi.NV_ERR_NO_MEMORY, c.status
        break
with xpu_ctl.Ctl() as a:
    info = a.slice_get(@SLICE@)
room = info.memory_limit - info.memory_used
t = threading.Thread(target=alloc); t.start()""").replace(
    """report(stalled=True)
sys.stdin.readline()
""", """import time
got = {}
def b1():
    got["free"] = ctl.rm_free(rm2.handle, rm2.handle, d2.hdevice,
                              check=False).status
def b2():
    got["device"] = ctl.rm_alloc(
        rm2.handle, rm2.handle, abi.NV01_DEVICE_0,
        abi.NV0080_ALLOC_PARAMETERS(
            deviceId=0,
            vaMode=abi.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES),
        hnew=P,
        check=False).status
def b3():
    got["userd"] = ctl.rm_alloc(
        rm2.handle, P, abi.NV01_MEMORY_SYSTEM,
        dev.memory_params(2 * 4096, location=abi.NVOS32_ATTR_LOCATION_PCI),
        hnew=U, check=False).status
def chan():
    got["channel"] = ctl.rm_alloc(rm2.handle, P, abi.HOPPER_CHANNEL_GPFIFO_A,
                                  chan_params(U), hnew=0x5c00c4a1,
                                  check=False).status
def asleep_in_xpu(d):
    # its state, and where: wchan, or the stack where wchan reads 0 (5.10);
    # neither names the mutex's own functions (__sched)
    task = f"/proc/self/task/{d.native_id}/"
    with open(task + "stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    where = ""
    for field in ("wchan", "stack"):
        with open(task + field) as f:
            where += f.read()
    return state in "SD" and "[xpu]" in where
ts = []
try:
    for fn in (b1, b2, b3, chan):
        d = threading.Thread(target=fn); d.start(); ts.append(d)
        deadline = time.monotonic() + 20
        while not asleep_in_xpu(d):
            assert d.is_alive(), f"{fn.__name__} did not wait: {got}"
            assert time.monotonic() < deadline, f"{fn.__name__} never waited"
except BaseException:
    os.close(uffd)          # the threads go on, and the child ends
    raise
report(room=room)
""") + """
for d in ts:
    d.join()
with xpu_ctl.Ctl() as a:
    info = a.slice_get(@SLICE@)
report(got=got, used=info.memory_used, peak=info.memory_peak,
       limit=info.memory_limit)
"""


def test_a_channel_s_parent_is_looked_up_where_it_cannot_change(
        admin, nodedir):
    """A channel in a TSG is charged its instance block (4 KiB); under a
    device, also the TSG RM makes for it (2 MiB).  xpu chose the charge by
    the parent's record before taking the slice's mem_lock, which the calls
    that free and make handles hold, so a channel that waited there behind
    the tenant's own calls -- the TSG's device freed, a device made under
    the TSG's handle -- was charged as one in a TSG and made under a device:
    past the limit of a full slice by 4 KiB (the freed TSG's 2 MiB came
    back; by 2 MiB where that charge stays, a TSG UVM retains), found by a
    review of sched.c in session 56.  The stall holds the lock (class 5).
    Now the parent is looked up under the lock: the channel is refused
    NV_ERR_NO_MEMORY, and the slice stays within its limit."""
    if not have_userfaultfd():
        pytest.skip("this kernel has no userfaultfd(2) to stall a page with")
    a = Slice(admin, nodedir, name="parent")
    try:
        child = nvtest.spawn_child(in_slice(STALL_PARENT, a,
                                            **{"@SLICE@": str(a.id)}))
        room = child.report()["room"]
        # the premise: the slice is full
        assert room < 4096, room
        assert child.report()["status"] == abi.NV_OK   # the stalled call
        r = child.report()
        got = r["got"]
        # the calls ran in their order: the device went, and came back as P
        assert got["free"] == got["device"] == got["userd"] == abi.NV_OK, got
        assert got["channel"] == abi.NV_ERR_NO_MEMORY, r
        assert r["peak"] <= r["limit"], r
        assert child.finish() == 0
    finally:
        a.destroy()


# --- class 15: a stalled tenant holds the admin's daemon


def test_a_stalled_tenant_holds_neither_the_admin_nor_xpud(tmp_path, nodedir):
    """A tenant of a slice xpud made stalls the driver's copy of its
    allocation parameters, with the slice's mem_lock held.  The admin lowers
    the slice's memory limit through xpud: xpu.ko waits for the lock at most
    1 s, so xpud answers `busy` in seconds and serves on (a list, a raise of
    the same slice, which waits for nothing).  Before, xpud's request slept
    on the lock with xpud's own lock held, and every request of every
    slice's admin waited with it, until the tenant let go.  Released, the
    stalled call completes and the lower limit is taken."""
    if not have_userfaultfd():
        pytest.skip("this kernel has no userfaultfd(2) to stall a page with")
    x = xpudtest.Xpud(tmp_path, Path(nodedir)).start()
    try:
        s = xpudtest.create(x, "stalled")
        stalled = start_child(STALL.replace("CTL", repr(s["ctl_node"]))
                              .replace("GPU", repr(s["gpu_node"])))
        try:
            line = stalled.stdout.readline()
            assert '"stalled": true' in line, (line, stalled.stderr.read())
            # Bounded: without the fix this request never returns.
            r = x.xpuctl("set", "stalled", "--memory", str(LIMIT // 2),
                         timeout=30)
            assert r.returncode == 1, (r.stdout, r.stderr)
            assert "has not ended in 1 s" in r.stderr, r.stderr
            # xpud serves on: the rest as requests of this process (each
            # xpuctl is a Python process, seconds under emulation).
            assert [s["name"] for s in x.call("list")] == ["stalled"]
            x.call("set", name="stalled", memory_limit_bytes=2 * LIMIT)
            assert xpudtest.kernel_slices()["stalled"].memory_limit == \
                2 * LIMIT
        finally:
            if stalled.poll() is None:
                stalled.stdin.write("\n")
                stalled.stdin.flush()
            out, err = stalled.communicate(timeout=60)
        assert stalled.returncode == 0, err
        assert '"status": 0' in out, out
        x.call("set", name="stalled", memory_limit_bytes=LIMIT // 2)
        assert xpudtest.kernel_slices()["stalled"].memory_limit == LIMIT // 2
        x.call("destroy", name="stalled")
        assert "stalled" not in xpudtest.kernel_slices()
    finally:
        x.cleanup()
        xpudtest.destroy_all()


# --- class 16: page tables a virtual allocation pins


VAS_PINNED = 5 * 4096    # RM's root and GSP's four directories, the most


def test_the_page_tables_a_virtual_allocation_pins_are_charged_to_its_slice(
        admin, nodedir):
    """A virtual allocation neither lazy nor externally managed pins the
    page tables of its whole range (RM's video memory, charged to no
    process): 1 GiB of VA about 2 MiB of tables.  Before, a tenant of a
    64 MiB slice pinned 64 ranges of 1 GiB, 130 MiB of the GPU, with its
    slice charged nothing.  Now xpu.ko charges each such allocation RM's
    worst case before RM makes it, and gives it back when it goes: the
    slice is refused once the tables would pass its limit, a lazy range is
    charged nothing, and RM's deprecated VID_HEAP path refuses a pinning
    one (NV_ERR_NOT_SUPPORTED)."""
    sl = Slice(admin, nodedir, name="pins")
    ctl, gpu, rm, dev = sl.open()
    try:
        hvas, _ = dev.vaspace()
        free0 = nvtest.heap_free(0)
        made, refused = [], 0
        for _ in range(64):
            try:
                made.append(dev.alloc_virtual(1 << 30, hvaspace=hvas)[0])
            except client.NvStatusError as e:
                assert e.status == abi.NV_ERR_NO_MEMORY, e
                refused += 1
                break
        pinned = free0 - nvtest.heap_free(0)
        assert refused == 1 and 16 <= len(made) < 32, (len(made), pinned)
        assert pinned <= LIMIT
        assert pinned <= sl.used() <= LIMIT, (pinned, sl.used())
        assert sl.get().denied_allocs == 1
        # a lazy range pins nothing and is charged nothing
        used = sl.used()
        lazy, _ = dev.alloc_virtual(64 << 30, hvaspace=hvas, lazy=True)
        assert sl.used() == used and nvtest.heap_free(0) == free0 - pinned
        rm.free(lazy)
        p = dev.heap_alloc_raw(1 << 30, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL)
        assert p.status == abi.NV_ERR_NOT_SUPPORTED, hex(p.status)
        # freed: the tables go, and so does the charge
        for h in made:
            rm.free(h)
        assert nvtest.heap_free(0) == free0
        assert sl.used() == VAS_PINNED      # the VA space's own directories
        # and with their VA space (a dependant of it)
        made = [dev.alloc_virtual(1 << 30, hvaspace=hvas)[0]
                for _ in range(4)]
        assert sl.used() > VAS_PINNED
        rm.free(hvas)
        assert nvtest.heap_free(0) == free0 + nvtest.PAGE_TABLE
        assert sl.used() == 0
    finally:
        for o in (dev, rm, gpu, ctl):
            o.close()
        sl.destroy()


def test_a_duplicate_of_a_pinning_range_is_charged_while_it_keeps_the_tables(
        admin, nodedir):
    """Class 20: RM duplicates a virtual allocation (stdmemCanCopy), and a
    duplicate of one that pinned its page tables takes a reference on the
    range (vaspaceIncAllocRefCnt): the tables stay pinned until the last
    handle goes.  xpu.ko records the duplicate, charged what its source's
    record is, so the slice pays for the tables as long as any handle
    keeps them (twice while both live: never less than RM holds).  Before,
    the source's free gave the charge back while the duplicate still held
    the tables: the slice read 0 with 2 MiB of the GPU pinned for it."""
    sl = Slice(admin, nodedir, name="dupvirt")
    ctl, gpu, rm, dev = sl.open()
    try:
        free0 = nvtest.heap_free(0)
        h, _ = dev.alloc_virtual(1 << 30)   # in the device's default VA space
        # the range's tables, and the default VA space's root (class 19)
        pinned = free0 - nvtest.heap_free(0)
        charged = sl.used()
        assert charged >= pinned - nvtest.PAGE_TABLE > 0, (pinned, charged)
        d = rm.dup(dev.hdevice, h)
        assert sl.used() == 2 * charged, (charged, sl.used())
        rm.free(h)
        # premise: RM keeps the range's tables for the duplicate
        assert free0 - nvtest.heap_free(0) == pinned
        assert sl.used() == charged, (charged, sl.used())
        # mapped into as the pinning range it is (class 18)
        mem = dev.alloc_vidmem(1 << 21)
        dev.map_dma(d, mem.handle, 1 << 21)
        rm.free(mem.handle)
        rm.free(d)
        assert sl.used() == 0, sl.used()
        assert nvtest.heap_free(0) == free0 - nvtest.PAGE_TABLE
    finally:
        for o in (dev, rm, gpu, ctl):
            o.close()
        sl.destroy()


SHARE_OWNER = nvtest.RAW_PRELUDE + """
hvas, _ = dev.vaspace()
rm.share(hvas, abi.RS_SHARE_TYPE_ALL)
report(client=rm.handle, vas=hvas)
sys.stdin.readline()
rm.free(hvas)
report(freed=True)
sys.stdin.readline()
"""

SHARE_TAKER = nvtest.RAW_PRELUDE + """
src = json.loads(sys.stdin.readline())
p = ctl.rm_dup(rm.handle, dev.hdevice, src["client"], src["vas"], check=False)
rm.parents[p.hObject] = dev.hdevice
report(status=p.status)
sys.stdin.readline()
if p.status == abi.NV_OK:
    rm.free(p.hObject)
report(freed=True)
sys.stdin.readline()
"""


def test_a_va_space_shared_with_another_slice_is_charged_where_it_is_kept(
        admin, nodedir):
    """Class 20 across slices: a client may share an object with any other
    (RM_SHARE, RS_SHARE_TYPE_ALL), so a tenant of another slice
    duplicates it, and a VA space's duplicate keeps its directories after
    the source goes.  xpu.ko charges the duplicate what the source's record
    is, whichever slice's it is.  Before (session 28's first fix looked in
    the duplicating slice's records only), the duplicate was charged
    nothing: two slices could pass directories from one to the other, each
    freeing its own, without bound and without charge."""
    a = Slice(admin, nodedir, name="owner")
    b = Slice(admin, nodedir, name="taker")
    try:
        owner = nvtest.spawn_child(SHARE_OWNER.replace("CTL", repr(a.ctl_node))
                                   .replace("GPU", repr(a.gpu_node)))
        src = owner.report()
        charged = a.used()
        assert charged > 0
        taker = nvtest.spawn_child(SHARE_TAKER.replace("CTL", repr(b.ctl_node))
                                   .replace("GPU", repr(b.gpu_node)))
        taker.p.stdin.write(json.dumps(src) + "\n")
        taker.p.stdin.flush()
        assert taker.report()["status"] == abi.NV_OK     # premise: shared
        assert b.used() == charged, (charged, b.used())
        held = nvtest.heap_free(0)
        assert let_go_on(owner) == {"freed": True}
        # premise: the duplicate keeps the directories
        assert nvtest.heap_free(0) == held
        assert (a.used(), b.used()) == (0, charged)
        assert let_go_on(taker) == {"freed": True}
        assert b.used() == 0
        assert owner.finish() == 0 and taker.finish() == 0
    finally:
        a.destroy()
        b.destroy()


SHARE_MEM_OWNER = nvtest.RAW_PRELUDE + """
m = dev.alloc_vidmem(32 << 20)
rm.share(m.handle, abi.RS_SHARE_TYPE_ALL)
report(client=rm.handle, mem=m.handle)
sys.stdin.readline()
rm.free(m.handle)
report(freed=True)
sys.stdin.readline()
"""


def _share_mem(a, b, taker_code):
    """SHARE_MEM_OWNER's tenant in slice A, and one running TAKER_CODE in
    slice B, which is given the owner's client and memory: (owner, taker)."""
    owner = nvtest.spawn_child(SHARE_MEM_OWNER.replace("CTL", repr(a.ctl_node))
                               .replace("GPU", repr(a.gpu_node)))
    src = owner.report()
    taker = nvtest.spawn_child(taker_code.replace("CTL", repr(b.ctl_node))
                               .replace("GPU", repr(b.gpu_node)))
    taker.p.stdin.write(json.dumps(src) + "\n")
    taker.p.stdin.flush()
    return owner, taker


@pytest.mark.parametrize("first", ["owner", "taker"])
def test_memory_shared_across_slices_goes_when_both_free_it(
        admin, nodedir, first):
    """Video memory one slice's tenant shares (RM_SHARE) and another's
    duplicates, then both free, whichever first.  The ledger keeps a
    duplicate for the first to free (the other's handle still holds the
    memory), charged to that slice; the second free finds that duplicate
    holding the memory and keeps no second one, so once both are freed the
    memory is the ledger's alone and goes.  Before, each slice's ledger kept
    a duplicate, each kept the other's from ever being alone: 32 MiB held
    and charged to both slices until they were destroyed."""
    a = Slice(admin, nodedir, name="owner")
    b = Slice(admin, nodedir, name="taker")
    heap0 = nvtest.heap_used(0)
    try:
        owner, taker = _share_mem(
            a, b, SHARE_TAKER.replace('src["vas"]', 'src["mem"]'))
        assert taker.report()["status"] == abi.NV_OK     # premise: shared
        one, two = (owner, taker) if first == "owner" else (taker, owner)
        assert let_go_on(one) == {"freed": True}
        # premise: the other's handle keeps it, and someone pays
        assert nvtest.heap_used(0) - heap0 == 32 << 20
        assert a.used() + b.used() >= 32 << 20, (a.used(), b.used())
        assert let_go_on(two) == {"freed": True}
        assert (a.used(), b.used()) == (0, 0)
        assert nvtest.heap_used(0) == heap0
        assert owner.finish() == 0 and taker.finish() == 0
    finally:
        a.destroy()
        b.destroy()


# The taker of SHARE_MEM_OWNER's memory keeps it through a dma-buf of its
# own duplicate (after RAW_PRELUDE), frees the duplicate, then allocates
# MORE twice: while the dma-buf is open and after its close.
SHARE_MEM_KEEPER = nvtest.RAW_PRELUDE + """
import os
src = json.loads(sys.stdin.readline())
p = ctl.rm_dup(rm.handle, dev.hdevice, src["client"], src["mem"], check=False)
rm.parents[p.hObject] = dev.hdevice
v = abi.parse_version(ctl.version)
rc, st, fd = gpu.export_dmabuf(v, rm.handle, [(p.hObject, 0, 32 << 20)])
report(status=p.status, export=[rc, st])
sys.stdin.readline()
rm.free(p.hObject)
report(freed=True)
sys.stdin.readline()
def alloc(n):
    try:
        m = dev.alloc_vidmem(n)
    except client.NvStatusError as e:
        return e.status
    rm.free(m.handle)
    return abi.NV_OK
kept = alloc(MORE)
os.close(fd)
report(kept=kept, closed=alloc(MORE))
sys.stdin.readline()
"""


def _kept_through_a_dmabuf(a, b):
    """SHARE_MEM_KEEPER's tenants: slice A's shares 32 MiB, slice B's
    duplicates it and makes a dma-buf of its duplicate (B's allocations
    of 32 MiB more come later), then A's frees its handle: B's handle and
    dma-buf keep the memory, A's ledger holds it.  (owner, keeper)."""
    owner, keeper = _share_mem(
        a, b, SHARE_MEM_KEEPER.replace("MORE", str(32 << 20)))
    # premise: shared, and the dma-buf made of B's duplicate
    assert keeper.report() == {"status": abi.NV_OK, "export": [0, abi.NV_OK]}
    assert let_go_on(owner) == {"freed": True}
    assert a.used() == 32 << 20, a.get()
    return owner, keeper


def _the_keeper_pays_until_its_close(b, keeper, heap0):
    """Slice B pays for the 32 MiB its tenant's dma-buf keeps: 32 MiB
    more is refused in its 48 until the dma-buf's close, then admitted;
    the memory goes with the close."""
    assert b.used() == 32 << 20, b.get()
    assert let_go_on(keeper) == {"kept": abi.NV_ERR_NO_MEMORY,
                                 "closed": abi.NV_OK}
    assert b.used() == 0
    assert nvtest.heap_used(0) == heap0
    assert keeper.finish() == 0


@pytest.mark.parametrize("first_gone", ["holder", "keeper"])
def test_memory_a_destroyed_slice_held_passes_to_the_slice_that_keeps_it(
        admin, nodedir, first_gone):
    """Class 21's one held duplicate a memory, when its slice goes first.
    A tenant of slice A shares 32 MiB (RM_SHARE); a tenant of slice B (48
    MiB) duplicates it and keeps it through a dma-buf of its duplicate (a
    kernel client's handle, in no process's figure: UVM's mapping would do
    the same); A frees its handle, and the ledger holds the memory for A; B
    frees its own, and keeps no second duplicate, since A's holds it.  Then
    A's tenant exits and A is destroyed, as a pod's slice is when the pod
    ends.  Before session 64 A's held duplicate went with A, and the memory
    B's dma-buf kept was charged to no slice: 32 MiB more admitted in B's
    48.  Now the held duplicate passes to B, which freed a handle of it:
    B pays for it until the dma-buf's close lets it go.  `[keeper]`: B goes
    first (its tenant's exit closes the dma-buf), and is no heir after: the
    claim it left on A's held duplicate goes with it, and the memory with
    A's next look."""
    a = Slice(admin, nodedir, name="holder", limit=256 << 20)
    b = Slice(admin, nodedir, name="keeper", limit=48 << 20)
    heap0 = nvtest.heap_used(0)
    a_alive = True
    try:
        owner, keeper = _kept_through_a_dmabuf(a, b)
        assert nvtest.heap_used(0) - heap0 == 32 << 20
        assert let_go_on(keeper) == {"freed": True}
        # premise: B kept no duplicate of its own; A pays
        assert (a.used(), b.used()) == (32 << 20, 0)
        if first_gone == "keeper":
            assert keeper.finish() == 0
            b.destroy()
            b = None
            # the dma-buf went with B's tenant: A's read lets the memory go
            assert a.used() == 0
            assert nvtest.heap_used(0) == heap0
            assert owner.finish() == 0
            a.destroy()
            a_alive = False
            assert nvtest.heap_used(0) == heap0
            return
        assert owner.finish() == 0
        a.destroy()
        a_alive = False
        # the dma-buf still keeps the memory, now charged to B
        assert nvtest.heap_used(0) - heap0 == 32 << 20
        _the_keeper_pays_until_its_close(b, keeper, heap0)
    finally:
        if a_alive:
            a.destroy()
        if b:
            b.destroy()


def _gpu0_orphaned():
    """GPU 0's memory_orphaned, as an admin's read of it says (the read
    lets go of what is alone by then)."""
    with xpu_ctl.Ctl() as c:
        return next(g for g in c.gpu_list() if g.minor == 0).memory_orphaned


def _gpu0_room(admin):
    """What of GPU 0's memory a new limit may take."""
    g = next(g for g in admin.gpu_list() if g.minor == 0)
    return g.memory_total - g.memory_sliced - g.memory_orphaned


# A tenant exports 32 MiB of its memory as a dma-buf, passes the fd out of
# its slice (SCM_RIGHTS to PATH) and frees its handle (after RAW_PRELUDE).
ORPHAN_MAKER = nvtest.RAW_PRELUDE + """
import os, socket
m = dev.alloc_vidmem(32 << 20)
v = abi.parse_version(ctl.version)
rc, st, fd = gpu.export_dmabuf(v, rm.handle, [(m.handle, 0, 32 << 20)])
s = socket.socket(socket.AF_UNIX)
s.connect(PATH)
socket.send_fds(s, [b"buf"], [fd])
s.close()
os.close(fd)
rm.free(m.handle)
report(export=[rc, st], freed=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("then", ["create", "raise"])
def test_memory_a_destroyed_slice_left_kept_outside_is_charged_to_the_gpu(
        admin, nodedir, then):
    """A keeper that never had a handle (session 64's open item).  A
    tenant of slice A exports 32 MiB as a dma-buf, passes the fd to a
    process outside every slice (this one) and frees its handle: the
    ledger holds the memory for A.  Then the tenant exits and A is
    destroyed.  Before, A's held duplicate went with A, and the fd kept
    32 MiB charged to no one, out of every slice's room.  Now it is the
    GPU's orphan: memory_orphaned says 32 MiB, and a new limit gets only
    what is neither sliced nor orphaned (a slice's creation or a raise of
    32 MiB more than that is refused) until the fd's close; then the
    creation's or the raise's own look lets it go, and it is made."""
    a = Slice(admin, nodedir, name="orphaner", limit=64 << 20)
    a_alive = True
    heap0 = nvtest.heap_used(0)
    path = os.path.join(nodedir, "orphan.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    buf = None
    try:
        child = nvtest.spawn_child(
            ORPHAN_MAKER.replace("CTL", repr(a.ctl_node))
            .replace("GPU", repr(a.gpu_node)).replace("PATH", repr(path)))
        conn, _ = srv.accept()
        _, fds, _, _ = socket.recv_fds(conn, 16, 1)
        conn.close()
        buf = fds[0]
        assert child.report() == {"export": [0, abi.NV_OK], "freed": True}
        # premise: the dma-buf keeps it, the ledger holds it for A
        assert nvtest.heap_used(0) - heap0 == 32 << 20
        assert a.used() == 32 << 20, a.get()
        assert child.finish() == 0
        assert _gpu0_orphaned() == 0
        room = _gpu0_room(admin)
        a.destroy()
        a_alive = False
        # the fd, outside every slice, still keeps it: the GPU pays
        assert nvtest.heap_used(0) - heap0 == 32 << 20
        assert _gpu0_orphaned() == 32 << 20
        # A's 64 MiB came back to be given, less what it left kept
        assert _gpu0_room(admin) == room + (32 << 20)
        with pytest.raises(xpu_ctl.CtlError) as e:
            admin.slice_create("toobig", 0, room + (64 << 20))
        assert e.value.errno == errno.ENOSPC
        grow = admin.slice_create("grow", 0, 1 << 20)
        try:
            with pytest.raises(xpu_ctl.CtlError) as e:
                admin.slice_set(grow.id, memory_limit=room + (64 << 20))
            assert e.value.errno == errno.ENOSPC
            os.close(buf)
            buf = None
            # the call's own look finds it alone, before any read
            if then == "create":
                admin.slice_destroy(grow.id)
                grow = admin.slice_create("fits", 0, room + (64 << 20))
            else:
                admin.slice_set(grow.id, memory_limit=room + (64 << 20))
            assert admin.slice_get(grow.id).memory_limit == room + (64 << 20)
        finally:
            admin.slice_destroy(grow.id)
        assert _gpu0_orphaned() == 0
        assert nvtest.heap_used(0) == heap0
    finally:
        srv.close()
        if buf is not None:
            os.close(buf)
        if a_alive:
            a.destroy()


def test_memory_a_destroyed_slice_left_to_the_gpu_passes_to_the_next_freer(
        admin, nodedir):
    """The GPU's orphan, when a slice's tenant kept a handle of the memory
    meanwhile.  A tenant of slice A shares 32 MiB; a tenant of slice B (48
    MiB) duplicates it and makes a dma-buf of its duplicate.  A frees its
    handle (held for A); A's tenant exits and A is destroyed while B has
    freed nothing, so B is no heir: the memory is the GPU's orphan.  Then B
    frees its handle, and its free finds the orphan holding the memory: B
    pays from then on, as it would had A's held duplicate never been (32
    MiB more refused in B's 48 while its dma-buf is open), and the GPU no
    more.  Without that, B would have been taken for an heir of a held
    duplicate with no slice, and charged nothing."""
    a = Slice(admin, nodedir, name="holder", limit=256 << 20)
    b = Slice(admin, nodedir, name="keeper", limit=48 << 20)
    heap0 = nvtest.heap_used(0)
    a_alive = True
    try:
        owner, keeper = _kept_through_a_dmabuf(a, b)
        assert owner.finish() == 0
        a.destroy()
        a_alive = False
        # B's handle and dma-buf keep it; no slice freed it but A
        assert nvtest.heap_used(0) - heap0 == 32 << 20
        assert _gpu0_orphaned() == 32 << 20
        assert let_go_on(keeper) == {"freed": True}
        assert _gpu0_orphaned() == 0
        _the_keeper_pays_until_its_close(b, keeper, heap0)
    finally:
        if a_alive:
            a.destroy()
        b.destroy()


def _asked_if_duplicates():
    """How often RM was asked whether two handles name one memory."""
    return stub.controls().get(abi.NV0000_CTRL_CMD_CLIENT_OBJECTS_ARE_DUPLICATES,
                               0)


def _hold(rm, dev, size):
    """Video memory freed while a duplicate of the caller's holds it: the
    ledger keeps it for the slice.  Returns the duplicate."""
    m = dev.alloc_vidmem(size)
    d = rm.dup(dev.hdevice, m.handle)
    rm.free(m.handle)
    return d


HOLD_ON_A_LINE = nvtest.RAW_PRELUDE + """
sys.stdin.readline()
m = dev.alloc_vidmem(SIZE)
d = rm.dup(dev.hdevice, m.handle)
rm.free(m.handle)
report(held=True)
sys.stdin.readline()
"""


def test_a_free_that_leaves_memory_held_asks_rm_of_its_own_memory_only(
        admin, nodedir):
    """The ledger keeps one held duplicate a memory (class 21): a free that
    leaves memory held looks for another slice's held duplicate of it, and
    a slice that holds any looks among its own on every free.  Before, both
    looks asked RM (CLIENT_OBJECTS_ARE_DUPLICATES) of every held duplicate of
    the size, under the one ledger lock every slice's frees take: a tenant
    holding thousands of one size slowed every such free of every slice (a
    review in session 56).  Now xpu.ko asks RM where each held duplicate's
    memory lies (GET_SURFACE_PHYS_ATTR, 550 on) when it is held, and asks
    whether two are duplicates only of those placed alike: here none.  A
    hoarder with 32 held: 64 questions for its own next free and 33 for the
    other slice's on the module before."""
    if abi.parse_version(client.driver_version())[0] < 550:
        pytest.skip("535 places no memory for a kernel client: every held "
                    "duplicate of the size is asked about (docs/security.md)")
    n, size = 32, 2 * MiB
    a = Slice(admin, nodedir, name="hoarder", limit=1 << 30)
    b = Slice(admin, nodedir, name="other", limit=1 << 30)
    opened = a.open()
    _, _, rm, dev = opened
    other = None
    try:
        # a process is in one slice: the other slice's tenant is a child
        other = nvtest.spawn_child(
            HOLD_ON_A_LINE.replace("CTL", repr(b.ctl_node))
            .replace("GPU", repr(b.gpu_node)).replace("SIZE", str(size)))
        for _ in range(n):
            _hold(rm, dev, size)
        # premise: each free left its memory held, charged to the hoarder
        assert a.used() >= n * size, a.used()
        asked = _asked_if_duplicates()
        _hold(rm, dev, size)
        own = _asked_if_duplicates() - asked
        asked = _asked_if_duplicates()
        other.p.stdin.write("\n")
        other.p.stdin.flush()
        assert other.report() == {"held": True}
        theirs = _asked_if_duplicates() - asked
        # premise: the other slice's free left its memory held too
        assert b.used() >= size, b.used()
        assert (own, theirs) == (0, 0), (own, theirs)
    finally:
        if other:
            other.finish()
        for o in reversed(opened):
            o.close()
        a.destroy()
        b.destroy()


def _asked_of_held():
    """How often RM was asked about the ledger's duplicates one by one:
    whether two name one memory, and where one lies."""
    got = stub.controls()
    return (got.get(abi.NV0000_CTRL_CMD_CLIENT_OBJECTS_ARE_DUPLICATES, 0) +
            got.get(abi.NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR, 0))


def test_a_free_that_leaves_nothing_held_asks_nothing_of_the_held(
        admin, nodedir):
    """A slice holding memory in the ledger (class 21) frees memory
    nothing else holds: RM is asked nothing about the held duplicates.
    Before session 60 every free of a slice that held any first looked
    among its own for one of the same memory, of RM: where the new
    duplicate's memory lies (550 on), or whether it named the same memory
    as each held one (before 550: 32 questions for a hoarder of 32, its
    every free).  The look after a free that leaves memory held covers the
    slice's own (the next test)."""
    n, size = 32, 2 * MiB
    a = Slice(admin, nodedir, name="hoarder", limit=1 << 30)
    opened = a.open()
    _, _, rm, dev = opened
    try:
        for _ in range(n):
            _hold(rm, dev, size)
        assert a.used() >= n * size, a.used()      # premise: held
        asked = _asked_of_held()
        m = dev.alloc_vidmem(size)
        rm.free(m.handle)
        assert _asked_of_held() - asked == 0
        assert a.used() >= n * size, a.used()      # still held
    finally:
        for o in reversed(opened):
            o.close()
        a.destroy()


def test_memory_the_slice_holds_already_is_held_once(admin, nodedir):
    """Memory a slice freed while its own duplicates still held it (held
    in the ledger, class 21), then those duplicates freed one by one: the
    ledger keeps one handle of it, so once the last goes the memory is the
    ledger's alone and goes at the next look (an admin's read).  Two
    handles of the ledger's would each keep the other from being alone:
    the memory would stay, charged, until the slice went."""
    size = 8 * MiB
    a = Slice(admin, nodedir, name="again", limit=1 << 30)
    opened = a.open()
    _, _, rm, dev = opened
    try:
        heap0 = nvtest.heap_used(0)
        m = dev.alloc_vidmem(size)
        d1 = rm.dup(dev.hdevice, m.handle)
        d2 = rm.dup(dev.hdevice, m.handle)
        rm.free(m.handle)
        assert a.used() >= size, a.used()          # premise: held
        rm.free(d1)
        assert nvtest.heap_used(0) - heap0 == size  # premise: still there
        rm.free(d2)
        a.used()        # an admin's read looks at what the slice holds
        assert nvtest.heap_used(0) == heap0
        assert a.used() < size, a.used()
    finally:
        for o in reversed(opened):
            o.close()
        a.destroy()


FREE_ON_A_LINE = nvtest.RAW_PRELUDE + """
report(ready=True)
sys.stdin.readline()
m = dev.alloc_vidmem(65536)
rm.free(m.handle)
report(freed=True)
sys.stdin.readline()
"""


def test_a_reading_of_the_ledger_walks_nothing_another_slice_holds(
        admin, nodedir):
    """Whether the ledger's duplicate holds its memory alone is read from
    RM's PID_INFO figures, and RM walks every memory object of every
    client of the process asked about.  Each slice has its own probe
    client, of a thread of its own: another slice's free walks none of the
    hoarder's held duplicates, and the hoarder's allocation past its limit,
    which asks about each of its own, walks each once.  Before session 61
    one client kept every slice's held duplicates and every reading walked
    them all: the other's free walked the hoarder's 128 at each reading,
    and the hoarder's allocation 2 * 128 * 128 (docs/security.md)."""
    n, piece = 128, 64 * 1024
    a = Slice(admin, nodedir, name="hoarder", limit=64 * MiB)
    b = Slice(admin, nodedir, name="other", limit=64 * MiB)
    opened = a.open()
    _, _, rm, dev = opened
    child = None
    try:
        for _ in range(n):
            _hold(rm, dev, piece)
        assert a.used() >= n * piece, a.used()      # premise: held
        child = nvtest.spawn_child(FREE_ON_A_LINE
                                   .replace("CTL", repr(b.ctl_node))
                                   .replace("GPU", repr(b.gpu_node)))
        assert child.report()["ready"]
        walked = stub.pid_info_walked()
        child.p.stdin.write("\n")
        child.p.stdin.flush()
        assert child.report()["freed"]
        other = stub.pid_info_walked() - walked
        # its own piece, and its members' figures: nothing of the hoarder's
        assert other < n // 4, other
        walked = stub.pid_info_walked()
        with pytest.raises(client.NvStatusError):
            dev.alloc_vidmem(128 * MiB)
        hoarder = stub.pid_info_walked() - walked
        # each held one once, and the members' figures a few times
        assert hoarder < 8 * n, hoarder
        assert a.used() >= n * piece, a.used()      # still held
    finally:
        if child:
            child.finish()
        for o in reversed(opened):
            o.close()
        a.destroy()
        b.destroy()


@pytest.mark.parametrize("how", ["close", "client_freed"])
@pytest.mark.parametrize("kept", ["nothing", "a_duplicate_each"])
def test_a_free_that_takes_many_allocations_walks_each_once(
        admin, nodedir, kept, how):
    """The close of a control file (or the free of a client or device) that
    takes N video-memory objects with it: the ledger's duplicate of each
    stands by in the slice's probe, and RM's readings say whether each holds
    its memory alone.  Each reading walks every handle the probe has, so
    asking about each with the others there walked N * N: before session
    62, 66046 to 66814 for 256, with nothing kept or with a duplicate of
    each kept by another client of the slice, the file closed or its
    client freed (RM_FREE).  Now one reading answers for
    all when all are alone; else each is asked about alone in the probe.
    Either way the slice is charged what it holds: nothing when nothing is
    kept, all of it while the other client's duplicates hold it, nothing
    once they go (the next allocation that needs the room asks RM)."""
    n, piece = 256, 64 * 1024
    sl = Slice(admin, nodedir, name="many", limit=32 * MiB)
    heap0 = nvtest.heap_used(0)
    opened = sl.open()
    _, _, rm, dev = opened
    other = None
    try:
        made = [dev.alloc_vidmem(piece).handle for _ in range(n)]
        if kept != "nothing":
            other = sl.open()
            orm, odev = other[2], other[3]
            for h in made:
                orm.dup(odev.hdevice, h, client_src=rm)
        assert sl.used() >= n * piece, sl.used()
        walked = stub.pid_info_walked()
        if how == "client_freed":
            rm.close()          # RM_FREE of the client, the file open
        for o in reversed(opened):
            o.close()
        opened = []
        walked = stub.pid_info_walked() - walked
        # a reading or two of the members' figures (the other client's n)
        # and, for each one, a handle or two in the probe
        assert walked < 8 * n, walked
        if kept == "nothing":
            assert sl.used() < piece, sl.used()
            assert nvtest.heap_used(0) == heap0
            return
        assert sl.used() >= n * piece, sl.used()        # still held
        for o in reversed(other):
            o.close()
        other = None
        # the ledger's duplicates alone now: the room is found for 30 MiB
        opened = sl.open()
        m = opened[3].alloc_vidmem(30 * MiB)
        opened[2].free(m.handle)
        for o in reversed(opened):
            o.close()
        opened = []
        assert sl.used() < piece, sl.used()
        assert nvtest.heap_used(0) == heap0
    finally:
        for o in reversed(opened):
            o.close()
        for o in reversed(other or []):
            o.close()
        sl.destroy()


# Makes COUNT allocations of PIECE bytes in a slice, then exits on a line:
# its control file's close takes them all.
CLOSE_MANY = nvtest.RAW_PRELUDE + """
made = [dev.alloc_vidmem(PIECE).handle for _ in range(COUNT)]
report(ready=True)
sys.stdin.readline()
os._exit(0)
"""


def in_the_driver_s_close(pid):
    """Whether PID sleeps in the stub's release of a control file (its
    close_delay_us)."""
    return nvtest.sleeps_in(pid, "nvidia_close", "msleep")


def test_two_closes_of_a_slice_at_once_walk_only_their_own(admin, nodedir):
    """Two processes of one slice close a control file with N allocations
    each, at once (the stub waits a second in each release, before it
    frees the file's clients: close_delay_us).  The ledger's duplicates of
    each close's objects stand by in the slice's probe while the driver
    frees them, and a reading of the probe walks every handle it has:
    before session 63 the first close to end found the other's duplicates
    there, their memory still the other's, so it could not let go of its
    own at one reading and asked about each of its N with the other's N in
    the probe: N * N walked (133120 for 256, 33280 for 128).  Now a reading
    first moves other frees' duplicates in flight out of the probe; each
    close walks its own once, and the slice ends charged nothing, RM's heap
    back where it was."""
    n, piece = 128, 64 * 1024
    sl = Slice(admin, nodedir, name="closes", limit=64 * MiB)
    heap0 = nvtest.heap_used(0)
    opened = sl.open()
    child = None
    try:
        for _ in range(n):
            opened[3].alloc_vidmem(piece)
        child = nvtest.spawn_child(in_slice(
            CLOSE_MANY, sl, COUNT=str(n), PIECE=str(piece)))
        assert child.report()["ready"]
        assert sl.used() >= 2 * n * piece, sl.used()
        walked = stub.pid_info_walked()
        with stub.param_set("close_delay_us", 1000000):
            child.p.stdin.write("\n")
            child.p.stdin.flush()
            pid = child.p.pid
            nvtest.wait_for(lambda: in_the_driver_s_close(pid), 60,
                            "the child's close in the driver")
            for o in reversed(opened):
                o.close()
            opened = []
            assert child.finish() == 0
            child = None
        walked = stub.pid_info_walked() - walked
        # each close's own once, and a few readings of the members'
        assert walked < 8 * n, walked
        assert sl.used() < piece, sl.used()
        assert nvtest.heap_used(0) == heap0
    finally:
        if child:
            let_go(child)
        for o in reversed(opened):
            o.close()
        sl.destroy()


def test_the_directories_a_va_space_pins_are_charged_to_its_slice(
        admin, nodedir):
    """A VA space of RM's own (FERMI_VASPACE_A, neither externally owned
    nor the device's default) comes with its page directories, RM's
    video memory charged to no process, and a client makes as many as it
    likes.  Before, a tenant of a 4 MiB slice made 409 of them and pinned
    1.6 MiB more of the GPU than its slice said (the stub's 4 KiB roots),
    with no refusal.  Now xpu.ko charges each RM's worst case before RM
    makes it (20 KiB: the root and, on a GSP client, the four directories
    of the range kept for GSP's RM), refuses one past the limit with
    NV_ERR_NO_MEMORY and nothing made, keeps at most 1024 per slice
    (NV_ERR_INSUFFICIENT_RESOURCES), charges nothing for an externally
    owned VA space (UVM's root) or one naming the device's default, and
    gives the charge back with the VA space, or with its device."""
    sl = Slice(admin, nodedir, name="roots", limit=4 * MiB)
    ctl, gpu, rm, dev = sl.open()
    try:
        free0 = nvtest.heap_free(0)
        made, refused = [], None
        for _ in range(2 * (4 * MiB) // VAS_PINNED):
            try:
                made.append(dev.vaspace()[0])
            except client.NvStatusError as e:
                refused = e.status
                break
        roots = free0 - nvtest.heap_free(0)
        # the attack reached RM: each VA space took its root there
        assert roots == len(made) * nvtest.PAGE_TABLE, (roots, len(made))
        assert refused == abi.NV_ERR_NO_MEMORY, (refused, len(made))
        assert len(made) == 4 * MiB // VAS_PINNED, len(made)
        assert sl.used() == len(made) * VAS_PINNED <= 4 * MiB
        assert sl.get().denied_allocs == 1
        # UVM's and the device's default: no directories of RM's here
        ext, _ = dev.vaspace(
            flags=abi.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
        p = dev.abi.NV_VASPACE_ALLOCATION_PARAMETERS(
            index=abi.NV_VASPACE_ALLOCATION_INDEX_GPU_DEVICE)
        named = rm.alloc(dev.hdevice, abi.FERMI_VASPACE_A, p)
        assert sl.used() == len(made) * VAS_PINNED
        rm.free(ext)
        rm.free(named)
        # freed: the root goes, and so does the charge
        for h in made[:10]:
            rm.free(h)
        assert sl.used() == (len(made) - 10) * VAS_PINNED
        # at most max_records (1024) a slice, whatever its limit
        admin.slice_set(sl.id, memory_limit=64 * MiB)
        made = made[10:]
        while True:
            try:
                made.append(dev.vaspace()[0])
            except client.NvStatusError as e:
                refused = e.status
                break
        assert refused == abi.NV_ERR_INSUFFICIENT_RESOURCES, refused
        assert len(made) == nvtest.xpu_param("max_records"), len(made)
        # xpu's refusal: RM made nothing
        n = stub.objects()["objects"]
        p = dev.abi.NV_VASPACE_ALLOCATION_PARAMETERS()
        st = rm.alloc_raw(dev.hdevice, abi.FERMI_VASPACE_A, p).status
        assert st == abi.NV_ERR_INSUFFICIENT_RESOURCES, hex(st)
        assert stub.objects()["objects"] == n
        # with their device: every record goes
        dev.close()
        assert sl.used() == 0
        assert nvtest.heap_free(0) == free0
    finally:
        for o in (dev, rm, gpu, ctl):
            o.close()
        sl.destroy()


def test_mappings_make_page_tables_only_where_the_slice_paid_for_them(
        admin, nodedir):
    """Class 18: RM_MAP_MEMORY_DMA into a lazy virtual allocation makes the
    page tables of each mapping then (a 4 KiB table per 2 MiB it reaches,
    and the directories above), RM's video memory charged to no process
    and capped by nothing.  Before, a tenant of a 4 MiB slice mapped one
    page of system memory every 2 MiB of a 1 TiB lazy range, 2048 times:
    8 MiB of the GPU's memory in tables, with its slice charged nothing.
    Now a slice's control file maps only into a virtual allocation whose
    tables RM pinned when it was made and xpu charged; anything else is
    refused with NV_ERR_NOT_SUPPORTED before RM is called.  Mappings in a
    pinning range make no table, and the unsliced control file is not
    held."""
    sl = Slice(admin, nodedir, name="maps", limit=4 * MiB)
    ctl, gpu, rm, dev = sl.open()
    fixed = abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << \
        abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT
    try:
        hvas, _ = dev.vaspace()
        mem = dev.alloc_sysmem(64 << 10)
        lazy, va = dev.alloc_virtual(1 << 40, hvaspace=hvas, lazy=True)
        free0, used0 = nvtest.heap_free(0), sl.used()
        mapped, st = 0, abi.NV_OK
        for i in range(2 * (4 * MiB) // nvtest.PAGE_TABLE):
            st = ctl.rm_map_memory_dma(
                rm.handle, dev.hdevice, lazy, mem.handle, 4096,
                dma_offset=va + (i << 21), flags=fixed, check=False).status
            if st != abi.NV_OK:
                break
            mapped += 1
        tables = free0 - nvtest.heap_free(0)
        assert (mapped, st) == (0, abi.NV_ERR_NOT_SUPPORTED), \
            (mapped, hex(st), tables, sl.used())
        assert tables == 0 and sl.used() == used0
        # a pinning range: its tables are charged, and a mapping makes none
        pinned, pva = dev.alloc_virtual(16 * MiB, hvaspace=hvas)
        free1 = nvtest.heap_free(0)
        assert free1 < free0 and sl.used() > used0
        for i in range(8):
            ctl.rm_map_memory_dma(rm.handle, dev.hdevice, pinned, mem.handle,
                                  4096, dma_offset=pva + (i << 21),
                                  flags=fixed)
        assert nvtest.heap_free(0) == free1
        ctl.rm_unmap_memory_dma(rm.handle, dev.hdevice, pinned, mem.handle,
                                pva)
        # its handle freed, a lazy range under it is refused again
        rm.free(pinned)
        lazy2, _ = dev.alloc_virtual(1 << 30, hvaspace=hvas, lazy=True)
        st = ctl.rm_map_memory_dma(rm.handle, dev.hdevice, lazy2, mem.handle,
                                   4096, check=False).status
        assert st == abi.NV_ERR_NOT_SUPPORTED, hex(st)
        assert nvtest.heap_free(0) == free0
    finally:
        for o in (dev, rm, gpu, ctl):
            o.close()
        sl.destroy()
    # root's unsliced control file maps as RM lets it
    with client.Ctl() as ctl2, client.RmClient(ctl2) as rm2, \
            rm2.device(0) as dev2:
        lazy, va = dev2.alloc_virtual(1 << 30, lazy=True)
        mem = dev2.alloc_sysmem(4096)
        assert dev2.map_dma(lazy, mem.handle, 4096) == va


def test_a_record_stands_for_the_object_rm_made_under_its_handle(
        admin, nodedir):
    """Class 18's refusal trusts xpu's records of pinning virtual
    allocations, so a record must never stand for another object of its
    handle.  Before, the records an RM_FREE took were asked of RM after
    the slice's lock went: one thread freed a client holding a pinning
    range H and a thousand usermode objects, and while xpu asked RM about
    them another thread made the client again under the same handle, a
    device, and a lazy range under H; RM then said H was a virtual
    allocation, the record stayed, and mappings into the lazy range (page
    tables charged to no one) were let through.  Now the free's records
    are asked before the lock goes, and a new object is recorded before
    it, so the lazy range is refused."""
    sl = Slice(admin, nodedir, name="reuse", limit=256 * MiB)
    ctl, gpu, rm, dev = sl.open()
    hc, hv = 0x5c1e0001, 0x5c1e0002
    fixed = abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << \
        abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT
    try:
        a = client.RmClient(ctl, handle=hc)
        da = a.device(0, gpu_file=gpu)
        p = da.memory_params(64 << 10, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL)
        a.alloc(da.hdevice, abi.NV50_MEMORY_VIRTUAL, p, hnew=hv)
        # records the free's question goes over
        for _ in range(min(1000, nvtest.xpu_param("max_records") - 1)):
            a.alloc(da.hsubdevice, abi.HOPPER_USERMODE_A)
        made = {}

        def remake():
            # the client again, under its handle, as soon as RM lets it
            while True:
                try:
                    b = client.RmClient(ctl, handle=hc)
                    break
                except client.NvStatusError as e:
                    assert e.status == abi.NV_ERR_INSERT_DUPLICATE_NAME, e
            db = b.device(0, gpu_file=gpu)
            q = db.memory_params(64 << 20, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL
                                 | abi.NVOS32_ALLOC_FLAGS_LAZY)
            b.alloc(db.hdevice, abi.NV50_MEMORY_VIRTUAL, q, hnew=hv)
            made.update(b=b, db=db, va=q.offset)

        t = threading.Thread(target=remake)
        t.start()
        ctl.rm_free(hc, hc, hc)
        t.join(60)
        assert not t.is_alive() and "b" in made
        b, db = made["b"], made["db"]
        mem = db.alloc_sysmem(4096)
        st = ctl.rm_map_memory_dma(hc, db.hdevice, hv, mem.handle, 4096,
                                   dma_offset=made["va"], flags=fixed,
                                   check=False).status
        assert st == abi.NV_ERR_NOT_SUPPORTED, hex(st)
        b.close()
    finally:
        for o in (dev, rm, gpu, ctl):
            o.close()
        sl.destroy()


# --- records of video memory (ledger.c): a struct that names no new object


# RM_ALLOC of 32 MiB with the handle left to RM, from a read-only page: the
# driver makes the object and cannot write its handle back (-EFAULT), so
# xpu cannot know which object it is -- nor follow it through a free that
# takes it with its client while UVM maps it.
HIDE = nvtest.RAW_PRELUDE + STRUCT_PAGE.replace(
    "ALLOC_BYTES", "32 << 20").replace("NEW_HANDLE", "0") + """
libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ)
rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_ALLOC, ctypes.sizeof(p)), addr)
report(rc=rc, errno=ctypes.get_errno())
"""


def test_an_allocation_whose_handle_cannot_come_back_is_recorded(
        admin, nodedir):
    """RM makes 32 MiB under a handle of its choosing, and the caller's
    struct is read-only, so the handle cannot come back to the caller.
    xpu.ko reads it where the driver wrote it -- xpu's own copy of the
    struct -- and records the allocation like any other: the slice is
    charged while it lives and free once the caller's files close, and
    the caller is not killed.  Before Nov 25 xpu read the caller's struct,
    could not name the memory, killed the caller and charged the slice
    until destroyed; before the records the caller went on, and could map
    the memory through UVM and free it with its client, uncharged."""
    sl = Slice(admin, nodedir)
    heap0 = nvtest.heap_used(0)
    try:
        child = start_child(in_slice(HIDE, sl) + "sys.stdin.readline()\n")
        line = child.stdout.readline()
        assert json.loads(line) == {"rc": -1, "errno": errno.EFAULT}
        assert sl.used() == 32 * MiB
        assert nvtest.heap_used(0) - heap0 == 32 * MiB
        out, err = child.communicate("\n", timeout=120)
        assert child.returncode == 0, (out, err)
        assert sl.get().killed == 0
        # the files closed with the process: RM let go, and so the slice
        assert nvtest.heap_used(0) == heap0
        assert nvtest.wait_for(lambda: sl.used() == 0, 30,
                               "the slice to be charged nothing")
    finally:
        sl.destroy()
    assert nvtest.heap_used(0) == heap0


def test_memory_exported_by_fd_is_charged_while_anything_holds_it(
        admin, nodedir):
    """CUDA's IPC by fd through a slice's files (class 22's honest side):
    video memory exported into a control file
    (NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD) and imported into
    another client (IMPORT_OBJECTS_FROM_FD, the handle left to RM, which
    xpu names) works, and the slice is charged for it once, while any
    handle holds it: the source, the import, or the export the fd's file
    keeps (the ledger, after both frees); it goes when the file closes."""
    sl = Slice(admin, nodedir, name="ipc", limit=64 * MiB)
    heap0 = nvtest.heap_used(0)
    ctl, gpu, rm, dev = sl.open()
    fd = client.Ctl(sl.ctl_node)
    try:
        m = dev.alloc_vidmem(32 * MiB)
        rm.export_objects(fd.fd, dev.hdevice, [m.handle], max_objects=2)
        rm2 = client.RmClient(ctl)
        dev2 = rm2.device(0, gpu_file=gpu)
        # handles left to RM: the empty slot's reads 0 again, as RM leaves it
        [(h, kind), empty] = rm2.import_objects(fd.fd, dev2.hdevice, [0, 0])
        assert kind == abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_VIDMEM
        assert h != 0
        assert empty == (0, abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_NONE)
        assert sl.used() == 32 * MiB, sl.used()
        rm.free(m.handle)
        assert sl.used() == 32 * MiB, sl.used()
        rm2.free(h)
        # premise: the export (and the ledger's duplicate) hold it now
        assert nvtest.heap_used(0) - heap0 == 32 * MiB
        assert sl.used() == 32 * MiB, sl.used()
        fd.close()
        assert sl.used() == 0, sl.used()    # the ledger's probe lets it go
        assert nvtest.heap_used(0) == heap0
    finally:
        fd.close()
        for c in (rm, ctl, gpu):
            c.close()
        sl.destroy()


# --- class 47: a call naming a client the file did not make

# Another slice's tenant names the victim's client, device, TSG, channel and
# memory in RM_ALLOCs of its own, with a second thread alive (so xpu asks RM
# what the call made, with its own privilege).
FOREIGN_CLIENT = """
import threading
ctl = client.Ctl(CTL_NODE); gpu = client.GpuFile(0, GPU_NODE)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
ev = threading.Event()
t = threading.Thread(target=ev.wait, daemon=True); t.start()
mp = dev.memory_params(64 << 10)
got = {"memory": ctl.rm_alloc(@CLIENT@, @DEVICE@, abi.NV01_MEMORY_LOCAL_USER,
                              mp, hnew=@MEMORY@, check=False).status}
cp = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
got["channel"] = ctl.rm_alloc(@CLIENT@, @TSG@, abi.HOPPER_CHANNEL_GPFIFO_A,
                              cp, hnew=@CHANNEL@, check=False).status
ev.set(); t.join()
report(**got)
sys.stdin.readline()
"""


@contextmanager
def foreign_tenants(admin, nodedir):
    """An attacker's slice, and a victim's with its client RM, device DEV
    and an unscheduled channel CH: (att, vic, rm, dev, ch)."""
    att = Slice(admin, nodedir, name="attacker")
    vic = Slice(admin, nodedir, name="victim")
    ctl, gpu, rm, dev = vic.open()
    ch = client.Channel(dev, schedule=False)
    try:
        yield att, vic, rm, dev, ch
    finally:
        for o in (ch, dev, rm, gpu, ctl):
            o.close()
        att.destroy()
        vic.destroy()


def spawn_foreign(code, att, rm, dev, mem, ch):
    """CODE (FOREIGN_CLIENT's kind) in a child of slice ATT, naming the
    victim's client RM, device DEV, memory MEM and channel CH."""
    return nvtest.spawn_child(
        code.replace("CTL_NODE", repr(att.ctl_node))
        .replace("GPU_NODE", repr(att.gpu_node))
        .replace("@SLICE@", str(att.id))
        .replace("@CLIENT@", str(rm.handle))
        .replace("@DEVICE@", str(dev.hdevice))
        .replace("@MEMORY@", str(mem.handle))
        .replace("@TSG@", str(ch.htsg))
        .replace("@CHANNEL@", str(ch.hchannel)))


def test_a_call_naming_another_tenant_s_client_makes_xpu_act_on_nothing(
        admin, nodedir):
    """Class 47 (session 56, found by a review of ledger.c and sched.c): RM
    refuses a call naming a client its file did not make
    (NV_ERR_INVALID_CLIENT), but xpu then asked RM, with its own privilege,
    what the call had made under the handles it named -- and found another
    tenant's objects there.  Its channel became a record of the attacker's
    slice (disabled whenever that slice waits), its memory one of the
    attacker's ledger records, held by the ledger for the attacker after
    the attacker's file closed, so the victim's free gave nothing back to
    the GPU.  Now a call naming a client not made through the calling file
    is refused before RM.  Without that, the attacker's slice counted the
    victim's channel (1, and 4096 bytes)."""
    with foreign_tenants(admin, nodedir) as (att, vic, rm, dev, ch):
        heap1 = nvtest.heap_used(0)
        mem = dev.alloc_vidmem(16 * MiB)
        child = spawn_foreign(FOREIGN_CLIENT, att, rm, dev, mem, ch)
        got = child.report()
        assert got == {"memory": abi.NV_ERR_INVALID_CLIENT,
                       "channel": abi.NV_ERR_INVALID_CLIENT}, got
        info = att.get()
        assert (info.channels, info.memory_used) == (0, 0), info
        assert child.finish() == 0
        # the attacker's files are closed; the victim's free gives it back
        rm.free(mem.handle)
        assert nvtest.heap_used(0) == heap1
        assert vic.get().channels == 1



def test_a_client_allocation_naming_another_tenant_s_client_records_nothing(
        admin, nodedir):
    """Class 50 (session 57, found by a review of rmapi.c): a threaded
    tenant's RM_ALLOC of a client whose handle (hRoot) is another tenant's
    client: RM refuses it (NV_ERR_INSERT_DUPLICATE_NAME), and xpu, taking
    the status for a claim, asked RM whether a client of that handle
    existed -- it did, the victim's -- and recorded it as made through the
    attacker's file.  Class 47's check then let the attacker name it: its
    calls naming the victim's client, device, memory and channel reached
    RM, and what xpu found there with its own privilege became the
    attacker's (the victim's channel counted in the attacker's slice).
    Now xpu asks before the call whether the handle is free: a taken one
    gets RM's refusal, RM not called, and only a client that did not exist
    before the call is recorded."""
    with foreign_tenants(admin, nodedir) as (att, vic, rm, dev, ch):
        mem = dev.alloc_vidmem(16 * MiB)
        code = FOREIGN_CLIENT.replace("mp = dev.memory_params(64 << 10)", """
from xpu import ctl as xpu_ctl
def handles():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(@SLICE@).rm_handles
h0 = handles()
squat = ctl.rm_alloc(@CLIENT@, 0, abi.NV01_ROOT_CLIENT, check=False)
squat = (squat.status, handles() - h0)
mp = dev.memory_params(64 << 10)""").replace(
            "report(**got)", "report(squat=squat, **got)")
        child = spawn_foreign(code, att, rm, dev, mem, ch)
        got = child.report()
        assert got["squat"] == [abi.NV_ERR_INSERT_DUPLICATE_NAME, 0], got
        assert (got["memory"], got["channel"]) == (
            abi.NV_ERR_INVALID_CLIENT, abi.NV_ERR_INVALID_CLIENT), got
        info = att.get()
        assert (info.channels, info.memory_used) == (0, 0), info
        assert child.finish() == 0
        assert vic.get().channels == 1


# PARKED's sixteenth call is a client's allocation naming handle @H@, whose
# look (free) comes before the page it waits for; once it waits, the test
# makes that client outside every slice, then lets the stalled calls go.
PARKED_CLIENT = PARKED.replace(
    "    control(base)           # its params are there: it waits for a page",
    "    got.append(ctl.rm_alloc(@H@, 0, abi.NV01_ROOT_CLIENT,\n"
    "                            check=False).status)").replace(
    "tid = []", "tid = []\ngot = []").replace(
    """report(switches=switches())
os.close(uffd)              # the stalled copies go on
for t in held + [t]:
    t.join()
""", """os.close(uffd)              # the stalled copies go on
for t in held + [t]:
    t.join()
report(status=got[0])
sys.stdin.readline()
""")


def test_a_client_made_elsewhere_while_a_call_waits_for_its_page_is_not_ours(
        admin, nodedir):
    """Class 50 again (session 58, found by a review of mem.c): xpu looked
    at a named client handle (free) before taking the page of the call,
    and a tenant whose 15 pages are held by its own stalled calls parks
    that call for as long as it likes.  A client made under the handle
    meanwhile -- here by a process outside every slice; RM gives its own
    handles in order, so a tenant can name the next one -- made the call's
    refusal (NV_ERR_INSERT_DUPLICATE_NAME, a claim with other threads
    alive) look like a client made, and xpu recorded that process's client
    as the attacker's file's: class 47's check then passed every call
    naming it.  Now the handle is looked at again just before the driver
    is called, under a lock every slice's client allocation takes."""
    if not have_userfaultfd():
        pytest.skip("this kernel has no userfaultfd(2) to stall a page with")
    h = 0xc1d5c5c5
    att = Slice(admin, nodedir, name="parker")
    child = nvtest.spawn_child(in_slice(PARKED_CLIENT, att).replace(
        "@H@", hex(h)))
    try:
        child.report()          # parked, its look made
        with client.Ctl() as c:
            made = c.rm_alloc(h, 0, abi.NV01_ROOT_CLIENT, check=False)
            assert made.status == abi.NV_OK      # the premise
            got = let_go_on(child)
            assert got["status"] == abi.NV_ERR_INSERT_DUPLICATE_NAME, got
            # the attacker's own client alone (its stalled controls made
            # nothing); before, the other process's client too
            assert att.get().rm_handles == 1, att.get()
        assert let_go(child) == 0
    finally:
        att.destroy()


# A client made through a second control file of the slice, freed through
# the first: RM refuses, and a thread stores NV_OK over the refusal on
# xpu's page while the driver waits after its copy-back.
RACE_STATUS_FREE = nvtest.RAW_PRELUDE + LIE_ON_PAGE + """
other = client.Ctl(CTL)
oc = client.RmClient(other); od = oc.device(0, gpu_file=gpu)
report(client=oc.handle)
sys.stdin.readline()
p = abi.NVOS00_PARAMETERS(hRoot=oc.handle, hObjectParent=oc.handle,
                          hObjectOld=oc.handle)
rc, stored = lie_on_page(abi.NV_ESC_RM_FREE, p,
                         lambda cur: cur.hObjectOld == oc.handle,
                         seen=abi.NV_ERR_INVALID_CLIENT, lie=abi.NV_OK)
report(rc=rc, status=p.status, stored=stored)
sys.stdin.readline()
"""


def test_a_free_of_a_client_another_file_made_takes_no_record(
        nodedir, reload_stub):
    """Class 47, through the free (session 56, found by a review of
    handles.c): xpu took the status of its free made as the caller at its
    word, and a thread's NV_OK stored over RM's refusal -- a client made
    through another control file of the slice -- took the records of that
    live client and all in it: its handles and OS events out of the
    slice's bounds, its channels past class 37's check.  Now the free is
    refused before RM, with RM's answer.  Without that: the store landed
    and `rm_handles` fell by the client, its device and subdevice."""
    with racer_slice(reload_stub, nodedir, copyout_delay_us=300000) as (
            sl, _heap0):
        child = nvtest.spawn_child(in_slice(RACE_STATUS_FREE, sl))
        child.report()
        before = sl.get().rm_handles
        r = let_go_on(child)
        assert (r["rc"], r["status"]) == (0, abi.NV_ERR_INVALID_CLIENT), r
        assert sl.get().rm_handles == before
        assert let_go(child) == 0
