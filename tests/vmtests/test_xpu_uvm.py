# SPDX-License-Identifier: Apache-2.0
"""Memory UVM keeps stays charged to the slice that allocated it (issue 18,
rule 4; docs/memory.md, "Memory UVM keeps").

UVM_MAP_EXTERNAL_ALLOCATION duplicates each mapped allocation into UVM's
kernel client; RM_FREE of the tenant's handle then passes ownership to that
duplicate, which GET_PID_INFO charges to no process.  xpu takes a duplicate
of its own (the ledger) before such a free reaches RM, and lets go of it only
when RM shows it alone."""

import errno
import os
import stat
import subprocess
from contextlib import contextmanager

import nvtest
import pytest
from nvclient import abi, client, stub
from nvclient.cudalike import CudaChannel, CudaContext
from nvclient.uvm import Uvm, gpu_uuid
from test_hostile_objects import module_param
from test_xpu_mem import Slice, admin, nodedir  # noqa: F401
from xpu import ctl, uapi

MiB = 1 << 20

pytestmark = pytest.mark.usefixtures("require_xpu")

# A tenant with a CUDA-like context in the slice; ORDER is how it frees:
# "keep" (RM_FREE, the UVM mapping kept), "cuda" (UVM_FREE, then RM_FREE),
# "tinygrad" (RM_FREE, then UVM_FREE).
TENANT = """
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
ctl = client.Ctl({ctl!r}); gpu = client.GpuFile(0, {gpu!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
uvm = Uvm(ctl.abi.version)
ctx = CudaContext(dev, uvm)
got, kept = [], []
for _ in range({rounds}):
    try:
        buf = ctx.alloc({size})
    except client.NvStatusError as e:
        got.append(e.status)
        continue
    got.append(abi.NV_OK)
    if {order!r} == "keep":
        rm.free(buf.handle)
        kept.append((buf.va, buf.size))
    else:
        buf.free(rm_first={order!r} == "tinygrad")
report(got=got, kept=kept)
import sys
sys.stdin.readline()
for va, size in kept:
    uvm.free(va, size)
report(freed=len(kept))
sys.stdin.readline()
"""


def tenant(sl, order, rounds, size=32 * MiB):
    return nvtest.spawn_child(TENANT.format(ctl=sl.ctl_node, gpu=sl.gpu_node,
                                            order=order, rounds=rounds,
                                            size=size))


def _go(child):
    child.p.stdin.write("\n")
    child.p.stdin.flush()


def _two_held_until_uvm_lets_go(sl, child, used0, freed):
    """CHILD's six rounds of 32 MiB: the 64 MiB slice held two and refused
    four, RM holds no more than the slice's limit; then the child's UVM
    lets go of FREED ranges, and a probe finds the ledger's duplicates
    alone: the slice is free."""
    r = child.report()
    assert r["got"] == [abi.NV_OK] * 2 + [abi.NV_ERR_NO_MEMORY] * 4
    assert nvtest.heap_used(0) - used0 <= 64 * MiB + 4 * MiB
    assert sl.used() >= 64 * MiB
    _go(child)
    assert child.report() == {"freed": freed}
    assert nvtest.wait_for(lambda: sl.used() <= 4 * MiB, 30,
                           "the slice to be charged nothing")
    _go(child)
    assert child.finish() == 0


def test_memory_uvm_keeps_after_rm_free_stays_charged(admin, nodedir,  # noqa: F811
                                                      uvm_nodes):
    """Allocate 32 MiB, map it through UVM, RM_FREE the handle, again: the
    64 MiB slice holds two and refuses the third (without the ledger the
    slice read 0 after each free and RM held 6 x 32 MiB)."""
    sl = Slice(admin, nodedir)
    used0 = nvtest.heap_used(0)
    try:
        child = tenant(sl, "keep", rounds=6)
        _two_held_until_uvm_lets_go(sl, child, used0, freed=2)
    finally:
        sl.destroy()
    assert nvtest.heap_used(0) == used0


@pytest.mark.parametrize("order", ["cuda", "tinygrad"])
def test_a_tenant_that_frees_may_allocate_again(admin, nodedir,  # noqa: F811
                                               uvm_nodes, order):
    """cuMemFree's order (UVM_FREE, then RM_FREE) frees at once; tinygrad's
    (RM_FREE, then UVM_FREE) leaves the memory held by the ledger until the
    next allocation that needs the room asks RM again.  Either way a tenant
    that frees what it allocates allocates 48 MiB eight times in 64 MiB."""
    sl = Slice(admin, nodedir)
    used0 = nvtest.heap_used(0)
    try:
        child = tenant(sl, order, rounds=8, size=48 * MiB)
        r = child.report()
        assert r["got"] == [abi.NV_OK] * 8
        _go(child)
        child.report()
        _go(child)
        assert child.finish() == 0
    finally:
        sl.destroy()
    assert nvtest.heap_used(0) == used0


# A tenant that maps 32 MiB through UVM and then frees, with the memory, a
# bigger object that holds it: its client, the device or subdevice it was
# made under, or the whole control file.  UVM's duplicate keeps the memory;
# each round starts again on a new control file, client and UVM file.
CASCADE = """
import os
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
gpu = client.GpuFile(0, {gpu!r})
what = {what!r}
got, kept = [], []
for _ in range({rounds}):
    ctl = client.Ctl({ctl!r})
    rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
    uvm = Uvm(ctl.abi.version)
    ctx = CudaContext(dev, uvm)
    parent = dev.hsubdevice if what == "subdevice" else dev.hdevice
    try:
        h = rm.alloc(parent, abi.NV01_MEMORY_LOCAL_USER,
                     dev.memory_params({size}))
    except client.NvStatusError as e:
        got.append(e.status)
    else:
        got.append(abi.NV_OK)
        va = ctx.va({size})
        uvm.create_external_range(va, {size})
        uvm.map_external(va, {size}, ctl.fileno(), rm.handle, h, [ctx.uuid])
    if what == "client":
        rm.close()
    elif what == "device":
        rm.free(dev.hdevice)
    elif what == "subdevice":
        rm.free(dev.hsubdevice)
    elif what == "close":
        ctl.close()
    kept.append(uvm)
report(got=got)
sys.stdin.readline()
for uvm in kept:
    uvm.close()
report(freed=len(kept))
sys.stdin.readline()
"""


@pytest.mark.parametrize("what", ["client", "device", "subdevice", "close"])
def test_memory_uvm_keeps_through_a_bigger_free_stays_charged(
        admin, nodedir, uvm_nodes, what):  # noqa: F811
    """Allocate 32 MiB, map it through UVM, free the client, device or
    subdevice it is under (or close the control file), again: the 64 MiB
    slice holds two and refuses the third, and is free once UVM lets go.
    Without the records of the slice's video memory (ledger.c) the slice
    read 0 after each free and RM held 6 x 32 MiB."""
    sl = Slice(admin, nodedir)
    used0 = nvtest.heap_used(0)
    try:
        child = nvtest.spawn_child(CASCADE.format(
            ctl=sl.ctl_node, gpu=sl.gpu_node, what=what, rounds=6,
            size=32 * MiB))
        _two_held_until_uvm_lets_go(sl, child, used0, freed=6)
    finally:
        sl.destroy()
    assert nvtest.heap_used(0) == used0


def test_a_process_that_exits_with_memory_mapped_leaves_its_slice_free(
        admin, nodedir, uvm_nodes):  # noqa: F811
    """A CUDA-like process exits with 48 MiB allocated and mapped: its files
    close in whatever order (the control file first, UVM's after), and the
    slice is charged nothing afterwards; a second such process fits."""
    sl = Slice(admin, nodedir)
    used0 = nvtest.heap_used(0)
    code = CASCADE.replace('report(got=got)\nsys.stdin.readline()',
                           'report(got=got)\nos._exit(0)')
    try:
        for _ in range(2):
            child = nvtest.spawn_child(code.format(
                ctl=sl.ctl_node, gpu=sl.gpu_node, what="none", rounds=1,
                size=48 * MiB))
            assert child.report() == {"got": [abi.NV_OK]}
            assert child.finish() == 0
            assert nvtest.wait_for(lambda: sl.used() <= 4 * MiB, 30,
                                   "the slice to be charged nothing")
    finally:
        sl.destroy()
    assert nvtest.heap_used(0) == used0


# --- Channels UVM retains (class 39; docs/security.md) ----------------------

# nvstatus.h: UVM_MM_INITIALIZE's answer where the mm need not be tracked.
NV_WARN_NOTHING_TO_DO = 0x10006


def _uvm_node(admin, sl, nodedir):  # noqa: F811
    """The slice's UVM node: a node of xpu.ko's misc device xpu-uvm,
    attached to the slice as XPU_NODE_UVM."""
    with open("/sys/class/misc/xpu-uvm/dev") as f:
        major, minor = map(int, f.read().split(":"))
    path = os.path.join(nodedir, f"xpu{sl.id}-uvm")
    os.mknod(path, 0o20666, os.makedev(major, minor))
    os.chmod(path, 0o666)
    admin.node_attach(sl.id, path, uapi.XPU_NODE_UVM)
    return path


def _register_and_free_tsg(ctx, rm):
    """CUDA's set-up of a channel and its UVM_REGISTER_CHANNEL, then an
    RM_FREE of the TSG with the channel still registered: RM keeps the
    TSG's context, the instance block and the channel id for UVM."""
    ch = CudaChannel(ctx, schedule=False)
    rm.free(ch.htsg)
    ch._objs.remove(ch.htsg)
    ch.registered = False       # left to UVM
    ch.close()


def _retentions_seen():
    with open("/sys/module/xpu/parameters/uvm_retentions_seen") as f:
        return f.read().strip() == "Y"


@pytest.fixture(params=["probes", "files"])
def sight(request):
    """How xpu.ko knows what UVM retains: "probes", its kretprobes on the
    driver's nvUvmInterfaceRetainChannel/ReleaseChannel (the default);
    "files", xpu.ko loaded with uvm_probes=0, where a freed channel stays
    charged while a UVM file of its slice is open."""
    if request.param == "probes":
        assert _retentions_seen()
        yield request.param
        return
    if not os.environ.get("XPU_KO"):
        pytest.skip("XPU_KO is not set: run under tests/vm/run")
    subprocess.run(["rmmod", "xpu"], check=True)
    try:
        nvtest.insmod_xpu("uvm_probes=0")
        assert not _retentions_seen()
        yield request.param
    finally:
        if os.path.exists("/sys/module/xpu"):
            subprocess.run(["rmmod", "xpu"], check=True)
        nvtest.insmod_xpu()


def test_a_channel_uvm_retains_stays_charged_to_its_slice(
        sight, admin, nodedir, uvm_nodes, config):  # noqa: F811
    """Class 39: a tenant registers a channel with UVM and frees its TSG,
    again and again.  RM keeps each TSG's GR context, instance block and
    channel id for UVM; xpu.ko keeps their charge on the slice, so a 64 MiB
    slice is refused once they fill it.  When the slice's UVM file (opened
    through its UVM node, a genuine UVM file) goes, UVM lets go of the
    channels, and the charge goes.  An honest context unregisters its
    channel before the free: with the probes nothing stays charged; seen
    by files only, its TSG stays until its UVM file goes.  (Without the
    charge kept, the tenant held 2048 channel ids and 4 GiB while its
    slice read 0: session 47.)"""
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    sl = Slice(admin, nodedir, name="uvm39", limit=64 * MiB)
    heap0 = nvtest.heap_used(0)
    ctl, gpu, rm, dev = sl.open()
    uvm = None
    try:
        node = _uvm_node(admin, sl, nodedir)
        uvm = Uvm(config.version, path=node)
        # UVM's identity check on the file it is named (f_op == &uvm_fops)
        with Uvm(config.version, path=node, initialize=False) as mm:
            assert mm.mm_initialize(uvm.fd, check=False) == \
                NV_WARN_NOTHING_TO_DO
        assert nvtest.wait_for(lambda: sl.get().uvm_files == 1, 30,
                               "xpu.ko to let go of the closed UVM file")
        ctx = CudaContext(dev, uvm)
        base = sl.used()
        made, refused = 0, None
        while made < 200:
            try:
                _register_and_free_tsg(ctx, rm)
            except client.NvStatusError as e:
                refused = e.status
                break
            made += 1
        assert refused == abi.NV_ERR_NO_MEMORY, (made, refused)
        got = sl.get()
        # the refused round's TSG, made before its ring was refused and
        # freed while the UVM file was open, is kept too
        ctx_bytes = each - 4096
        assert got.uvm_channels == made and \
            got.uvm_tsgs in (made, made + 1), got
        assert got.uvm_retained == \
            got.uvm_tsgs * ctx_bytes + got.uvm_channels * 4096, got
        assert made >= (64 * MiB - base) // each - 2, (made, base)
        assert got.memory_used <= 64 * MiB
        # RM holds what the slice is charged
        assert nvtest.heap_used(0) - heap0 >= made * each
        # the tenant's file goes: UVM lets go, and the charge with it
        uvm.close()
        assert nvtest.wait_for(lambda: sl.get().uvm_files == 0, 30,
                               "xpu.ko to let go of the UVM file")
        got = sl.get()
        assert (got.uvm_tsgs, got.uvm_channels, got.uvm_retained) == \
            (0, 0, 0), got
        assert sl.used() <= base
        # an honest context: unregistered, then freed -- charged until its
        # UVM file goes (what UVM let go of, xpu cannot tell)
        with Uvm(config.version, path=node) as uvm2:
            ctx2 = CudaContext(dev, uvm2)
            ch = CudaChannel(ctx2, schedule=False)
            ch.close()
            assert sl.get().uvm_tsgs == (1 if sight == "files" else 0)
            ctx2.close()
        assert nvtest.wait_for(lambda: sl.get().uvm_tsgs == 0, 30,
                               "the honest context's charge to go")
        assert sl.used() <= base
        if ctx.hvas in rm.parents:
            rm.free(ctx.hvas)
    finally:
        # a forced destroy kills the slice's processes: this one first
        # lets go of its files
        if uvm is not None:
            uvm.close()
        dev.close()
        rm.close()
        gpu.close()
        ctl.close()
        sl.destroy()
    assert nvtest.heap_used(0) == heap0


# Class 39 by each way a registered channel's records go: each round a new
# control file, client, device, UVM file (kept open) and CUDA-like context
# with one registered channel, then WHAT frees them -- the channel and then
# its TSG ("channel"), the device, the client, or the control file's close
# -- and the control file closes.
RETAIN_BY = """
from nvclient.cudalike import CudaChannel, CudaContext
from nvclient.uvm import Uvm
gpu = client.GpuFile(0, {gpu!r})
what = {what!r}
kept, made, refused = [], 0, None
while made < {rounds}:
    ctl = client.Ctl({ctl!r})
    rm = client.RmClient(ctl)
    uvm = Uvm(ctl.abi.version, path={node!r})
    kept.append(uvm)
    try:
        dev = rm.device(0, gpu_file=gpu)
        ch = CudaChannel(CudaContext(dev, uvm), schedule=False)
    except client.NvStatusError as e:
        refused = e.status
        ctl.close()
        break
    # the ring's memory off UVM first: memory UVM maps stays charged too
    uvm.free(ch.area.va, ch.area.size)
    if what == "channel":
        rm.free(ch.hchannel)
        rm.free(ch.htsg)
    elif what == "device":
        rm.free(dev.hdevice)
    elif what == "client":
        rm.close()
    ctl.close()
    made += 1
report(made=made, refused=refused)
sys.stdin.readline()
for u in kept:
    u.close()
report(closed=len(kept))
sys.stdin.readline()
"""


@pytest.mark.parametrize("what", ["channel", "device", "client", "close"])
def test_a_channel_uvm_retains_stays_charged_however_it_is_freed(
        admin, nodedir, uvm_nodes, what):  # noqa: F811
    """Class 39 through every free that drops a channel's or TSG's record
    (the channel alone and then its TSG, the device, the client, the
    control file's close): while the slice's UVM files are open their
    charge stays, and the 64 MiB slice is refused; it goes with the files.
    (Without the charge kept: 60 rounds, never refused.)"""
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    with _uvm_tenant(admin, nodedir, "uvm39" + what, RETAIN_BY,
                     uvm_node=True, what=what, rounds=60) as (sl, child):
        heap0 = sl.heap0
        r = child.report()
        assert r["refused"] == abi.NV_ERR_NO_MEMORY, r
        assert r["made"] >= (64 * MiB) // each - 4, r
        got = sl.get()
        # the refused round's TSG may be kept too (made before its ring)
        assert got.uvm_channels == r["made"] and \
            got.uvm_tsgs in (r["made"], r["made"] + 1), got
        assert got.uvm_retained == got.uvm_tsgs * (each - 4096) + \
            got.uvm_channels * 4096, got
        assert got.memory_used <= 64 * MiB
        assert nvtest.heap_used(0) - heap0 >= r["made"] * each
        _go(child)
        assert child.report() == {"closed": r["made"] + 1}
        assert nvtest.wait_for(lambda: sl.get().uvm_files == 0, 30,
                               "xpu.ko to let go of the UVM files")
        got = sl.get()
        assert (got.uvm_tsgs, got.uvm_channels, got.uvm_retained) == \
            (0, 0, 0), got


@contextmanager
def _uvm_tenant(xctl, where, name, code, uvm_node=False, **fmt):
    """A 64 MiB slice NAME and a child running CODE (formatted with the
    slice's ctl and gpu nodes, with its UVM node as `node` when UVM_NODE,
    and FMT) in it: yields (slice, child), the slice's `heap0` RM's heap
    before it.  The child exits, the slice goes, and RM holds nothing more
    than before."""
    sl = Slice(xctl, where, name=name, limit=64 * MiB)
    sl.heap0 = heap0 = nvtest.heap_used(0)
    child = None
    try:
        if uvm_node:
            fmt["node"] = _uvm_node(xctl, sl, where)
        child = nvtest.spawn_child(code.format(
            ctl=sl.ctl_node, gpu=sl.gpu_node, **fmt))
        yield sl, child
        _go(child)
        assert child.finish() == 0
        child = None
    finally:
        if child is not None:
            child.p.kill()
            child.finish()
        sl.destroy()
    assert nvtest.heap_used(0) == heap0


def _uvm_charged(sl):
    """(TSGs, channels, bytes) the slice is charged for what UVM holds."""
    got = sl.get()
    return got.uvm_tsgs, got.uvm_channels, got.uvm_retained


def _closes_its_uvm_file(sl, child):
    """CHILD closes its UVM file: UVM's release let go of every channel,
    synchronously, and the slice is charged for none."""
    _go(child)
    assert child.report() == {"closed": True}
    assert _uvm_charged(sl) == (0, 0, 0), sl.get()


# CUDA's channel set-up, UVM_REGISTER_CHANNEL and a free of the TSG, again,
# until refused (or ROUNDS made); then the UVM file's close: the end of a
# child script that made CTX's DEV, RM and UVM.
REGISTER_AND_FREE = """
ctx = CudaContext(dev, uvm)
made, refused = 0, None
while made < {rounds}:
    try:
        ch = CudaChannel(ctx, schedule=False)
        rm.free(ch.htsg)
        ch._objs.remove(ch.htsg)
        ch.registered = False
        ch.close()
    except client.NvStatusError as e:
        refused = e.status
        break
    made += 1
report(made=made, refused=refused)
sys.stdin.readline()
uvm.close()
report(closed=True)
sys.stdin.readline()
"""


# A tenant of the slice whose UVM file comes from outside every slice: a
# process of no slice opens the driver's /dev/nvidia-uvm and passes the
# file over a socket (SCM_RIGHTS).  Then CUDA's channel set-up,
# registration through that file and a free of the TSG, until refused (or
# ROUNDS made).
PASSED_IN = """
import os, socket
from nvclient.cudalike import CudaChannel, CudaContext
from nvclient.uvm import Uvm
mine, theirs = socket.socketpair()
pid = os.fork()
if pid == 0:
    fd = os.open("/dev/nvidia-uvm", os.O_RDWR | os.O_CLOEXEC)
    socket.send_fds(theirs, [b"uvm"], [fd])
    os._exit(0)
_, fds, _, _ = socket.recv_fds(mine, 16, 1)
assert os.waitpid(pid, 0)[1] == 0
ctl = client.Ctl({ctl!r}); gpu = client.GpuFile(0, {gpu!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
uvm = Uvm(ctl.abi.version, fd=fds[0])
""" + REGISTER_AND_FREE


def test_a_channel_retained_through_a_uvm_file_passed_in_stays_charged(
        admin, nodedir, uvm_nodes):  # noqa: F811
    """Class 39 through a UVM file that is no slice's: opened by a process
    outside every slice and passed in over a socket, so xpu.ko holds no
    file for the slice.  xpu.ko sees the retention itself (its probes on
    the driver's nvUvmInterfaceRetainChannel and ReleaseChannel), so the
    TSGs the tenant frees while UVM retains them stay charged and the
    64 MiB slice is refused; when the file goes, UVM lets go and so does
    the charge.  (Seen by files only, uvm_probes=0: 200 rounds, never
    refused, the slice charged nothing.)"""
    assert _retentions_seen()
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    heap0 = nvtest.heap_used(0)
    with _uvm_tenant(admin, nodedir, "uvmin", PASSED_IN,
                     rounds=200) as (sl, child):
        r = child.report()
        assert r["refused"] == abi.NV_ERR_NO_MEMORY, r
        assert r["made"] >= (64 * MiB) // each - 4, r
        got = sl.get()
        assert got.uvm_files == 0, got
        assert _uvm_charged(sl) == (r["made"], r["made"], r["made"] * each)
        assert got.memory_used <= 64 * MiB
        assert nvtest.heap_used(0) - heap0 >= r["made"] * each
        _closes_its_uvm_file(sl, child)


# A child's start: the slice's control and GPU files, a client, a device
# and a CUDA-like context with one registered channel CH, on a UVM file of
# no slice's (the driver's own /dev/nvidia-uvm, opened outside any bound
# cgroup).
REGISTERED_ON_HOST_UVM = """
from nvclient.cudalike import CudaChannel, CudaContext
from nvclient.uvm import Uvm
ctl = client.Ctl({ctl!r}); gpu = client.GpuFile(0, {gpu!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
uvm = Uvm(ctl.abi.version, path="/dev/nvidia-uvm")
ctx = CudaContext(dev, uvm)
ch = CudaChannel(ctx, schedule=False)
"""


# The registration of a channel (through a UVM file of no slice's) in one
# thread, and the free of its TSG in another while the driver is between
# its retention and its return (the stub's uvm_retain_delay_us): the free
# waits until the stub's channel shows its retainer.
RETAIN_RACE = REGISTERED_ON_HOST_UVM + """
import threading, time
from nvclient import stub
uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel)
got = {{}}
def register():
    got["status"] = uvm.register_channel(
        ctx.uuid, ctl.fileno(), rm.handle, ch.hchannel,
        ctx.next_channel_va, 64 << 20, check=False)
    got["registered"] = time.monotonic()
t = threading.Thread(target=register)
t.start()
def retained():
    return any(c["client"] == rm.handle and c["handle"] == ch.hchannel and
               c["retainers"] == 1 for c in stub.channels(0))
while not retained():
    assert t.is_alive(), got
rm.free(ch.htsg)
freed = time.monotonic()
t.join()
report(status=got["status"], freed_first=freed < got["registered"])
sys.stdin.readline()
uvm.close()
report(closed=True)
sys.stdin.readline()
"""


def test_a_tsg_freed_while_the_driver_retains_its_channel_stays_charged(
        reload_stub, nodedir, uvm_nodes):  # noqa: F811
    """Class 39's race: RM retains a channel for UVM and lets go of its
    locks before nvUvmInterfaceRetainChannel returns; a thread of the
    tenant frees the channel's TSG in between (the stub waits 300 ms
    there).  xpu.ko made its record of the retention at the call's entry,
    so the free finds it in flight and the TSG and channel stay charged
    until UVM lets go.  (With the record made at the return instead, the
    free found none: the slice read 0 while RM held them.)"""
    reload_stub(uvm_retain_delay_us=300000)
    nvtest.insmod_xpu()
    assert _retentions_seen()
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    with ctl.Ctl() as xctl:
        _retain_race(xctl, nodedir, each)


def _retain_race(xctl, where, each):
    heap0 = nvtest.heap_used(0)
    with _uvm_tenant(xctl, where, "uvmrace", RETAIN_RACE) as (sl, child):
        r = child.report()
        # premise: the free came back while the registration was inside
        assert r == {"status": abi.NV_OK, "freed_first": True}, r
        assert _uvm_charged(sl) == (1, 1, each), sl.get()
        assert nvtest.heap_used(0) - heap0 >= each
        _closes_its_uvm_file(sl, child)


# libcuda 535's two CLIENT_SET_INHERITED_SHARE_POLICY calls at cuInit
# (recorded with nvtrace's NVTRACE_PARAMS): PID policies, DUP_OBJECT and
# then DEBUG composed, which share with no other process.
CUDA_POLICIES = """
for mask, action in ((1, 0), (4, abi.RS_SHARE_ACTION_FLAG_COMPOSE)):
    rm.control(rm.handle,
               abi.NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY,
               abi.RS_SHARE_POLICY(target=rm.handle, accessMask=mask,
                                   type=abi.RS_SHARE_TYPE_PID,
                                   action=action))
"""

# After its handles are told: the channel's TSG freed when told, and when.
FREES_ITS_TSG = """
sys.stdin.readline()
rm.free(ch.htsg)
ch._objs.remove(ch.htsg)
report(freed=time.monotonic())
sys.stdin.readline()
"""

# A slice's tenant with a channel it made, registered with UVM and let go
# of again, its client's policies libcuda's: it tells its handles, then
# frees the channel's TSG when told.
VICTIM = REGISTERED_ON_HOST_UVM + CUDA_POLICIES + """
import time
uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel)
ch.registered = False
report(client=rm.handle, channel=ch.hchannel)
""" + FREES_ITS_TSG

# A child's part, after its ctl, ctx and uvm: register(name, hclient,
# hchannel) puts UVM_REGISTER_CHANNEL's status and the time it came back in
# got; take_pool(hclient) starts a thread's registration of a channel that
# is not there, which holds the kretprobe's one instance
# (uvm_probe_maxactive=1) while the stub keeps it at the retain's entry,
# and returns the thread once xpu.ko recorded the call; behind_the_pool()
# then has a second thread register a channel, unwatched, and reports.
TAKE_POOL = """
import threading, time
got = {{}}
def records():
    with open("/sys/module/xpu/parameters/uvm_retain_records") as f:
        return int(f.read())
def register(name, hclient, hchannel):
    got[name] = uvm.register_channel(
        ctx.uuid, ctl.fileno(), hclient, hchannel, ctx.next_channel_va,
        64 << 20, check=False)
    got[name + "_back"] = time.monotonic()
def take_pool(hclient):
    base = records()
    first = threading.Thread(target=register, args=("first", hclient, 0xbad0))
    first.start()
    while records() == base:
        assert first.is_alive(), got
    return first
def behind_the_pool(hclient, hchannel):
    # the pool taken, a second thread's registration of HCHANNEL, which
    # goes unwatched; both awaited, and what they got told
    first = take_pool(hclient)
    second = threading.Thread(target=register,
                              args=("second", hclient, hchannel))
    second.start()
    report(started=True)
    first.join()
    second.join()
    report(**got)
"""

# Another slice's tenant with a UVM VA space of its own: with the pool
# taken, a second thread's registration naming the victim's client and
# channel finds no instance, so xpu.ko will not see it return.  The
# victim's handles come on stdin, once it is ready.
UNWATCHED = """
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm
ctl = client.Ctl({ctl!r}); gpu = client.GpuFile(0, {gpu!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
uvm = Uvm(ctl.abi.version, path="/dev/nvidia-uvm")
ctx = CudaContext(dev, uvm)
""" + TAKE_POOL + """
report(ready=True)
hclient, hchannel = map(int, sys.stdin.readline().split())
behind_the_pool(hclient, hchannel)
sys.stdin.readline()
"""


def test_a_registration_xpu_cannot_watch_pins_no_other_slice_s_free(
        reload_stub, nodedir, uvm_nodes):  # noqa: F811
    """Class 39's probes run out (docs/security.md, "UVM's retentions"):
    threads held inside the driver's retain take every instance of the
    kretprobe, and a call past them is one whose return xpu.ko never sees.
    An attacker's such call naming another slice's client and channel
    (RM refuses it: the channel is not in the caller's VA space, or gone)
    must not pin that slice's free of the channel.  Here the pool is one
    instance and the stub keeps each call 2 s at the retain's entry: the
    victim's free of its TSG while the attacker's unwatched call is inside
    gives its charge back at once, and stays given back after the call;
    the attacker's record goes once its thread is gone.  (With the record
    allowed to pin any slice, as before, the victim stayed charged for
    the TSG and channel for good.)"""
    reload_stub(uvm_retain_wait_us=2000000)
    nvtest.insmod_xpu("uvm_probe_maxactive=1")
    assert _retentions_seen()
    assert nvtest.xpu_param("uvm_probe_maxactive") == 1
    records0 = nvtest.xpu_param("uvm_retain_records")
    with ctl.Ctl() as xctl, \
            _uvm_tenant(xctl, nodedir, "attacker", UNWATCHED) as (_, achild):
        assert achild.report() == {"ready": True}
        with _uvm_tenant(xctl, nodedir, "victim", VICTIM) as \
                (victim, vchild):
            h = vchild.report()
            assert _uvm_charged(victim) == (0, 0, 0), victim.get()
            assert nvtest.xpu_param("uvm_retain_records") == records0
            missed0 = nvtest.xpu_param("uvm_retains_unwatched")
            achild.p.stdin.write(f"{h['client']} {h['channel']}\n")
            achild.p.stdin.flush()
            assert achild.report() == {"started": True}
            assert nvtest.wait_for(
                lambda: nvtest.xpu_param("uvm_retains_unwatched") > missed0,
                10, "the second registration to find no instance")
            _go(vchild)
            freed = vchild.report()["freed"]
            assert _uvm_charged(victim) == (0, 0, 0), victim.get()
            r = achild.report()
            # premises: the free came while the unwatched call was inside
            # (RM found the channel gone); RM refused both calls; only the
            # second went unwatched
            assert freed < r["second_back"], (freed, r)
            assert r["first"] == r["second"] == \
                abi.NV_ERR_INVALID_OBJECT_HANDLE, r
            assert nvtest.xpu_param("uvm_retains_unwatched") == missed0 + 1
            assert _uvm_charged(victim) == (0, 0, 0), victim.get()
    assert nvtest.wait_for(
        lambda: nvtest.xpu_param("uvm_retain_records") == records0, 10,
        "the unwatched call's record to go with its thread")


# A slice's tenant that shares its VA space with everyone ({widen}: an
# RM_SHARE of it, or its client's inherited policy) and lets UVM go of it:
# it tells its handles, then frees its channel's TSG when told.
SHARER = REGISTERED_ON_HOST_UVM + """
import time
uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel)
ch.registered = False
uvm.unregister_gpu(ctx.uuid)
if {widen!r} == "rm_share":
    rm.share(ctx.hvas, abi.RS_SHARE_TYPE_ALL)
else:
    rm.control(rm.handle,
               abi.NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY,
               abi.RS_SHARE_POLICY(accessMask=1 << abi.RS_ACCESS_DUP_OBJECT,
                                   type=abi.RS_SHARE_TYPE_ALL))
report(client=rm.handle, vas=ctx.hvas, channel=ch.hchannel)
""" + FREES_ITS_TSG

# Another slice's tenant: it registers the sharer's VA space with a UVM
# file of its own (the share lets it), takes the pool, and has a second
# thread register the sharer's channel, which RM retains unseen by xpu.ko.
RETAINER = """
from nvclient.cudalike import CudaContext
from nvclient.uvm import Uvm, gpu_uuid
ctl = client.Ctl({ctl!r})
uvm = Uvm(ctl.abi.version, path="/dev/nvidia-uvm")
class ctx:
    uuid = gpu_uuid(0)
    next_channel_va = CudaContext.CHANNEL_VA
""" + TAKE_POOL + """
report(ready=True)
hclient, hvas, hchannel = map(int, sys.stdin.readline().split())
uvm.register_gpu(ctx.uuid)
got["vas"] = uvm.register_gpu_va_space(ctx.uuid, ctl.fileno(), hclient,
                                       hvas, check=False)
behind_the_pool(hclient, hchannel)
sys.stdin.readline()
uvm.close()
report(closed=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("widen", ["rm_share", "inherited"])
def test_an_unwatched_retention_of_a_shared_channel_pins_its_slice_s_free(
        reload_stub, nodedir, uvm_nodes, widen):  # noqa: F811
    """A client shared with everyone (RM_SHARE of its VA space, or its
    inherited policy) lets another slice's process register its VA space
    with UVM and retain its channels (RM's share policy is UVM's only
    gate).  With the pool taken, that retention goes unwatched, and the
    sharer's free of the TSG while RM holds the channel must stay charged
    to the sharer: a slice that widened a share is one whose frees
    unwatched retentions of other processes pin.  (Pinning only the
    retaining process's own slice, as before, gave the charge back --
    (0, 0, 0) -- while RM kept the TSG's context and the channel.)"""
    reload_stub(uvm_retain_wait_us=2000000, uvm_retain_delay_us=1000000)
    nvtest.insmod_xpu("uvm_probe_maxactive=1")
    assert _retentions_seen()
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    with ctl.Ctl() as xctl, \
            _uvm_tenant(xctl, nodedir, "retainer", RETAINER) as (_, achild):
        assert achild.report() == {"ready": True}
        with _uvm_tenant(xctl, nodedir, "sharer", SHARER, widen=widen) as \
                (sharer, vchild):
            h = vchild.report()
            missed0 = nvtest.xpu_param("uvm_retains_unwatched")
            achild.p.stdin.write(f"{h['client']} {h['vas']} {h['channel']}\n")
            achild.p.stdin.flush()
            assert achild.report() == {"started": True}

            def retained():
                return any(c["client"] == h["client"] and
                           c["handle"] == h["channel"] and
                           c["retainers"] == 1 for c in stub.channels(0))
            assert nvtest.wait_for(retained, 10,
                                   "RM to retain the sharer's channel")
            _go(vchild)
            freed = vchild.report()["freed"]
            r = achild.report()
            # premises: the share let the VA space in; RM refused the first
            # call and retained for the second, which went unwatched; the
            # free came before the second's return
            assert r["vas"] == abi.NV_OK, r
            assert r["first"] == abi.NV_ERR_INVALID_OBJECT_HANDLE, r
            assert r["second"] == abi.NV_OK, r
            assert freed < r["second_back"], (freed, r)
            assert nvtest.xpu_param("uvm_retains_unwatched") == missed0 + 1
            assert _uvm_charged(sharer) == (1, 1, each), sharer.get()
            assert nvtest.heap_used(0) - sharer.heap0 >= each
            # the retainer's UVM file closes: UVM lets go and destroys the
            # VA space, and the charge goes with it
            _go(achild)
            assert achild.report() == {"closed": True}
            assert _uvm_charged(sharer) == (0, 0, 0), sharer.get()


# A tenant's own registration of its channel that xpu.ko cannot watch: with
# the pool taken, the second thread's registration of the tenant's channel
# finds no instance; RM retains the channel, and while the driver waits to
# return the tenant frees the channel's TSG.
UNWATCHED_OWN = REGISTERED_ON_HOST_UVM + TAKE_POOL + """
from nvclient import stub
uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel)
ch.registered = False
first = take_pool(rm.handle)
second = threading.Thread(target=register,
                          args=("second", rm.handle, ch.hchannel))
second.start()
def retained():
    return any(c["client"] == rm.handle and c["handle"] == ch.hchannel and
               c["retainers"] == 1 for c in stub.channels(0))
while not retained():
    assert second.is_alive(), got
rm.free(ch.htsg)
ch._objs.remove(ch.htsg)
got["freed"] = time.monotonic()
first.join()
second.join()
report(**got)
sys.stdin.readline()
uvm.close()
report(closed=True)
sys.stdin.readline()
"""


def test_a_registration_xpu_cannot_watch_still_pins_its_own_slice_s_free(
        reload_stub, nodedir, uvm_nodes):  # noqa: F811
    """The other side of the test above: a tenant's own unwatched
    registration (the pool of one instance taken by its first thread)
    still pins its slice's free of the channel, so class 39's race stays
    closed when the probes run out: RM retains the channel, the tenant
    frees the TSG before the driver returns, and the slice stays charged
    for the TSG and channel RM keeps.  When UVM lets go, xpu.ko, which
    never learnt UVM's pointer, does not see the release; the charge goes
    when UVM destroys the VA space the retain named (the tenant's UVM file
    closes), after which nothing of it is retained.  (With unwatched
    records pinning nothing, the slice read 0 while RM held them; before
    session 55 the charge stayed until xpu.ko was unloaded.)"""
    reload_stub(uvm_retain_wait_us=2000000, uvm_retain_delay_us=1000000)
    nvtest.insmod_xpu("uvm_probe_maxactive=1")
    assert _retentions_seen()
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    missed0 = nvtest.xpu_param("uvm_retains_unwatched")
    with ctl.Ctl() as xctl, \
            _uvm_tenant(xctl, nodedir, "own", UNWATCHED_OWN) as (sl, child):
        r = child.report()
        # premises: RM refused the first and retained for the second, which
        # went unwatched; the free came before the second's return
        assert r["first"] == abi.NV_ERR_INVALID_OBJECT_HANDLE, r
        assert r["second"] == abi.NV_OK, r
        assert r["freed"] < r["second_back"], r
        assert nvtest.xpu_param("uvm_retains_unwatched") == missed0 + 1
        assert _uvm_charged(sl) == (1, 1, each), sl.get()
        assert nvtest.heap_used(0) - sl.heap0 >= each
        records = nvtest.xpu_param("uvm_retain_records")
        _go(child)
        assert child.report() == {"closed": True}
        assert _uvm_charged(sl) == (0, 0, 0), sl.get()
        assert nvtest.xpu_param("uvm_retain_records") < records


# A channel's handle made again: CH (registered through UVM file A) is
# freed, and its handle named for a new channel of a new TSG on a second
# context (UVM file B, a VA space of its own), registered through B; A then
# lets go of the old channel, and the new TSG is freed while B retains its
# channel.
HANDLE_MADE_AGAIN = REGISTERED_ON_HOST_UVM + """
h = ch.hchannel
rm.free(h)
report(step="freed")
sys.stdin.readline()
uvm2 = Uvm(ctl.abi.version, path="/dev/nvidia-uvm")
ctx2 = CudaContext(dev, uvm2)
t2 = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
              abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                  engineType=abi.NV2080_ENGINE_TYPE_GR0))
share = rm.alloc(t2, abi.FERMI_CONTEXT_SHARE_A,
                 abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                     hVASpace=ctx2.hvas,
                     flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
area = ctx2.alloc(2 << 20, vidmem=True, cpu=True)
p = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
p.hObjectBuffer = area.handle
p.gpFifoOffset = area.va
p.gpFifoEntries = 1024
p.hContextShare = share
p.hUserdMemory[0] = area.handle
p.userdOffset[0] = 1024 * abi.NV_GPFIFO_ENTRY_SIZE
assert rm.alloc(t2, abi.HOPPER_CHANNEL_GPFIFO_A, p, hnew=h) == h
uvm2.register_channel(ctx2.uuid, ctl.fileno(), rm.handle, h,
                      ctx2.next_channel_va, 64 << 20)
uvm.unregister_channel(ctx.uuid, rm.handle, h)
report(step="made again")
sys.stdin.readline()
rm.free(t2)
report(step="tsg freed")
sys.stdin.readline()
uvm2.close()
report(step="closed")
sys.stdin.readline()
"""


def test_a_retention_of_a_handle_made_again_inherits_nothing_of_the_old(
        admin, nodedir, uvm_nodes):  # noqa: F811
    """Class 39 with a channel's handle made again (found in session 65 by
    a study of retain.c): a registered channel freed leaves its charge
    pinned to its retention; the tenant makes a new channel, of a new TSG,
    under the same handle and registers it through another UVM file, then
    lets the old registration go.  The old pin moved to the new retention,
    the only other one of that (client, handle), with the old channel's
    TSG as its TSG, so the new TSG's free found no retention of its own:
    RM kept the new TSG's context and channel for UVM, and the slice was
    charged 4 KiB for them (0, 1, 4096).  Now a retention takes a pin only
    of a record that went after it entered (RM looks the handle up inside
    the call): the old charge goes with the old channel, and the new TSG
    and channel are charged while UVM keeps them."""
    assert _retentions_seen()
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    with _uvm_tenant(admin, nodedir, "uvmagain",
                     HANDLE_MADE_AGAIN) as (sl, child):
        assert child.report() == {"step": "freed"}
        # premise: the old channel's charge pinned to its retention
        assert _uvm_charged(sl) == (0, 1, 4096), sl.get()
        _go(child)
        assert child.report() == {"step": "made again"}
        assert _uvm_charged(sl) == (0, 0, 0), sl.get()
        held = nvtest.heap_used(0)
        _go(child)
        assert child.report() == {"step": "tsg freed"}
        # premise: RM keeps the new TSG's context and channel for UVM
        assert nvtest.heap_used(0) == held
        assert _uvm_charged(sl) == (1, 1, each), sl.get()
        _go(child)
        assert child.report() == {"step": "closed"}
        assert _uvm_charged(sl) == (0, 0, 0), sl.get()


# Two channels of one TSG, both registered with UVM (through a UVM file of
# no slice's), the TSG freed (RM frees both channels with it), then UVM
# lets go of one channel and then of the other.
TWO_IN_A_TSG = REGISTERED_ON_HOST_UVM + """
p = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
off = 1 << 16
p.hObjectBuffer = ch.area.handle
p.gpFifoOffset = ch.area.va + off
p.gpFifoEntries = 1024
p.hContextShare = ch.hctxshare
p.hUserdMemory[0] = ch.area.handle
p.userdOffset[0] = off + 1024 * abi.NV_GPFIFO_ENTRY_SIZE
second = rm.alloc(ch.htsg, abi.HOPPER_CHANNEL_GPFIFO_A, p)
uvm.register_channel(ctx.uuid, ctl.fileno(), rm.handle, second,
                     ctx.next_channel_va, 64 << 20)
rm.free(ch.htsg)
for h in (ch.hchannel, second):
    assert h not in rm.parents
report(step="freed")
sys.stdin.readline()
order = [ch.hchannel, second][::{step}]
uvm.unregister_channel(ctx.uuid, rm.handle, order[0])
report(step="one")
sys.stdin.readline()
uvm.unregister_channel(ctx.uuid, rm.handle, order[1])
report(step="both")
sys.stdin.readline()
"""


@pytest.mark.parametrize("order", ["made_first", "made_last"])
def test_a_tsg_stays_charged_while_uvm_retains_any_of_its_channels(
        admin, nodedir, uvm_nodes, order):  # noqa: F811
    """Class 39 with two registered channels in one TSG: the TSG's free
    leaves RM holding its context and both channels for UVM, and the slice
    charged for them; when UVM lets go of one channel (ORDER: the one made
    first, or last) its charge goes, but the TSG's stays with the other
    channel's retention (RM still holds the context: UVM's duplicate of
    the TSG), until UVM lets go of that one too.  (With the TSG's charge
    given back at the first release instead of moved: `[made_last]` read
    no TSG after it.)"""
    assert _retentions_seen()
    ctx_bytes = nvtest.xpu_param("gr_context_kib") << 10
    heap0 = nvtest.heap_used(0)
    with _uvm_tenant(admin, nodedir, "uvmtsg2", TWO_IN_A_TSG,
                     step=1 if order == "made_first" else -1) as (sl, child):
        assert child.report() == {"step": "freed"}
        assert _uvm_charged(sl) == (1, 2, ctx_bytes + 2 * 4096)
        held = nvtest.heap_used(0)
        assert held - heap0 >= ctx_bytes + 2 * 4096
        _go(child)
        assert child.report() == {"step": "one"}
        # RM gave back the first channel's instance block, not the context
        assert held - nvtest.heap_used(0) == 4096
        assert _uvm_charged(sl) == (1, 1, ctx_bytes + 4096)
        _go(child)
        assert child.report() == {"step": "both"}
        assert held - nvtest.heap_used(0) == ctx_bytes + 2 * 4096
        assert _uvm_charged(sl) == (0, 0, 0)


# A task of a bound cgroup: the driver's own nodes (/dev/nvidiactl,
# /dev/nvidia0, /dev/nvidia-uvm), CUDA's channel set-up, registration and
# a free of the TSG, again, until refused (or ROUNDS made).
CGROUP_TENANT = """
import os
with open({procs!r}, "w") as f:
    f.write(str(os.getpid()))
from nvclient.cudalike import CudaChannel, CudaContext
from nvclient.uvm import Uvm
os.close(os.open("/dev/nvidia-uvm-tools", os.O_RDWR))
ctl = client.Ctl(); gpu = client.GpuFile(0)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
uvm = Uvm(ctl.abi.version)
""" + REGISTER_AND_FREE


def test_a_bound_cgroup_s_uvm_files_of_the_driver_s_node_are_its_slice_s(
        admin, nodedir, uvm_nodes, config):  # noqa: F811
    """Class 39 for a task of a bound cgroup that opens the driver's own
    /dev/nvidia-uvm (no container, no UVM node of the slice): xpu.ko
    interposes on the open of UVM's character device, so the file is held
    for the slice as one of its UVM node is, and the channels it retains
    stay charged: the 64 MiB slice is refused.  The tools node of the same
    device opens untouched.  (Without the interposition the task's file
    was no slice's: 200 rounds, never refused, the slice's uvm_files 0.)"""
    each = (nvtest.xpu_param("gr_context_kib") << 10) + 4096
    sl = Slice(admin, nodedir, name="uvmcg", limit=64 * MiB)
    heap0 = nvtest.heap_used(0)
    base = f"/sys/fs/cgroup/xpu-uvm-{os.getpid()}"
    os.makedirs(base)
    child = None
    try:
        admin.cgroup_bind(sl.id, base)
        assert _interposed()
        child = nvtest.spawn_child(CGROUP_TENANT.format(
            procs=base + "/cgroup.procs", rounds=200))
        r = child.report()
        assert r["refused"] == abi.NV_ERR_NO_MEMORY, r
        assert r["made"] >= (64 * MiB) // each - 4, r
        got = sl.get()
        assert got.uvm_files == 1 and got.uvm_channels == r["made"], got
        assert got.memory_used <= 64 * MiB
        assert nvtest.heap_used(0) - heap0 >= r["made"] * each
        # a UVM file of a task outside every slice: UVM's, not held
        with Uvm(config.version, path="/dev/nvidia-uvm") as u:
            u.register_gpu(gpu_uuid(0))
            assert sl.get().uvm_files == 1
        _go(child)
        assert child.report() == {"closed": True}
        assert nvtest.wait_for(lambda: sl.get().uvm_files == 0, 30,
                               "xpu.ko to let go of the UVM file")
        got = sl.get()
        assert (got.uvm_tsgs, got.uvm_channels, got.uvm_retained) == \
            (0, 0, 0), got
        _go(child)
        assert child.finish() == 0
        child = None
        admin.cgroup_unbind(sl.id, base)
    finally:
        if child is not None:
            child.p.kill()
            child.finish()
        os.rmdir(base)
        sl.destroy()
    assert nvtest.heap_used(0) == heap0


def _interposed():
    with open("/sys/module/xpu/parameters/uvm_interposed") as f:
        return f.read().strip() == "Y"


def test_uvm_s_node_opens_with_xpu_interposed_unloaded_and_reloaded(
        uvm_nodes, config):
    """xpu.ko interposes on the open of UVM's own device when it finds it
    (at load, when the node is there), and puts UVM's table back at
    unload: a UVM file opened through the interposition outlives xpu.ko,
    the node opens and works with xpu.ko gone, and again once reloaded."""
    ko = os.environ.get("XPU_KO")
    if not ko:
        pytest.skip("XPU_KO is not set")
    params = os.environ.get("XPU_KO_PARAMS", "").split()
    held = []
    try:
        for _ in range(3):
            subprocess.run(["rmmod", "xpu"], check=True)
            with Uvm(config.version) as u:
                u.register_gpu(gpu_uuid(0))
            subprocess.run(["insmod", ko, *params], check=True)
            assert _interposed()
            u = Uvm(config.version)
            u.register_gpu(gpu_uuid(0))
            held.append(u)
        # uvm_node naming the NVIDIA driver's own node: neither taken for
        # UVM's nor interposed on
        subprocess.run(["rmmod", "xpu"], check=True)
        subprocess.run(["insmod", ko, *params, "uvm_node=/dev/nvidiactl"],
                       check=True)
        assert not _interposed()
        with pytest.raises(OSError) as e:
            os.close(os.open("/dev/xpu-uvm", os.O_RDWR))
        assert e.value.errno == errno.ENODEV
        with client.Ctl() as c:
            client.RmClient(c).close()
    finally:
        for u in held:
            u.close()
        # xpu.ko as the rig loads it
        node = "/sys/module/xpu/parameters/uvm_node"
        loaded = None
        if os.path.exists(node):
            with open(node) as f:
                loaded = f.read().strip()
        if loaded == "/dev/nvidiactl":
            subprocess.run(["rmmod", "xpu"], check=True)
        if loaded in (None, "/dev/nvidiactl"):
            subprocess.run(["insmod", ko, *params], check=True)


@pytest.fixture
def max_uvm_files():
    """Sets xpu.ko's max_uvm_files for the test, and puts it back."""
    yield from module_param("max_uvm_files")


def test_a_slice_s_uvm_files_are_bounded_and_its_node_checked(
        admin, nodedir, uvm_nodes, config, max_uvm_files):  # noqa: F811
    """Each UVM file of a slice's node is a UVM va_space xpu.ko holds until
    nobody else does: a slice holds at most max_uvm_files (EMFILE past it),
    a place coming back once a closed file is let go.  Only a node of
    xpu-uvm is attached as a slice's UVM node (ENODEV for a GPU node); an
    open of xpu-uvm outside every slice is a UVM file xpu.ko does not
    hold."""
    sl = Slice(admin, nodedir, name="uvmfiles", limit=64 * MiB)
    held = []
    try:
        node = _uvm_node(admin, sl, nodedir)
        with pytest.raises(ctl.CtlError) as e:
            admin.node_attach(sl.id, sl.gpu_node, uapi.XPU_NODE_UVM)
        assert e.value.errno == errno.ENODEV
        max_uvm_files(2)
        held = [Uvm(config.version, path=node) for _ in range(2)]
        with pytest.raises(OSError) as e:
            Uvm(config.version, path=node)
        assert e.value.errno == errno.EMFILE
        assert sl.get().uvm_files == 2
        held.pop().close()
        assert nvtest.wait_for(lambda: sl.get().uvm_files == 1, 30,
                               "xpu.ko to let go of the closed UVM file")
        held.append(Uvm(config.version, path=node))
        # outside every slice: UVM's file, not held, and root's alone (a
        # host may have made its own UVM node narrower)
        st = os.stat("/dev/xpu-uvm")
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, 0)
        with Uvm(config.version, path="/dev/xpu-uvm") as u:
            u.register_gpu(gpu_uuid(0))
            assert sl.get().uvm_files == 2
    finally:
        for u in held:
            u.close()
        sl.destroy()


def test_a_slice_s_uvm_files_leave_no_open_file_behind(
        admin, nodedir, uvm_nodes, config, max_uvm_files):  # noqa: F811
    """A slice counts its open driver files (`open_files`), and a destroy
    without --force is refused while any is open.  Since session 56 the
    count was taken where the slice of an open is found, which UVM's opens
    share, and nothing took a UVM file's back (found by a review in
    session 58): every UVM file a slice ever opened, or was refused,
    stayed counted, and the slice of any CUDA program could never be
    destroyed without --force.  Now a UVM file is not counted."""
    sl = Slice(admin, nodedir, name="uvmopen", limit=64 * MiB)
    destroyed = False
    try:
        node = _uvm_node(admin, sl, nodedir)
        assert sl.get().open_files == 0
        max_uvm_files(1)
        with Uvm(config.version, path=node) as u:
            u.register_gpu(gpu_uuid(0))
            with pytest.raises(OSError) as e:       # past the bound
                Uvm(config.version, path=node)
            assert e.value.errno == errno.EMFILE
        assert nvtest.wait_for(lambda: sl.get().uvm_files == 0, 30,
                               "xpu.ko to let go of the closed UVM file")
        assert sl.get().open_files == 0, sl.get()
        admin.slice_destroy(sl.id, force=False)
        destroyed = True
        for p in (sl.gpu_node, sl.ctl_node):
            os.unlink(p)
    finally:
        if not destroyed:
            sl.destroy()
