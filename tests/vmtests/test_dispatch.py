# SPDX-License-Identifier: Apache-2.0
"""ioctl dispatch as kernel-open/nvidia/nv.c nvidia_ioctl and
src/nvidia/arch/nvalloc/unix/src/escape.c RmIoctl do it: sizes, numbers,
which file an escape belongs to, and the escapes handled outside RM."""

import ctypes
import errno
import os

import nvtest
import pytest
from nvclient import abi, client
from nvclient.client import ioctl_raw

EINVAL = -errno.EINVAL


def zeroed(size):
    return (ctypes.c_uint8 * size)()


# Escapes whose argument size RmIoctl / nvidia_ioctl check exactly, with an
# argument that the right size accepts (rc 0; any verdict is in `status`).
def _rm_free():
    return abi.NVOS00_PARAMETERS()


def _rm_alloc21():
    return abi.NVOS21_PARAMETERS(hClass=0xDEAD)     # no such class


def _rm_alloc64():
    return abi.NVOS64_PARAMETERS(hClass=0xDEAD)


def _rm_control():
    return abi.NVOS54_PARAMETERS()


def _vid_heap():
    return abi.for_version("580.126.20").NVOS32_PARAMETERS()


def _map_memory():
    return abi.nv_ioctl_nvos33_parameters_with_fd(fd=-1)


def _unmap_memory():
    return abi.NVOS34_PARAMETERS()


def _dup():
    return abi.NVOS55_PARAMETERS()


def _sys_params():
    # The kernel's own memory-block size, as CUDA's user space sends it: the
    # driver takes the first size it is sent and refuses any other after,
    # 0 included (nv.c), so the call is accepted whoever came first in the
    # boot (NVIDIA's user space, the fuzzer).  A 0 was refused -EBUSY once
    # a test before had set the true size.
    return abi.nv_ioctl_sys_params_t(nvtest.memory_block_size())


CTL_SIZED = {
    "RM_FREE": (abi.NV_ESC_RM_FREE, _rm_free),
    "RM_ALLOC/NVOS21": (abi.NV_ESC_RM_ALLOC, _rm_alloc21),
    "RM_ALLOC/NVOS64": (abi.NV_ESC_RM_ALLOC, _rm_alloc64),
    "RM_CONTROL": (abi.NV_ESC_RM_CONTROL, _rm_control),
    "RM_VID_HEAP_CONTROL": (abi.NV_ESC_RM_VID_HEAP_CONTROL, _vid_heap),
    "RM_MAP_MEMORY": (abi.NV_ESC_RM_MAP_MEMORY, _map_memory),
    "RM_UNMAP_MEMORY": (abi.NV_ESC_RM_UNMAP_MEMORY, _unmap_memory),
    "RM_DUP_OBJECT": (abi.NV_ESC_RM_DUP_OBJECT, _dup),
    "SYS_PARAMS": (abi.NV_ESC_SYS_PARAMS, _sys_params),
}


@pytest.mark.parametrize("name", sorted(CTL_SIZED))
def test_right_size_is_dispatched(ctl, name):
    nr, make = CTL_SIZED[name]
    assert ctl.escape_raw(nr, make()) == 0


@pytest.mark.parametrize("delta", [-1, 1, 8])
@pytest.mark.parametrize("name", sorted(CTL_SIZED))
def test_wrong_size_is_einval(ctl, name, delta):
    nr, make = CTL_SIZED[name]
    arg = make()
    size = ctypes.sizeof(arg) + delta
    if nr == abi.NV_ESC_RM_ALLOC and size in (32, 48):
        size += 1       # both are valid RM_ALLOC sizes
    assert ctl.escape_raw(nr, arg, size=size) == EINVAL


def test_rm_alloc_sizes_between_nvos21_and_nvos64_are_einval(ctl):
    for size in (0, 4, 24, 40, 56, 64):
        assert ctl.escape_raw(abi.NV_ESC_RM_ALLOC, _rm_alloc64(), size=size) \
            == EINVAL, size


def test_alloc_memory_wrong_size_is_einval(gpu0):
    arg = abi.nv_ioctl_nvos02_parameters_with_fd(fd=-1)
    assert gpu0.escape_raw(abi.NV_ESC_RM_ALLOC_MEMORY, arg, size=48) == EINVAL
    assert gpu0.escape_raw(abi.NV_ESC_RM_ALLOC_MEMORY, arg, size=57) == EINVAL


def test_check_version_wrong_size_is_einval(ctl, config):
    p = abi.nv_ioctl_rm_api_version_t(cmd=abi.NV_RM_API_VERSION_CMD_QUERY)
    for size in (71, 73, 64):
        p.reply = 0
        assert ctl.escape_raw(abi.NV_ESC_CHECK_VERSION_STR, p, size=size) \
            == EINVAL


def test_register_fd_wrong_size_is_einval(ctl, gpu0):
    arg = abi.nv_ioctl_register_fd_t(ctl.fd)
    assert gpu0.escape_raw(abi.NV_ESC_REGISTER_FD, arg, size=8) == EINVAL
    # the refused call registered nothing: the right size still works
    assert gpu0.escape_raw(abi.NV_ESC_REGISTER_FD, arg) == 0


UNKNOWN_NRS = [0x00, 0x20, 0x26, 0x5B, 0x60, abi.NV_IOCTL_BASE + 5, 0xFF]


@pytest.mark.parametrize("nr", UNKNOWN_NRS)
def test_unknown_nr_is_einval(ctl, gpu0, nr):
    for f in (ctl, gpu0):
        assert ioctl_raw(f.fd, abi.nv_ioctl(nr, 16), zeroed(16)) == EINVAL


def _card_info_arg():
    return (abi.nv_ioctl_card_info_t * 16)()


def _version_query():
    return abi.nv_ioctl_rm_api_version_t(cmd=abi.NV_RM_API_VERSION_CMD_QUERY)


def _attach():
    return (ctypes.c_uint32 * 1)(0)


def _client_alloc():
    return abi.NVOS21_PARAMETERS(hClass=abi.NV01_ROOT_CLIENT)


# Escapes that only the control file takes (NV_CTL_DEVICE_ONLY).
CTL_ONLY = {
    "CARD_INFO": (abi.NV_ESC_CARD_INFO, _card_info_arg),
    "CHECK_VERSION_STR": (abi.NV_ESC_CHECK_VERSION_STR, _version_query),
    "ATTACH_GPUS_TO_FD": (abi.NV_ESC_ATTACH_GPUS_TO_FD, _attach),
    "SYS_PARAMS": (abi.NV_ESC_SYS_PARAMS, _sys_params),
    "RM_ALLOC(client)": (abi.NV_ESC_RM_ALLOC, _client_alloc),
    "RM_FREE": (abi.NV_ESC_RM_FREE, _rm_free),
    "RM_CONTROL": (abi.NV_ESC_RM_CONTROL, _rm_control),
    "RM_VID_HEAP_CONTROL": (abi.NV_ESC_RM_VID_HEAP_CONTROL, _vid_heap),
    "RM_MAP_MEMORY": (abi.NV_ESC_RM_MAP_MEMORY, _map_memory),
    "RM_UNMAP_MEMORY": (abi.NV_ESC_RM_UNMAP_MEMORY, _unmap_memory),
    "RM_DUP_OBJECT": (abi.NV_ESC_RM_DUP_OBJECT, _dup),
}


@pytest.mark.parametrize("name", sorted(CTL_ONLY))
def test_ctl_only_escape_on_gpu_file_is_einval(ctl, gpu0, name):
    nr, make = CTL_ONLY[name]
    assert gpu0.escape_raw(nr, make()) == EINVAL
    # ... and the control file takes it (the client, if any, goes with ctl)
    assert ctl.escape_raw(nr, make()) == 0


def test_gpu_only_escape_on_ctl_is_einval(ctl, gpu0):
    arg = abi.nv_ioctl_nvos02_parameters_with_fd(fd=-1)
    arg.params.hClass = abi.NV01_MEMORY_LOCAL_USER
    assert ctl.escape_raw(abi.NV_ESC_RM_ALLOC_MEMORY, arg) == EINVAL
    assert gpu0.escape_raw(abi.NV_ESC_RM_ALLOC_MEMORY, arg) == 0


def test_einval_still_copies_the_argument_back(ctl, config):
    """nvidia_ioctl copies the argument back unless the copy-in faulted:
    a refused version check returns the driver's version."""
    rc, p = ctl.check_version_raw("1.0")
    assert rc == EINVAL
    assert p.versionString.decode() == config.version


# --- CARD_INFO


def test_card_info_describes_every_gpu(ctl, config):
    rc, arr = ctl.card_info_raw(config.gpus)
    assert rc == 0
    for i, ci in enumerate(arr):
        bus = nvtest.PCI_BUS_BASE + i
        assert ci.valid == 1
        assert ci.pci_info.domain == 0
        assert (ci.pci_info.bus, ci.pci_info.slot, ci.pci_info.function) \
            == (bus, 0, 0)
        assert ci.pci_info.vendor_id == nvtest.PCI_VENDOR_NVIDIA
        assert ci.pci_info.device_id == nvtest.PCI_DEVICE_H200
        assert ci.minor_number == i
        # gpuGenerate32BitId(domain, bus, device)
        assert ci.gpu_id == (bus << 8)


def test_card_info_fewer_entries_than_gpus_is_einval(ctl, config):
    for entries in range(config.gpus):
        rc, _ = ctl.card_info_raw(entries)
        assert rc == EINVAL, entries


def test_card_info_extra_entries_are_cleared(ctl, config):
    arr = (abi.nv_ioctl_card_info_t * (config.gpus + 2))()
    ctypes.memset(arr, 0xA5, ctypes.sizeof(arr))
    size = ctypes.sizeof(arr)
    assert ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_CARD_INFO, size), arr) \
        == 0
    assert [ci.valid for ci in arr] == [1] * config.gpus + [0, 0]
    assert bytes(arr[config.gpus]) == bytes(72)


def test_card_info_entries_are_size_over_72(ctl, config):
    """entries = size / 72: a partial trailing entry does not count."""
    size = 72 * config.gpus + 71
    buf = zeroed(size)
    assert ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_CARD_INFO, size), buf) \
        == 0
    size = 72 * config.gpus - 1
    buf = zeroed(size)
    assert ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_CARD_INFO, size), buf) \
        == EINVAL


# --- CHECK_VERSION_STR (osapi.c RmPerformVersionCheck)


def test_version_strict_match(ctl, config):
    rc, p = ctl.check_version_raw(config.version)
    assert rc == 0
    assert p.reply == abi.NV_RM_API_VERSION_REPLY_RECOGNIZED


@pytest.mark.parametrize("bad", ["", "1.0", "580.126.2", "580.126.200",
                                 "999.999.99"])
def test_version_strict_mismatch(ctl, config, bad):
    if bad == "580.126.2":
        bad = config.version[:-1]
    elif bad == "580.126.200":
        bad = config.version + "0"
    rc, p = ctl.check_version_raw(bad)
    assert rc == EINVAL
    assert p.reply == abi.NV_RM_API_VERSION_REPLY_RECOGNIZED
    assert p.versionString.decode() == config.version


def test_version_relaxed_compares_up_to_the_first_dot(ctl, config):
    major = config.version.split(".")[0]
    relaxed = abi.NV_RM_API_VERSION_CMD_RELAXED
    rc, p = ctl.check_version_raw(major + ".0.1", relaxed)
    assert rc == 0
    rc, p = ctl.check_version_raw(major + ".anything", relaxed)
    assert rc == 0
    # no dot: the client's NUL meets the driver's '.', a mismatch
    rc, p = ctl.check_version_raw(major, relaxed)
    assert rc == EINVAL
    assert p.versionString.decode() == config.version
    rc, p = ctl.check_version_raw(str(int(major) + 1) + ".0", relaxed)
    assert rc == EINVAL
    # the strict command refuses what relaxed accepts
    rc, p = ctl.check_version_raw(major + ".0.1")
    assert rc == EINVAL


def test_version_query(ctl, config):
    rc, p = ctl.check_version_raw("garbage",
                                  abi.NV_RM_API_VERSION_CMD_QUERY)
    assert rc == 0
    assert p.reply == abi.NV_RM_API_VERSION_REPLY_RECOGNIZED
    assert p.versionString.decode() == config.version
    assert client.driver_version() == config.version


# --- REGISTER_FD (escape.c)


def test_register_fd_gpu_file_to_ctl(ctl, gpu0):
    gpu0.register_fd(ctl)
    # once linked, a file cannot be linked again
    with pytest.raises(OSError) as e:
        gpu0.register_fd(ctl)
    assert e.value.errno == errno.EINVAL


def test_register_fd_needs_a_ctl_file(ctl, gpu0, tmp_path):
    other_gpu = client.GpuFile(0)
    null = os.open("/dev/null", os.O_RDWR)
    plain = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        for fd in (other_gpu.fd, null, plain, -1, 999999):
            arg = abi.nv_ioctl_register_fd_t(fd)
            assert gpu0.escape_raw(abi.NV_ESC_REGISTER_FD, arg) == EINVAL, fd
        # none of the refusals linked the file
        gpu0.register_fd(ctl)
    finally:
        other_gpu.close()
        os.close(null)
        os.close(plain)


def test_register_fd_no_self_link_no_chain(ctl):
    with client.Ctl() as b, client.Ctl() as c:
        arg = abi.nv_ioctl_register_fd_t(ctl.fd)
        assert ctl.escape_raw(abi.NV_ESC_REGISTER_FD, arg) == EINVAL
        b.register_fd(ctl)
        # c may not link to b, which is itself linked
        arg = abi.nv_ioctl_register_fd_t(b.fd)
        assert c.escape_raw(abi.NV_ESC_REGISTER_FD, arg) == EINVAL
        c.register_fd(ctl)


# --- ATTACH_GPUS_TO_FD (nv.c)


def test_attach_gpus(ctl, config):
    ids = [ci.gpu_id for ci in ctl.card_info()]
    assert len(ids) == config.gpus
    ctl.attach_gpus(ids)
    # a file attaches once
    with pytest.raises(OSError) as e:
        ctl.attach_gpus(ids)
    assert e.value.errno == errno.EINVAL


def test_attach_gpus_refusals(ctl):
    gpu_id = ctl.card_info()[0].gpu_id
    with pytest.raises(OSError):
        ctl.attach_gpus([0xDEAD00])         # no such GPU
    buf = zeroed(6)                          # not a multiple of 4
    assert ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_ATTACH_GPUS_TO_FD, 6),
                     buf) == EINVAL
    assert ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_ATTACH_GPUS_TO_FD, 0),
                     buf) == EINVAL
    # the refusals attached nothing; zero entries are skipped
    ctl.attach_gpus([0, gpu_id])


# --- IOCTL_XFER_CMD (nv.c)


def _xfer(fd, nr, arg, size=None):
    x = abi.nv_ioctl_xfer_t(cmd=nr, size=size or ctypes.sizeof(arg),
                            ptr=ctypes.addressof(arg))
    return ioctl_raw(fd, abi.IOCTL_XFER_CMD, x)


def test_xfer_redirects(ctl, config):
    p = _version_query()
    assert _xfer(ctl.fd, abi.NV_ESC_CHECK_VERSION_STR, p) == 0
    assert p.versionString.decode() == config.version
    p = abi.NVOS21_PARAMETERS(hClass=abi.NV01_ROOT_CLIENT)
    assert _xfer(ctl.fd, abi.NV_ESC_RM_ALLOC, p) == 0
    assert p.status == abi.NV_OK and p.hObjectNew != 0
    ctl.rm_free(p.hObjectNew, p.hObjectNew, p.hObjectNew)


def test_xfer_refusals(ctl):
    p = _version_query()
    # the redirected size is checked like a direct one
    assert _xfer(ctl.fd, abi.NV_ESC_CHECK_VERSION_STR, p, size=71) == EINVAL
    big = zeroed(abi.NV_ABSOLUTE_MAX_IOCTL_SIZE + 1)
    assert _xfer(ctl.fd, abi.NV_ESC_RM_CONTROL, big) == EINVAL
    x = abi.nv_ioctl_xfer_t(cmd=abi.NV_ESC_CHECK_VERSION_STR, size=72,
                            ptr=ctypes.addressof(p))
    assert client.escape_raw(ctl.fd, abi.NV_ESC_IOCTL_XFER_CMD, x, size=24) \
        == EINVAL


# --- escapes RM has and the stub only sizes (docs/nvstub.md: "NOT_SUPPORTED")


GPU_ONLY_OTHERS = {abi.NV_ESC_RM_I2C_ACCESS}
# osapi.c rm_ioctl() serves RM_GET_EVENT_DATA itself, on any file
ANY_FILE_OTHERS = {abi.NV_ESC_RM_GET_EVENT_DATA}


@pytest.mark.parametrize("nr", sorted(abi.OTHER_ESCAPE_ARGS),
                         ids=lambda nr: abi.OTHER_ESCAPE_ARGS[nr][0])
def test_other_escapes_check_size_and_file(ctl, gpu0, nr):
    _, size = abi.OTHER_ESCAPE_ARGS[nr]
    right, wrong = (gpu0, ctl) if nr in GPU_ONLY_OTHERS else (ctl, gpu0)
    buf = zeroed(size + 8)
    for bad in (size - 1, size + 1, size + 8):
        assert ioctl_raw(right.fd, abi.nv_ioctl(nr, bad), buf) == EINVAL, bad
    assert ioctl_raw(right.fd, abi.nv_ioctl(nr, size), zeroed(size)) == 0
    assert ioctl_raw(wrong.fd, abi.nv_ioctl(nr, size), zeroed(size)) == \
        (0 if nr in ANY_FILE_OTHERS else EINVAL)


@pytest.mark.parametrize("nr", [abi.NV_ESC_ALLOC_OS_EVENT,
                                abi.NV_ESC_FREE_OS_EVENT])
def test_os_event_escapes_check_size(ctl, nr):
    p = abi.nv_ioctl_alloc_os_event_t()
    assert ctl.escape_raw(nr, p) == 0
    assert ctl.escape_raw(nr, p, size=12) == EINVAL
    assert ctl.escape_raw(nr, p, size=20) == EINVAL


def test_os_events_are_kept_as_rm_keeps_them(ctl, gpu0, rm):
    """osapi.c (535 to 595): ALLOC_OS_EVENT ties a (hClient, fd) pair to
    the file it came through, any file, checking neither -- a client that
    does not exist is fine -- and refuses a pair twice, the whole driver
    over, NV_ERR_INSUFFICIENT_RESOURCES; FREE_OS_EVENT frees a pair whoever
    made it (NV_ERR_INVALID_EVENT if none); an RM_FREE of a client frees
    the events of its handle, and a file's close the events tied to it.
    Before session 33 the stub answered NOT_SUPPORTED (docs/security.md,
    class 27)."""
    A, F = abi.NV_ESC_ALLOC_OS_EVENT, abi.NV_ESC_FREE_OS_EVENT

    def osev(f, nr, hc, fd):
        p = abi.nv_ioctl_alloc_os_event_t(hClient=hc, fd=fd)
        assert f.escape_raw(nr, p) == 0
        return p.Status

    nobody = 0x7e570001                 # no client has this handle
    assert osev(gpu0, A, nobody, 3) == abi.NV_OK
    assert osev(ctl, A, nobody, 3) == abi.NV_ERR_INSUFFICIENT_RESOURCES
    assert osev(ctl, F, nobody, 3) == abi.NV_OK     # not its file's: freed
    assert osev(gpu0, F, nobody, 3) == abi.NV_ERR_INVALID_EVENT
    # an RM_FREE of a client takes the events of its handle
    other = client.RmClient(ctl)
    h = other.handle
    assert osev(gpu0, A, h, 4) == abi.NV_OK
    other.close()
    assert osev(ctl, F, h, 4) == abi.NV_ERR_INVALID_EVENT
    # a file's close takes the events tied to it, and only those
    with client.GpuFile(0) as g:
        assert osev(g, A, rm.handle, 5) == abi.NV_OK
        assert osev(ctl, A, rm.handle, 6) == abi.NV_OK
    assert osev(ctl, A, rm.handle, 5) == abi.NV_OK
    assert osev(ctl, F, rm.handle, 5) == abi.NV_OK
    assert osev(ctl, F, rm.handle, 6) == abi.NV_OK


def test_query_device_intr_is_einval(ctl, gpu0):
    for f in (ctl, gpu0):
        assert ioctl_raw(f.fd, abi.nv_ioctl(abi.NV_ESC_QUERY_DEVICE_INTR, 8),
                         zeroed(8)) == EINVAL


def test_sys_params_memblock_set_once(reload_stub):
    """nv.c: the NUMA memblock size is set once; the same value again is
    fine, another is -EBUSY (a fresh stub, since the value outlives files)."""
    reload_stub()
    with client.Ctl() as ctl:
        set_ = abi.nv_ioctl_sys_params_t(128 << 20)
        assert ctl.escape_raw(abi.NV_ESC_SYS_PARAMS, set_) == 0
        assert ctl.escape_raw(abi.NV_ESC_SYS_PARAMS, set_) == 0
        other = abi.nv_ioctl_sys_params_t(256 << 20)
        assert ctl.escape_raw(abi.NV_ESC_SYS_PARAMS, other) == -errno.EBUSY


def test_numa_info_says_the_gpu_has_no_numa_node(ctl, gpu0, rm, config):
    """NUMA_INFO (nv.c, osapi.c rm_get_gpu_numa_info; CUDA asks it of each
    GPU file) on a GPU that is not coherent with the CPU, as the stub's
    H200 is not: no NUMA node (NV0000_CTRL_NO_NUMA_NODE, -1), no onlined
    range, no offline address, status DISABLED, no auto-online, and the
    memory-block size SYS_PARAMS set.  Only a GPU file takes it, only at
    its exact size; from 545 the offline-address count the caller sends
    is the room it has, and past 64 RM refuses it (-EBUSY).  The 2080
    control behind it (FB_GET_NUMA_INFO) answers any client the same.
    Before, the stub answered -EINVAL, as for an escape it did not know."""
    assert ctl.escape_raw(abi.NV_ESC_SYS_PARAMS, _sys_params()) == 0
    stale = 0xA5A5A5A5A5A5A5A5
    p = abi.nv_ioctl_numa_info_t(nid=7, status=9, numa_mem_addr=stale,
                                 numa_mem_size=stale, use_auto_online=1)
    p.offline_addresses.numEntries = 64
    p.offline_addresses.addresses[0] = stale
    assert gpu0.escape_raw(abi.NV_ESC_NUMA_INFO, p) == 0
    assert (p.nid, p.status, p.numa_mem_addr, p.numa_mem_size,
            p.use_auto_online, p.offline_addresses.numEntries) == \
        (-1, abi.NV_IOCTL_NUMA_STATUS_DISABLED, 0, 0, 0, 0)
    assert p.memblock_size == nvtest.memory_block_size()
    for size in (ctypes.sizeof(p) - 8, ctypes.sizeof(p) + 8):
        assert gpu0.escape_raw(abi.NV_ESC_NUMA_INFO, p, size=size) == EINVAL
    assert ctl.escape_raw(abi.NV_ESC_NUMA_INFO, p) == EINVAL
    p.offline_addresses.numEntries = 65
    major = int(config.version.split(".")[0])
    assert gpu0.escape_raw(abi.NV_ESC_NUMA_INFO, p) == \
        (-errno.EBUSY if major >= 545 else 0)
    dev = rm.device(0, gpu_file=gpu0)
    q = abi.NV2080_CTRL_FB_GET_NUMA_INFO_PARAMS(
        numaNodeId=7, numaMemAddr=stale, numaOfflineAddressesCount=65)
    assert rm.control_raw(dev.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_NUMA_INFO,
                          q).status == abi.NV_ERR_INVALID_ARGUMENT
    q.numaOfflineAddressesCount = 64
    assert rm.control_raw(dev.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_NUMA_INFO,
                          q).status == abi.NV_OK
    assert (q.numaNodeId, q.numaMemAddr, q.numaMemSize,
            q.numaOfflineAddressesCount) == (-1, 0, 0, 0)


def test_card_info_reports_bar1_as_fb_size(ctl, config):
    """CARD_INFO's fb_size is nv->fb->size, the BAR1 aperture (256 GiB on
    the stub's H200), not the video memory."""
    for ci in ctl.card_info():
        assert ci.fb_size == 256 << 30

