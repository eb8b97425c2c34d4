# SPDX-License-Identifier: Apache-2.0
"""GPU virtual memory as NVIDIA's RM has it (issue 18, rule 6): VA spaces
(FERMI_VASPACE_A), virtual allocations in them, RM_MAP_MEMORY_DMA, context
shares (FERMI_CONTEXT_SHARE_A), a channel whose ring is a GPU virtual address
and whose USERD may be video memory written through BAR1, a channel under a
device, and objects freed with what they depend on (docs/nvstub.md)."""


import errno
import os

import nvtest
import pytest
from nvclient import abi, client
from nvclient.client import PAGE_SIZE

MS = 1000
KIB = 1024
VA_START_MIN = 1 << 20          # gvaspaceGetReservedVaspaceBase()
VA_LIMIT_MAX = (1 << 57) - 1    # Hopper: virtAddrBitHi 56


def status(p):
    return p.status


def test_vaspace_defaults_and_limits(dev0):
    rm = dev0.client
    h, p = dev0.vaspace()
    # "Return the actual VAS base and size": 1 MiB up to the HW limit
    assert (p.vaBase, p.vaSize) == (VA_START_MIN, VA_LIMIT_MAX + 1)
    rm.free(h)
    h, p = dev0.vaspace(va_base=0x1000, va_size=1 << 40)
    assert (p.vaBase, p.vaSize) == (0x1000, 1 << 40)
    rm.free(h)
    for kw in ({"vaSize": VA_LIMIT_MAX + 2}, {"bigPageSize": 4096},
               {"index": abi.NV_VASPACE_ALLOCATION_INDEX_GPU_HOST}):
        q = dev0.abi.NV_VASPACE_ALLOCATION_PARAMETERS(**kw)
        st = rm.alloc_raw(dev0.hdevice, abi.FERMI_VASPACE_A, q)
        assert st.status == abi.NV_ERR_INVALID_ARGUMENT, kw
    # the params are required
    st = rm.alloc_raw(dev0.hdevice, abi.FERMI_VASPACE_A, None)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT


@pytest.mark.parametrize("mode", ["single", "multiple"])
def test_va_mode_decides_which_va_spaces_exist(rm, mode):
    """vaspaceGetByHandleOrDeviceDefault(): SINGLE_VASPACE has only the
    device's; MULTIPLE_VASPACES none by default, so a virtual allocation or a
    legacy channel must name one."""
    va_mode = {"single": abi.NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE,
               "multiple": abi.NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES}
    with rm.device(0, va_mode=va_mode[mode]) as dev:
        q = dev.abi.NV_VASPACE_ALLOCATION_PARAMETERS()
        st = rm.alloc_raw(dev.hdevice, abi.FERMI_VASPACE_A, q)
        p = dev.memory_params(64 * KIB, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL)
        virt = rm.alloc_raw(dev.hdevice, abi.NV50_MEMORY_VIRTUAL, p)
        if mode == "single":
            assert st.status == abi.NV_ERR_INVALID_STATE
            assert virt.status == abi.NV_OK
        else:
            assert st.status == abi.NV_OK
            assert virt.status == abi.NV_ERR_INVALID_STATE
            p.hVASpace = st.hObjectNew
            assert rm.alloc_raw(dev.hdevice, abi.NV50_MEMORY_VIRTUAL,
                                p).status == abi.NV_OK
            # a legacy channel (no context share) needs the default one
            tsg = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                           abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                               engineType=abi.NV2080_ENGINE_TYPE_GR0))
            mem = dev.alloc_sysmem(8 * KIB)
            c = _chan_params(dev, userd=mem.handle)
            st = rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, c)
            assert st.status == abi.NV_ERR_INVALID_STATE


def test_virtual_allocations_are_rms_va_heap(dev0):
    rm = dev0.client
    hvas, _ = dev0.vaspace(va_base=1 << 30, va_size=(1 << 30) + (1 << 20))
    a, va_a = dev0.alloc_virtual(512 * KIB, hvaspace=hvas)
    b, va_b = dev0.alloc_virtual(256 * KIB, hvaspace=hvas)
    assert va_a == 1 << 30 and va_b == va_a + 512 * KIB
    # a fixed address in use, or past the limit, is refused
    p = dev0.memory_params(64 * KIB, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL
                           | abi.NVOS32_ALLOC_FLAGS_FIXED_ADDRESS_ALLOCATE)
    p.hVASpace, p.offset = hvas, va_b
    assert rm.alloc_raw(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL,
                        p).status == abi.NV_ERR_NO_MEMORY
    p.offset = (1 << 30) + (1 << 20)
    assert rm.alloc_raw(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL,
                        p).status == abi.NV_ERR_NO_MEMORY
    # the whole space is taken now: 768 KiB of 1 MiB used, 512 KiB asked
    p = dev0.memory_params(512 * KIB, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL)
    p.hVASpace = hvas
    assert rm.alloc_raw(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL,
                        p).status == abi.NV_ERR_NO_MEMORY
    rm.free(a)                          # its range is free again
    c, va_c = dev0.alloc_virtual(512 * KIB, hvaspace=hvas)
    assert va_c == va_a
    # a virtual allocation needs the VIRTUAL flag (virtmemConstruct)
    p = dev0.memory_params(64 * KIB)
    p.hVASpace = hvas
    assert rm.alloc_raw(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL,
                        p).status == abi.NV_ERR_INVALID_ARGUMENT
    # a VA space handle that is not one
    p = dev0.memory_params(64 * KIB, flags=abi.NVOS32_ALLOC_FLAGS_VIRTUAL)
    p.hVASpace = b
    assert rm.alloc_raw(dev0.hdevice, abi.NV50_MEMORY_VIRTUAL,
                        p).status == abi.NV_ERR_INVALID_OBJECT_HANDLE
    objs = nvtest.objects_total()
    # its virtual allocations are its dependants, not its children: RM
    # destructs them and keeps their handles until they are freed
    rm.free(hvas)
    assert nvtest.objects_total() == objs - 1
    for h in (b, c):
        nvtest.assert_invalidated(rm, h, abi.NV50_MEMORY_VIRTUAL,
                                  dev0.hdevice)
        rm.free(h)
        assert nvtest.handle_info(rm, h, nvtest.HANDLE_CLASSID)[0] == \
            abi.NV_ERR_OBJECT_NOT_FOUND
    assert nvtest.objects_total() == objs - 3


def test_map_memory_dma(dev0):
    rm, ctl = dev0.client, dev0.ctl
    virt, va = dev0.alloc_virtual(256 * KIB)
    mem = dev0.alloc_sysmem(64 * KIB)
    other = dev0.alloc_sysmem(64 * KIB)

    def map_(**kw):
        args = {"length": 64 * KIB, "offset": 0, "dma_offset": 0, "flags": 0}
        args.update(kw)
        h = args.pop("hmemory", mem.handle)
        hdma = args.pop("hdma", virt)
        return ctl.rm_map_memory_dma(rm.handle, dev0.hdevice, hdma, h,
                                     check=False, **args)

    p = map_()
    assert p.status == abi.NV_OK and p.dmaOffset == va
    # the same VA again, however named
    assert map_(hmemory=other.handle).status == abi.NV_ERR_STATE_IN_USE
    fixed = abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << \
        abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT
    assert map_(hmemory=other.handle, dma_offset=va, flags=fixed).status == \
        abi.NV_ERR_STATE_IN_USE
    p = map_(hmemory=other.handle, dma_offset=va + 64 * KIB, flags=fixed)
    assert p.status == abi.NV_OK and p.dmaOffset == va + 64 * KIB
    # the physical misalignment is added to the address returned
    p = map_(offset=0x100, length=0x1000, dma_offset=128 * KIB)
    assert p.status == abi.NV_OK and p.dmaOffset == va + 128 * KIB + 0x100
    # outside the virtual allocation, past the memory, not a virtual one
    assert map_(dma_offset=256 * KIB - 4 * KIB).status == \
        abi.NV_ERR_INVALID_LIMIT
    assert map_(offset=4 * KIB, dma_offset=192 * KIB).status == \
        abi.NV_ERR_INVALID_BASE
    assert map_(length=0, dma_offset=192 * KIB).status == \
        abi.NV_ERR_INVALID_LIMIT
    assert map_(hdma=other.handle).status == abi.NV_ERR_INVALID_OBJECT_HANDLE
    assert map_(hdma=0x0BADF00D).status == abi.NV_ERR_OBJECT_NOT_FOUND
    # unmapping needs the exact address RM returned
    st = ctl.rm_unmap_memory_dma(rm.handle, dev0.hdevice, virt, mem.handle,
                                 va + 4 * KIB, check=False)
    assert st.status == abi.NV_ERR_INVALID_OBJECT_HANDLE
    ctl.rm_unmap_memory_dma(rm.handle, dev0.hdevice, virt, mem.handle, va)
    assert map_().status == abi.NV_OK       # the VA is free again
    rm.free(virt)       # takes its mappings
    rm.free(mem.handle)
    rm.free(other.handle)


def test_a_mapping_goes_with_its_memory_or_its_device_handle(dev0, rm):
    """RM_MAP_MEMORY_DMA makes an inter-mapping (serverInterMap): freeing
    the memory handle it mapped, or the device or subdevice it named,
    unmaps it with its page tables (clientFreeResource,
    _clientUnmapInterBackRefMappings), though the virtual allocation
    stays.  Before, the stub kept such a mapping, and its tables, until
    the virtual allocation went."""
    ctl = dev0.ctl
    lazy, va = dev0.alloc_virtual(1 << 30, lazy=True)
    free0 = nvtest.heap_free(0)
    fixed = abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE << \
        abi.NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT
    for gone in ("memory", "subdevice"):
        mem = dev0.alloc_sysmem(4 * KIB)
        for i in range(4):
            ctl.rm_map_memory_dma(rm.handle, dev0.hsubdevice, lazy,
                                  mem.handle, 4 * KIB,
                                  dma_offset=va + (i << 21), flags=fixed)
        # a page table per 2 MiB, and the directories above them
        assert nvtest.heap_free(0) <= free0 - 4 * nvtest.PAGE_TABLE
        if gone == "memory":
            rm.free(mem.handle)
        else:
            rm.free(dev0.hsubdevice)
            dev0.hsubdevice = rm.alloc(
                dev0.hdevice, abi.NV20_SUBDEVICE_0,
                abi.NV2080_ALLOC_PARAMETERS(subDeviceId=0))
        assert nvtest.heap_free(0) == free0, gone
        # nothing left to unmap
        st = ctl.rm_unmap_memory_dma(rm.handle, dev0.hsubdevice, lazy,
                                     mem.handle, va, check=False).status
        assert st in (abi.NV_ERR_OBJECT_NOT_FOUND,
                      abi.NV_ERR_INVALID_OBJECT_HANDLE), hex(st)
        if gone == "subdevice":
            rm.free(mem.handle)
    rm.free(lazy)


def test_context_share_veids(dev0):
    rm = dev0.client
    tsg = _tsg(dev0)

    def ctxshare(flags, subctx=0, hvas=0):
        p = abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas, flags=flags,
                                                  subctxId=subctx)
        st = rm.alloc_raw(tsg, abi.FERMI_CONTEXT_SHARE_A, p)
        return st.status, p.subctxId

    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC) == \
        (abi.NV_OK, 0)
    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC)[0] == \
        abi.NV_ERR_NO_MEMORY
    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC) == \
        (abi.NV_OK, 63)
    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC) == \
        (abi.NV_OK, 62)
    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED,
                    5) == (abi.NV_OK, 5)
    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED,
                    64)[0] == abi.NV_ERR_NO_MEMORY
    assert ctxshare(3)[0] == abi.NV_ERR_INVALID_ARGUMENT
    # an externally owned VA space needs UVM's page directory first
    hvas, _ = dev0.vaspace(
        flags=abi.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
    assert ctxshare(abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC,
                    hvas=hvas)[0] == abi.NV_ERR_INVALID_STATE
    rm.free(tsg)
    rm.free(hvas)


def test_a_ring_in_a_va_space_of_its_own_runs(dev0):
    """The path CUDA and tinygrad take (VA space, context share, ring at a
    GPU VA), here with RM's own page tables: the ring and USERD in system
    memory mapped by RM_MAP_MEMORY_DMA."""
    rm = dev0.client
    hvas, _ = dev0.vaspace()
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    cpu = dev0.map(mem.handle, mem.size)
    virt, _ = dev0.alloc_virtual(mem.size, hvaspace=hvas)
    gpu_va = dev0.map_dma(virt, mem.handle, mem.size)
    tsg = _tsg(dev0)
    cs = rm.alloc(tsg, abi.FERMI_CONTEXT_SHARE_A,
                  abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                      hVASpace=hvas,
                      flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
    c = _chan_params(dev0, userd=mem.handle, userd_offset=PAGE_SIZE,
                     ring=gpu_va, ctxshare=cs, entries=16)
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, c)
    _run_one_item(dev0, tsg, ch, cpu, ring_off=0, userd_off=PAGE_SIZE)
    cpu.close()
    rm.free(tsg)
    rm.free(virt)
    rm.free(hvas)
    rm.free(mem.handle)


def test_usermode_in_video_memory_through_bar1(dev0):
    """USERD and the ring in video memory, as tinygrad places them: the CPU
    writes them through a BAR1 mapping of a GPU file (RM_MAP_MEMORY + mmap);
    the stub backs the pages it touches."""
    rm = dev0.client
    vid = dev0.alloc_vidmem(64 * KIB)
    cpu = dev0.map(vid.handle, vid.size, node=dev0.gpu.path)
    cpu.write32(0x100, 0xC0FFEE)
    assert cpu.read32(0x100) == 0xC0FFEE
    virt, _ = dev0.alloc_virtual(vid.size)
    gpu_va = dev0.map_dma(virt, vid.handle, vid.size)
    tsg = _tsg(dev0)
    c = _chan_params(dev0, userd=vid.handle, userd_offset=32 * KIB,
                     ring=gpu_va, entries=16)
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, c)
    _run_one_item(dev0, tsg, ch, cpu, ring_off=0, userd_off=32 * KIB)
    cpu.close()
    rm.free(tsg)
    rm.free(virt)
    rm.free(vid.handle)


def test_a_context_dma_binds_to_a_host_channel_doing_nothing(ctl, dev0):
    """RM_BIND_CONTEXT_DMA (RmDeprecatedBindContextDma) is
    NV0002_CTRL_CMD_BIND_CONTEXTDMA on hCtxDma in the caller's own client;
    binding to a host channel "is no longer required" and succeeds doing
    nothing (ctxdmaCtrlCmdBindContextdma_IMPL), anything else must be a
    display channel, which no simulated GPU has.  Control node only."""
    rm, c = dev0.client, dev0.client.handle
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    hctx = 0xCAFE0020
    rm.alloc_context_dma(mem.handle, limit=PAGE_SIZE - 1,
                         hsubdevice=dev0.hsubdevice, hnew=hctx,
                         hparent=dev0.hdevice)
    tsg = _tsg(dev0)
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                  _chan_params(dev0, userd=mem.handle, userd_offset=PAGE_SIZE,
                               ring=0x7f0000000000, entries=16))

    def bind(hchannel, hctxdma=hctx, hclient=c):
        return ctl.rm_bind_context_dma(hclient, hchannel, hctxdma,
                                       check=False).status

    def control(hchannel, hctxdma=hctx):
        return rm.control_raw(hctxdma, abi.NV0002_CTRL_CMD_BIND_CONTEXTDMA,
                              abi.NV0002_CTRL_BIND_CONTEXTDMA_PARAMS(
                                  hChannel=hchannel)).status

    for call in (bind, control):
        assert call(ch) == abi.NV_OK
        assert call(tsg) == abi.NV_ERR_INVALID_OBJECT_HANDLE
        assert call(0x0BADF00D) == abi.NV_ERR_OBJECT_NOT_FOUND
        assert call(ch, hctxdma=mem.handle) == abi.NV_ERR_NOT_SUPPORTED
        assert call(ch, hctxdma=0x0BADF00D) == abi.NV_ERR_OBJECT_NOT_FOUND
    # the caller's own client only (the escape carries the file's identity)
    with client.Ctl() as other:
        st = other.rm_bind_context_dma(c, ch, hctx, check=False).status
    assert st == abi.NV_ERR_INVALID_CLIENT
    p = abi.NVOS49_PARAMETERS(hClient=c, hChannel=ch, hCtxDma=hctx)
    assert dev0.gpu.escape_raw(abi.NV_ESC_RM_BIND_CONTEXT_DMA,
                               p) == -errno.EINVAL
    # gone with its memory, its handle kept: the control's answer
    rm.free(tsg)
    rm.free(mem.handle)
    assert bind(0x0BADF00D) == abi.NV_ERR_RESOURCE_LOST
    rm.free(hctx)


def test_an_unmapped_ring_faults_its_channel(dev0):
    rm = dev0.client
    mem = dev0.alloc_sysmem(PAGE_SIZE)
    cpu = dev0.map(mem.handle, mem.size)
    tsg = _tsg(dev0)
    c = _chan_params(dev0, userd=mem.handle, userd_offset=0,
                     ring=0x7f0000000000, entries=16)
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, c)
    tok = _token(rm, ch)
    _schedule(rm, tsg)
    with _Usermode(dev0) as um:
        cpu.write32(abi.NVC36F_USERD_GP_PUT, 1)
        um.write32(abi.NVC361_NOTIFY_CHANNEL_PENDING, tok)
        rec = nvtest.wait_for(lambda: _state(tok) == "faulted", 10,
                              "the channel to fault")
        assert rec
    assert cpu.read32(abi.NVC36F_USERD_GP_GET) == 0
    cpu.close()
    rm.free(tsg)
    rm.free(mem.handle)


def test_objects_go_with_what_they_depend_on(dev0):
    """refAddDependant(): a channel depends on its context share, a context
    share on its VA space, though neither is their parent.  Freeing what
    they depend on destructs them (the channel leaves the engine), but RM
    only invalidates them (serverFreeResourceTree's bInvalidateOnly): their
    handles stay until they or an ancestor go."""
    rm = dev0.client
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    for free_first in ("vaspace", "ctxshare"):
        hvas, _ = dev0.vaspace()
        tsg = _tsg(dev0)
        cs = rm.alloc(tsg, abi.FERMI_CONTEXT_SHARE_A,
                      abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas))
        ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                      _chan_params(dev0, userd=mem.handle, ctxshare=cs))
        objs = nvtest.objects_total()
        channels = nvtest.stub.engine(0)["channels"]
        if free_first == "vaspace":
            rm.free(hvas)
            lost = {cs: abi.FERMI_CONTEXT_SHARE_A}
        else:
            rm.free(cs)
            lost = {}
        lost[ch] = abi.HOPPER_CHANNEL_GPFIFO_A
        assert nvtest.objects_total() == objs - 1, free_first
        assert nvtest.stub.engine(0)["channels"] == channels - 1
        for h, hclass in lost.items():
            nvtest.assert_invalidated(rm, h, hclass, tsg)
        # the TSG may take channels of its own again, with context shares
        cs2 = rm.alloc(tsg, abi.FERMI_CONTEXT_SHARE_A,
                       abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                           flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC))
        rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                 _chan_params(dev0, userd=mem.handle, ctxshare=cs2))
        # their ancestor takes the invalidated handles for good
        rm.free(tsg)
        assert nvtest.objects_total() == objs - 2 - len(lost)
        for h in lost:
            assert nvtest.handle_info(rm, h, nvtest.HANDLE_CLASSID)[0] == \
                abi.NV_ERR_OBJECT_NOT_FOUND
        if free_first == "ctxshare":
            rm.free(hvas)
    rm.free(mem.handle)


def test_a_tsg_goes_with_the_va_space_it_names(dev0):
    """kchangrpapiConstruct(): a TSG that names a VA space (its channels use
    it when they name no context share) depends on it.  Freeing the VA space
    destructs the TSG and the channels under it, which leave the engine;
    their handles stay, invalidated, until the device goes."""
    rm = dev0.client
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    hvas, _ = dev0.vaspace()
    tsg = rm.alloc(dev0.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                   abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                       hVASpace=hvas, engineType=abi.NV2080_ENGINE_TYPE_GR0))
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                  _chan_params(dev0, userd=mem.handle))
    objs = nvtest.objects_total()
    channels = nvtest.stub.engine(0)["channels"]
    rm.free(hvas)
    assert nvtest.objects_total() == objs - 1
    assert nvtest.stub.engine(0)["channels"] == channels - 1
    nvtest.assert_invalidated(rm, tsg, abi.KEPLER_CHANNEL_GROUP_A,
                              dev0.hdevice)
    nvtest.assert_invalidated(rm, ch, abi.HOPPER_CHANNEL_GPFIFO_A, tsg)
    rm.free(tsg)
    assert nvtest.objects_total() == objs - 3
    rm.free(mem.handle)


def test_channel_shapes(dev0):
    """kchannelConstruct(): never both a context share and a VA space; a TSG
    channel names no VA space; a channel under a device gets a TSG of RM's
    own (and no context share); a TSG's channels all name context shares or
    none."""
    rm = dev0.client
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    hvas, _ = dev0.vaspace()
    tsg = _tsg(dev0)
    cs = rm.alloc(tsg, abi.FERMI_CONTEXT_SHARE_A,
                  abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas))
    both = _chan_params(dev0, userd=mem.handle, ctxshare=cs, vaspace=hvas)
    assert rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, both).status == \
        abi.NV_ERR_INVALID_ARGUMENT
    named = _chan_params(dev0, userd=mem.handle, vaspace=hvas)
    assert rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, named).status == \
        abi.NV_ERR_INVALID_ARGUMENT
    with_cs = _chan_params(dev0, userd=mem.handle, ctxshare=cs)
    assert rm.alloc_raw(dev0.hdevice, abi.HOPPER_CHANNEL_GPFIFO_A,
                        with_cs).status == abi.NV_ERR_INVALID_ARGUMENT
    rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, with_cs)
    legacy = _chan_params(dev0, userd=mem.handle, userd_offset=PAGE_SIZE)
    assert rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, legacy).status == \
        abi.NV_ERR_INVALID_ARGUMENT
    # under the device, in a VA space it names: schedulable on its own
    ring_cpu = dev0.map(mem.handle, mem.size)
    virt, _ = dev0.alloc_virtual(mem.size, hvaspace=hvas)
    gpu_va = dev0.map_dma(virt, mem.handle, mem.size)
    own = _chan_params(dev0, userd=mem.handle, userd_offset=PAGE_SIZE,
                       ring=gpu_va, vaspace=hvas, entries=16)
    ch = rm.alloc(dev0.hdevice, abi.HOPPER_CHANNEL_GPFIFO_A, own)
    assert own.hPhysChannelGroup == 0       # "only needed internally"
    _run_one_item(dev0, None, ch, ring_cpu, ring_off=0, userd_off=PAGE_SIZE)
    ring_cpu.close()
    rm.free(ch)
    rm.free(tsg)
    rm.free(virt)
    rm.free(hvas)
    rm.free(mem.handle)


def test_channel_alloc_checks(dev0):
    """kchannelConstruct() and kchannelCreateUserdMemDesc_GV100(): a
    power-of-two ring of 2..2^20 entries (stub: RM leaves the count to the
    GPU), USERD 512-aligned inside a memory object of the client, system or
    video memory, the TSG's engine; hObjectBuffer is "no longer used"; the
    ring is a GPU VA, not checked at allocation."""
    rm = dev0.client
    tsg = _tsg(dev0)
    mem = dev0.alloc_sysmem(2 * 4096)
    objs = nvtest.objects_total()
    bad = [({"entries": 3}, abi.NV_ERR_INVALID_ARGUMENT),
           ({"entries": 1}, abi.NV_ERR_INVALID_ARGUMENT),
           ({"entries": 0}, abi.NV_ERR_INVALID_ARGUMENT),
           ({"userd_offset": 4096 + 256}, abi.NV_ERR_INVALID_ARGUMENT),
           ({"userd_offset": 8192}, abi.NV_ERR_INVALID_ARGUMENT),
           ({"engine": 2}, abi.NV_ERR_INVALID_ARGUMENT),
           ({"userd": 0x0BADF00D}, abi.NV_ERR_OBJECT_NOT_FOUND),
           ({"userd": tsg}, abi.NV_ERR_INVALID_OBJECT_HANDLE),
           ({"userd": 0}, abi.NV_ERR_NOT_SUPPORTED)]
    for case, want in bad:
        kw = {"userd": mem.handle, "userd_offset": 4096}
        kw.update(case)
        st = rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                          _chan_params(dev0, **kw))
        assert st.status == want, case
    assert nvtest.objects_total() == objs
    vid = dev0.alloc_vidmem(64 << 10)
    for userd in (mem.handle, vid.handle):
        p = _chan_params(dev0, userd=userd, userd_offset=4096,
                         ring=0x123456789000)
        p.hObjectBuffer = 0x0BADF00D
        rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, p)
    rm.free(tsg)
    rm.free(mem.handle)
    rm.free(vid.handle)


def test_a_tsg_holds_at_most_128_channels(dev0):
    """kchangrpAddChannel(): a TSG holds kfifoGetMaxChannelGroupSize()
    channels (NV_RAMRL_ENTRY_TSG_LENGTH_MAX, 128 from Volta on); the next is
    NV_ERR_INSUFFICIENT_RESOURCES and RM makes nothing.  A free gives the
    place back; another TSG has places of its own."""
    rm = dev0.client
    mem = dev0.alloc_sysmem(2 * 4096)
    tsg = _tsg(dev0)
    made = [rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                     _chan_params(dev0, userd=mem.handle))
            for _ in range(128)]
    objs = nvtest.objects_total()
    st = rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                      _chan_params(dev0, userd=mem.handle)).status
    assert st == abi.NV_ERR_INSUFFICIENT_RESOURCES, hex(st)
    assert nvtest.objects_total() == objs
    other = _tsg(dev0)
    rm.alloc(other, abi.HOPPER_CHANNEL_GPFIFO_A,
             _chan_params(dev0, userd=mem.handle))
    rm.free(made.pop())
    rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
             _chan_params(dev0, userd=mem.handle))
    rm.free(other)
    rm.free(tsg)
    rm.free(mem.handle)


def test_channels_and_tsgs_take_video_memory_no_process_is_charged(dev0):
    """Rule 5: a channel's instance block (_kchannelAllocOrDescribeInstMem,
    NV_RAMIN_ALLOC_SIZE) comes with the channel, and a TSG's GR context
    buffers with its first compute object (kgrctxAllocCtxBuffers), kept until
    the TSG goes (shrkgrctxTeardown); HEAP_FREE shows them, GPU_GET_PID_INFO
    never does.  A channel under a device has a TSG of RM's, which goes with
    it."""
    rm = dev0.client
    ctx_kib = int(nvtest.stub.param("gr_context_kib"))
    free_kib, charged = _heap_free_and_charged(dev0)
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    vid = dev0.heap_alloc(2 << 20)          # PID_INFO sees memory objects
    rm.free(dev0.alloc_virtual(PAGE_SIZE)[0])   # the default VA space's PDB
    free0, charged0 = free_kib(), charged()
    assert charged0 >= 2 << 20
    tsg = _tsg(dev0)
    assert free_kib() == free0              # nothing until a channel
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                  _chan_params(dev0, userd=mem.handle))
    assert free_kib() == free0 - 4
    rm.alloc(ch, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
    assert free_kib() == free0 - 4 - ctx_kib
    ch2 = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                   _chan_params(dev0, userd=mem.handle, userd_offset=512))
    rm.alloc(ch2, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
    assert free_kib() == free0 - 8 - ctx_kib     # one context per TSG
    assert charged() == charged0
    rm.free(ch)
    rm.free(ch2)
    assert free_kib() == free0 - ctx_kib         # the TSG keeps its context
    rm.free(tsg)
    assert free_kib() == free0
    own = rm.alloc(dev0.hdevice, abi.HOPPER_CHANNEL_GPFIFO_A,
                   _chan_params(dev0, userd=mem.handle))
    rm.alloc(own, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
    assert free_kib() == free0 - 4 - ctx_kib
    assert charged() == charged0
    rm.free(own)
    assert free_kib() == free0
    rm.free(vid.handle)
    rm.free(mem.handle)


def test_a_duplicate_tsg_or_va_space_keeps_what_it_shares(dev0):
    """RM duplicates TSGs and VA spaces (kchangrpapiCanCopy,
    vaspaceapiCanCopy).  A TSG's duplicate shares its channel group and
    graphics context (kchangrpapiCopyConstruct: serverRefShare), so
    channels made under either join one group, and the context goes with
    the last handle; the source's channels are its children and go with
    it.  A VA space's duplicate takes a reference on it (vaspaceIncRefCnt):
    the directories go with the last handle (vmmDestroyVaspace)."""
    rm = dev0.client
    ctx_kib = int(nvtest.stub.param("gr_context_kib"))
    free_kib, _ = _heap_free_and_charged(dev0)
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    rm.free(dev0.alloc_virtual(PAGE_SIZE)[0])   # the default VA space's PDB
    free0 = free_kib()
    tsg = _tsg(dev0)
    dup = rm.dup(dev0.hdevice, tsg)
    ch = rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                  _chan_params(dev0, userd=mem.handle))
    rm.alloc(ch, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
    ch2 = rm.alloc(dup, abi.HOPPER_CHANNEL_GPFIFO_A,
                   _chan_params(dev0, userd=mem.handle, userd_offset=512))
    rm.alloc(ch2, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
    assert free_kib() == free0 - 8 - ctx_kib     # one group, one context
    rm.free(tsg)                                 # and its channel with it
    assert free_kib() == free0 - 4 - ctx_kib
    rm.free(dup)
    assert free_kib() == free0
    for last in (0, 1):
        hvas, _ = dev0.vaspace()
        assert free_kib() == free0 - PT_KIB      # its PDB
        handles = [hvas, rm.dup(dev0.hdevice, hvas)]
        rm.free(handles.pop(1 - last))
        assert free_kib() == free0 - PT_KIB
        rm.free(handles.pop())
        assert free_kib() == free0
    rm.free(mem.handle)


def test_a_duplicate_context_share_shares_its_veid_and_va_space(dev0):
    """RM duplicates context shares (kctxshareapiCanCopy): the duplicate,
    under a TSG of its client, shares its source's data -- VA space and
    VEID -- (kctxshareapiCopyConstruct: serverRefShare), so the VEID stays
    taken in the source's TSG until the last handle goes, and the
    duplicate depends on its client's VA space object of that VA space.
    A channel may name it only under its own parent TSG (kchannelConstruct:
    NV_ERR_INVALID_OBJECT_PARENT).  The stub refused the duplicate before
    (NV_ERR_INVALID_ARGUMENT), so no test could make a channel on one."""
    rm = dev0.client
    mem = dev0.alloc_sysmem(2 * PAGE_SIZE)
    hvas, _ = dev0.vaspace()
    tsg = _tsg(dev0)
    async_ = abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC

    def share(flags=async_):
        p = abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas, flags=flags)
        st = rm.alloc_raw(tsg, abi.FERMI_CONTEXT_SHARE_A, p)
        return st.status, st.hObjectNew, p.subctxId

    st, cs, veid = share()
    assert (st, veid) == (abi.NV_OK, 63)
    dtsg = rm.dup(dev0.hdevice, tsg)
    # a context share's parent is a TSG
    assert ctl_dup(rm, dev0.hdevice, cs) == abi.NV_ERR_INVALID_OBJECT_PARENT
    dcs = rm.dup(dtsg, cs)
    objs = nvtest.objects_total()
    # the source's handle goes; its VEID stays with the duplicate
    rm.free(cs)
    st, cs2, veid = share()
    assert (st, veid) == (abi.NV_OK, 62)
    # a channel on the duplicate, under its parent only
    p = _chan_params(dev0, userd=mem.handle, ctxshare=dcs)
    assert rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, p).status == \
        abi.NV_ERR_INVALID_OBJECT_PARENT
    channels = nvtest.stub.engine(0)["channels"]
    ch = rm.alloc(dtsg, abi.HOPPER_CHANNEL_GPFIFO_A, p)
    assert nvtest.stub.engine(0)["channels"] == channels + 1
    # the last handle of the share: its VEID is free again
    rm.free(dcs)
    assert nvtest.stub.engine(0)["channels"] == channels
    nvtest.assert_invalidated(rm, ch, abi.HOPPER_CHANNEL_GPFIFO_A, dtsg)
    st, cs3, veid = share()
    assert (st, veid) == (abi.NV_OK, 63)
    # a duplicate depends on its client's VA space object of the share's
    dcs = rm.dup(dtsg, cs3)
    rm.free(hvas)
    for h in (cs2, cs3, dcs):
        nvtest.assert_invalidated(rm, h, abi.FERMI_CONTEXT_SHARE_A,
                                  dtsg if h == dcs else tsg)
    rm.free(dtsg)
    rm.free(tsg)
    # of the six objects when counted, the memory alone is left
    assert nvtest.objects_total() == objs - 5
    rm.free(mem.handle)


def ctl_dup(rm, hparent, hsrc):
    return rm.ctl.rm_dup(rm.handle, hparent, rm.handle, hsrc,
                         check=False).status


PT_KIB = nvtest.PAGE_TABLE // KIB


def test_page_tables_take_video_memory_no_process_is_charged(dev0):
    """Rule 5: an RM VA space's PDB comes with it (gvaspaceConstruct_); each
    level a mapping reaches is made then, at its whole size, in video memory,
    and freed with its last entry (gmmu_walk.c _gmmuWalkCBLevelAlloc,
    mmuWalkMap, mmuWalkUnmap): on Hopper four directories and the PT, a PT
    per 2 MiB and a PD0 per 512 MiB of VA.  HEAP_FREE shows them,
    GPU_GET_PID_INFO never does."""
    rm = dev0.client
    free_kib, charged = _heap_free_and_charged(dev0)
    mem = dev0.alloc_vidmem(64 * KIB)
    free0, charged0 = free_kib(), charged()
    hvas, _ = dev0.vaspace()
    assert free_kib() == free0 - PT_KIB                 # the PDB
    virt, va = dev0.alloc_virtual(1 << 30, hvaspace=hvas, va=1 << 30,
                                  lazy=True)
    assert free_kib() == free0 - PT_KIB                 # a lazy one: none
    at = [dev0.map_dma(virt, mem.handle, 4 * KIB, dma_offset=off)
          for off in (0, 4 * KIB)]
    assert at == [va, va + 4 * KIB]
    # three directories, PD0 and one PT, shared by both mappings
    assert free_kib() == free0 - PT_KIB - 5 * PT_KIB
    dev0.map_dma(virt, mem.handle, 4 * KIB, dma_offset=2 << 20)
    assert free_kib() == free0 - 7 * PT_KIB             # the next 2 MiB: a PT
    far = dev0.map_dma(virt, mem.handle, 64 * KIB, dma_offset=512 << 20)
    assert free_kib() == free0 - 9 * PT_KIB             # and a PD0
    assert charged() == charged0
    dev0.ctl.rm_unmap_memory_dma(rm.handle, dev0.hdevice, virt, mem.handle,
                                 far)
    assert free_kib() == free0 - 7 * PT_KIB
    dev0.ctl.rm_unmap_memory_dma(rm.handle, dev0.hdevice, virt, mem.handle,
                                 va + 4 * KIB)
    assert free_kib() == free0 - 7 * PT_KIB             # the PT has a user
    rm.free(virt)                                       # with its mappings
    assert free_kib() == free0 - PT_KIB
    rm.free(hvas)
    assert free_kib() == free0
    # the device's default VA space has a PDB too, from its first use
    virt, va = dev0.alloc_virtual(64 * KIB)
    dev0.map_dma(virt, mem.handle, 64 * KIB)
    assert free_kib() < free0 and charged() == charged0
    rm.free(virt)
    rm.free(mem.handle)


@pytest.mark.parametrize("flags", ["default", "sparse"])
def test_a_virtual_allocation_pins_its_page_tables_unless_lazy(dev0, flags):
    """A virtual allocation neither lazy nor externally managed pins the
    page tables of its whole range when it is made, with no mapping, until
    it goes (gpu_vaspace.c gvaspaceAlloc: mmuWalkReserveEntries); a sparse
    one too, LAZY or not (virtual_mem.c clears LAZY on it).  Mappings in it
    take no more.  1 GiB at 1 GiB: three directories, two PD0s and 512
    PTs.  A lazy or externally managed one pins nothing."""
    rm = dev0.client
    free_kib, charged = _heap_free_and_charged(dev0)
    mem = dev0.alloc_vidmem(64 * KIB)
    hvas, _ = dev0.vaspace()
    free0, charged0 = free_kib(), charged()
    extra = abi.NVOS32_ALLOC_FLAGS_SPARSE | abi.NVOS32_ALLOC_FLAGS_LAZY \
        if flags == "sparse" else 0
    virt, va = dev0.alloc_virtual(1 << 30, hvaspace=hvas, va=1 << 30,
                                  flags=extra)
    assert va == 1 << 30
    pinned = (3 + 2 + 512) * PT_KIB
    assert free_kib() == free0 - pinned
    dev0.map_dma(virt, mem.handle, 64 * KIB, dma_offset=512 << 20)
    assert free_kib() == free0 - pinned                 # already there
    assert charged() == charged0
    rm.free(virt)
    assert free_kib() == free0
    for lazy in (abi.NVOS32_ALLOC_FLAGS_LAZY,
                 abi.NVOS32_ALLOC_FLAGS_EXTERNALLY_MANAGED):
        virt, _ = dev0.alloc_virtual(1 << 30, hvaspace=hvas, flags=lazy)
        assert free_kib() == free0
        rm.free(virt)
    rm.free(hvas)
    rm.free(mem.handle)


def test_a_duplicate_range_keeps_its_tables(dev0):
    """RM duplicates a virtual allocation (stdmemCanCopy) only where the new
    handle's device has the range in its default VA space: the duplicate
    names no VA space of its own (_virtmemCopyConstruct,
    NV_ERR_INVALID_DEVICE).  It takes a reference on the range
    (vaspaceIncAllocRefCnt), so the pinned tables stay until the last
    handle goes, whichever goes first."""
    rm = dev0.client
    free_kib, _ = _heap_free_and_charged(dev0)
    hvas, _ = dev0.vaspace()
    virt, _ = dev0.alloc_virtual(1 << 30, hvaspace=hvas)
    p = rm.ctl.rm_dup(rm.handle, dev0.hdevice, rm.handle, virt, check=False)
    assert p.status == abi.NV_ERR_INVALID_DEVICE, hex(p.status)
    rm.free(virt)
    rm.free(hvas)
    lazy, _ = dev0.alloc_virtual(1 << 21, lazy=True)   # the default's root
    free0 = free_kib()
    for last in (0, 1):
        virt, _ = dev0.alloc_virtual(1 << 30, va=1 << 30)
        pinned = free0 - free_kib()
        assert pinned > 0
        handles = [virt, rm.dup(dev0.hdevice, virt)]
        assert free_kib() == free0 - pinned
        rm.free(handles.pop(1 - last))
        assert free_kib() == free0 - pinned
        rm.free(handles.pop())
        assert free_kib() == free0
    rm.free(lazy)


def test_a_pin_that_does_not_fit_is_refused_whole(dev0):
    """Tables RM cannot make fail the allocation (NV_ERR_NO_MEMORY), and
    what it had made of them goes back: with 1 to 3 MiB of the heap left,
    4 GiB of VA would pin about 8 MiB."""
    free_kib, _ = _heap_free_and_charged(dev0)
    hvas, _ = dev0.vaspace()
    fill = dev0.alloc_vidmem((free_kib() - 1024) // 2048 * 2048 * KIB)
    free0 = free_kib()
    assert 1024 <= free0 < 4096
    with pytest.raises(client.NvStatusError) as e:
        dev0.alloc_virtual(4 << 30, hvaspace=hvas)
    assert e.value.status == abi.NV_ERR_NO_MEMORY
    assert free_kib() == free0
    dev0.client.free(fill.handle)
    dev0.client.free(hvas)


# --- helpers

def _heap_free_and_charged(dev):
    """Two readings: the heap's free KiB (FB_GET_INFO HEAP_FREE) and what
    GPU_GET_PID_INFO charges this process."""
    me = os.getpid()
    free_idx = abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE

    def free_kib():
        return dev.fb_info_v2([free_idx])[free_idx]

    def charged():
        return dev.pid_info([me])[me][1]

    return free_kib, charged


def _tsg(dev):
    return dev.client.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                            abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                                engineType=abi.NV2080_ENGINE_TYPE_GR0))


def _chan_params(dev, userd, userd_offset=4096, ring=0, entries=16,
                 ctxshare=0, vaspace=0, engine=abi.NV2080_ENGINE_TYPE_GR0):
    p = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
    p.gpFifoOffset = ring
    p.gpFifoEntries = entries
    p.hContextShare = ctxshare
    p.hVASpace = vaspace
    p.hUserdMemory[0] = userd
    p.userdOffset[0] = userd_offset
    p.engineType = engine
    return p


def _token(rm, ch):
    rm.alloc(ch, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
    tok = abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()
    rm.control(ch, abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, tok)
    return tok.workSubmitToken


def _schedule(rm, tsg, ch=None):
    p = rm.ctl.abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1)
    if tsg is not None:
        rm.control(tsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, p)
    else:
        rm.control(ch, abi.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE, p)


def _state(token):
    for rec in nvtest.stub.channels(0):
        if rec.get("token") == token:
            return rec.get("state")
    return None


class _Usermode:
    def __init__(self, dev):
        self.dev = dev
        self.h = dev.client.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
        self.map = dev.map(self.h, abi.NVC361_NV_USERMODE__SIZE,
                           hparent=dev.hsubdevice, node=dev.gpu.path)

    def write32(self, off, value):
        self.map.write32(off, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.map.close()
        self.dev.client.free(self.h)


def _run_one_item(dev, tsg, ch, cpu, ring_off, userd_off):
    """Queue one 1 ms item through the CPU mapping CPU (ring at RING_OFF,
    USERD at USERD_OFF), ring the doorbell, and wait for GPGet to move."""
    rm = dev.client
    tok = _token(rm, ch)
    _schedule(rm, tsg, ch)
    item = abi.NvstubWorkItem(duration_us=MS)
    cpu.mm[ring_off:ring_off + 8] = bytes(item)
    cpu.write32(userd_off + abi.NVC36F_USERD_GP_PUT, 1)
    with _Usermode(dev) as um:
        um.write32(abi.NVC361_NOTIFY_CHANNEL_PENDING, tok)
        nvtest.wait_for(
            lambda: cpu.read32(userd_off + abi.NVC36F_USERD_GP_GET) == 1,
            30, "GPGet to reach 1")
    assert _state(tok) != "faulted"

