# SPDX-License-Identifier: Apache-2.0
"""The simulated UVM as NVIDIA's UVM module behaves (issue 18, rules 4, 6
and 7; docs/nvstub.md): GPU and VA space registration, external ranges and
their mappings, UVM's duplicate keeping memory alive after RM_FREE with no
process charged, channel registration and GPFIFO_SCHEDULE, and a client built
as CUDA and tinygrad are at 535 and at 580."""

import ctypes
import os

import nvtest
import pytest
from nvclient import abi, client
from nvclient.cudalike import CudaChannel, CudaContext
from nvclient.uvm import Uvm, gpu_uuid

MIB = 1 << 20
MS = 1000


@pytest.fixture
def uvm(config, uvm_nodes):
    with Uvm(config.version) as u:
        yield u


PT = nvtest.PAGE_TABLE
_page_tables = nvtest.page_tables


def _pid_info(dev):
    """This process's GPU_GET_PID_INFO entry (all three figures)."""
    p = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=1)
    p.pidInfoList[0].pid = os.getpid()
    p.pidInfoList[0].index = abi.NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE
    dev.client.control(dev.hsubdevice, abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, p)
    return p.pidInfoList[0]


def test_registration_rules(dev0, uvm, config):
    uuid = gpu_uuid(0)
    with Uvm(config.version, initialize=False) as raw:
        assert raw.register_gpu(uuid, check=False) == abi.NV_ERR_ILLEGAL_ACTION
    bogus = type(uuid)(*range(16))
    assert uvm.register_gpu(bogus, check=False) == \
        abi.NV_ERR_GPU_UUID_NOT_FOUND
    # a VA space before its GPU, then twice
    hvas, _ = dev0.vaspace(
        flags=abi.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
    ctl, h = dev0.ctl.fileno(), dev0.client.handle
    assert uvm.register_gpu_va_space(uuid, ctl, h, hvas, check=False) == \
        abi.NV_ERR_INVALID_DEVICE
    uvm.register_gpu(uuid)
    assert uvm.register_gpu(uuid, check=False) == abi.NV_ERR_INVALID_DEVICE
    # only an externally owned VA space, and once
    plain, _ = dev0.vaspace()
    assert uvm.register_gpu_va_space(uuid, ctl, h, plain, check=False) == \
        abi.NV_ERR_INVALID_FLAGS
    assert uvm.register_gpu_va_space(uuid, ctl, h, dev0.hdevice,
                                     check=False) == abi.NV_ERR_INVALID_OBJECT
    uvm.register_gpu_va_space(uuid, ctl, h, hvas)
    assert uvm.register_gpu_va_space(uuid, ctl, h, hvas, check=False) == \
        abi.NV_ERR_INVALID_DEVICE
    # UVM's page directory makes context shares possible
    tsg = dev0.client.alloc(dev0.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                            abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                                engineType=abi.NV2080_ENGINE_TYPE_GR0))
    dev0.client.alloc(tsg, abi.FERMI_CONTEXT_SHARE_A,
                      abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas))
    # another va_space cannot own that VA space's page tables too
    with Uvm(config.version) as other:
        other.register_gpu(uuid)
        assert other.register_gpu_va_space(uuid, ctl, h, hvas,
                                           check=False) == \
            abi.NV_ERR_INVALID_DEVICE
    uvm.unregister_gpu_va_space(uuid)
    assert uvm.unregister_gpu_va_space(uuid, check=False) == \
        abi.NV_ERR_INVALID_DEVICE
    uvm.unregister_gpu(uuid)
    for o in (tsg, plain, hvas):
        dev0.client.free(o)


def test_external_ranges(uvm):
    assert uvm.create_external_range(0x1000, 0x1000) == abi.NV_OK
    for base, length in ((0, 0x1000), (0x2001, 0x1000), (0x3000, 0),
                         (0x3000, 0x800)):
        assert uvm.create_external_range(base, length, check=False) == \
            abi.NV_ERR_INVALID_ADDRESS, (base, length)
    assert uvm.create_external_range(0x1000, 0x2000, check=False) == \
        abi.NV_ERR_UVM_ADDRESS_IN_USE
    # FREE needs the range exactly
    assert uvm.free(0x1000, 0x2000, check=False) == abi.NV_ERR_INVALID_ADDRESS
    uvm.free(0x1000, 0x1000)
    assert uvm.free(0x1000, 0x1000, check=False) == abi.NV_ERR_INVALID_ADDRESS


def test_map_external_rules(dev0, uvm, config):
    ctx = CudaContext(dev0, uvm)
    mem = dev0.alloc_vidmem(2 * MIB)
    ctl, h, uuid = dev0.ctl.fileno(), dev0.client.handle, ctx.uuid
    va = ctx.va(4 * MIB)
    # no range yet
    assert uvm.map_external(va, 2 * MIB, ctl, h, mem.handle, [uuid],
                            check=False) == abi.NV_ERR_INVALID_ADDRESS
    uvm.create_external_range(va, 4 * MIB)
    assert uvm.map_external(va, 2 * MIB, ctl, h, mem.handle, [uuid], count=0,
                            check=False) == abi.NV_ERR_INVALID_ARGUMENT
    assert uvm.map_external(va, 2 * MIB, ctl, h, mem.handle, [],
                            count=len(uvm.MAP_EXTERNAL().perGpuAttributes) + 1,
                            check=False) == abi.NV_ERR_INVALID_ARGUMENT
    assert uvm.map_external(va, 4 * MIB, ctl, h, mem.handle, [uuid],
                            check=False) == abi.NV_ERR_INVALID_OFFSET
    assert uvm.map_external(va, 2 * MIB, ctl, h, 0x0BADF00D, [uuid],
                            check=False) == abi.NV_ERR_OBJECT_NOT_FOUND
    assert uvm.map_external(va, 2 * MIB, ctl, h, dev0.hdevice, [uuid],
                            check=False) == abi.NV_ERR_INVALID_OBJECT_HANDLE
    uvm.map_external(va, 2 * MIB, ctl, h, mem.handle, [uuid])
    # rmCtrlFd is not checked ("Bug 1624521")
    uvm.map_external(va + 2 * MIB, 2 * MIB, -1, h, mem.handle, [uuid])
    uvm.free(va, 4 * MIB)
    dev0.client.free(mem.handle)
    ctx.close()


def test_uvm_keeps_memory_freed_by_rm_free_and_charges_no_one(dev0, uvm):
    """RM_FREE of a handle UVM maps: UVM's duplicate (a kernel client's)
    becomes the owner, the memory stays, GPU_GET_PID_INFO charges the
    process nothing; UVM_FREE releases it (rule 4)."""
    ctx = CudaContext(dev0, uvm)
    used0 = nvtest.heap_used(0)
    buf = ctx.alloc(64 * MIB)
    mapped = nvtest.heap_used(0)
    assert mapped - used0 == 64 * MIB + _page_tables(buf.va, buf.size)
    info = _pid_info(dev0)
    # two handles now (the user's, UVM's): shared, owned by the user
    assert info.data.vidMemUsage.memPrivate == 0
    assert info.data.vidMemUsage.memSharedOwned == 64 * MIB
    dev0.client.free(buf.handle)
    assert nvtest.heap_used(0) == mapped
    info = _pid_info(dev0)
    usage = info.data.vidMemUsage
    assert (usage.memPrivate, usage.memSharedOwned, usage.memSharedDuped) == \
        (0, 0, 0)
    uvm.free(buf.va, buf.size)
    assert nvtest.heap_used(0) == used0
    ctx.close()


def test_closing_uvm_releases_its_duplicates(dev0, config, uvm_nodes):
    used0 = nvtest.heap_used(0)
    with Uvm(config.version) as u:
        ctx = CudaContext(dev0, u)
        buf = ctx.alloc(32 * MIB)
        dev0.client.free(buf.handle)
        assert nvtest.heap_used(0) == used0 + 32 * MIB + PT + \
            _page_tables(buf.va, buf.size)      # UVM's root and tables
    assert nvtest.heap_used(0) == used0
    dev0.client.free(ctx.hvas)


def test_uvm_page_tables_take_video_memory_no_process_is_charged(dev0, uvm):
    """Rule 5: UVM's page tree (uvm_page_tree.c) is UVM's own video memory:
    a root at REGISTER_GPU_VASPACE, the levels an external mapping reaches at
    MAP_EXTERNAL_ALLOCATION, freed with the last mapping of each and the
    root at unregistration.  GPU_GET_PID_INFO charges the process only its
    memory."""
    used0 = nvtest.heap_used(0)
    ctx = CudaContext(dev0, uvm)
    assert nvtest.heap_used(0) == used0 + PT
    bufs = [ctx.alloc(2 * MIB) for _ in range(3)]
    tables = _page_tables(bufs[0].va, 3 * 2 * MIB)
    assert tables == (4 + 3) * PT               # four directories, three PTs
    assert nvtest.heap_used(0) == used0 + PT + 3 * 2 * MIB + tables
    info = _pid_info(dev0)
    assert info.data.vidMemUsage.memSharedOwned == 3 * 2 * MIB
    assert info.data.vidMemUsage.memPrivate == 0
    middle = bufs[1]
    ctx.uvm.free(middle.va, middle.size)
    dev0.client.free(middle.handle)
    assert nvtest.heap_used(0) == used0 + PT + 2 * 2 * MIB + tables - PT
    ctx.close()                                 # the rest and the root
    assert nvtest.heap_used(0) == used0 + 2 * 2 * MIB
    for b in (bufs[0], bufs[2]):
        dev0.client.free(b.handle)
    assert nvtest.heap_used(0) == used0


def test_uvm_dups_only_the_callers_clients(dev0, uvm):
    """nvGpuOpsDupMemory(): the source client must be the calling process's
    (the PID share policy), whatever rmCtrlFd says."""
    ctx = CudaContext(dev0, uvm)
    code = """
    ctl = client.Ctl()
    rm = client.RmClient(ctl)
    dev = rm.device(0)
    mem = dev.alloc_vidmem(1 << 20)
    report(client=rm.handle, memory=mem.handle)
    import sys
    sys.stdin.read()
    """
    child = nvtest.spawn_child(code)
    try:
        r = child.report()
        va = ctx.va(MIB)
        uvm.create_external_range(va, MIB)
        st = uvm.map_external(va, MIB, dev0.ctl.fileno(), r["client"],
                              r["memory"], [ctx.uuid], check=False)
        assert st == abi.NV_ERR_INSUFFICIENT_PERMISSIONS
        uvm.free(va, MIB)
    finally:
        child.finish()
    ctx.close()


def test_schedule_needs_uvm_channel_registration(dev0, uvm):
    """kchannelIsSchedulable(): a graphics channel of an externally owned VA
    space is scheduled only once UVM_REGISTER_CHANNEL bound it, and not
    after UVM_UNREGISTER_CHANNEL (NV_ERR_INVALID_STATE)."""
    ctx = CudaContext(dev0, uvm)
    ch = CudaChannel(ctx, schedule=False)
    sched = dev0.abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1)
    rm = dev0.client
    rm.control(ch.htsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, sched)
    uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel)
    ch.registered = False
    for h, cmd in ((ch.htsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE),
                   (ch.hchannel, abi.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE)):
        st = rm.control_raw(h, cmd, sched)
        assert st.status == abi.NV_ERR_INVALID_STATE
    assert uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel,
                                  check=False) == abi.NV_ERR_INVALID_CHANNEL
    # a channel of another VA space is refused
    assert uvm.register_channel(ctx.uuid, dev0.ctl.fileno(), rm.handle,
                                ch.htsg, 1 << 36, 1 << 20, check=False) == \
        abi.NV_ERR_INVALID_OBJECT_HANDLE
    uvm.register_channel(ctx.uuid, dev0.ctl.fileno(), rm.handle, ch.hchannel,
                         1 << 36, 1 << 20)
    ch.registered = True
    rm.control(ch.htsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, sched)
    ch.close()
    ctx.close()


def test_uvm_keeps_a_registered_channel_s_id_instance_block_and_context(
        dev0, uvm):
    """nvGpuOpsRetainChannel (UVM_REGISTER_CHANNEL) duplicates the channel's
    TSG into UVM's own client and allocates a UVM_CHANNEL_RETAINER, which
    takes a reference on the channel id and on the instance block
    (uvmchanrtnrConstruct, 535 to 595): the user's RM_FREE of its TSG
    leaves the graphics context, the instance block and the channel id in
    use, charged to no process, until UVM lets go of the channel."""
    ctx_kib = int(nvtest.stub.param("gr_context_kib"))
    rm = dev0.client
    ctx = CudaContext(dev0, uvm)
    ch = CudaChannel(ctx, schedule=False)
    chid = ch.token & 0xffff
    before = nvtest.heap_free(0)
    rm.free(ch.htsg)                # the channel and its context share too
    ch._objs.remove(ch.htsg)
    assert nvtest.heap_free(0) == before        # nothing went
    # the channel id is still taken: a new channel gets another
    other = client.Channel(dev0, entries=8, schedule=False)
    assert other.token & 0xffff != chid, (hex(other.token), hex(chid))
    other.close()
    before = nvtest.heap_free(0)    # (the default VA space's directory stays)
    # UVM lets go, by the handles it registered
    uvm.unregister_channel(ctx.uuid, rm.handle, ch.hchannel)
    ch.registered = False
    assert nvtest.heap_free(0) == before + ctx_kib * 1024 + 4096
    again = client.Channel(dev0, entries=8, schedule=False)
    assert again.token & 0xffff == chid, (hex(again.token), hex(chid))
    again.close()
    ch.close()
    ctx.close()


@pytest.mark.parametrize("version", ["535.288.01", "580.126.20"])
def test_a_cuda_like_client_runs(reload_stub, uvm_nodes, version):
    """Device, externally owned VA space with UVM, memory at GPU VAs, a
    channel in a context share with its ring and USERD in video memory, the
    compute object, the token, UVM_REGISTER_CHANNEL, GPFIFO_SCHEDULE: the
    work runs, at the oldest and the newest ABI (MAP_EXTERNAL_ALLOCATION
    is 1200 bytes at 535, 9264 at 580)."""
    reload_stub(version=version)
    nvtest.make_uvm_nodes()     # the reloaded stub's major
    with client.Ctl() as ctl, Uvm(version) as u:
        assert ctl.abi.version == version
        rm = client.RmClient(ctl)
        dev = rm.device(0)
        with CudaContext(dev, u) as ctx:
            buf = ctx.alloc(8 * MIB)
            with CudaChannel(ctx) as ch:
                for _ in range(3):
                    ch.submit(2 * MS)
                ch.wait(timeout=60)
                assert ch.gp_get == 3
            buf.free()
        dev.close()
        rm.close()


def test_a_client_holding_the_access_counter_buffer_keeps_uvm_off_the_gpu(
        dev0, uvm, config):
    """ACCESS_COUNTER_NOTIFY_BUFFER (clc365.h) is one a GPU for each index
    (accessCounterBufferCount: 1 on GH100), allocatable by any client
    (resource_list.h: RS_FLAGS_ALLOC_NON_PRIVILEGED), and nobody else gets
    it while it lives (accesscntrConstruct: NV_ERR_INVALID_STATE) -- UVM
    included, whose parent-GPU init allocates it when the first VA space
    registers the GPU (uvm_isr_init_access_counters): the registration
    fails for every process until the holder frees it."""
    uuid = gpu_uuid(0)
    acp = ctypes.c_uint32(0)
    rm = dev0.client
    h = rm.alloc(dev0.hsubdevice, abi.ACCESS_COUNTER_NOTIFY_BUFFER, acp)
    other = client.RmClient(dev0.ctl)
    odev = other.device(0, gpu_file=dev0.gpu)
    assert other.alloc_raw(odev.hsubdevice, abi.ACCESS_COUNTER_NOTIFY_BUFFER,
                           acp).status == abi.NV_ERR_INVALID_STATE
    assert other.alloc_raw(odev.hsubdevice, abi.ACCESS_COUNTER_NOTIFY_BUFFER,
                           ctypes.c_uint32(1)).status == \
        abi.NV_ERR_INVALID_ARGUMENT
    assert uvm.register_gpu(uuid, check=False) == abi.NV_ERR_INVALID_STATE
    rm.free(h)
    uvm.register_gpu(uuid)
    # UVM holds it now: the client does not get it
    assert other.alloc_raw(odev.hsubdevice, abi.ACCESS_COUNTER_NOTIFY_BUFFER,
                           acp).status == abi.NV_ERR_INVALID_STATE
    uvm.unregister_gpu(uuid)
    other.close()
