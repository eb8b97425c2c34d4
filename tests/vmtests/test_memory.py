# SPDX-License-Identifier: Apache-2.0
"""Video memory: both ways in (RM_ALLOC of class 0x40, RM_VID_HEAP_CONTROL),
exact accounting in every report (VID_HEAP INFO, FB_GET_INFO V1/V2, the size
query, per-process usage, the stub's heap), rounding, exhaustion, and the
second read of the alloc params from user memory."""

import ctypes
import errno
import mmap
import os
import threading
import time

import nvtest
import pytest
from nvclient import abi, client

MiB = 1 << 20
KiB = 1 << 10

TOTAL = abi.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE
RAM = abi.NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE
HEAP = abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE
HEAP_FREE = abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE
USABLE = abi.NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE
INDICES = [TOTAL, RAM, HEAP, HEAP_FREE, USABLE]


class Reports:
    """Every figure of one GPU's video memory, read at once."""

    def __init__(self, dev):
        self.info_total, self.info_free = dev.heap_info()
        self.v1 = dev.fb_info(INDICES)
        self.v2 = dev.fb_info_v2(INDICES)
        self.used = nvtest.heap_used(dev.index)


def test_reports_agree_at_rest(dev0, config):
    r = Reports(dev0)
    assert r.info_total == config.memory_bytes
    assert r.v1 == r.v2
    assert r.v2[TOTAL] == config.memory_mib * 1024
    assert r.v2[HEAP] * KiB == r.info_total
    assert r.v2[HEAP_FREE] * KiB == r.info_free
    assert r.info_free == r.info_total - r.used


@pytest.mark.parametrize("path", ["rm_alloc/nvos21", "rm_alloc/nvos64",
                                  "vid_heap"])
def test_allocation_is_exact_everywhere(dev0, path):
    before = Reports(dev0)
    size = 96 * MiB
    if path == "vid_heap":
        mem = dev0.heap_alloc(size)
    else:
        mem = dev0.alloc_vidmem(size, nvos64=path.endswith("64"))
    assert mem.size == size
    after = Reports(dev0)
    assert after.info_total == before.info_total
    assert after.info_free == before.info_free - size
    assert after.v1[HEAP_FREE] == before.v1[HEAP_FREE] - size // KiB
    assert after.v2[HEAP_FREE] == before.v2[HEAP_FREE] - size // KiB
    assert after.used == before.used + size
    if path == "vid_heap":
        dev0.heap_free(mem.handle)
    else:
        dev0.client.free(mem.handle)
    again = Reports(dev0)
    assert (again.info_free, again.used) == (before.info_free, before.used)


def test_heap_free_by_rm_free_and_rm_alloc_by_heap_free(dev0):
    """Both ways out work for both ways in: the object is the same kind."""
    _, free0 = dev0.heap_info()
    a = dev0.heap_alloc(MiB)
    b = dev0.alloc_vidmem(MiB)
    dev0.client.free(a.handle)
    dev0.heap_free(b.handle)
    assert dev0.heap_info()[1] == free0


# memmgrDeterminePageSize() on Hopper: by default 2 MiB pages from 2 MiB up,
# 64 KiB (big) pages below; the size is rounded to the page and written back.
@pytest.mark.parametrize("asked,got", [
    (1, 64 * KiB), (64 * KiB, 64 * KiB), (64 * KiB + 1, 128 * KiB),
    (2 * MiB - 1, 2 * MiB), (2 * MiB + 1, 4 * MiB), (5 * MiB + 3, 6 * MiB)])
def test_size_rounded_and_written_back(dev0, asked, got):
    _, free0 = dev0.heap_info()
    a = dev0.alloc_vidmem(asked)
    b = dev0.heap_alloc(asked)
    assert a.size == got
    assert b.size == got
    assert dev0.heap_info()[1] == free0 - 2 * got
    dev0.client.free(a.handle)
    dev0.client.free(b.handle)


def test_page_size_attributes(dev0):
    """An explicit big (64 KiB) page keeps a large size at 64 KiB steps; an
    explicit huge page rounds a small one to 2 MiB."""
    _, free0 = dev0.heap_info()
    p = dev0.memory_params(5 * MiB + 3)
    p.attr |= abi.NVOS32_ATTR_PAGE_SIZE_BIG << abi.NVOS32_ATTR_PAGE_SIZE_SHIFT
    big = dev0.client.alloc(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    assert p.size == 5 * MiB + 64 * KiB
    a = dev0.alloc_vidmem(MiB + 1, huge=True)
    b = dev0.heap_alloc(1, huge=True)
    assert (a.size, b.size) == (2 * MiB, 2 * MiB)
    assert dev0.heap_info()[1] == free0 - 4 * MiB - p.size
    for h in (big, a.handle, b.handle):
        dev0.client.free(h)


def test_virtual_reserves_nothing(dev0):
    """VID_HEAP with ALLOC_FLAGS_VIRTUAL makes an NV50_MEMORY_VIRTUAL range:
    no video memory.  Class 0x40 itself refuses the flag (vidmemConstruct).
    Lazy ranges: one that is not pins its page tables
    (test_gpu_va.py::test_a_virtual_allocation_pins_its_page_tables_unless_lazy)."""
    virtual = abi.NVOS32_ALLOC_FLAGS_VIRTUAL | abi.NVOS32_ALLOC_FLAGS_LAZY
    # the device's default VA space, and its PDB, come with its first use
    dev0.client.free(dev0.alloc_virtual(4096)[0])
    _, free0 = dev0.heap_info()
    used0 = nvtest.heap_used(0)
    heap = dev0.heap_alloc(64 * MiB, flags=virtual)
    p = dev0.memory_params(64 * MiB, flags=abi.NVOS32_ALLOC_FLAGS_LAZY)
    # virtmemConstruct(): a virtual allocation says so in its flags
    st = dev0.client.alloc_raw(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    p = dev0.memory_params(64 * MiB, flags=virtual)
    virt = dev0.client.alloc(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL, p)
    assert dev0.heap_info()[1] == free0
    assert nvtest.heap_used(0) == used0
    p = dev0.memory_params(64 * MiB, flags=virtual)
    st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    assert dev0.heap_info()[1] == free0
    dev0.heap_free(heap.handle)
    dev0.client.free(virt)


def test_memory_params_validated(dev0):
    """stdmemValidateParams(): an owner, a size, no internal flags."""
    _, free0 = dev0.heap_info()
    for field, value, status in [("owner", 0, abi.NV_ERR_INVALID_OWNER),
                                 ("owner", 0xFFFFFFFF, abi.NV_ERR_INVALID_OWNER),
                                 ("size", 0, abi.NV_ERR_INVALID_ARGUMENT),
                                 ("internalflags", 1,
                                  abi.NV_ERR_INVALID_ARGUMENT)]:
        p = dev0.memory_params(MiB)
        setattr(p, field, value)
        st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
        assert st.status == status, field
    assert dev0.heap_info()[1] == free0


def test_exhaustion_is_no_memory_and_leaks_nothing(dev0):
    _, free0 = dev0.heap_info()
    objs = nvtest.objects_total()
    for nvos64 in (False, True):
        p = dev0.memory_params(free0 + 64 * KiB)
        st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER,
                                   p, nvos64=nvos64)
        assert st.status == abi.NV_ERR_NO_MEMORY
    h = dev0.heap_alloc_raw(free0 + 64 * KiB)
    assert h.status == abi.NV_ERR_NO_MEMORY
    assert dev0.heap_info()[1] == free0
    assert nvtest.objects_total() == objs
    # the whole heap can be had, and then nothing more
    whole = dev0.alloc_vidmem(free0)
    assert dev0.heap_info()[1] == 0
    assert dev0.fb_info([HEAP_FREE]) == {HEAP_FREE: 0}
    assert dev0.fb_info_v2([HEAP_FREE]) == {HEAP_FREE: 0}
    assert dev0.heap_alloc_raw(64 * KiB).status == abi.NV_ERR_NO_MEMORY
    p = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER,
                              dev0.memory_params(1))
    assert p.status == abi.NV_ERR_NO_MEMORY
    dev0.client.free(whole.handle)
    assert dev0.heap_info()[1] == free0


def test_gpus_have_separate_heaps(rm, config):
    if config.gpus < 2:
        pytest.skip("needs two GPUs")
    d0, d1 = rm.device(0), rm.device(1)
    _, f1 = d1.heap_info()
    mem = d0.alloc_vidmem(32 * MiB)
    assert d1.heap_info()[1] == f1
    assert nvtest.heap_used(1) == d1.heap_info()[0] - f1
    rm.free(mem.handle)
    d0.close()
    d1.close()


# --- RM_ALLOC_MEMORY size query (GPU file)


def test_size_query_on_gpu_file(ctl, dev0, config):
    """rmapi_deprecated_allocmemory.c _rmAllocMemoryLocalUser(): the limit
    is the FB size - 1, and a handle that holds no memory is left behind
    "to keep the client happy"; it goes like any other."""
    objs = nvtest.objects_total()
    _, free0 = dev0.heap_info()
    p = dev0.gpu.rm_alloc_memory(dev0.client.handle, dev0.hdevice,
                                 abi.NV01_MEMORY_LOCAL_USER, check=False)
    # the GPU file acts for ctl's clients only once registered to it
    assert p.params.status == abi.NV_ERR_INVALID_CLIENT
    assert nvtest.objects_total() == objs
    dev0.gpu.register_fd(ctl)
    q = dev0.memory_size_query(hnew=0x4D454D00)
    assert q.status == abi.NV_OK
    assert q.limit == config.memory_bytes - 1
    assert nvtest.objects_total() == objs + 1
    assert dev0.heap_info()[1] == free0
    dev0.client.free(0x4D454D00)
    assert nvtest.objects_total() == objs
    # without a handle RM picks one, and does not say which
    q = dev0.memory_size_query()
    assert (q.status, q.hObjectNew) == (abi.NV_OK, 0)
    assert q.limit == config.memory_bytes - 1
    assert nvtest.objects_total() == objs + 1


def test_size_query_refused_on_ctl(ctl, dev0):
    arg = abi.nv_ioctl_nvos02_parameters_with_fd(fd=-1)
    arg.params.hRoot = dev0.client.handle
    arg.params.hObjectParent = dev0.hdevice
    arg.params.hClass = abi.NV01_MEMORY_LOCAL_USER
    assert ctl.escape_raw(abi.NV_ESC_RM_ALLOC_MEMORY, arg) == -22


# --- per-process usage


def test_pids_and_pid_info_report_this_process(dev0):
    me = os.getpid()
    mem = dev0.alloc_vidmem(40 * MiB)
    heap = dev0.heap_alloc(24 * MiB)
    assert me in dev0.pids()
    info = dev0.pid_info([me])
    assert info[me] == (abi.NV_OK, 64 * MiB)
    dev0.client.free(mem.handle)
    assert dev0.pid_info([me])[me] == (abi.NV_OK, 24 * MiB)
    dev0.heap_free(heap.handle)
    assert dev0.pid_info([me])[me][1] == 0


PROTECTED = abi.NVOS32_ATTR2_MEMORY_PROTECTION_PROTECTED
UNPROTECTED = abi.NVOS32_ATTR2_MEMORY_PROTECTION_UNPROTECTED


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["off", "apm", "cc"])
def test_protected_memory_counts_in_both_pid_info_figures(reload_stub, mode):
    """vidmemConstruct(): with CC or APM on, video memory is protected
    unless attr2 asks UNPROTECTED (CC refuses that); with neither on,
    asking PROTECTED is refused.  _gpuCollectMemInfo() adds protected
    memory to memPrivate and to protectedMemPrivate: the second is a part
    of the first, not more memory."""
    reload_stub(memory_protection=mode)
    me = os.getpid()
    with client.Ctl() as ctl:
        rm = client.RmClient(ctl)
        dev = rm.device(0)
        m = dev.alloc_vidmem(4 * MiB)
        u = dev.pid_vidmem(me)
        assert u["memPrivate"] == 4 * MiB
        assert u["protectedMemPrivate"] == (4 * MiB if mode else 0)
        if mode == 2:
            with pytest.raises(client.NvStatusError) as e:
                dev.alloc_vidmem(2 * MiB, protection=UNPROTECTED)
            assert e.value.status == abi.NV_ERR_INVALID_ARGUMENT
        else:
            dev.alloc_vidmem(2 * MiB, protection=UNPROTECTED)
        if mode:
            dev.alloc_vidmem(2 * MiB, protection=PROTECTED)
        else:
            with pytest.raises(client.NvStatusError) as e:
                dev.alloc_vidmem(2 * MiB, protection=PROTECTED)
            assert e.value.status == abi.NV_ERR_INVALID_ARGUMENT
        u = dev.pid_vidmem(me)
        assert u["memPrivate"] == {0: 6, 1: 8, 2: 6}[mode] * MiB
        assert u["protectedMemPrivate"] == {0: 0, 1: 6, 2: 6}[mode] * MiB
        # a duplicate: the owner's figure moves to shared, protected too
        rm2 = client.RmClient(ctl)
        dev2 = rm2.device(0)
        rm2.dup(dev2.hdevice, m.handle, client_src=rm)
        u = dev.pid_vidmem(me)
        assert u["memSharedOwned"] == 4 * MiB
        assert u["memSharedDuped"] == 4 * MiB
        assert u["protectedMemSharedOwned"] == (4 * MiB if mode else 0)
        assert u["protectedMemSharedDuped"] == (4 * MiB if mode else 0)
        dev2.close()
        rm2.close()
        dev.close()
        rm.close()


def test_pid_info_of_another_process(dev0):
    """A child's allocation is the child's, not ours."""
    code = """
    import time
    ctl = client.Ctl()
    dev = client.RmClient(ctl).device(0)
    dev.alloc_vidmem(10 << 20)
    report(pid=os.getpid(), pids=dev.pids(),
           info={str(k): v for k, v in dev.pid_info([os.getpid()]).items()})
    """
    r = nvtest.run_child(code)
    assert r["pid"] in r["pids"]
    assert r["info"][str(r["pid"])] == [abi.NV_OK, 10 * MiB]
    # the child has exited: its memory went with its files
    assert dev0.pid_info([os.getpid()])[os.getpid()][1] == 0


# --- the alloc params are read by RM from user memory, after the escape


def _thread_in_ioctl(tid, fd):
    """Whether thread ``tid`` of this process is blocked in ioctl(fd)."""
    try:
        with open(f"/proc/self/task/{tid}/syscall") as f:
            fields = f.read().split()
    except OSError:
        return False
    # x86_64: ioctl is syscall 16; the first argument is the fd
    return len(fields) > 1 and fields[0] == "16" and int(fields[1], 16) == fd


def test_alloc_params_reread_after_the_escape(reload_stub):
    delay_us = 300000
    reload_stub(alloc_reread_delay_us=delay_us)
    with client.Ctl() as ctl:
        rm = client.RmClient(ctl)
        dev = rm.device(0)
        total, free0 = dev.heap_info()

        # Without interference the delay is there and the size is the asked.
        p = dev.memory_params(MiB)
        t0 = time.monotonic()
        h = rm.alloc(dev.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
        assert time.monotonic() - t0 >= delay_us / 1e6 * 0.9
        assert p.size == MiB
        rm.free(h)

        # A thread changes the size while the caller is inside the ioctl:
        # RM allocates what it reads then, not what was there at the call.
        p = dev.memory_params(MiB)
        caller = threading.get_native_id()
        seen = threading.Event()

        def racer():
            deadline = time.monotonic() + 30
            while not _thread_in_ioctl(caller, ctl.fd):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.001)
            p.size = 256 * MiB
            seen.set()

        t = threading.Thread(target=racer)
        t.start()
        h = rm.alloc(dev.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
        t.join()
        assert seen.is_set(), "the racer never saw the caller in the ioctl"
        assert p.size == 256 * MiB
        assert dev.heap_info()[1] == free0 - 256 * MiB
        assert nvtest.heap_used(0) == total - free0 + 256 * MiB
        rm.free(h)
        dev.close()
        rm.close()


# --- mappings


def test_system_memory_maps_real_pages(dev0):
    mem = dev0.alloc_sysmem(3 * 4096)
    a = dev0.map(mem.handle, mem.size)
    b = dev0.map(mem.handle, mem.size)
    a.mm[:5] = b"hello"
    a.write32(8192, 0xFEEDF00D)
    assert b.mm[:5] == b"hello"
    assert b.read32(8192) == 0xFEEDF00D
    a.close()
    b.close()
    dev0.client.free(mem.handle)


def test_system_memory_costs_no_video_memory(dev0):
    _, free0 = dev0.heap_info()
    mem = dev0.alloc_sysmem(MiB)
    assert dev0.heap_info()[1] == free0
    dev0.client.free(mem.handle)


def test_one_mapping_context_per_file(ctl, dev0):
    mem = dev0.alloc_sysmem(4096)
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR)
    try:
        ctl.rm_map_memory(dev0.client.handle, dev0.hdevice, mem.handle, 4096,
                          fd)
        arg = ctl.rm_map_memory(dev0.client.handle, dev0.hdevice, mem.handle,
                                4096, fd, check=False)
        assert arg.params.status == abi.NV_ERR_STATE_IN_USE
    finally:
        os.close(fd)
        dev0.client.free(mem.handle)


def test_system_memory_maps_only_through_a_ctl_file(ctl, dev0):
    mem = dev0.alloc_sysmem(4096)
    with client.GpuFile(0) as g:
        arg = ctl.rm_map_memory(dev0.client.handle, dev0.hdevice, mem.handle,
                                4096, g.fd, check=False)
        assert arg.params.status == abi.NV_ERR_INVALID_ARGUMENT
    dev0.client.free(mem.handle)


def test_mmap_without_a_mapping_context_fails(ctl):
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR)
    try:
        with pytest.raises(OSError):
            mmap.mmap(fd, 4096, mmap.MAP_SHARED,
                      mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def test_video_memory_maps_through_bar1(dev0):
    """RM_MAP_MEMORY of video memory on a file of its GPU, then mmap: BAR1.
    Two mappings see the same bytes; the heap is what it was (stub: the
    pages behind the mapping are made on first touch, not taken from it)."""
    mem = dev0.alloc_vidmem(MiB)
    used = nvtest.heap_used(0)
    a = dev0.map(mem.handle, MiB, node=dev0.gpu.path)
    b = dev0.map(mem.handle, MiB, node=dev0.gpu.path)
    a.write32(MiB - 4, 0x5A5A1234)
    assert b.read32(MiB - 4) == 0x5A5A1234
    assert b.read32(0) == 0         # never written: zeroed
    assert nvtest.heap_used(0) == used
    # a ctl file maps system memory only
    with pytest.raises(client.NvStatusError) as e:
        dev0.map(mem.handle, MiB)
    assert e.value.status == abi.NV_ERR_INVALID_ARGUMENT
    a.close()
    b.close()
    dev0.client.free(mem.handle)


def test_usermode_maps_through_its_gpu_file(dev0):
    h = dev0.client.alloc(dev0.hsubdevice, abi.HOPPER_USERMODE_A)
    m = dev0.map(h, abi.NVC361_NV_USERMODE__SIZE, hparent=dev0.hsubdevice,
                 node=dev0.gpu.path)
    assert len(m.mm) == abi.NVC361_NV_USERMODE__SIZE
    m.close()
    # ... and not through a ctl file
    with pytest.raises(client.NvStatusError) as e:
        dev0.map(h, abi.NVC361_NV_USERMODE__SIZE, hparent=dev0.hsubdevice)
    assert e.value.status == abi.NV_ERR_INVALID_ARGUMENT
    dev0.client.free(h)


# --- more of the memory classes' rules (docs/nvstub.md "RM objects")


def test_memory_class_location_rules(dev0):
    _, free0 = dev0.heap_info()
    # system memory may not be VIDMEM; video memory must be
    p = dev0.memory_params(MiB)
    st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_SYSTEM, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    p = dev0.memory_params(MiB, location=abi.NVOS32_ATTR_LOCATION_PCI)
    st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    # a range without USE_BEGIN_END
    p = dev0.memory_params(MiB)
    p.rangeHi = 1 << 30
    st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    assert dev0.heap_info()[1] == free0


def test_video_memory_under_the_subdevice(dev0):
    _, free0 = dev0.heap_info()
    p = dev0.memory_params(4 * MiB)
    h = dev0.client.alloc(dev0.hsubdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    assert dev0.heap_info()[1] == free0 - 4 * MiB
    # freeing the subdevice frees it
    dev0.client.free(dev0.hsubdevice)
    assert dev0.client.parents.get(h) is None
    # heap_info needs no subdevice (INFO names the device)
    assert dev0.heap_info()[1] == free0


class _PhysAttr(ctypes.Structure):
    """NV0041_CTRL_GET_SURFACE_PHYS_ATTR_PARAMS (535 to 595 alike)."""
    _fields_ = [("memOffset", ctypes.c_uint64), ("memFormat", ctypes.c_uint32),
                ("comprOffset", ctypes.c_uint32),
                ("comprFormat", ctypes.c_uint32),
                ("memAperture", ctypes.c_uint32),
                ("gpuCacheAttr", ctypes.c_uint32),
                ("gpuP2PCacheAttr", ctypes.c_uint32),
                ("mmuContext", ctypes.c_uint32),
                ("contigSegmentSize", ctypes.c_uint64)]


assert ctypes.sizeof(_PhysAttr) == 48

PHYS_ATTR_AS_NOBODY = """
import ctypes
os.setgid(65534)
os.setuid(65534)
ctl = client.Ctl(); gpu = client.GpuFile(0)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
vid = dev.alloc_vidmem(1 << 20)
p = ctypes.create_string_buffer(48)
r = rm.control_raw(vid.handle, abi.NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR, p,
                   params_size=48)
report(status=r.status)
"""


def test_a_memory_s_place_is_one_for_all_its_handles(dev0):
    """NV0041 GET_SURFACE_PHYS_ATTR (mem_ctrl.c, 550 on; 535 has no such
    control): where byte memOffset of a Memory lies, AT_GPU
    (memdescFillMemdescForPhysAttr).  Duplicates share the memdesc, so
    every handle of one memory answers alike and another memory elsewhere;
    a virtual range has no pages (NV_ERR_NOT_SUPPORTED).  From 580 the
    control is RMCTRL_FLAGS_PRIVILEGED: a user without admin rights is
    refused, a kernel caller (xpu.ko's ledger) never."""
    major = abi.parse_version(client.driver_version())[0]
    rm = dev0.client
    vid = dev0.alloc_vidmem(MiB)
    other = dev0.alloc_vidmem(MiB)
    dup = rm.dup(dev0.hdevice, vid.handle)

    def where(h, offset=0):
        p = _PhysAttr(memOffset=offset)
        r = rm.control_raw(h, abi.NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR, p)
        return r.status, p

    try:
        if major < 550:
            assert where(vid.handle)[0] == abi.NV_ERR_NOT_SUPPORTED
            return
        (s1, p1), (s2, p2), (s3, p3) = (where(vid.handle), where(dup),
                                         where(other.handle))
        assert (s1, s2, s3) == (abi.NV_OK,) * 3, (s1, s2, s3)
        assert p1.memOffset == p2.memOffset != p3.memOffset
        assert p1.memAperture == \
            abi.NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_VIDMEM
        s4, p4 = where(vid.handle, 4096)
        assert s4 == abi.NV_OK
        assert p4.memOffset == p1.memOffset + 4096
        assert p4.contigSegmentSize == MiB - 4096
        virt, _ = dev0.alloc_virtual(MiB)
        assert where(virt)[0] == abi.NV_ERR_NOT_SUPPORTED
        rm.free(virt)
        nobody = nvtest.run_child(PHYS_ATTR_AS_NOBODY)["status"]
        assert nobody == (abi.NV_ERR_INSUFFICIENT_PERMISSIONS
                          if major >= 580 else abi.NV_OK), hex(nobody)
    finally:
        for h in (dup, other.handle, vid.handle):
            rm.free(h)


class _NumPhysPages(ctypes.Structure):
    _fields_ = [("numPages", ctypes.c_uint32)]


class _PhysPages(ctypes.Structure):
    _fields_ = [("pPages", ctypes.c_uint64), ("numPages", ctypes.c_uint32)]


def test_system_memory_pages_are_told_to_kernel_callers_only(dev0):
    """NV003E GET_SURFACE_NUM_PHYS_PAGES and GET_SURFACE_PHYS_PAGES hand out
    struct page pointers, written straight into pPages: RM exports them to
    kernel callers only (g_system_mem_nvoc.c, flags 0: KERNEL_PRIVILEGED), so
    a user's call is NV_ERR_INSUFFICIENT_PERMISSIONS and writes nothing; on
    another class's object the command is not found, NV_ERR_NOT_SUPPORTED.
    (xpu.ko asks them as a kernel client: test_hostile_hostmem.py.)"""
    mem = dev0.alloc_sysmem(2 * 4096)
    vid = dev0.alloc_vidmem(MiB)
    out = (ctypes.c_uint64 * 2)()
    for cmd, p in ((0x3E0102, _NumPhysPages()),
                   (0x3E0103, _PhysPages(pPages=ctypes.addressof(out),
                                         numPages=2))):
        r = dev0.client.control_raw(mem.handle, cmd, p)
        assert r.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, hex(r.status)
        r = dev0.client.control_raw(vid.handle, cmd, p)
        assert r.status == abi.NV_ERR_NOT_SUPPORTED, hex(r.status)
    assert list(out) == [0, 0]
    dev0.client.free(vid.handle)
    dev0.client.free(mem.handle)


def test_system_memory_is_capped(dev0):
    """Real pages, 256 MiB for all GPUs together."""
    p = dev0.memory_params(257 * MiB, location=abi.NVOS32_ATTR_LOCATION_PCI)
    st = dev0.client.alloc_raw(dev0.hdevice, abi.NV01_MEMORY_SYSTEM, p)
    assert st.status == abi.NV_ERR_NO_MEMORY


def test_vid_heap_alloc_details(dev0):
    """The caller's handle with MEMORY_HANDLE_PROVIDED; partitionStride 256;
    total/free 0 in an allocation's answer; limit = size - 1."""
    p = dev0._heap_params(abi.NVOS32_FUNCTION_ALLOC_SIZE)
    a = p.data.AllocSize
    a.owner, a.size, a.hMemory = 0x58505521, 3 * 64 * KiB, 0x4000BEEF
    a.flags = abi.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED
    dev0.ctl.vid_heap_control(p)
    assert a.hMemory == 0x4000BEEF
    assert (a.size, a.limit) == (3 * 64 * KiB, 3 * 64 * KiB - 1)
    assert a.partitionStride == 256
    assert (p.total, p.free) == (0, 0)
    dev0.client.parents[a.hMemory] = dev0.hdevice
    dev0.heap_free(a.hMemory)


def test_vid_heap_info_details(dev0):
    mem = dev0.alloc_vidmem(6 * MiB)
    p = dev0.ctl.vid_heap_control(dev0._heap_params(abi.NVOS32_FUNCTION_INFO))
    assert p.total - p.free == nvtest.heap_used(0)
    info = p.data.Info
    assert (info.base, info.size, info.offset) == (0, p.free,
                                                   p.total - p.free)
    # INFO's parent must be a device
    q = dev0._heap_params(abi.NVOS32_FUNCTION_INFO)
    q.hObjectParent = dev0.hsubdevice
    assert dev0.ctl.vid_heap_control(q, check=False).status == \
        abi.NV_ERR_INVALID_OBJECT_PARENT
    q = dev0._heap_params(abi.NVOS32_FUNCTION_INFO)
    q.ivcHeapNumber = 1
    assert dev0.ctl.vid_heap_control(q, check=False).status == \
        abi.NV_ERR_NOT_SUPPORTED
    dev0.client.free(mem.handle)


def test_vid_heap_hw_free_frees_any_handle(dev0):
    """NVOS32_FUNCTION_HW_FREE is RmFree(hRoot, hResourceHandle)
    (_nvos32FunctionHwFree, 535 to 595), whatever the handle names and the
    flags say: video memory and a TSG go by it, and their handles are free
    to make again.  HW_ALLOC makes NV01_MEMORY_HW_RESOURCES, which the stub
    does not simulate (NV_ERR_NOT_SUPPORTED)."""
    rm = dev0.client
    heap0 = nvtest.heap_used(0)
    mem = dev0.alloc_vidmem(2 * MiB)
    tsg = rm.alloc(dev0.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                   abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                       engineType=abi.NV2080_ENGINE_TYPE_GR0))
    for h in (mem.handle, tsg):
        p = dev0._heap_params(abi.NVOS32_FUNCTION_HW_FREE)
        p.data.HwFree.hResourceHandle = h
        dev0.ctl.vid_heap_control(p)
        rm._forget(h)
    assert nvtest.heap_used(0) == heap0
    # RM has nothing under either handle now
    rm.alloc(dev0.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
             abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                 engineType=abi.NV2080_ENGINE_TYPE_GR0), hnew=tsg)
    rm.free(tsg)
    p = dev0._heap_params(abi.NVOS32_FUNCTION_HW_ALLOC)
    assert dev0.ctl.vid_heap_control(p, check=False).status == \
        abi.NV_ERR_NOT_SUPPORTED


def test_surface_info_gives_a_memory_object_s_size(dev0, config):
    """NV0041_CTRL_CMD_GET_SURFACE_INFO (mem_ctrl.c): a Memory's size as
    RM made it (memdescGetSize: PHYS_SIZE in 4 KiB units; from 580 also
    PHYS_SIZE_LO/HI in bytes) and its address space, through a list the
    caller points to.  RM stops at the first index it cannot answer and
    copies nothing out then; a size without a list or a list without a
    size is NV_ERR_INVALID_ARGUMENT (rmapiParamsAcquire); an object that
    is no Memory does not export the command."""
    rm = dev0.client
    I = abi                     # the indices' prefix is long
    since_580 = int(config.version.split(".")[0]) >= 580
    vid = dev0.alloc_vidmem(3 * MiB + 4096)
    sysm = dev0.alloc_sysmem(5 * 4096)
    for mem, space in ((vid, I.NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_VIDMEM),
                       (sysm, I.NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_SYSMEM)):
        got = rm.surface_info(mem.handle, [
            I.NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE,
            I.NV0041_CTRL_SURFACE_INFO_INDEX_ADDR_SPACE_TYPE,
            I.NV0041_CTRL_SURFACE_INFO_INDEX_ATTRS])
        assert got == {
            I.NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE: mem.size // 4096,
            I.NV0041_CTRL_SURFACE_INFO_INDEX_ADDR_SPACE_TYPE: space,
            I.NV0041_CTRL_SURFACE_INFO_INDEX_ATTRS: 0}, got
    # the rounded size RM made, not the one asked for
    assert vid.size % (64 * 1024) == 0 and vid.size > 3 * MiB + 4096
    lohi = [I.NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_LO,
            I.NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_HI]
    st, entries = rm.surface_info_raw(vid.handle, lohi)
    if since_580:
        assert st.status == abi.NV_OK
        assert entries == [(lohi[0], vid.size), (lohi[1], 0)]
    else:
        assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    # a bad index stops the list: nothing comes back, not even the first
    st, entries = rm.surface_info_raw(vid.handle, [
        I.NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE, 0xBEEF])
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    assert [d for _, d in entries] == [0xFFFFFFFF] * 2
    # a list without a size, a size without a list
    for n, ptr in ((0, 0x1000), (1, 0)):
        p = abi.NV0041_CTRL_GET_SURFACE_INFO_PARAMS(surfaceInfoListSize=n,
                                                    surfaceInfoList=ptr)
        st = rm.control_raw(vid.handle, abi.NV0041_CTRL_CMD_GET_SURFACE_INFO, p)
        assert st.status == abi.NV_ERR_INVALID_ARGUMENT, (n, ptr)
    st, _ = rm.surface_info_raw(vid.handle, [])
    assert st.status == abi.NV_OK
    st, _ = rm.surface_info_raw(dev0.hsubdevice,
                                [I.NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE])
    assert st.status == abi.NV_ERR_NOT_SUPPORTED
    rm.free(vid.handle)
    rm.free(sysm.handle)


def test_size_query_other_classes(ctl, dev0):
    dev0.gpu.register_fd(ctl)
    # NV01_MEMORY_SYSTEM_DYNAMIC (cl0070.h): RM's, not the stub's
    for hclass, status in [(0x0070, abi.NV_ERR_NOT_SUPPORTED),
                           (0xBEEF, abi.NV_ERR_INVALID_CLASS)]:
        arg = dev0.gpu.rm_alloc_memory(dev0.client.handle, dev0.hdevice,
                                       hclass, check=False)
        assert arg.params.status == status, hex(hclass)
    arg = dev0.gpu.rm_alloc_memory(dev0.client.handle, dev0.hsubdevice,
                                   abi.NV01_MEMORY_LOCAL_USER, check=False)
    assert arg.params.status == abi.NV_ERR_INVALID_OBJECT_PARENT


# nvos.h NVOS02_FLAGS_*
OS02_ALLOC_NONE = 1 << 16
OS02_LOCATION_VIDMEM = 2 << 8
OS02_COHERENCY_BAD = 6 << 12        # past WRITE_BACK (5)
OS02_MAPPING_NO_MAP = 1 << 30


def test_rm_alloc_memory_makes_system_memory(ctl, dev0):
    """_rmAllocMemorySystem: RM_ALLOC_MEMORY of NV01_MEMORY_SYSTEM makes
    limit + 1 bytes of system memory through RM_ALLOC; location PCI only,
    ALLOC_NONE refused, the flags checked as RmDeprecatedConvertOs02ToOs32
    Flags does.  By default RM maps it at once and the escape makes the
    mapping context in the control file FD names; when that fails the
    ioctl fails (-EINVAL) and the memory stays, as RM leaves it."""
    dev0.gpu.register_fd(ctl)
    rm = dev0.client
    for flags in (OS02_ALLOC_NONE, OS02_LOCATION_VIDMEM, OS02_COHERENCY_BAD):
        arg = dev0.gpu.rm_alloc_memory(rm.handle, dev0.hdevice,
                                       abi.NV01_MEMORY_SYSTEM,
                                       flags=flags | OS02_MAPPING_NO_MAP,
                                       limit=4095, hnew=0xCAFE0001,
                                       check=False)
        assert arg.params.status == abi.NV_ERR_INVALID_FLAGS, hex(flags)
    arg = dev0.gpu.rm_alloc_memory(rm.handle, dev0.hdevice,
                                   abi.NV01_MEMORY_SYSTEM,
                                   flags=OS02_MAPPING_NO_MAP,
                                   limit=3 * 4096 - 1, hnew=0xCAFE0001)
    assert arg.params.pMemory == 0
    assert nvtest.handle_info(rm, 0xCAFE0001, nvtest.HANDLE_CLASSID) == (
        abi.NV_OK, abi.NV01_MEMORY_SYSTEM)
    m = dev0.map(0xCAFE0001, 3 * 4096)
    m.write32(8192, 0xFEEDF00D)
    assert m.read32(8192) == 0xFEEDF00D
    m.close()
    rm.ctl.rm_free(rm.handle, dev0.hdevice, 0xCAFE0001)
    # mapped at once into a control file of the caller's
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR)
    try:
        arg = dev0.gpu.rm_alloc_memory(rm.handle, dev0.hdevice,
                                       abi.NV01_MEMORY_SYSTEM, limit=4095,
                                       hnew=0xCAFE0002, fd=fd)
        assert arg.params.pMemory != 0
        mm = mmap.mmap(fd, 4096, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE)
        mm[:4] = b"xpu!"
        assert mm[:4] == b"xpu!"
        mm.close()
    finally:
        os.close(fd)
    rm.ctl.rm_free(rm.handle, dev0.hdevice, 0xCAFE0002)
    # no file to map into: the ioctl fails, the memory stays
    with pytest.raises(OSError) as e:
        dev0.gpu.rm_alloc_memory(rm.handle, dev0.hdevice,
                                 abi.NV01_MEMORY_SYSTEM, limit=4095,
                                 hnew=0xCAFE0003, fd=-1)
    assert e.value.errno == errno.EINVAL
    assert nvtest.handle_info(rm, 0xCAFE0003, nvtest.HANDLE_CLASSID) == (
        abi.NV_OK, abi.NV01_MEMORY_SYSTEM)
    rm.ctl.rm_free(rm.handle, dev0.hdevice, 0xCAFE0003)


CTXDMA_RW = abi.NVOS03_FLAGS_HASH_TABLE_DISABLE << abi.NVOS03_FLAGS_HASH_TABLE_SHIFT


def test_rm_alloc_context_dma2_makes_the_class_it_is_told(ctl, dev0):
    """RmDeprecatedAllocContextDma: RM_ALLOC_CONTEXT_DMA2 (NVOS39) is an
    RM_ALLOC, in client hObjectParent, under the parent of hMemory, of the
    class hClass names -- whatever it is -- with the fields as its
    NV_CONTEXT_DMA_ALLOCATION_PARAMS.  A context DMA (ctxdmaConstruct) is
    a window [offset, offset + limit] inside hMemory, NVOS03 flags checked
    (HASH_TABLE_ENABLE is refused); a missing hMemory is
    NV_ERR_OBJECT_NOT_FOUND.  Any other class is made all the same: a
    usermode object under the subdevice, from a handle under it.  Control
    node only (NV_CTL_DEVICE_ONLY), its size exact."""
    rm = dev0.client
    mem = dev0.alloc_sysmem(2 * 4096)
    for kw, st in (({"flags": 0}, abi.NV_ERR_INVALID_FLAGS),
                   ({"flags": CTXDMA_RW | 3}, abi.NV_ERR_INVALID_FLAGS),
                   ({"limit": 2 * 4096}, abi.NV_ERR_INVALID_LIMIT),
                   ({"offset": 4096, "limit": 4096}, abi.NV_ERR_INVALID_LIMIT),
                   ({"offset": 1 << 63, "limit": 1 << 63},
                    abi.NV_ERR_INVALID_LIMIT),
                   ({"hsubdevice": 0xBAD},
                    abi.NV_ERR_INVALID_OBJECT_HANDLE)):
        p = rm.alloc_context_dma(mem.handle, hnew=0xCAFE0010, check=False, **kw)
        assert p.status == st, (kw, abi.status_name(p.status))
    p = rm.alloc_context_dma(0xBAD, check=False)
    assert p.status == abi.NV_ERR_OBJECT_NOT_FOUND, abi.status_name(p.status)
    rm.alloc_context_dma(mem.handle, offset=4096, limit=4095,
                         hsubdevice=dev0.hsubdevice, hnew=0xCAFE0010,
                         hparent=dev0.hdevice)
    assert nvtest.handle_info(rm, 0xCAFE0010, nvtest.HANDLE_CLASSID) == (
        abi.NV_OK, abi.NV01_CONTEXT_DMA)
    assert nvtest.handle_info(rm, 0xCAFE0010, nvtest.HANDLE_PARENT) == (
        abi.NV_OK, dev0.hdevice)
    # a dependant of the memory: freed with it, its handle kept
    rm.free(mem.handle)
    nvtest.assert_invalidated(rm, 0xCAFE0010, abi.NV01_CONTEXT_DMA,
                              dev0.hdevice)
    rm.free(0xCAFE0010)
    # the class the caller names, under hMemory's parent
    u = rm.alloc(dev0.hsubdevice, abi.HOPPER_USERMODE_A)
    rm.alloc_context_dma(u, hclass=abi.HOPPER_USERMODE_A, hnew=0xCAFE0011,
                         hparent=dev0.hsubdevice)
    assert nvtest.handle_info(rm, 0xCAFE0011, nvtest.HANDLE_CLASSID) == (
        abi.NV_OK, abi.HOPPER_USERMODE_A)
    assert nvtest.handle_info(rm, 0xCAFE0011, nvtest.HANDLE_PARENT) == (
        abi.NV_OK, dev0.hsubdevice)
    rm.free(0xCAFE0011)
    rm.free(u)
    p = abi.NVOS39_PARAMETERS()
    for bad in (55, 57):
        assert ctl.escape_raw(abi.NV_ESC_RM_ALLOC_CONTEXT_DMA2, p,
                              size=bad) == -errno.EINVAL
    assert dev0.gpu.escape_raw(abi.NV_ESC_RM_ALLOC_CONTEXT_DMA2,
                               p) == -errno.EINVAL


# --- RM_MAP_MEMORY / RM_UNMAP_MEMORY / mmap in detail


def _map(ctl, dev, hmem, length, fd, offset=0, hdevice=None, flags=0):
    return ctl.rm_map_memory(dev.client.handle,
                             dev.hdevice if hdevice is None else hdevice,
                             hmem, length, fd, offset=offset, flags=flags,
                             check=False).params


NVOS33_CACHING_TYPE_SHIFT = 23      # nvos.h NVOS33_FLAGS_CACHING_TYPE 25:23
NVOS33_CACHING_TYPE_DEFAULT = 6
NVOS33_FLAGS_SKIP_SIZE_CHECK = 1 << 8


def test_map_memory_checks(ctl, rm, config):
    dev = rm.device(0)
    mem = dev.alloc_sysmem(2 * 4096)
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR)
    try:
        cases = [({"offset": 8192}, abi.NV_ERR_INVALID_BASE),
                 ({"length": 0}, abi.NV_ERR_INVALID_LIMIT),
                 ({"length": 8193}, abi.NV_ERR_INVALID_LIMIT),
                 ({"offset": 4096, "length": 8192}, abi.NV_ERR_INVALID_LIMIT),
                 ({"flags": NVOS33_FLAGS_SKIP_SIZE_CHECK},
                  abi.NV_ERR_INSUFFICIENT_PERMISSIONS),
                 ({"hdevice": dev.hsubdevice + 0x1000},
                  abi.NV_ERR_OBJECT_NOT_FOUND),
                 ({"hmem": 0x0BADF00D}, abi.NV_ERR_OBJECT_NOT_FOUND)]
        for kw, status in cases:
            args = {"length": 8192, **kw}
            hmem = args.pop("hmem", mem.handle)
            p = _map(ctl, dev, hmem, args.pop("length"), fd, **args)
            assert p.status == status, kw
        if config.gpus > 1:
            other = rm.device(1)
            p = _map(ctl, dev, mem.handle, 8192, fd, hdevice=other.hdevice)
            assert p.status == abi.NV_ERR_INVALID_DEVICE
            other.close()
        tsg = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                       abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                           engineType=abi.NV2080_ENGINE_TYPE_GR0))
        assert _map(ctl, dev, tsg, 4096, fd).status == abi.NV_ERR_NOT_SUPPORTED
        # none of the refusals took the file's one mapping context
        p = _map(ctl, dev, mem.handle, 8192, fd, flags=1 << 23)
        assert p.status == abi.NV_OK
        # the escape forces the caching type to DEFAULT
        assert (p.flags >> NVOS33_CACHING_TYPE_SHIFT) & 7 == \
            NVOS33_CACHING_TYPE_DEFAULT
        ctl.rm_unmap_memory(rm.handle, dev.hdevice, mem.handle,
                            p.pLinearAddress)
        rm.free(tsg)
    finally:
        os.close(fd)
    rm.free(mem.handle)
    dev.close()


def test_map_with_the_client_as_device(ctl, dev0):
    """hDevice may be the client itself for system memory only."""
    mem = dev0.alloc_sysmem(4096)
    um = dev0.client.alloc(dev0.hsubdevice, abi.HOPPER_USERMODE_A)
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR)
    gfd = os.open(dev0.gpu.path, os.O_RDWR)
    try:
        p = _map(ctl, dev0, um, abi.NVC361_NV_USERMODE__SIZE, gfd,
                 hdevice=dev0.client.handle)
        assert p.status == abi.NV_ERR_INVALID_ARGUMENT
        p = _map(ctl, dev0, mem.handle, 4096, fd, hdevice=dev0.client.handle)
        assert p.status == abi.NV_OK
    finally:
        os.close(fd)
        os.close(gfd)
    dev0.client.free(um)
    dev0.client.free(mem.handle)


def test_unmap_checks(ctl, dev0):
    mem = dev0.alloc_sysmem(4096)
    m = dev0.map(mem.handle, 4096)
    p = ctl.rm_unmap_memory(dev0.client.handle, dev0.hdevice, mem.handle,
                            m.linear + 4096, check=False)
    assert p.status == abi.NV_ERR_OBJECT_NOT_FOUND
    # unmapped once, the record is gone
    m.close()
    p = ctl.rm_unmap_memory(dev0.client.handle, dev0.hdevice, mem.handle,
                            m.linear, check=False)
    assert p.status == abi.NV_ERR_OBJECT_NOT_FOUND
    dev0.client.free(mem.handle)


def test_update_device_mapping_info_moves_the_callers_own_mapping(ctl, dev0,
                                                                   config):
    """RM_UPDATE_DEVICE_MAPPING_INFO (osapi.c RmUpdateDeviceMappingInfo):
    the address RM keeps for a mapping -- the one RM_UNMAP_MEMORY names --
    moves to where user space moved it (CUDA sends it: gVisor passes it to
    compute workloads).  The client is any client, not only one of the
    calling file's; the mapping must be the calling process's own."""
    upd = ctl.rm_update_mapping
    c, hdev = dev0.client.handle, dev0.hdevice
    mem = dev0.alloc_sysmem(4096)
    m = dev0.map(mem.handle, 4096)
    old, new = m.linear, m.linear + (1 << 30)
    # the checks, each before the mapping is looked at
    unknown = (abi.NV_ERR_INVALID_OBJECT_HANDLE
               if int(config.version.split(".")[0]) >= 555
               else abi.NV_ERR_INVALID_OBJECT)
    assert upd(0x0BADC0DE, hdev, mem.handle, old, new,
               check=False).status == unknown
    assert upd(c, 0x0BADF00D, mem.handle, old, new,
               check=False).status == abi.NV_ERR_OBJECT_NOT_FOUND
    assert upd(c, mem.handle, mem.handle, old, new,
               check=False).status == abi.NV_ERR_INVALID_OBJECT_HANDLE
    assert upd(c, hdev, 0x0BADF00D, old, new,
               check=False).status == abi.NV_ERR_OBJECT_NOT_FOUND
    um = dev0.client.alloc(dev0.hsubdevice, abi.HOPPER_USERMODE_A)
    assert upd(c, hdev, um, old, new,
               check=False).status == abi.NV_ERR_INVALID_OBJECT_HANDLE
    assert upd(c, dev0.hsubdevice, mem.handle, old + 4096, new,
               check=False).status == abi.NV_ERR_OBJECT_NOT_FOUND
    # a GPU file: NV_CTL_DEVICE_ONLY, the ioctl fails
    gfd = os.open(dev0.gpu.path, os.O_RDWR)
    try:
        p = abi.NVOS56_PARAMETERS(hClient=c, hDevice=hdev, hMemory=mem.handle,
                                  pOldCpuAddress=old, pNewCpuAddress=new)
        assert client.escape_raw(gfd, abi.NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO,
                                 p) == -errno.EINVAL
    finally:
        os.close(gfd)
    # another process (a forked child, same files and client) reaches none
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            st = upd(c, hdev, mem.handle, old, new, check=False).status
            os.write(w, st.to_bytes(4, "little"))
        finally:
            os._exit(0)
    os.close(w)
    child = int.from_bytes(os.read(r, 4), "little")
    os.close(r)
    os.waitpid(pid, 0)
    assert child == abi.NV_ERR_OBJECT_NOT_FOUND
    # the caller's own: moved, through a file the client was not made on
    with client.Ctl() as other:
        assert other.rm_update_mapping(c, hdev, mem.handle, old,
                                       new).status == abi.NV_OK
    assert ctl.rm_unmap_memory(c, hdev, mem.handle, old,
                               check=False).status == abi.NV_ERR_OBJECT_NOT_FOUND
    m.linear = new      # Mapping.close() unmaps at the address RM now keeps
    m.close()
    assert ctl.rm_unmap_memory(c, hdev, mem.handle, new,
                               check=False).status == abi.NV_ERR_OBJECT_NOT_FOUND
    dev0.client.free(um)
    dev0.client.free(mem.handle)


def test_mmap_rules(ctl, dev0):
    mem = dev0.alloc_sysmem(2 * 4096)
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR)
    try:
        p = _map(ctl, dev0, mem.handle, 4096, fd, offset=4096)
        assert p.status == abi.NV_OK
        rw = mmap.PROT_READ | mmap.PROT_WRITE
        with pytest.raises(OSError):     # private mappings are refused
            mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, rw)
        with pytest.raises(OSError):     # a nonzero file offset is refused
            mmap.mmap(fd, 4096, mmap.MAP_SHARED, rw, offset=4096)
        with pytest.raises(OSError):     # beyond the object's end: -ERANGE
            mmap.mmap(fd, 2 * 4096, mmap.MAP_SHARED, rw)
        # the mapped offset is where the mapping starts
        whole = dev0.map(mem.handle, 2 * 4096)
        whole.mm[4096:4100] = b"tail"
        m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, rw)
        assert m[:4] == b"tail"
        # freeing the object while it is mapped is safe: the pages stay
        whole.close()
        dev0.client.free(mem.handle)
        m[:4] = b"safe"
        assert m[:4] == b"safe"
        m.close()
    finally:
        os.close(fd)


def test_usermode_mmap_length_must_match(ctl, dev0):
    um = dev0.client.alloc(dev0.hsubdevice, abi.HOPPER_USERMODE_A)
    gfd = os.open(dev0.gpu.path, os.O_RDWR)
    try:
        p = _map(ctl, dev0, um, abi.NVC361_NV_USERMODE__SIZE, gfd,
                 hdevice=dev0.hsubdevice)
        assert p.status == abi.NV_OK
        with pytest.raises(OSError):
            mmap.mmap(gfd, 4096, mmap.MAP_SHARED,
                      mmap.PROT_READ | mmap.PROT_WRITE)
        m = mmap.mmap(gfd, abi.NVC361_NV_USERMODE__SIZE, mmap.MAP_SHARED,
                      mmap.PROT_READ | mmap.PROT_WRITE)
        m.close()
    finally:
        os.close(gfd)
    dev0.client.free(um)


def test_usermode_params(dev0):
    """usrmodeConstruct(): bPriv without bBar1Mapping is an invalid
    parameter; bPriv is for the kernel only."""
    for bar1, priv, status in [(0, 1, abi.NV_ERR_INVALID_PARAMETER),
                               (1, 1, abi.NV_ERR_INSUFFICIENT_PERMISSIONS)]:
        p = abi.NV_HOPPER_USERMODE_A_PARAMS(bBar1Mapping=bar1, bPriv=priv)
        st = dev0.client.alloc_raw(dev0.hsubdevice, abi.HOPPER_USERMODE_A, p)
        assert st.status == status
    h = dev0.client.alloc(dev0.hsubdevice, abi.HOPPER_USERMODE_A,
                          abi.NV_HOPPER_USERMODE_A_PARAMS())
    dev0.client.free(h)
