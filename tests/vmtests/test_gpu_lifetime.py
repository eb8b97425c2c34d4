# SPDX-License-Identifier: Apache-2.0
"""A GPU's lifetime (issue 18, rule 2; docs/nvstub.md): with persistence
mode off, the last user of a GPU going -- its last open file, the last
ATTACH_GPUS_TO_FD, the last kernel client's open_gpu() -- shuts it down, and
RM deletes every client's devices on it (RmShutdownAdapter,
rmapiDelPendingDevices).  xpu.ko holds each GPU it serves open, so its own
device handles, and with them its accounting, outlive every tenant's files."""

import nvtest
import pytest
from nvclient import abi, client, stub
from test_xpu_mem import LIMIT, Slice, admin, nodedir  # noqa: F401

MiB = 1 << 20


def _fb_status(rm, dev):
    p = dev.fb_info_v2_params([abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE])
    return rm.control_raw(dev.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
                          p).status


def test_the_last_user_of_a_gpu_takes_every_clients_devices(reload_stub):
    reload_stub()               # xpu.ko unloaded: nobody else holds GPU 0
    assert stub.heap(0)["users"] == 0
    with client.Ctl() as ctl:
        rm = client.RmClient(ctl)
        gpu = client.GpuFile(0)
        assert stub.heap(0)["users"] == 1
        dev = rm.device(0, gpu_file=gpu)
        assert _fb_status(rm, dev) == abi.NV_OK
        objs = nvtest.objects_total()
        gpu.close()             # the last file of GPU 0: it goes down
        assert stub.heap(0)["users"] == 0
        assert nvtest.objects_total() == objs - 2     # device, subdevice
        assert _fb_status(rm, dev) == abi.NV_ERR_OBJECT_NOT_FOUND
        rm.parents.clear()
        # a control file attached to the GPU keeps it up
        gpu = client.GpuFile(0)
        dev = rm.device(0, gpu_file=gpu)
        ctl.attach_gpus([ctl.card_info()[0].gpu_id])
        gpu.close()
        assert stub.heap(0)["users"] == 1
        assert _fb_status(rm, dev) == abi.NV_OK
        rm.close()


ALLOC = """
ctl = client.Ctl({ctl!r}); gpu = client.GpuFile(0, {gpu!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
got = []
for size in {sizes!r}:
    p = dev.memory_params(size)
    st = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    got.append(st.status)
report(got=got)
"""


@pytest.mark.usefixtures("require_xpu")
def test_xpu_keeps_its_gpus_open(admin, nodedir):   # noqa: F811
    """Every tenant's file of GPU 0 closed, the GPU stays up for xpu: its
    devices, and the limit it enforces with them, survive (without
    open_gpu(), RM deleted them, and the next tenant held 96 MiB in a
    64 MiB slice)."""
    sl = Slice(admin, nodedir)
    try:
        r = nvtest.run_child(ALLOC.format(ctl=sl.ctl_node, gpu=sl.gpu_node,
                                          sizes=[32 * MiB]))
        assert r["got"] == [abi.NV_OK]
        assert stub.heap(0)["users"] >= 1       # xpu.ko's open_gpu()
        r = nvtest.run_child(ALLOC.format(ctl=sl.ctl_node, gpu=sl.gpu_node,
                                          sizes=[48 * MiB, 48 * MiB]))
        assert r["got"] == [abi.NV_OK, abi.NV_ERR_NO_MEMORY]
        assert sl.used() == 0
        assert LIMIT == 64 * MiB
    finally:
        sl.destroy()
