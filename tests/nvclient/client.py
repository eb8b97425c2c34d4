# SPDX-License-Identifier: Apache-2.0
"""A user-mode client of NVIDIA's kernel driver, speaking its ioctl ABI as CUDA does.

Layers, lowest first:
- ``ioctl_raw``/``escape_raw`` return the driver's answer as it is (0 or
  -errno, the argument updated in place); tests of refusals use these.
- ``NvFile`` (``Ctl`` for /dev/nvidiactl, ``GpuFile`` for /dev/nvidiaN): one
  method per escape; RM calls raise ``NvStatusError`` when the struct's status
  is not NV_OK (``check=False`` returns the struct instead), and ``OSError``
  when the ioctl itself fails.
- ``RmClient``: one RM client on a ctl file, remembering each object's parent.
- ``Device``: NV01_DEVICE_0 + NV20_SUBDEVICE_0 of one GPU, with the memory,
  reporting and mapping calls.
- ``Channel``: a TSG with one GPFIFO channel, its ring, USERD and doorbell.
"""

import contextlib
import ctypes
import fcntl
import mmap
import os
import re
import struct
import time
from typing import NamedTuple

from . import abi

PAGE_SIZE = mmap.PAGESIZE
VIDMEM_GRANULE = 64 << 10       # the stub rounds video memory to 64 KiB
VIDMEM_HUGE_GRANULE = 2 << 20   # ... or 2 MiB with the huge page attribute
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_GPUS = "/proc/driver/nvidia/gpus"


class NvStatusError(Exception):
    """An RM call the driver dispatched and RM refused: ``status`` says why."""

    def __init__(self, status, what=""):
        self.status = status
        self.what = what
        msg = abi.status_name(status)
        super().__init__(f"{what}: {msg}" if what else msg)


def round_up(value, granule):
    return (value + granule - 1) // granule * granule


# ---------------------------------------------------------------------------
# ioctl


def ioctl_raw(fd, cmd, arg):
    """Issue ioctl ``cmd`` with ``arg`` (a ctypes object) updated in place.

    Returns 0 or -errno.  Like the driver, ``arg`` holds what the driver
    copied back even when the ioctl failed."""
    try:
        fcntl.ioctl(fd, cmd, arg, True)
    except OSError as e:
        return -e.errno
    return 0


def escape_raw(fd, nr, arg, size=None):
    """Escape ``nr`` with ``arg``, encoding ``size`` (default sizeof(arg)).

    A ``size`` other than sizeof(arg) sends arg's bytes in a buffer of that
    size (zero-padded or truncated) and copies back what fits: this is how
    tests present a wrong-sized argument."""
    own = ctypes.sizeof(arg)
    if size is None or size == own:
        return ioctl_raw(fd, abi.nv_ioctl(nr, own), arg)
    buf = (ctypes.c_uint8 * max(size, own, 1))()
    ctypes.memmove(buf, ctypes.addressof(arg), own)
    rc = ioctl_raw(fd, abi.nv_ioctl(nr, size), buf)
    ctypes.memmove(ctypes.addressof(arg), buf, min(own, size))
    return rc


def _escape_name(nr):
    for name, value in vars(abi).items():
        if name.startswith("NV_ESC_") and value == nr:
            return name
    return f"escape {nr:#x}"


def escape(fd, nr, arg, size=None):
    rc = escape_raw(fd, nr, arg, size)
    if rc:
        raise OSError(-rc, f"{_escape_name(nr)}: {os.strerror(-rc)}")
    return arg


def _check(params, what, check=True):
    if check and params.status != abi.NV_OK:
        raise NvStatusError(params.status, what)
    return params


# ---------------------------------------------------------------------------
# The driver's version


_PROC_VERSION_RE = re.compile(r"^NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s",
                              re.MULTILINE)


def parse_proc_version(text):
    """The driver version in /proc/driver/nvidia/version's text, or None."""
    m = _PROC_VERSION_RE.search(text)
    return m.group(1) if m else None


def query_version(fd):
    """The driver's version by CHECK_VERSION_STR's query command."""
    p = abi.nv_ioctl_rm_api_version_t(cmd=abi.NV_RM_API_VERSION_CMD_QUERY)
    escape(fd, abi.NV_ESC_CHECK_VERSION_STR, p)
    return p.versionString.decode()


def driver_version(ctl_fd=None):
    """The loaded driver's version: /proc first, else CHECK_VERSION_STR query."""
    try:
        with open(PROC_VERSION) as f:
            version = parse_proc_version(f.read())
        if version:
            return version
    except OSError:
        pass
    if ctl_fd is not None:
        return query_version(ctl_fd)
    fd = os.open(abi.NV_CTL_PATH, os.O_RDWR | os.O_CLOEXEC)
    try:
        return query_version(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# Files


class NvFile:
    """An open NVIDIA device node."""

    def __init__(self, path, flags=os.O_RDWR):
        self.path = path
        self.fd = os.open(path, flags | os.O_CLOEXEC)

    def fileno(self):
        return self.fd

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def closed(self):
        return self.fd < 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # A file dropped without close(): release the descriptor.
        with contextlib.suppress(OSError, AttributeError):
            self.close()

    def escape_raw(self, nr, arg, size=None):
        return escape_raw(self.fd, nr, arg, size)

    def escape(self, nr, arg, size=None):
        return escape(self.fd, nr, arg, size)

    def register_fd(self, ctl):
        """Make this file act for the clients of ``ctl`` (NV_ESC_REGISTER_FD)."""
        ctl_fd = ctl if isinstance(ctl, int) else ctl.fileno()
        self.escape(abi.NV_ESC_REGISTER_FD, abi.nv_ioctl_register_fd_t(ctl_fd))


class GpuFile(NvFile):
    """/dev/nvidiaN."""

    def __init__(self, minor, path=None):
        super().__init__(path or abi.nv_gpu_path(minor))
        self.minor = minor

    def rm_alloc_memory(self, hroot, hparent, hclass, flags=0, limit=0,
                        hnew=0, fd=-1, check=True):
        """NV_ESC_RM_ALLOC_MEMORY (NVOS02 + fd); a GPU-file escape."""
        arg = abi.nv_ioctl_nvos02_parameters_with_fd()
        p = arg.params
        p.hRoot, p.hObjectParent, p.hObjectNew = hroot, hparent, hnew
        p.hClass, p.flags, p.limit = hclass, flags, limit
        arg.fd = fd
        self.escape(abi.NV_ESC_RM_ALLOC_MEMORY, arg)
        _check(p, "RM_ALLOC_MEMORY", check)
        return arg

    def export_dmabuf(self, version, h_client, objects, total_size=None,
                      total_objects=None, index=0, fd=-1, mapping_type=0):
        """NV_ESC_EXPORT_TO_DMABUF_FD (nv-ioctl.h): ``objects`` of
        (handle, offset, size) of client ``h_client`` attached from
        ``index`` to the dma-buf ``fd``, or to a new one of ``total_size``
        bytes for ``total_objects`` handles (by default those given) when
        ``fd`` is -1.  ``version`` (a parse_version tuple) decides the
        layout: ``mappingType`` and the arrays 4 bytes on from 570.
        Returns (rc, status, fd): rc 0 or -errno, the fd RM wrote back."""
        since_570 = version[:2] >= (570, 0)
        size = 2608 if since_570 else 2600
        handles, offsets, sizes = (36, 552, 1576) if since_570 else (32, 544, 1568)
        buf = (ctypes.c_uint8 * size)()
        if total_size is None:
            total_size = sum(o[2] for o in objects)
        if total_objects is None:
            total_objects = len(objects)
        struct.pack_into("<iIIII", buf, 0, fd, h_client, total_objects,
                         len(objects), index)
        struct.pack_into("<Q", buf, 24, total_size)
        if since_570:
            struct.pack_into("<B", buf, 32, mapping_type)
        for i, (h, off, sz) in enumerate(objects):
            struct.pack_into("<I", buf, handles + 4 * i, h)
            struct.pack_into("<Q", buf, offsets + 8 * i, off)
            struct.pack_into("<Q", buf, sizes + 8 * i, sz)
        rc = ioctl_raw(self.fd, abi.nv_ioctl(abi.NV_ESC_EXPORT_TO_DMABUF_FD,
                                             size), buf)
        return (rc, struct.unpack_from("<I", buf, size - 8)[0],
                struct.unpack_from("<i", buf, 0)[0])


def _ptr(obj):
    return ctypes.addressof(obj) if obj is not None else 0


def _handle_lists(p, lists):
    """The idling of channels' three lists (phClients, phDevices,
    phChannels of ``p``) from ``lists`` of (client, device, channel)
    triples; the arrays, which the caller holds until the call is made."""
    arrays = []
    for i, name in enumerate(("phClients", "phDevices", "phChannels")):
        a = (ctypes.c_uint32 * max(len(lists), 1))(*(t[i] for t in lists))
        arrays.append(a)
        setattr(p, name, ctypes.addressof(a))
    return arrays


class Ctl(NvFile):
    """/dev/nvidiactl, with the driver version whose struct sizes apply."""

    def __init__(self, path=abi.NV_CTL_PATH, version=None):
        super().__init__(path)
        try:
            self.version = version or driver_version(self.fd)
            self.abi = abi.for_version(self.version)
        except BaseException:
            self.close()
            raise

    # -- escapes handled outside RM

    def card_info_raw(self, entries):
        arr = (abi.nv_ioctl_card_info_t * entries)()
        rc = ioctl_raw(self.fd, abi.nv_ioctl(abi.NV_ESC_CARD_INFO,
                                             ctypes.sizeof(arr)), arr)
        return rc, arr

    def card_info(self, entries=32):
        """The valid CARD_INFO entries (at most ``entries`` GPUs)."""
        rc, arr = self.card_info_raw(entries)
        if rc:
            raise OSError(-rc, f"NV_ESC_CARD_INFO: {os.strerror(-rc)}")
        return [ci for ci in arr if ci.valid]

    def check_version_raw(self, version, cmd=abi.NV_RM_API_VERSION_CMD_STRICT):
        """CHECK_VERSION_STR: (rc, params); on mismatch params.versionString
        is the driver's version."""
        p = abi.nv_ioctl_rm_api_version_t(cmd=cmd)
        p.versionString = version.encode()
        return self.escape_raw(abi.NV_ESC_CHECK_VERSION_STR, p), p

    def check_version(self, version, relaxed=False):
        cmd = (abi.NV_RM_API_VERSION_CMD_RELAXED if relaxed
               else abi.NV_RM_API_VERSION_CMD_STRICT)
        rc, p = self.check_version_raw(version, cmd)
        if rc:
            raise OSError(-rc, f"driver version {p.versionString.decode()} "
                               f"refuses client version {version}")
        return p

    def query_version(self):
        return query_version(self.fd)

    def attach_gpus(self, gpu_ids):
        arr = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        rc = ioctl_raw(self.fd, abi.nv_ioctl(abi.NV_ESC_ATTACH_GPUS_TO_FD,
                                             ctypes.sizeof(arr)), arr)
        if rc:
            raise OSError(-rc, f"ATTACH_GPUS_TO_FD: {os.strerror(-rc)}")

    # -- RM escapes

    def rm_alloc(self, hroot, hparent, hclass, params=None, hnew=0,
                 nvos64=False, params_size=None, check=True):
        """NV_ESC_RM_ALLOC; NVOS21 or NVOS64 by ioctl size.  Returns the
        NVOS struct (hObjectNew holds the handle)."""
        p = abi.NVOS64_PARAMETERS() if nvos64 else abi.NVOS21_PARAMETERS()
        p.hRoot, p.hObjectParent, p.hObjectNew, p.hClass = (
            hroot, hparent, hnew, hclass)
        p.pAllocParms = _ptr(params)
        p.paramsSize = (params_size if params_size is not None
                        else ctypes.sizeof(params) if params is not None else 0)
        self.escape(abi.NV_ESC_RM_ALLOC, p)
        return _check(p, f"RM_ALLOC class {hclass:#x}", check)

    def rm_free(self, hroot, hparent, hobject, check=True):
        p = abi.NVOS00_PARAMETERS(hroot, hparent, hobject)
        self.escape(abi.NV_ESC_RM_FREE, p)
        return _check(p, f"RM_FREE {hobject:#x}", check)

    def rm_control(self, hclient, hobject, cmd, params=None, params_size=None,
                   check=True):
        p = abi.NVOS54_PARAMETERS(hClient=hclient, hObject=hobject, cmd=cmd)
        p.params = _ptr(params)
        p.paramsSize = (params_size if params_size is not None
                        else ctypes.sizeof(params) if params is not None else 0)
        self.escape(abi.NV_ESC_RM_CONTROL, p)
        return _check(p, f"RM_CONTROL {cmd:#x}", check)

    def rm_idle_channels(self, hclient, hdevice=0, hchannel=0, lists=None,
                         flags=0, timeout=0):
        """NV_ESC_RM_IDLE_CHANNELS: one channel (hdevice, hchannel of
        hclient), or ``lists`` of (client, device, channel) triples; the
        NVOS30 struct, unchecked."""
        p = abi.NVOS30_PARAMETERS(hClient=hclient, hDevice=hdevice,
                                  hChannel=hchannel, flags=flags,
                                  timeout=timeout)
        if lists is None:
            p.flags |= abi.NVOS30_FLAGS_CHANNEL_SINGLE << 4
        else:
            p.numChannels = len(lists)
            keep = _handle_lists(p, lists)  # noqa: F841 (held for the call)
        self.escape(abi.NV_ESC_RM_IDLE_CHANNELS, p)
        return p

    def rm_access_registry(self, hclient, hobject, access, name=None, data=0,
                           binary=None, length=None, name_length=None):
        """NV_ESC_RM_ACCESS_REGISTRY of key ``name`` (its length without
        the NUL unless ``name_length``); ``binary``, bytes written, or
        ``length`` bytes to read.  (NVOS38 struct, bytes read), unchecked."""
        p = abi.NVOS38_PARAMETERS(hClient=hclient, hObject=hobject,
                                  AccessType=access, Data=data)
        if name is not None:
            s = ctypes.create_string_buffer(
                name if isinstance(name, bytes) else name.encode())
            p.pParmStr = ctypes.addressof(s)
            p.ParmStrLength = (len(s.value) if name_length is None
                               else name_length)
        buf = None
        if binary is not None or length is not None:
            size = len(binary) if binary is not None else length
            buf = ctypes.create_string_buffer(binary or b"", max(size, 1))
            p.pBinaryData = ctypes.addressof(buf)
            p.BinaryDataLength = size
        self.escape(abi.NV_ESC_RM_ACCESS_REGISTRY, p)
        got = buf.raw[:p.BinaryDataLength] if buf is not None else None
        return p, got

    def rm_dup(self, hclient, hparent, hclient_src, hobject_src, hnew=0,
               check=True):
        p = abi.NVOS55_PARAMETERS(hClient=hclient, hParent=hparent,
                                  hObject=hnew, hClientSrc=hclient_src,
                                  hObjectSrc=hobject_src)
        self.escape(abi.NV_ESC_RM_DUP_OBJECT, p)
        return _check(p, f"RM_DUP_OBJECT {hobject_src:#x}", check)

    def rm_share(self, hclient, hobject, share_type, target=0,
                 access=1 << abi.RS_ACCESS_DUP_OBJECT, action=0, check=True):
        """RM_SHARE: a share policy for ``hobject`` (DUP_OBJECT by
        default; ``target`` is RS_SHARE_TYPE_CLIENT's client)."""
        p = abi.NVOS57_PARAMETERS(hClient=hclient, hObject=hobject)
        p.sharePolicy.target, p.sharePolicy.accessMask = target, access
        p.sharePolicy.type, p.sharePolicy.action = share_type, action
        self.escape(abi.NV_ESC_RM_SHARE, p)
        return _check(p, f"RM_SHARE {hobject:#x}", check)

    def vid_heap_control(self, params, check=True):
        self.escape(abi.NV_ESC_RM_VID_HEAP_CONTROL, params)
        return _check(params, f"RM_VID_HEAP_CONTROL function "
                              f"{params.function}", check)

    def rm_map_memory(self, hclient, hdevice, hmemory, length, fd, offset=0,
                      flags=0, check=True):
        """RM_MAP_MEMORY: record a mapping in file ``fd`` (then mmap it)."""
        arg = abi.nv_ioctl_nvos33_parameters_with_fd()
        p = arg.params
        p.hClient, p.hDevice, p.hMemory = hclient, hdevice, hmemory
        p.offset, p.length, p.flags = offset, length, flags
        arg.fd = fd
        self.escape(abi.NV_ESC_RM_MAP_MEMORY, arg)
        _check(p, f"RM_MAP_MEMORY {hmemory:#x}", check)
        return arg

    def rm_unmap_memory(self, hclient, hdevice, hmemory, linear, check=True):
        p = abi.NVOS34_PARAMETERS(hClient=hclient, hDevice=hdevice,
                                  hMemory=hmemory, pLinearAddress=linear)
        self.escape(abi.NV_ESC_RM_UNMAP_MEMORY, p)
        return _check(p, f"RM_UNMAP_MEMORY {hmemory:#x}", check)

    def rm_bind_context_dma(self, hclient, hchannel, hctxdma, check=True):
        p = abi.NVOS49_PARAMETERS(hClient=hclient, hChannel=hchannel,
                                  hCtxDma=hctxdma)
        self.escape(abi.NV_ESC_RM_BIND_CONTEXT_DMA, p)
        return _check(p, f"RM_BIND_CONTEXT_DMA {hctxdma:#x}", check)

    def rm_update_mapping(self, hclient, hdevice, hmemory, old, new,
                          check=True):
        """RM_UPDATE_DEVICE_MAPPING_INFO: RM's record of a mapping at
        ``old`` (its address for RM_UNMAP_MEMORY) now says ``new``."""
        p = abi.NVOS56_PARAMETERS(hClient=hclient, hDevice=hdevice,
                                  hMemory=hmemory, pOldCpuAddress=old,
                                  pNewCpuAddress=new)
        self.escape(abi.NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO, p)
        return _check(p, f"RM_UPDATE_DEVICE_MAPPING_INFO {hmemory:#x}", check)

    def rm_map_memory_dma(self, hclient, hdevice, hdma, hmemory, length,
                          offset=0, dma_offset=0, flags=0, check=True):
        """RM_MAP_MEMORY_DMA: map ``hmemory`` into the virtual allocation
        ``hdma`` at ``dma_offset`` (relative to it, or absolute with
        DMA_OFFSET_FIXED in ``flags``).  Returns the NVOS46 struct, whose
        dmaOffset is the GPU virtual address."""
        p = self.abi.NVOS46_PARAMETERS(hClient=hclient, hDevice=hdevice,
                                       hDma=hdma, hMemory=hmemory,
                                       offset=offset, length=length,
                                       flags=flags, dmaOffset=dma_offset)
        self.escape(abi.NV_ESC_RM_MAP_MEMORY_DMA, p)
        return _check(p, f"RM_MAP_MEMORY_DMA {hmemory:#x}", check)

    def rm_unmap_memory_dma(self, hclient, hdevice, hdma, hmemory, dma_offset,
                            check=True):
        p = self.abi.NVOS47_PARAMETERS(hClient=hclient, hDevice=hdevice,
                                       hDma=hdma, hMemory=hmemory,
                                       dmaOffset=dma_offset)
        self.escape(abi.NV_ESC_RM_UNMAP_MEMORY_DMA, p)
        return _check(p, f"RM_UNMAP_MEMORY_DMA {dma_offset:#x}", check)

    def client(self, **kw):
        return RmClient(self, **kw)


# ---------------------------------------------------------------------------
# RM objects


class RmClient:
    """One RM client (NV01_ROOT_CLIENT) on a ctl file."""

    def __init__(self, ctl, handle=0, nvos64=False):
        self.ctl = ctl
        self.nvos64 = nvos64
        # serverAllocClient(): the requested client handle is hRoot
        p = ctl.rm_alloc(handle, 0, abi.NV01_ROOT_CLIENT, nvos64=nvos64)
        self.handle = p.hObjectNew
        self.parents = {}       # handle -> parent handle, for RM_FREE

    def alloc(self, hparent, hclass, params=None, hnew=0, nvos64=None,
              params_size=None):
        p = self.ctl.rm_alloc(self.handle, hparent, hclass, params, hnew,
                              self.nvos64 if nvos64 is None else nvos64,
                              params_size)
        self.parents[p.hObjectNew] = hparent
        return p.hObjectNew

    def alloc_raw(self, hparent, hclass, params=None, hnew=0, nvos64=None,
                  params_size=None):
        """As ``alloc`` but returns the NVOS struct without checking status."""
        p = self.ctl.rm_alloc(self.handle, hparent, hclass, params, hnew,
                              self.nvos64 if nvos64 is None else nvos64,
                              params_size, check=False)
        if p.status == abi.NV_OK:
            self.parents[p.hObjectNew] = hparent
        return p

    def _forget(self, handle):
        self.parents.pop(handle, None)
        for child in [h for h, par in self.parents.items() if par == handle]:
            self._forget(child)

    def free(self, handle):
        """Free ``handle`` and, as RM does, everything under it."""
        if handle == self.handle:
            self.close()
            return
        self.ctl.rm_free(self.handle, self.parents[handle], handle)
        self._forget(handle)

    def close(self):
        if self.handle and not self.ctl.closed:
            self.ctl.rm_free(self.handle, self.handle, self.handle)
        self.parents.clear()
        self.handle = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def control(self, hobject, cmd, params=None, params_size=None):
        self.ctl.rm_control(self.handle, hobject, cmd, params, params_size)
        return params

    def control_raw(self, hobject, cmd, params=None, params_size=None):
        return self.ctl.rm_control(self.handle, hobject, cmd, params,
                                   params_size, check=False)

    def surface_info_raw(self, hmemory, indices):
        """NV0041_CTRL_CMD_GET_SURFACE_INFO on memory ``hmemory``: the
        NVOS54 struct, unchecked, and the entries (index, data)."""
        entries = (abi.NV0041_CTRL_SURFACE_INFO * len(indices))()
        for e, i in zip(entries, indices):
            e.index, e.data = i, 0xFFFFFFFF
        p = abi.NV0041_CTRL_GET_SURFACE_INFO_PARAMS(
            surfaceInfoListSize=len(indices),
            surfaceInfoList=ctypes.addressof(entries) if indices else 0)
        st = self.control_raw(hmemory, abi.NV0041_CTRL_CMD_GET_SURFACE_INFO, p)
        return st, [(e.index, e.data) for e in entries]

    def surface_info(self, hmemory, indices):
        """{index: data} of memory ``hmemory`` (GET_SURFACE_INFO)."""
        st, entries = self.surface_info_raw(hmemory, indices)
        _check(st, "GET_SURFACE_INFO", True)
        return dict(entries)

    def idle_channels(self, lists, flags=0, timeout=0):
        """NV0000_CTRL_CMD_IDLE_CHANNELS on this client: ``lists`` of
        (client, device, channel) triples, in this process's memory; the
        NVOS54 struct, unchecked."""
        p = abi.NV0000_CTRL_GPU_IDLE_CHANNELS_PARAMS(
            numChannels=len(lists), flags=flags, timeout=timeout)
        keep = _handle_lists(p, lists)  # noqa: F841 (held for the call)
        return self.control_raw(self.handle,
                                abi.NV0000_CTRL_CMD_IDLE_CHANNELS, p)

    def fifo_idle_channels(self, hdevice, channels, flags=0, timeout=0,
                           count=None):
        """NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS on device ``hdevice``
        (``count`` overrides numChannels); the NVOS54 struct, unchecked."""
        p = abi.NV0080_CTRL_FIFO_IDLE_CHANNELS_PARAMS(
            numChannels=len(channels) if count is None else count,
            flags=flags, timeout=timeout)
        p.hChannels[:len(channels)] = channels
        return self.control_raw(hdevice,
                                abi.NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS, p)

    def share(self, hobject, share_type, **kw):
        return self.ctl.rm_share(self.handle, hobject, share_type, **kw)

    def export_object(self, hobject, fd, hdevice=0, check=True):
        """NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD of ``hobject`` into
        the control file ``fd`` (its first and only slot)."""
        p = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_PARAMS(fd=fd)
        p.object.type = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM
        p.object.data.rmObject.hDevice = hdevice
        p.object.data.rmObject.hObject = hobject
        return self.ctl.rm_control(
            self.handle, self.handle,
            abi.NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD, p, check=check)

    def import_object(self, fd, hparent, hnew=0, check=True):
        """NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD: the new handle,
        or the NVOS54 struct when not ``check``ed."""
        p = abi.NV0000_CTRL_OS_UNIX_IMPORT_OBJECT_FROM_FD_PARAMS(fd=fd)
        p.object.type = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM
        p.object.data.rmObject.hParent = hparent
        p.object.data.rmObject.hObject = hnew
        r = self.ctl.rm_control(
            self.handle, self.handle,
            abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD, p, check=check)
        if not check:
            return r
        h = p.object.data.rmObject.hObject
        self.parents[h] = hparent
        return h

    def export_info(self, fd, check=True):
        """NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO of the control
        file ``fd``: the params, or the NVOS54 struct when not
        ``check``ed."""
        p = self.ctl.abi.NV0000_CTRL_OS_UNIX_GET_EXPORT_OBJECT_INFO_PARAMS(
            fd=fd)
        r = self.ctl.rm_control(
            self.handle, self.handle,
            abi.NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO, p,
            check=check)
        return p if check else r

    def export_objects(self, fd, hdevice, objects, max_objects=None, index=0,
                       metadata=b"", check=True):
        """NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD of ``objects`` into
        slots ``index``... of ``fd`` (made ``max_objects`` long, with
        ``metadata``, by the first export into it)."""
        p = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_PARAMS(
            fd=fd, hDevice=hdevice, numObjects=len(objects), index=index,
            maxObjects=len(objects) if max_objects is None else max_objects)
        for i, h in enumerate(objects):
            p.objects[i] = h
        ctypes.memmove(p.metadata, metadata, len(metadata))
        return self.ctl.rm_control(
            self.handle, self.handle,
            abi.NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD, p, check=check)

    def import_objects(self, fd, hparent, handles, index=0, check=True):
        """NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD into ``handles``
        (0: RM's choice): (the handles, their types), or the params and
        the NVOS54 struct when not ``check``ed."""
        p = abi.NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_FROM_FD_PARAMS(
            fd=fd, hParent=hparent, numObjects=len(handles), index=index)
        for i, h in enumerate(handles):
            p.objects[i] = h
        r = self.ctl.rm_control(
            self.handle, self.handle,
            abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD, p,
            check=check)
        if not check:
            return p, r
        made = [(p.objects[i], p.objectTypes[i]) for i in range(len(handles))]
        for h, t in made:
            if t != abi.NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_NONE:
                self.parents[h] = hparent
        return made

    def alloc_context_dma(self, hmemory, hclass=abi.NV01_CONTEXT_DMA,
                          flags=None, offset=0, limit=0, hsubdevice=0,
                          hnew=0, hparent=None, check=True):
        """NV_ESC_RM_ALLOC_CONTEXT_DMA2: RM makes ``hclass`` under
        ``hmemory``'s parent (``hparent``, for RM_FREE).  Returns the
        NVOS39 struct; ``flags`` defaults to read-write, no hash table."""
        if flags is None:
            flags = (abi.NVOS03_FLAGS_HASH_TABLE_DISABLE
                     << abi.NVOS03_FLAGS_HASH_TABLE_SHIFT)
        p = abi.NVOS39_PARAMETERS(
            hObjectParent=self.handle, hSubDevice=hsubdevice,
            hObjectNew=hnew, hClass=hclass, flags=flags, hMemory=hmemory,
            offset=offset, limit=limit)
        self.ctl.escape(abi.NV_ESC_RM_ALLOC_CONTEXT_DMA2, p)
        _check(p, "RM_ALLOC_CONTEXT_DMA2", check)
        if p.status == abi.NV_OK and hparent is not None:
            self.parents[p.hObjectNew] = hparent
        return p

    def dup(self, hparent, hobject_src, client_src=None, hnew=0):
        src = client_src.handle if client_src is not None else self.handle
        p = self.ctl.rm_dup(self.handle, hparent, src, hobject_src, hnew)
        self.parents[p.hObject] = hparent
        return p.hObject

    def device(self, index, gpu_file=None, **kw):
        return Device(self, index, gpu_file, **kw)


class Memory(NamedTuple):
    handle: int
    size: int       # as RM reported it after the call


class Device:
    """NV01_DEVICE_0 and its NV20_SUBDEVICE_0 for GPU ``index``.

    Opens /dev/nvidia<index> unless ``gpu_file`` is given: RM refuses the
    device unless the caller holds a file of that GPU."""

    def __init__(self, client, index, gpu_file=None,
                 va_mode=abi.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES):
        self.client = client
        self.ctl = client.ctl
        self.abi = client.ctl.abi
        self.index = index
        self.own_gpu_file = gpu_file is None
        self.gpu = gpu_file or GpuFile(index)
        try:
            self.hdevice = client.alloc(
                client.handle, abi.NV01_DEVICE_0,
                abi.NV0080_ALLOC_PARAMETERS(deviceId=index, vaMode=va_mode))
            self.hsubdevice = client.alloc(
                self.hdevice, abi.NV20_SUBDEVICE_0,
                abi.NV2080_ALLOC_PARAMETERS(subDeviceId=0))
        except BaseException:
            if self.own_gpu_file:
                self.gpu.close()
            raise

    def close(self):
        if self.client.handle and self.hdevice in self.client.parents:
            self.client.free(self.hdevice)
        if self.own_gpu_file:
            self.gpu.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- memory through RM_ALLOC

    def memory_params(self, size, location=abi.NVOS32_ATTR_LOCATION_VIDMEM,
                      huge=False, flags=0, protection=0):
        """NV_MEMORY_ALLOCATION_PARAMS of this driver version (PROTECTION:
        attr2's NVOS32_ATTR2_MEMORY_PROTECTION, 0 the default)."""
        p = self.abi.NV_MEMORY_ALLOCATION_PARAMS()
        p.owner = 0x58505521    # any owner tag; RM keeps it for debugging
        p.type = abi.NVOS32_TYPE_IMAGE
        p.flags = flags
        page = abi.NVOS32_ATTR_PAGE_SIZE_HUGE if huge else 0
        p.attr = abi.nvos32_attr(location, page)
        if huge:
            p.attr2 = (abi.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB
                       << abi.NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT)
        p.attr2 |= protection << abi.NVOS32_ATTR2_MEMORY_PROTECTION_SHIFT
        p.size = size
        return p

    def alloc_vidmem(self, size, nvos64=False, huge=False, flags=0,
                     protection=0):
        """Video memory by RM_ALLOC of NV01_MEMORY_LOCAL_USER."""
        p = self.memory_params(size, huge=huge, flags=flags,
                               protection=protection)
        h = self.client.alloc(self.hdevice, abi.NV01_MEMORY_LOCAL_USER, p,
                              nvos64=nvos64)
        return Memory(h, p.size)

    def alloc_sysmem(self, size):
        """System memory (NV01_MEMORY_SYSTEM), mappable through a ctl file."""
        p = self.memory_params(size, location=abi.NVOS32_ATTR_LOCATION_PCI)
        h = self.client.alloc(self.hdevice, abi.NV01_MEMORY_SYSTEM, p)
        return Memory(h, p.size)

    # -- GPU virtual memory

    def alloc_virtual(self, size, hvaspace=0, va=None, lazy=False,
                      flags=0):
        """A GPU VA range (NV50_MEMORY_VIRTUAL) in VA space ``hvaspace`` (0:
        the device's default), at ``va`` if given; unless ``lazy``, RM pins
        the page tables of the whole range (FLAGS: more NVOS32 flags).
        Returns (handle, VA)."""
        flags |= abi.NVOS32_ALLOC_FLAGS_VIRTUAL
        if lazy:
            flags |= abi.NVOS32_ALLOC_FLAGS_LAZY
        if va is not None:
            flags |= abi.NVOS32_ALLOC_FLAGS_FIXED_ADDRESS_ALLOCATE
        p = self.memory_params(size, flags=flags)
        p.hVASpace = hvaspace
        p.offset = va or 0
        h = self.client.alloc(self.hdevice, abi.NV50_MEMORY_VIRTUAL, p)
        return h, p.offset

    def map_dma(self, hvirtual, hmemory, length, offset=0, dma_offset=0):
        """RM_MAP_MEMORY_DMA into ``hvirtual`` at ``dma_offset`` within it;
        returns the GPU virtual address."""
        return self.ctl.rm_map_memory_dma(
            self.client.handle, self.hdevice, hvirtual, hmemory, length,
            offset=offset, dma_offset=dma_offset).dmaOffset

    def vaspace(self, flags=0, va_base=0, va_size=0):
        """A FERMI_VASPACE_A; returns (handle, its params as RM wrote them)."""
        p = self.abi.NV_VASPACE_ALLOCATION_PARAMETERS(
            flags=flags, vaBase=va_base, vaSize=va_size)
        h = self.client.alloc(self.hdevice, abi.FERMI_VASPACE_A, p)
        return h, p

    # -- memory through RM_VID_HEAP_CONTROL

    def _heap_params(self, function):
        p = self.abi.NVOS32_PARAMETERS()
        p.hRoot, p.hObjectParent, p.function = (
            self.client.handle, self.hdevice, function)
        return p

    def heap_alloc_raw(self, size, huge=False, flags=0,
                       location=abi.NVOS32_ATTR_LOCATION_VIDMEM):
        p = self._heap_params(abi.NVOS32_FUNCTION_ALLOC_SIZE)
        a = p.data.AllocSize
        a.owner, a.type, a.size = 0x58505521, abi.NVOS32_TYPE_IMAGE, size
        a.flags = flags
        page = abi.NVOS32_ATTR_PAGE_SIZE_HUGE if huge else 0
        a.attr = abi.nvos32_attr(location, page)
        if huge:
            a.attr2 = (abi.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB
                       << abi.NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT)
        return self.ctl.vid_heap_control(p, check=False)

    def heap_alloc(self, size, huge=False, flags=0,
                   location=abi.NVOS32_ATTR_LOCATION_VIDMEM):
        """Video memory (or LOCATION's) by RM_VID_HEAP_CONTROL ALLOC_SIZE."""
        p = _check(self.heap_alloc_raw(size, huge, flags, location),
                   "VID_HEAP ALLOC_SIZE")
        h = p.data.AllocSize.hMemory
        self.client.parents[h] = self.hdevice
        return Memory(h, p.data.AllocSize.size)

    def heap_free_raw(self, hmemory,
                      flags=abi.NVOS32_FREE_FLAGS_MEMORY_HANDLE_PROVIDED):
        p = self._heap_params(abi.NVOS32_FUNCTION_FREE)
        f = p.data.Free
        f.owner, f.hMemory, f.flags = 0x58505521, hmemory, flags
        return self.ctl.vid_heap_control(p, check=False)

    def heap_free(self, hmemory):
        """RM_VID_HEAP_CONTROL FREE (an RM_FREE of the handle)."""
        _check(self.heap_free_raw(hmemory), "VID_HEAP FREE")
        self.client._forget(hmemory)

    def heap_info(self):
        """(total, free) in bytes from VID_HEAP INFO."""
        p = self.ctl.vid_heap_control(
            self._heap_params(abi.NVOS32_FUNCTION_INFO))
        return p.total, p.free

    def memory_size_query(self, hnew=0, check=True):
        """RM_ALLOC_MEMORY of class 0x40 on the GPU file (registered to the
        client's ctl file): limit = FB size - 1.  RM leaves a memory-less
        handle ``hnew`` (rmapi_deprecated_allocmemory.c), which is not
        written back: pass one to be able to free it."""
        arg = self.gpu.rm_alloc_memory(self.client.handle, self.hdevice,
                                       abi.NV01_MEMORY_LOCAL_USER, hnew=hnew,
                                       check=check)
        if arg.params.status == abi.NV_OK and hnew:
            self.client.parents[hnew] = self.hdevice
        return arg.params

    # -- controls on the subdevice

    def fb_info(self, indices):
        """{index: KiB} through FB_GET_INFO (list by pointer)."""
        entries = (abi.NV2080_CTRL_FB_INFO * len(indices))()
        for e, i in zip(entries, indices):
            e.index = i
        p = abi.NV2080_CTRL_FB_GET_INFO_PARAMS(
            fbInfoListSize=len(indices), fbInfoList=ctypes.addressof(entries))
        self.client.control(self.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO, p)
        return {e.index: e.data for e in entries}

    def fb_info_v2_params(self, indices):
        p = self.abi.NV2080_CTRL_FB_GET_INFO_V2_PARAMS(
            fbInfoListSize=len(indices))
        for e, i in zip(p.fbInfoList, indices):
            e.index = i
        return p

    def fb_info_v2(self, indices):
        """{index: KiB} through FB_GET_INFO_V2 (list inline)."""
        p = self.fb_info_v2_params(indices)
        self.client.control(self.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
                            p)
        return {e.index: e.data for e in p.fbInfoList[:len(indices)]}

    def pids(self):
        """PIDs with objects of NV20_SUBDEVICE_0 on this GPU (GPU_GET_PIDS)."""
        p = abi.NV2080_CTRL_GPU_GET_PIDS_PARAMS(
            idType=abi.NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_CLASS,
            id=abi.NV20_SUBDEVICE_0)
        self.client.control(self.hsubdevice, abi.NV2080_CTRL_CMD_GPU_GET_PIDS, p)
        return list(p.pidTbl[:p.pidTblCount])

    def pid_info_entries(self, pids):
        """GPU_GET_PID_INFO's video-memory entries for ``pids``, in order."""
        p = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=len(pids))
        for e, pid in zip(p.pidInfoList, pids):
            e.pid = pid
            e.index = abi.NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE
        self.client.control(self.hsubdevice,
                            abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, p)
        return p.pidInfoList[:len(pids)]

    def pid_info(self, pids):
        """{pid: (result, memPrivate bytes)} through GPU_GET_PID_INFO."""
        return {e.pid: (e.result, e.data.vidMemUsage.memPrivate)
                for e in self.pid_info_entries(pids)}

    def pid_vidmem(self, pid):
        """GPU_GET_PID_INFO's video-memory figures of ``pid``, by name."""
        u = self.pid_info_entries([pid])[0].data.vidMemUsage
        return {name: getattr(u, name) for name, _ in u._fields_}

    # -- mappings

    def map(self, hmemory, length, hparent=None, node=None):
        """Map ``hmemory`` as CUDA does: a fresh file of ``node`` (default the
        ctl node, for system memory), RM_MAP_MEMORY naming it, mmap at 0."""
        return Mapping(self.ctl, self.client.handle,
                       hparent if hparent is not None else self.hdevice,
                       hmemory, length, node or self.ctl.path)


class Mapping:
    """One CPU mapping of an RM memory object, through its own file."""

    def __init__(self, ctl, hclient, hparent, hmemory, length, node):
        self.ctl, self.hclient, self.hparent, self.hmemory = (
            ctl, hclient, hparent, hmemory)
        self.length = length
        self.fd = os.open(node, os.O_RDWR | os.O_CLOEXEC)
        self.mm = None
        self.linear = None
        try:
            arg = ctl.rm_map_memory(hclient, hparent, hmemory, length, self.fd)
            self.linear = arg.params.pLinearAddress
            self.mm = mmap.mmap(self.fd, length, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        except BaseException:
            if self.linear is not None:     # RM recorded it: take it back
                ctl.rm_unmap_memory(hclient, hparent, hmemory, self.linear,
                                    check=False)
            os.close(self.fd)
            self.fd = -1
            raise

    def read32(self, offset):
        return struct.unpack_from("<I", self.mm, offset)[0]

    def write32(self, offset, value):
        struct.pack_into("<I", self.mm, offset, value)

    def close(self, unmap=True):
        """Unmap; ``unmap=False`` skips RM_UNMAP_MEMORY (the object is gone)."""
        if self.fd < 0:
            return
        self.mm.close()
        if unmap and not self.ctl.closed:
            self.ctl.rm_unmap_memory(self.hclient, self.hparent, self.hmemory,
                                     self.linear)
        os.close(self.fd)
        self.fd = -1


# ---------------------------------------------------------------------------
# Compute


class Channel:
    """A TSG with one Hopper GPFIFO channel, ready for work, made as NVIDIA's
    ABI has it (alloc_channel.h): the ring at a GPU virtual address of the
    device's default VA space (an NV50_MEMORY_VIRTUAL range into which
    RM_MAP_MEMORY_DMA maps a system-memory object), USERD in that object after
    the ring, no context share (the TSG's legacy mode).  The stub's engine
    reads the ring through the VA space; a work item is {u32 duration_us;
    u32 reserved} (docs/nvstub.md)."""

    def __init__(self, device, entries=64, timeslice_us=None, schedule=True):
        self.device = device
        client = device.client
        self.client = client
        self.entries = entries
        self.put = 0
        self._objs = []
        self._maps = []
        try:
            self.htsg = client.alloc(
                device.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                    engineType=abi.NV2080_ENGINE_TYPE_GR0))
            self._objs.append(self.htsg)
            if timeslice_us is not None:
                self.timeslice(timeslice_us)

            self.ring_bytes = round_up(entries * abi.NV_GPFIFO_ENTRY_SIZE,
                                       PAGE_SIZE)
            self.userd_offset = self.ring_bytes
            mem = device.alloc_sysmem(self.ring_bytes + PAGE_SIZE)
            self.hmem = mem.handle
            self._objs.append(self.hmem)
            self.mem = device.map(self.hmem, mem.size)
            self._maps.append(self.mem)
            # a range whose page tables RM pins when it is made: a slice
            # maps (RM_MAP_MEMORY_DMA) only there (docs/security.md, class
            # 18); CUDA's lazy ranges are mapped through UVM (CudaChannel)
            self.hvirtual, _ = device.alloc_virtual(mem.size)
            self._objs.append(self.hvirtual)
            self.gpu_va = device.map_dma(self.hvirtual, self.hmem, mem.size)

            p = device.abi.NV_CHANNEL_ALLOC_PARAMS()
            p.gpFifoOffset = self.gpu_va
            p.gpFifoEntries = entries
            p.hUserdMemory[0] = self.hmem
            p.userdOffset[0] = self.userd_offset
            p.engineType = abi.NV2080_ENGINE_TYPE_GR0
            self.hchannel = client.alloc(self.htsg, abi.HOPPER_CHANNEL_GPFIFO_A,
                                         p)
            # The compute object puts the channel on a runlist, which the
            # work-submit token needs (RM: NV_ERR_INVALID_STATE before), so
            # it comes first, as CUDA and tinygrad make them.
            self.hcompute = client.alloc(self.hchannel, abi.HOPPER_COMPUTE_A,
                                         abi.NV_GR_ALLOCATION_PARAMETERS())

            tok = abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()
            client.control(self.hchannel,
                           abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, tok)
            self.token = tok.workSubmitToken

            if schedule:
                self.schedule(True)

            self.husermode = client.alloc(device.hsubdevice,
                                          abi.HOPPER_USERMODE_A)
            self._objs.append(self.husermode)
            self.usermode = device.map(self.husermode,
                                       abi.NVC361_NV_USERMODE__SIZE,
                                       hparent=device.hsubdevice,
                                       node=device.gpu.path)
            self._maps.append(self.usermode)
        except BaseException:
            self.close()
            raise

    def schedule(self, enable=True):
        """GPFIFO_SCHEDULE on the TSG: make it (un)runnable."""
        p = self.device.abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(
            bEnable=int(enable))
        self.client.control(self.htsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, p)

    def timeslice(self, us=None):
        """SET_TIMESLICE when ``us`` is given; returns GET_TIMESLICE."""
        if us is not None:
            self.client.control(self.htsg, abi.NVA06C_CTRL_CMD_SET_TIMESLICE,
                                abi.NVA06C_CTRL_TIMESLICE_PARAMS(us))
        p = abi.NVA06C_CTRL_TIMESLICE_PARAMS()
        self.client.control(self.htsg, abi.NVA06C_CTRL_CMD_GET_TIMESLICE, p)
        return p.timesliceUs

    @property
    def gp_get(self):
        return self.mem.read32(self.userd_offset + abi.NVC36F_USERD_GP_GET)

    @property
    def gp_put(self):
        return self.mem.read32(self.userd_offset + abi.NVC36F_USERD_GP_PUT)

    def submit(self, duration_us, ring=True, timeout=30.0):
        """Queue one work item of ``duration_us`` and ring the doorbell."""
        nxt = (self.put + 1) % self.entries
        if nxt == self.gp_get:
            self._wait_for(lambda: nxt != self.gp_get, timeout, "ring space")
        item = abi.NvstubWorkItem(duration_us=duration_us)
        off = self.put * abi.NV_GPFIFO_ENTRY_SIZE
        self.mem.mm[off:off + ctypes.sizeof(item)] = bytes(item)
        self.put = nxt
        self.mem.write32(self.userd_offset + abi.NVC36F_USERD_GP_PUT, self.put)
        if ring:
            self.ring()

    def ring(self):
        """Write this channel's work-submit token to the doorbell."""
        self.usermode.write32(abi.NVC361_NOTIFY_CHANNEL_PENDING, self.token)

    def idle(self):
        return self.gp_get == self.put

    def wait(self, timeout=30.0):
        """Wait until the engine has consumed every submitted entry."""
        self._wait_for(self.idle, timeout, "GPGet to reach GPPut")

    def _wait_for(self, done, timeout, what):
        # A bounded poll standing for the GPU's own spin-wait on GPGet.
        deadline = time.monotonic() + timeout
        delay = 0.0002
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"channel {self.hchannel:#x}: waited {timeout}s for {what} "
                    f"(GPGet {self.gp_get}, GPPut {self.gp_put})")
            time.sleep(delay)
            delay = min(delay * 2, 0.005)

    def close(self):
        for m in reversed(self._maps):
            m.close(unmap=self.client.handle != 0)
        self._maps.clear()
        # The TSG first: freeing it frees the channel, which uses the memory.
        if self.client.handle and not self.client.ctl.closed:
            for h in self._objs:
                if h in self.client.parents:
                    self.client.free(h)
        self._objs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------
# /proc/driver/nvidia


def proc_gpu_information(bus_id):
    """/proc/driver/nvidia/gpus/<bus id>/information as {key: value}."""
    with open(os.path.join(PROC_GPUS, bus_id, "information")) as f:
        return parse_colon_pairs(f.read())


def parse_colon_pairs(text):
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def proc_gpu_bus_ids():
    try:
        return sorted(os.listdir(PROC_GPUS))
    except FileNotFoundError:
        return []


__all__ = [
    "Channel",
    "Ctl",
    "Device",
    "GpuFile",
    "Mapping",
    "Memory",
    "NvFile",
    "NvStatusError",
    "RmClient",
    "driver_version",
    "escape",
    "escape_raw",
    "ioctl_raw",
    "parse_proc_version",
    "proc_gpu_bus_ids",
    "proc_gpu_information",
    "query_version",
    "round_up",
]
