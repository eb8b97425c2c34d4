# SPDX-License-Identifier: Apache-2.0
"""Memory UVM keeps stays charged to the slice that allocated it (issue 18,
rule 4; docs/memory.md, "Memory UVM keeps").

UVM_MAP_EXTERNAL_ALLOCATION duplicates each mapped allocation into UVM's
kernel client; RM_FREE of the tenant's handle then passes ownership to that
duplicate, which GET_PID_INFO charges to no process.  xpu takes a duplicate
of its own (the ledger) before such a free reaches RM, and lets go of it only
when RM shows it alone."""

import nvtest
import pytest
from nvclient import abi
from test_xpu_mem import Slice, admin, nodedir  # noqa: F401

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
