# SPDX-License-Identifier: Apache-2.0
"""Objects exported to a control file by fd and imported from it, as RM
does on Linux (arch/nvalloc/unix/src/rmobjexportimport.c and the
NV0000_CTRL_CMD_OS_UNIX_{EXPORT,IMPORT}_OBJECT(S)_{TO,FROM}_FD controls of
os.c; docs/nvstub.md): the export is a duplicate in RM's own client that
lives as long as the fd's file, the import a duplicate of that into the
caller's client."""

import ctypes
import errno
import os

import nvtest
import pytest
from nvclient import abi, client

MiB = 1 << 20


@pytest.fixture
def dev(rm, gpu0):
    d = rm.device(0, gpu_file=gpu0)
    yield d


def test_an_exported_object_outlives_its_client_until_the_fd_closes(
        ctl, gpu0):
    """Video memory exported into a control file stays while the file is
    open, after its client is gone; another client imports it (singular
    and plural: the plural one says it is video memory) and holds it
    after the file closes; it goes with the last handle."""
    heap0 = nvtest.heap_used(0)
    src = client.RmClient(ctl)
    sdev = src.device(0, gpu_file=gpu0)
    m = sdev.alloc_vidmem(4 * MiB)
    s = sdev.alloc_vidmem(1 * MiB)
    one, many = client.Ctl(), client.Ctl()
    src.export_object(m.handle, one.fd, hdevice=sdev.hdevice)
    src.export_objects(many.fd, sdev.hdevice, [0, s.handle], max_objects=3)
    src.close()
    assert nvtest.heap_used(0) - heap0 == 5 * MiB   # the exports hold it
    dst = client.RmClient(ctl)
    ddev = dst.device(0, gpu_file=gpu0)
    h = dst.import_object(one.fd, ddev.hdevice)
    made = dst.import_objects(many.fd, ddev.hdevice, [0x7e000001,
                                                       0x7e000002, 0])
    none = abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_NONE
    assert made == [(0x7e000001, none),
                    (0x7e000002,
                     abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_VIDMEM),
                    (0, none)]
    one.close()
    many.close()
    assert nvtest.heap_used(0) - heap0 == 5 * MiB   # the imports hold it
    dst.free(h)
    assert nvtest.heap_used(0) - heap0 == 1 * MiB
    dst.close()
    assert nvtest.heap_used(0) == heap0


def test_the_plural_import_takes_memory_only_and_undoes_all_it_named(
        rm, dev, gpu0):
    """The plural import asks each object's address space first and fails
    for what is not memory (a usermode object: REGMEM); the singular one
    imports it.  A failed plural import frees every handle it named before
    the failing one, imported or not -- here a handle of the importer's
    own that named an empty slot (os.c's undo loop)."""
    usermode = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
    fd = client.Ctl()
    rm.export_objects(fd.fd, dev.hdevice, [0, usermode])
    mine = dev.alloc_vidmem(64 << 10).handle
    _, r = rm.import_objects(fd.fd, dev.hsubdevice, [mine, 0x7e000003],
                             check=False)
    assert r.status == abi.NV_ERR_INVALID_ARGUMENT, hex(r.status)
    assert nvtest.handle_info(rm, mine, nvtest.HANDLE_CLASSID)[0] == \
        abi.NV_ERR_OBJECT_NOT_FOUND
    rm.parents.pop(mine)
    one = client.Ctl()
    rm.export_object(usermode, one.fd)
    h = rm.import_object(one.fd, dev.hsubdevice)
    assert nvtest.handle_info(rm, h, nvtest.HANDLE_CLASSID) == (
        abi.NV_OK, abi.HOPPER_USERMODE_A)
    one.close()
    fd.close()


def test_export_and_import_refuse_what_rm_refuses(rm, dev, gpu0):
    """The checks of os.c: an fd that is no control file, an export with
    no room made (maxObjects 0), slots past maxObjects, an object of
    another GPU's device than the fd's, an import from an fd nothing was
    exported into, the library's EMPTY_FD flag."""
    ctl2 = client.Ctl()
    m = dev.alloc_vidmem(64 << 10).handle
    bad = abi.NV_ERR_INVALID_PARAMETER
    assert rm.export_object(m, gpu0.fd, check=False).status == bad
    assert rm.export_objects(gpu0.fd, dev.hdevice, [m],
                             check=False).status == bad
    assert rm.export_objects(ctl2.fd, dev.hdevice, [m], max_objects=0,
                             check=False).status == bad
    assert rm.import_object(ctl2.fd, dev.hdevice,
                            check=False).status == bad
    rm.export_objects(ctl2.fd, dev.hdevice, [m], max_objects=2)
    assert rm.export_objects(ctl2.fd, dev.hdevice, [m, m], index=1,
                             check=False).status == abi.NV_ERR_OUT_OF_RANGE
    # an fd made for objects under no device takes none under one
    nodev = client.Ctl()
    assert rm.export_objects(nodev.fd, 0, [m],
                             check=False).status == bad
    p = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_PARAMS(fd=ctl2.fd,
                                                           flags=1)
    p.object.type = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM
    p.object.data.rmObject.hObject = m
    r = rm.ctl.rm_control(rm.handle, rm.handle,
                          abi.NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD, p,
                          check=False)
    assert r.status == bad
    for f in (ctl2, nodev):
        f.close()


def test_an_export_fd_tells_what_its_table_was_made_with(rm, dev, gpu0):
    """NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO (os.c
    cliresCtrlCmdOsUnixGetExportObjectInfo; CUDA asks it before a
    shareable handle's import, gVisor's nvproxy passes it): what the first
    export into the fd made its table with -- the device instance
    (NV_MAX_DEVICES for objects under no device), from 545 the device's MIG
    GPU instance (NV_U32_MAX without one), the table's length and the
    exporter's metadata (zeros for the singular export) -- through any
    client of the caller's.  A negative fd, a GPU file and a control file
    nothing was exported into are NV_ERR_INVALID_PARAMETER.  The params
    are 76 bytes before 545 and 80 from it.  Before session 45 the stub
    answered NV_ERR_NOT_SUPPORTED."""
    bad = abi.NV_ERR_INVALID_PARAMETER
    m = dev.alloc_vidmem(64 << 10).handle
    many, one, nodev, empty = (client.Ctl() for _ in range(4))
    meta = bytes(range(1, 65))
    rm.export_objects(many.fd, dev.hdevice, [m], max_objects=5,
                      metadata=meta)
    rm.export_object(m, one.fd, hdevice=dev.hdevice)
    rm.export_objects(nodev.fd, 0, [0], max_objects=2)
    other = client.RmClient(rm.ctl)     # any client of the caller's asks
    p = other.export_info(many.fd)
    since_545 = abi.parse_version(rm.ctl.abi.version) >= (545,)
    assert ctypes.sizeof(p) == (80 if since_545 else 76)
    assert hasattr(p, "gpuInstanceId") == since_545
    assert (p.deviceInstance, p.maxObjects, bytes(p.metadata)) == \
        (0, 5, meta)
    p = rm.export_info(one.fd)
    assert (p.deviceInstance, p.maxObjects, bytes(p.metadata)) == \
        (0, 1, bytes(64))
    p = rm.export_info(nodev.fd)
    assert (p.deviceInstance, p.maxObjects) == (abi.NV_MAX_DEVICES, 2)
    if since_545:
        assert p.gpuInstanceId == abi.NV_U32_MAX
    for fd in (-1, gpu0.fd, empty.fd):
        assert rm.export_info(fd, check=False).status == bad, fd
    other.close()
    for f in (many, one, nodev, empty):
        f.close()


def _pid_vidmem(dev):
    """This process's three GET_PID_INFO video-memory figures, summed."""
    p = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=1)
    p.pidInfoList[0].pid = os.getpid()
    p.pidInfoList[0].index = \
        abi.NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE
    dev.client.control(dev.hsubdevice, abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, p)
    u = p.pidInfoList[0].data.vidMemUsage
    return u.memPrivate + u.memSharedOwned + u.memSharedDuped


def test_a_dma_buf_keeps_the_memory_it_exports_charged_to_no_one(
        ctl, rm, dev, gpu0, config):
    """NV_ESC_EXPORT_TO_DMABUF_FD (nv-dmabuf.c, osapi.c
    RmDmabufVerifyMemHandle, 535 to 595): a GPU file's call duplicates the
    named video memory into the GPU's memory-manager client (a kernel
    client: no process's GET_PID_INFO figure) and returns a dma-buf that
    holds the duplicates until its last reference goes.  Handles attach
    over several calls; each is checked, and a call that fails undoes what
    it attached."""
    version = abi.parse_version(config.version)
    heap0 = nvtest.heap_used(0)
    m = dev.alloc_vidmem(4 * MiB)
    s = dev.alloc_vidmem(2 * MiB)
    sysmem = dev.alloc_sysmem(1 * MiB)
    exp = gpu0.export_dmabuf
    # the control file has no such escape; the size is the version's
    for f in (ctl, gpu0):
        assert client.escape_raw(f.fd, abi.NV_ESC_EXPORT_TO_DMABUF_FD,
                                 (ctypes.c_uint8 * 2604)()) == -errno.EINVAL
    rc, st, _ = client.GpuFile.export_dmabuf(ctl, version, rm.handle,
                                         [(m.handle, 0, 4096)])
    assert rc == -errno.EINVAL
    bad = [
        ([(m.handle, 0, 0)], None, abi.NV_ERR_INVALID_ARGUMENT),  # total 0
        ([(m.handle, 4096 + 1, 4096)], 4096, abi.NV_ERR_INVALID_ARGUMENT),
        ([(m.handle, 0, 8 * MiB)], None, abi.NV_ERR_INVALID_ARGUMENT),
        ([(m.handle, 4 * MiB - 4096, 8192)], None,
         abi.NV_ERR_INVALID_ARGUMENT),
        ([(dev.hdevice, 0, 4096)], None, abi.NV_ERR_INVALID_OBJECT),
        ([(sysmem.handle, 0, 4096)], None, abi.NV_ERR_INVALID_ARGUMENT),
        ([(0x7e7e7e7e, 0, 4096)], None, abi.NV_ERR_OBJECT_NOT_FOUND),
        # the last handle attached, the sizes must add up to the total
        ([(m.handle, 0, 4096)], 8192, abi.NV_ERR_INVALID_ARGUMENT),
    ]
    for objs, total, want in bad:
        rc, st, _ = exp(version, rm.handle, objs, total_size=total)
        assert (rc, st) == (0, want), (objs, total, rc, hex(st))
    rc, st, _ = exp(version, 0x7e7e7e7e, [(m.handle, 0, 4096)])
    assert (rc, st) == (0, abi.NV_ERR_INVALID_CLIENT)
    rm.free(sysmem.handle)
    assert nvtest.heap_used(0) - heap0 == 6 * MiB
    # two calls: a dma-buf for two handles, then the second attached
    rc, st, fd = exp(version, rm.handle, [(m.handle, 0, 4 * MiB)],
                     total_size=6 * MiB, total_objects=2)
    assert (rc, st) == (0, abi.NV_OK) and fd >= 0
    try:
        rc, st, _ = exp(version, rm.handle, [(s.handle, 0, 2 * MiB)],
                        fd=fd, index=0)
        assert (rc, st) == (0, abi.NV_ERR_IN_USE)   # index 0 is taken
        rc, st, _ = exp(version, rm.handle, [(s.handle, 0, 2 * MiB)],
                        fd=fd, index=1)
        assert (rc, st) == (0, abi.NV_OK)
        before = _pid_vidmem(dev)
        rm.free(m.handle)
        rm.free(s.handle)
        # the memory stays, and no process pays for it
        assert nvtest.heap_used(0) - heap0 == 6 * MiB
        assert before - _pid_vidmem(dev) == 6 * MiB
    finally:
        os.close(fd)
    assert nvtest.heap_used(0) == heap0
