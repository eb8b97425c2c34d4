# SPDX-License-Identifier: Apache-2.0
"""A client built as CUDA and tinygrad's NV backend drive NVIDIA's driver
(NVIDIA's headers; gVisor's nvproxy tables of what CUDA sends; tinygrad's
ops_nv.py, which runs on real GPUs): an externally owned VA space that UVM
owns the page tables of, memory at GPU virtual addresses of the client's
choosing mapped through UVM, and channels in a context share of that VA
space, their ring and USERD in video memory written through BAR1.

    ctx = CudaContext(device, Uvm(version))
    buf = ctx.alloc(64 << 20)                 # cuMemAlloc
    ch = CudaChannel(ctx)                      # what a stream needs
    ch.submit(1000); ch.wait()
    ch.close(); buf.free(); ctx.close()
"""

from . import abi
from .client import Channel, Mapping, round_up
from .uvm import gpu_uuid

MIB = 1 << 20
HUGE = 2 * MIB


class CudaContext:
    """A device's GPU virtual memory as a CUDA context sets it up: a
    FERMI_VASPACE_A with IS_EXTERNALLY_OWNED | ENABLE_PAGE_FAULTING (the VA
    range tinygrad asks for), registered with UVM (REGISTER_GPU, then
    REGISTER_GPU_VASPACE, which installs UVM's page directory)."""

    VA_BASE = 0x1000
    VA_SIZE = 0x1fffffb000000
    HEAP_VA = 0x200000000       # this client's allocations, bump-allocated
    CHANNEL_VA = 0x1000000000   # the channels' UVM ranges (tinygrad's)

    def __init__(self, device, uvm):
        self.device = device
        self.client = device.client
        self.ctl = device.ctl
        self.uvm = uvm
        self.uuid = gpu_uuid(device.index)
        self.hvas, _ = device.vaspace(
            flags=abi.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED
            | abi.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING,
            va_base=self.VA_BASE, va_size=self.VA_SIZE)
        try:
            uvm.register_gpu(self.uuid)
            uvm.register_gpu_va_space(self.uuid, self.ctl.fileno(),
                                      self.client.handle, self.hvas)
        except BaseException:
            self.client.free(self.hvas)
            raise
        self.next_va = self.HEAP_VA
        self.next_channel_va = self.CHANNEL_VA

    def va(self, size):
        va = round_up(self.next_va, HUGE if size >= HUGE else 4096)
        self.next_va = va + size
        return va

    def alloc(self, size, vidmem=True, cpu=False):
        """cuMemAlloc: RM_ALLOC of the memory, CREATE_EXTERNAL_RANGE and
        MAP_EXTERNAL_ALLOCATION at a VA of ours; with CPU a CPU mapping too
        (BAR1 through a GPU file for video memory)."""
        dev = self.device
        mem = dev.alloc_vidmem(size) if vidmem else dev.alloc_sysmem(size)
        va = self.va(mem.size)
        try:
            self.uvm.create_external_range(va, mem.size)
            self.uvm.map_external(va, mem.size, self.ctl.fileno(),
                                  self.client.handle, mem.handle, [self.uuid])
        except BaseException:
            self.uvm.free(va, mem.size, check=False)
            self.client.free(mem.handle)
            raise
        mapping = None
        if cpu:
            mapping = dev.map(mem.handle, mem.size,
                              node=dev.gpu.path if vidmem else None)
        return Allocation(self, mem.handle, va, mem.size, mapping)

    def close(self):
        """UVM_UNREGISTER_GPU takes the GPU's VA space and mappings with it."""
        if self.client.handle and not self.ctl.closed:
            self.uvm.unregister_gpu(self.uuid, check=False)
            if self.hvas in self.client.parents:
                self.client.free(self.hvas)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Allocation:
    def __init__(self, ctx, handle, va, size, mapping):
        self.ctx, self.handle, self.va, self.size = ctx, handle, va, size
        self.cpu = mapping

    def free(self, rm_first=False):
        """cuMemFree: UVM_FREE, then RM_FREE.  RM_FIRST is tinygrad's order
        (RM_FREE, then UVM_FREE): between the two, UVM's duplicate alone
        keeps the memory."""
        if self.cpu:
            self.cpu.close()
            self.cpu = None
        if rm_first:
            self.ctx.client.free(self.handle)
            self.ctx.uvm.free(self.va, self.size)
        else:
            self.ctx.uvm.free(self.va, self.size)
            self.ctx.client.free(self.handle)


class CudaChannel(Channel):
    """A TSG, a context share of the context's VA space (ASYNC), and a Hopper
    GPFIFO channel whose ring and USERD sit in 2 MiB of video memory mapped
    at a GPU VA through UVM and for the CPU through BAR1; the compute and
    copy objects, the work-submit token, UVM_REGISTER_CHANNEL, then
    GPFIFO_SCHEDULE on the TSG: tinygrad's order (ops_nv.py)."""

    def __init__(self, ctx, entries=1024, timeslice_us=None, schedule=True):
        device = ctx.device
        self.ctx = ctx
        self.device = device
        client = device.client
        self.client = client
        self.entries = entries
        self.put = 0
        self._objs = []
        self._maps = []
        self.area = None
        self.registered = False
        try:
            self.htsg = client.alloc(
                device.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                    engineType=abi.NV2080_ENGINE_TYPE_GR0))
            self._objs.append(self.htsg)
            if timeslice_us is not None:
                self.timeslice(timeslice_us)
            self.area = ctx.alloc(HUGE, vidmem=True, cpu=True)
            self.mem = self.area.cpu
            self.hmem = self.area.handle
            self.userd_offset = entries * abi.NV_GPFIFO_ENTRY_SIZE
            self.hctxshare = client.alloc(
                self.htsg, abi.FERMI_CONTEXT_SHARE_A,
                abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                    hVASpace=ctx.hvas,
                    flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
            p = device.abi.NV_CHANNEL_ALLOC_PARAMS()
            p.hObjectBuffer = self.area.handle      # "no longer used"
            p.gpFifoOffset = self.area.va
            p.gpFifoEntries = entries
            p.hContextShare = self.hctxshare
            p.hUserdMemory[0] = self.area.handle
            p.userdOffset[0] = self.userd_offset
            self.hchannel = client.alloc(self.htsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                                         p)
            self.hcompute = client.alloc(self.hchannel, abi.HOPPER_COMPUTE_A,
                                         abi.NV_GR_ALLOCATION_PARAMETERS())
            client.alloc(self.hchannel, abi.HOPPER_DMA_COPY_A)
            tok = abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()
            client.control(self.hchannel,
                           abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, tok)
            self.token = tok.workSubmitToken
            base = ctx.next_channel_va
            ctx.next_channel_va += 64 * MIB
            ctx.uvm.register_channel(ctx.uuid, device.ctl.fileno(),
                                     client.handle, self.hchannel, base,
                                     64 * MIB)
            self.registered = True
            if schedule:
                self.schedule(True)
            self.husermode = client.alloc(device.hsubdevice,
                                          abi.HOPPER_USERMODE_A)
            self._objs.append(self.husermode)
            self.usermode = Mapping(device.ctl, client.handle,
                                    device.hsubdevice, self.husermode,
                                    abi.NVC361_NV_USERMODE__SIZE,
                                    device.gpu.path)
            self._maps.append(self.usermode)
        except BaseException:
            self.close()
            raise

    def close(self):
        for m in reversed(self._maps):
            m.close(unmap=self.client.handle != 0)
        self._maps.clear()
        live = self.client.handle and not self.client.ctl.closed
        if live and self.registered:
            self.ctx.uvm.unregister_channel(self.ctx.uuid, self.client.handle,
                                            self.hchannel, check=False)
            self.registered = False
        if live:
            for h in self._objs:
                if h in self.client.parents:
                    self.client.free(h)
        self._objs.clear()
        if live and self.area is not None:
            self.area.free()
            self.area = None
