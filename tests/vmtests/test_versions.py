# SPDX-License-Identifier: Apache-2.0
"""The stub loaded as each driver version: the version it reports and the
struct sizes that moved between releases (docs/nvstub.md's table; sizes from
NVIDIA's headers, tests/fixtures/nvidia-abi)."""

import ctypes
import errno
import gc
import os
from dataclasses import dataclass

import nvtest
import pytest
from nvclient import abi, client
from nvclient.client import Channel

MiB = 1 << 20
OWNER = 0x58505521     # any valid heap owner


@dataclass(frozen=True)
class Version:
    version: str
    fb_info_v2: int
    mem_alloc_params: int
    channel_alloc_params: int
    gpfifo_schedule: int

    def __str__(self):
        return self.version


VERSIONS = [
    Version("535.288.01", 436, 120, 360, 2),
    Version("550.163.01", 444, 128, 360, 2),
    Version("570.211.01", 460, 128, 368, 2),
    Version("580.126.20", 1028, 128, 368, 3),
]
FB_V2_SIZES = sorted({v.fb_info_v2 for v in VERSIONS})


@pytest.fixture(scope="module", params=VERSIONS, ids=str)
def loaded(request):
    """The stub reloaded as one version for this module's tests of it."""
    if os.geteuid() != 0 or not os.environ.get("XPU_NVSTUB_KO"):
        pytest.skip("needs the rig (root, XPU_NVSTUB_KO)")
    loader = nvtest.Loader()
    loader.reload(version=request.param.version)
    yield request.param
    gc.collect()
    loader.restore()


@pytest.fixture
def vdev(loaded):
    with client.Ctl() as ctl:
        rm = client.RmClient(ctl)
        dev = rm.device(0)
        yield dev
        dev.close()
        rm.close()


def test_version_reported(loaded):
    with open(client.PROC_VERSION) as f:
        text = f.read()
    assert client.parse_proc_version(text) == loaded.version
    with client.Ctl() as ctl:
        assert ctl.version == loaded.version
        assert ctl.query_version() == loaded.version
        ctl.check_version(loaded.version)


def test_sizes_of_this_version(loaded):
    row = abi.for_version(loaded.version)
    assert row.fb_info_v2_size == loaded.fb_info_v2
    assert row.mem_alloc_params_size == loaded.mem_alloc_params
    assert row.channel_alloc_params_size == loaded.channel_alloc_params
    assert ctypes.sizeof(row.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS) == \
        loaded.gpfifo_schedule


def test_fb_info_v2_only_at_this_versions_size(loaded, vdev):
    index = abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE
    total, _ = vdev.heap_info()
    for size in FB_V2_SIZES:
        buf = (ctypes.c_uint8 * max(FB_V2_SIZES))()
        head = abi.NV2080_CTRL_FB_INFO.from_buffer(buf, 4)
        ctypes.c_uint32.from_buffer(buf, 0).value = 1
        head.index = index
        p = vdev.client.control_raw(vdev.hsubdevice,
                                    abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, buf,
                                    params_size=size)
        if size == loaded.fb_info_v2:
            assert p.status == abi.NV_OK
            assert head.data * 1024 == total
        else:
            assert p.status == abi.NV_ERR_INVALID_ARGUMENT, size
    # V1 (16 bytes, list by pointer) in every version
    assert vdev.fb_info([index]) == {index: total // 1024}


def test_memory_alloc_params_read_at_this_versions_size(loaded, vdev):
    """RM copies sizeof(NV_MEMORY_ALLOCATION_PARAMS) of its version from
    pAllocParms: a struct of that size ending at an unmapped page works; the
    120-byte struct of an older client, against a 128-byte driver, faults."""
    rm = vdev.client
    _, free0 = vdev.heap_info()
    own = abi.for_version(loaded.version).NV_MEMORY_ALLOCATION_PARAMS
    with nvtest.guarded(own) as p:
        p.owner = OWNER
        p.size = MiB
        h = rm.alloc(vdev.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
        assert p.size == MiB
        rm.free(h)
    if loaded.mem_alloc_params == 128:
        old = abi.for_version("535.288.01").NV_MEMORY_ALLOCATION_PARAMS
        with nvtest.guarded(old) as p:
            p.owner = OWNER
            p.size = MiB
            st = rm.alloc_raw(vdev.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
            assert st.status == abi.NV_ERR_INVALID_ADDRESS
    assert vdev.heap_info()[1] == free0


def _alloc_channel(dev, cls):
    """Allocate a channel with alloc params of class ``cls`` ending at an
    unmapped page; returns (status, tsg handle, memory handle)."""
    rm = dev.client
    tsg = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                   abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                       engineType=abi.NV2080_ENGINE_TYPE_GR0))
    mem = dev.alloc_sysmem(2 * 4096)
    with nvtest.guarded(cls) as p:
        p.hObjectBuffer = mem.handle
        p.gpFifoEntries = 16
        p.hUserdMemory[0] = mem.handle
        p.userdOffset[0] = 4096
        p.engineType = abi.NV2080_ENGINE_TYPE_GR0
        st = rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, p)
    return st.status, tsg, mem.handle


def test_channel_alloc_params_read_at_this_versions_size(loaded, vdev):
    own = abi.for_version(loaded.version).NV_CHANNEL_ALLOC_PARAMS
    status, tsg, mem = _alloc_channel(vdev, own)
    assert status == abi.NV_OK
    vdev.client.free(tsg)
    vdev.client.free(mem)
    if loaded.channel_alloc_params == 368:
        old = abi.for_version("535.288.01").NV_CHANNEL_ALLOC_PARAMS
        status, tsg, mem = _alloc_channel(vdev, old)
        assert status == abi.NV_ERR_INVALID_ADDRESS
        vdev.client.free(tsg)
        vdev.client.free(mem)


def test_gpfifo_schedule_params_size(loaded, vdev):
    rm = vdev.client
    tsg = rm.alloc(vdev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                   abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                       engineType=abi.NV2080_ENGINE_TYPE_GR0))
    buf = (ctypes.c_uint8 * 4)()
    for size in (2, 3):
        p = rm.control_raw(tsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, buf,
                           params_size=size)
        want = (abi.NV_OK if size == loaded.gpfifo_schedule
                else abi.NV_ERR_INVALID_ARGUMENT)
        assert p.status == want, size
    rm.free(tsg)


def test_channel_runs_work(loaded, vdev):
    with Channel(vdev) as ch:
        ch.submit(2000)
        ch.wait(60)
        assert ch.gp_get == 1


def test_device_needs_a_gpu_file(loaded):
    r = nvtest.run_child("""
    ctl = client.Ctl()
    rm = client.RmClient(ctl)
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=0))
    g = client.GpuFile(0)
    q = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=0))
    report(without=p.status, with_file=q.status)
    """)
    assert r == {"without": abi.NV_ERR_INSUFFICIENT_PERMISSIONS,
                 "with_file": abi.NV_OK}


def test_wait_open_complete_from_550(loaded):
    with client.Ctl() as ctl, client.GpuFile(0) as gpu:
        for f in (ctl, gpu):
            p = abi.nv_ioctl_wait_open_complete_t(rc=-1, adapterStatus=7)
            rc = client.escape_raw(f.fd, abi.NV_ESC_WAIT_OPEN_COMPLETE, p,
                                   size=8)
            if ctl.abi.since_550:
                assert rc == 0
                assert (p.rc, p.adapterStatus) == (0, abi.NV_OK)
                assert client.escape_raw(f.fd, abi.NV_ESC_WAIT_OPEN_COMPLETE,
                                         p, size=12) == -errno.EINVAL
            else:
                assert rc == -errno.EINVAL      # no such escape yet


def test_map_memory_dma_sizes(loaded):
    """NVOS46 (RM_MAP_MEMORY_DMA) grew 56 -> 64 in 580, NVOS47
    (RM_UNMAP_MEMORY_DMA) 40 -> 48 in 550."""
    row = abi.for_version(loaded.version)
    with client.Ctl() as ctl:
        for nr, size in ((abi.NV_ESC_RM_MAP_MEMORY_DMA, row.nvos46_size),
                         (abi.NV_ESC_RM_UNMAP_MEMORY_DMA, row.nvos47_size)):
            for other in (40, 48, 56, 64):
                buf = (ctypes.c_uint8 * 64)()
                rc = client.ioctl_raw(ctl.fd, abi.nv_ioctl(nr, other), buf)
                assert rc == (0 if other == size else -errno.EINVAL), \
                    (hex(nr), other)


def test_device_factory_checks(loaded):
    """From 550 the device factory refuses NULL params and deviceId >= 32
    with NV_ERR_INVALID_ARGUMENT; before, NULL params mean device 0 and a
    large deviceId is just an invalid class."""
    with client.Ctl() as ctl, client.GpuFile(0):
        rm = client.RmClient(ctl)
        p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0, None)
        q = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                         abi.NV0080_ALLOC_PARAMETERS(deviceId=32))
        if ctl.abi.since_550:
            assert p.status == abi.NV_ERR_INVALID_ARGUMENT
            assert q.status == abi.NV_ERR_INVALID_ARGUMENT
        else:
            assert p.status == abi.NV_OK
            assert q.status == abi.NV_ERR_INVALID_CLASS
        rm.close()


def test_fb_info_index_max(loaded, vdev):
    top = abi.for_version(loaded.version).fb_info_index_max
    assert list(vdev.fb_info_v2([top])) == [top]
    p = vdev.fb_info_v2_params([top + 1])
    st = vdev.client.control_raw(vdev.hsubdevice,
                                 abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
