# SPDX-License-Identifier: Apache-2.0
"""A client of /dev/nvidia-uvm, as NVIDIA's UVM module defines its ioctls
(kernel-open/nvidia-uvm/uvm_ioctl.h, uvm_types.h): raw command numbers, the
status in ``rmStatus``.  UVM_MAP_EXTERNAL_ALLOCATION's attribute array has
UVM_MAX_GPUS entries: 32 before 550, 256 from (NV_MAX_DEVICES *
UVM_PARENT_ID_MAX_SUB_PROCESSORS), so its size is the driver's.

The layouts are checked against NVIDIA's headers in
tests/unit/test_nvclient_uvm.py."""

import ctypes
import fcntl
import os
from ctypes import c_int32, c_uint8, c_uint32, c_uint64

from . import abi
from .client import NvStatusError, proc_gpu_bus_ids, proc_gpu_information

UVM_PATH = "/dev/nvidia-uvm"

UVM_INITIALIZE = 0x30000001
UVM_DEINITIALIZE = 0x30000002
UVM_REGISTER_GPU_VASPACE = 25
UVM_UNREGISTER_GPU_VASPACE = 26
UVM_REGISTER_CHANNEL = 27
UVM_UNREGISTER_CHANNEL = 28
UVM_MAP_EXTERNAL_ALLOCATION = 33
UVM_FREE = 34
UVM_REGISTER_GPU = 37
UVM_UNREGISTER_GPU = 38
UVM_CREATE_EXTERNAL_RANGE = 73
UVM_MM_INITIALIZE = 75

UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC = 1

NvProcessorUuid = c_uint8 * 16


class _S(ctypes.Structure):
    pass


class UVM_INITIALIZE_PARAMS(_S):
    _fields_ = [("flags", c_uint64), ("rmStatus", c_uint32)]


class UVM_MM_INITIALIZE_PARAMS(_S):
    _fields_ = [("uvmFd", c_int32), ("rmStatus", c_uint32)]


class UVM_REGISTER_GPU_PARAMS(_S):
    _fields_ = [("gpu_uuid", NvProcessorUuid), ("numaEnabled", c_uint8),
                ("numaNodeId", c_int32), ("rmCtrlFd", c_int32),
                ("hClient", c_uint32), ("hSmcPartRef", c_uint32),
                ("rmStatus", c_uint32)]


class UVM_UNREGISTER_GPU_PARAMS(_S):
    _fields_ = [("gpu_uuid", NvProcessorUuid), ("rmStatus", c_uint32)]


class UVM_REGISTER_GPU_VASPACE_PARAMS(_S):
    _fields_ = [("gpuUuid", NvProcessorUuid), ("rmCtrlFd", c_int32),
                ("hClient", c_uint32), ("hVaSpace", c_uint32),
                ("rmStatus", c_uint32)]


class UVM_UNREGISTER_GPU_VASPACE_PARAMS(_S):
    _fields_ = [("gpuUuid", NvProcessorUuid), ("rmStatus", c_uint32)]


class UVM_CREATE_EXTERNAL_RANGE_PARAMS(_S):
    _fields_ = [("base", c_uint64), ("length", c_uint64),
                ("rmStatus", c_uint32)]


class UVM_FREE_PARAMS(_S):
    _fields_ = [("base", c_uint64), ("length", c_uint64),
                ("rmStatus", c_uint32)]


class UvmGpuMappingAttributes(_S):
    _fields_ = [("gpuUuid", NvProcessorUuid), ("gpuMappingType", c_uint32),
                ("gpuCachingType", c_uint32), ("gpuFormatType", c_uint32),
                ("gpuElementBits", c_uint32), ("gpuCompressionType", c_uint32)]


def map_external_params(max_gpus):
    """UVM_MAP_EXTERNAL_ALLOCATION_PARAMS with UVM_MAX_GPUS = MAX_GPUS."""
    return type(f"UVM_MAP_EXTERNAL_ALLOCATION_PARAMS_{max_gpus}", (_S,), {
        "_fields_": [("base", c_uint64), ("length", c_uint64),
                     ("offset", c_uint64),
                     ("perGpuAttributes", UvmGpuMappingAttributes * max_gpus),
                     ("gpuAttributesCount", c_uint64), ("rmCtrlFd", c_int32),
                     ("hClient", c_uint32), ("hMemory", c_uint32),
                     ("rmStatus", c_uint32)]})


class UVM_REGISTER_CHANNEL_PARAMS(_S):
    _fields_ = [("gpuUuid", NvProcessorUuid), ("rmCtrlFd", c_int32),
                ("hClient", c_uint32), ("hChannel", c_uint32),
                ("base", c_uint64), ("length", c_uint64),
                ("rmStatus", c_uint32)]


class UVM_UNREGISTER_CHANNEL_PARAMS(_S):
    _fields_ = [("gpuUuid", NvProcessorUuid), ("hClient", c_uint32),
                ("hChannel", c_uint32), ("rmStatus", c_uint32)]


def uvm_max_gpus(version):
    """UVM_MAX_GPUS of driver VERSION: 32 up to 550.40.07, 256 after."""
    return 256 if abi.parse_version(version)[:2] >= (550, 0) else 32


def gpu_uuid(index):
    """The 16 bytes of GPU INDEX's UUID (/proc/driver/nvidia's "GPU UUID")."""
    for bus in proc_gpu_bus_ids():
        info = proc_gpu_information(bus)
        if int(info.get("Device Minor", -1)) == index:
            text = info["GPU UUID"].removeprefix("GPU-").replace("-", "")
            return NvProcessorUuid(*bytes.fromhex(text))
    raise LookupError(f"no GPU with minor {index} in /proc/driver/nvidia")


class UvmError(NvStatusError):
    pass


class Uvm:
    """One open /dev/nvidia-uvm (a UVM va_space), initialized."""

    def __init__(self, version, path=UVM_PATH, initialize=True, fd=None):
        """FD: a UVM file opened elsewhere (passed in), taken over."""
        self.version = version
        self.MAP_EXTERNAL = map_external_params(uvm_max_gpus(version))
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC) if fd is None \
            else fd
        if initialize:
            self.call(UVM_INITIALIZE, UVM_INITIALIZE_PARAMS())

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, cmd, params, check=True):
        """The ioctl (0 or an OSError); returns rmStatus, raising UvmError
        when CHECK and it is not NV_OK."""
        fcntl.ioctl(self.fd, cmd, params)
        if check and params.rmStatus != abi.NV_OK:
            raise UvmError(params.rmStatus, f"UVM command {cmd}")
        return params.rmStatus

    def mm_initialize(self, uvm_fd, check=True):
        """UVM_MM_INITIALIZE on this file, naming the initialized UVM file
        UVM_FD (UVM checks that its f_op is UVM's own)."""
        return self.call(UVM_MM_INITIALIZE,
                         UVM_MM_INITIALIZE_PARAMS(uvmFd=uvm_fd), check)

    def register_gpu(self, uuid, check=True):
        return self.call(UVM_REGISTER_GPU, UVM_REGISTER_GPU_PARAMS(
            gpu_uuid=uuid, rmCtrlFd=-1), check)

    def unregister_gpu(self, uuid, check=True):
        return self.call(UVM_UNREGISTER_GPU,
                         UVM_UNREGISTER_GPU_PARAMS(gpu_uuid=uuid), check)

    def register_gpu_va_space(self, uuid, ctl_fd, hclient, hvaspace,
                              check=True):
        return self.call(UVM_REGISTER_GPU_VASPACE,
                         UVM_REGISTER_GPU_VASPACE_PARAMS(
                             gpuUuid=uuid, rmCtrlFd=ctl_fd, hClient=hclient,
                             hVaSpace=hvaspace), check)

    def unregister_gpu_va_space(self, uuid, check=True):
        return self.call(UVM_UNREGISTER_GPU_VASPACE,
                         UVM_UNREGISTER_GPU_VASPACE_PARAMS(gpuUuid=uuid),
                         check)

    def create_external_range(self, base, length, check=True):
        return self.call(UVM_CREATE_EXTERNAL_RANGE,
                         UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=base,
                                                          length=length),
                         check)

    def free(self, base, length, check=True):
        return self.call(UVM_FREE, UVM_FREE_PARAMS(base=base, length=length),
                         check)

    def map_external(self, base, length, ctl_fd, hclient, hmemory, uuids,
                     offset=0, count=None, check=True):
        p = self.MAP_EXTERNAL(base=base, length=length, offset=offset,
                              rmCtrlFd=ctl_fd, hClient=hclient,
                              hMemory=hmemory)
        for i, uuid in enumerate(uuids):
            p.perGpuAttributes[i].gpuUuid = uuid
            p.perGpuAttributes[i].gpuMappingType = \
                UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC
        p.gpuAttributesCount = len(uuids) if count is None else count
        return self.call(UVM_MAP_EXTERNAL_ALLOCATION, p, check)

    def register_channel(self, uuid, ctl_fd, hclient, hchannel, base, length,
                         check=True):
        return self.call(UVM_REGISTER_CHANNEL, UVM_REGISTER_CHANNEL_PARAMS(
            gpuUuid=uuid, rmCtrlFd=ctl_fd, hClient=hclient, hChannel=hchannel,
            base=base, length=length), check)

    def unregister_channel(self, uuid, hclient, hchannel, check=True):
        return self.call(UVM_UNREGISTER_CHANNEL, UVM_UNREGISTER_CHANNEL_PARAMS(
            gpuUuid=uuid, hClient=hclient, hChannel=hchannel), check)

