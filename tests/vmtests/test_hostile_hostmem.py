# SPDX-License-Identifier: Apache-2.0
"""Hostile tenants against the host's memory (issue 17, class 25,
docs/security.md): system memory RM allocates for a slice's clients
(NV01_MEMORY_SYSTEM) is pages the driver takes with plain GFP_KERNEL,
charged to no memory cgroup.  A slice's host_memory_limit bounds it, and
the charge follows the pages, not the handle: memory whose handle is gone
but whose pages something else still holds (a CPU mapping here; UVM's
duplicate on a real host) stays charged until the pages go.

Each test fails on an xpu.ko without the page ledger (kmod/hostmem.c): with
no bound the allocations past it are admitted; with a charge that goes with
the handle, the allocation after a free whose pages a mapping keeps is
admitted."""

import inspect
import subprocess
import sys

import nvtest
import pytest
import test_xpu_mem
from test_xpu_mem import Slice

pytestmark = pytest.mark.usefixtures("require_xpu")

admin = test_xpu_mem.admin
nodedir = test_xpu_mem.nodedir

MiB = 1 << 20
HOST = 8 * MiB


@pytest.fixture
def sl(admin, nodedir):
    heap0 = nvtest.heap_used(0)
    s = Slice(admin, nodedir, name="hostmem", limit=64 * MiB)
    info = admin.slice_set(s.id, host_memory_limit=HOST)
    assert info.host_memory_limit == HOST and info.host_memory_used == 0
    yield s
    s.destroy()
    assert nvtest.heap_used(0) == heap0


# What the children share: the slice's figures, and an allocation's status.
PRELUDE = """
from xpu import ctl as xpu_ctl
def used():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).host_memory_used
def sysmem(size):
    p = dev.memory_params(size, location=abi.NVOS32_ATTR_LOCATION_PCI)
    r = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_SYSTEM, p)
    return r.status, r.hObjectNew
MiB = 1 << 20
"""


def child(sl, code):
    """CODE in a process of the slice, with a client and device of its
    own and nothing else allocated."""
    src = (nvtest.CHILD_PRELUDE + nvtest.RAW_PRELUDE + PRELUDE + code).replace(
        "CTL", repr(sl.ctl_node)).replace("GPU", repr(sl.gpu_node)).replace(
        "SLICE", str(sl.id))
    r = subprocess.run([sys.executable, "-c", src], check=False,
                       capture_output=True, text=True, cwd="/", timeout=300)
    assert r.returncode == 0, r.stderr


def test_system_memory_past_the_host_bound_is_refused_and_freeing_gives_it_back(
        sl, admin):
    """An 8 MiB bound: two 4 MiB allocations fit (one by RM_ALLOC, one by
    VID_HEAP_CONTROL at LOCATION_PCI), a page more by any of the three ways
    in (RM_ALLOC, VID_HEAP_CONTROL, RM_ALLOC_MEMORY on the GPU file) is
    NV_ERR_NO_MEMORY and counted as a denial; after a free, 4 MiB fit
    again, and the slice reads what RM holds for it at every step."""
    denied0 = admin.slice_get(sl.id).denied_allocs
    child(sl, """
st, a = sysmem(4 * MiB)
assert st == abi.NV_OK, hex(st)
assert used() == 4 * MiB
b = dev.heap_alloc(4 * MiB, location=abi.NVOS32_ATTR_LOCATION_PCI)
assert used() == 8 * MiB
st, _ = sysmem(4096)
assert st == abi.NV_ERR_NO_MEMORY, hex(st)
r = dev.heap_alloc_raw(4096, location=abi.NVOS32_ATTR_LOCATION_PCI)
assert r.status == abi.NV_ERR_NO_MEMORY, hex(r.status)
gpu.register_fd(ctl)
NO_MAP = 1 << 30
r = gpu.rm_alloc_memory(rm.handle, dev.hdevice, abi.NV01_MEMORY_SYSTEM,
                        flags=NO_MAP, limit=4095, hnew=0xCAFE0001, check=False)
assert r.params.status == abi.NV_ERR_NO_MEMORY, hex(r.params.status)
rm.free(a)
assert used() == 4 * MiB
gpu.rm_alloc_memory(rm.handle, dev.hdevice, abi.NV01_MEMORY_SYSTEM,
                    flags=NO_MAP, limit=4 * MiB - 1, hnew=0xCAFE0001)
assert used() == 8 * MiB
ctl.rm_free(rm.handle, dev.hdevice, 0xCAFE0001)
assert used() == 4 * MiB
st, a = sysmem(4 * MiB)
assert st == abi.NV_OK, hex(st)
dev.heap_free(b.handle)
rm.free(a)
assert used() == 0
""")
    assert admin.slice_get(sl.id).denied_allocs == denied0 + 3


def test_the_page_of_a_call_cannot_be_made_read_only(sl, admin):
    """The page xpu.ko maps in a process for the calls it makes there
    (kmod/callpage.c) made read-only between two calls: the driver's
    copy-back of the next call would fail (-EFAULT) after RM acted, and
    xpu would read its own copy of the call -- whatever status the caller
    put there -- as RM's answer.  A caller that wrote a failure there had
    each system-memory allocation go unrecorded: past the 8 MiB bound with
    the slice reading 0.  mprotect of the page is refused (EPERM) where
    the kernel lets a mapping's driver say so (5.11+), and on a sealing
    kernel (6.10+) so are munmap, mremap and mmap over it; then four
    allocations of 4 MiB with a failure preset: two made, two refused, and
    the slice reads 8 MiB."""
    guard = nvtest.xpu_param("call_page_guard")
    if guard == 0:
        pytest.skip("no mprotect hook for a mapping's driver before 5.11")
    denied0 = admin.slice_get(sl.id).denied_allocs
    child(sl, """
import errno
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
def call_page():
    with open("/proc/self/maps") as f:
        for line in f:
            if "xpu-call" in line:
                return int(line.split("-")[0], 16)
page = call_page()                  # kept from the calls above
assert page, "no page of a call"
assert libc.mprotect(page, mmap.PAGESIZE, mmap.PROT_READ) == -1
assert ctypes.get_errno() == errno.EPERM, ctypes.get_errno()
if GUARD == 2:
    assert libc.munmap(page, mmap.PAGESIZE) == -1
    assert ctypes.get_errno() == errno.EPERM
    at = libc.mmap(page, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE,
                   mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10, -1, 0)
    assert at == 2 ** 64 - 1 and ctypes.get_errno() == errno.EPERM, at
assert call_page() == page
made = 0
for i in range(4):
    mp = dev.memory_params(4 * MiB, location=abi.NVOS32_ATTR_LOCATION_PCI)
    p = abi.NVOS21_PARAMETERS(hRoot=rm.handle, hObjectParent=dev.hdevice,
                              hObjectNew=0xCAFE1000 + i,
                              hClass=abi.NV01_MEMORY_SYSTEM,
                              pAllocParms=ctypes.addressof(mp),
                              paramsSize=ctypes.sizeof(mp),
                              status=abi.NV_ERR_GENERIC)
    assert client.escape_raw(ctl.fd, abi.NV_ESC_RM_ALLOC, p) == 0
    assert p.status in (abi.NV_OK, abi.NV_ERR_NO_MEMORY), hex(p.status)
    made += p.status == abi.NV_OK
assert made == 2, made
assert used() == 8 * MiB, used()
""".replace("GUARD", str(guard)))
    assert admin.slice_get(sl.id).denied_allocs == denied0 + 2


def _mem_free():
    """The host's free memory (bytes): the zones' free pages and those on
    their per-CPU lists (/proc/zoneinfo), which MemFree leaves out -- 6.12
    kept 120 MiB of the pages freed here on them."""
    pages = 0
    with open("/proc/zoneinfo") as f:
        for line in f:
            w = line.split()
            if w[:2] == ["pages", "free"]:
                pages += int(w[2])
            elif w[:1] == ["count:"]:
                pages += int(w[1])
    return pages * 4096


def test_system_memory_goes_back_to_the_host_without_a_bound_or_a_read(
        admin, nodedir):
    """A slice with no host bound (the default) still records the pages of
    its system memory, with a reference on each.  Those of objects it
    frees go back to the host at its next calls, and those of the objects
    its control file's close took at the close -- not only when an admin
    reads the slice.  48 allocations of 4 MiB freed one by one, then 48
    left to the file's close: neither leaves 192 MiB held (nobody reads the
    slice meanwhile).  Before session 52 both did, until an admin read."""
    heap0 = nvtest.heap_used(0)
    sl = Slice(admin, nodedir, name="hostfree", limit=64 * MiB)
    try:
        child(sl, inspect.getsource(_mem_free) + """
import gc
before = _mem_free()
for _ in range(48):
    st, h = sysmem(4 * MiB)
    assert st == abi.NV_OK, hex(st)
    rm.free(h)
gc.collect()
held = before - _mem_free()
assert held < 64 * MiB, held // MiB
""")
        before = _mem_free()
        child(sl, """
for _ in range(48):
    st, h = sysmem(4 * MiB)
    assert st == abi.NV_OK, hex(st)
""")
        held = before - _mem_free()
        assert held < 64 * MiB, held // MiB
        assert admin.slice_get(sl.id).host_memory_used == 0
    finally:
        sl.destroy()
    assert nvtest.heap_used(0) == heap0


def test_system_memory_a_mapping_still_holds_stays_charged_after_its_free(sl):
    """The tenant maps 8 MiB of system memory, frees the handle and
    allocates again: the mapping keeps the pages (vm_insert_page's
    references, as the driver's own mmap takes them), so the slice still
    holds 8 MiB of the host's memory and the new allocation is refused.
    Once the mapping goes, so do the pages and the charge."""
    child(sl, """
st, h = sysmem(8 * MiB)
assert st == abi.NV_OK, hex(st)
m = dev.map(h, 8 * MiB)
m.write32(0, 0x5EC0DE)
rm.free(h)
assert m.read32(0) == 0x5EC0DE      # the premise: the pages live on
assert used() == 8 * MiB
st, _ = sysmem(4 * MiB)
assert st == abi.NV_ERR_NO_MEMORY, hex(st)
m.close(unmap=False)
assert used() == 0
st, h = sysmem(8 * MiB)
assert st == abi.NV_OK, hex(st)
rm.free(h)
""")


def test_deviceless_memory_is_not_made_in_a_bounded_slice(sl, admin):
    """NV01_MEMORY_DEVICELESS (0x90CE, under the client) is system memory
    too, and RM tells no one its pages: a slice with a host bound refuses
    it, NV_ERR_NOT_SUPPORTED, before RM sees it (the stub, which has no
    such class, would answer NV_ERR_INVALID_CLASS); without a bound it is
    RM's to answer."""
    child(sl, """
p = dev.memory_params(4096, location=abi.NVOS32_ATTR_LOCATION_PCI)
r = rm.alloc_raw(rm.handle, 0x90CE, p)
assert r.status == abi.NV_ERR_NOT_SUPPORTED, hex(r.status)
with xpu_ctl.Ctl() as a:
    a.slice_set(SLICE, host_memory_limit=0)
r = rm.alloc_raw(rm.handle, 0x90CE, p)
assert r.status == abi.NV_ERR_INVALID_CLASS, hex(r.status)
""")


def test_a_host_bound_below_what_the_slice_holds_is_refused(sl, admin):
    """SET lowers the bound only to what the slice holds: below is -EBUSY,
    the old bound kept, and nothing else the same SET names changes (a
    raise of the memory limit with it); no bound (0) is always accepted,
    and a slice with none still reads what it holds."""
    child(sl, """
import errno
st, h = sysmem(4 * MiB)
assert st == abi.NV_OK, hex(st)
with xpu_ctl.Ctl() as a:
    try:
        a.slice_set(SLICE, host_memory_limit=2 * MiB)
        raise AssertionError("a bound below the slice's use was set")
    except xpu_ctl.CtlError as e:
        assert e.errno == errno.EBUSY, e
    assert a.slice_get(SLICE).host_memory_limit == 8 * MiB
    try:
        a.slice_set(SLICE, memory_limit=128 * MiB, host_memory_limit=2 * MiB)
        raise AssertionError("a bound below the slice's use was set")
    except xpu_ctl.CtlError as e:
        assert e.errno == errno.EBUSY, e
    got = a.slice_get(SLICE)
    assert (got.memory_limit, got.host_memory_limit) == (64 * MiB, 8 * MiB)
    assert a.slice_set(SLICE, host_memory_limit=0).host_memory_limit == 0
    st, h2 = sysmem(16 * MiB)
    assert st == abi.NV_OK, hex(st)
    assert used() == 20 * MiB
    rm.free(h2)
    assert a.slice_set(SLICE, host_memory_limit=4 * MiB).host_memory_used == 4 * MiB
rm.free(h)
""")
    assert admin.slice_get(sl.id).host_memory_limit == 4 * MiB
