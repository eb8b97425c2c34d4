# SPDX-License-Identifier: Apache-2.0
"""NVIDIA kernel-driver user ABI: numbers, status codes and x86_64 layouts.

Everything here is a fact read from NVIDIA's open kernel modules
(NVIDIA/open-gpu-kernel-modules); the header each group comes from is named
above it.  Classes keep the C names so they can be grepped in the headers, and
tests/unit/test_nvclient_abi.py checks every size and offset against layouts
computed from those headers (tests/fixtures/nvidia-abi/).

Structures whose size changed between driver releases are not module-level
classes: ``for_version()`` returns the table row of one driver version with
the right classes and sizes.
"""

import ctypes
import re
from ctypes import c_char, c_int32, c_uint8, c_uint16, c_uint32, c_uint64
from dataclasses import dataclass
from functools import cache

# ---------------------------------------------------------------------------
# ioctl encoding (asm-generic/ioctl.h; the driver reads only _IOC_NR/_IOC_SIZE)

_IOC_NRBITS, _IOC_TYPEBITS, _IOC_SIZEBITS = 8, 8, 14
_IOC_NRSHIFT = 0
_IOC_TYPESHIFT = _IOC_NRSHIFT + _IOC_NRBITS
_IOC_SIZESHIFT = _IOC_TYPESHIFT + _IOC_TYPEBITS
_IOC_DIRSHIFT = _IOC_SIZESHIFT + _IOC_SIZEBITS
_IOC_WRITE, _IOC_READ = 1, 2
IOC_SIZE_MAX = (1 << _IOC_SIZEBITS) - 1


def _IOC(direction, type_, nr, size):
    if not 0 <= size <= IOC_SIZE_MAX:
        raise ValueError(f"ioctl size {size} does not fit _IOC_SIZE")
    return ((direction << _IOC_DIRSHIFT) | (size << _IOC_SIZESHIFT)
            | (type_ << _IOC_TYPESHIFT) | (nr << _IOC_NRSHIFT))


def _IOWR(type_, nr, size):
    return _IOC(_IOC_READ | _IOC_WRITE, type_, nr, size)


def ioc_nr(cmd):
    return (cmd >> _IOC_NRSHIFT) & ((1 << _IOC_NRBITS) - 1)


def ioc_size(cmd):
    return (cmd >> _IOC_SIZESHIFT) & ((1 << _IOC_SIZEBITS) - 1)


# kernel-open/common/inc/nv-ioctl-numbers.h
NV_IOCTL_MAGIC = ord("F")


def nv_ioctl(nr, size):
    """The command word for escape ``nr`` with an argument of ``size`` bytes."""
    return _IOWR(NV_IOCTL_MAGIC, nr, size)


NV_IOCTL_BASE = 200
NV_ESC_CARD_INFO = NV_IOCTL_BASE + 0
NV_ESC_REGISTER_FD = NV_IOCTL_BASE + 1
NV_ESC_ALLOC_OS_EVENT = NV_IOCTL_BASE + 6
NV_ESC_FREE_OS_EVENT = NV_IOCTL_BASE + 7
NV_ESC_STATUS_CODE = NV_IOCTL_BASE + 9
NV_ESC_CHECK_VERSION_STR = NV_IOCTL_BASE + 10
NV_ESC_IOCTL_XFER_CMD = NV_IOCTL_BASE + 11
NV_ESC_ATTACH_GPUS_TO_FD = NV_IOCTL_BASE + 12
NV_ESC_QUERY_DEVICE_INTR = NV_IOCTL_BASE + 13
NV_ESC_SYS_PARAMS = NV_IOCTL_BASE + 14
NV_ESC_NUMA_INFO = NV_IOCTL_BASE + 15
NV_ESC_EXPORT_TO_DMABUF_FD = NV_IOCTL_BASE + 17
NV_ESC_WAIT_OPEN_COMPLETE = NV_IOCTL_BASE + 18

# src/nvidia/arch/nvalloc/unix/include/nv_escape.h
NV_ESC_RM_ALLOC_MEMORY = 0x27
NV_ESC_RM_ALLOC_OBJECT = 0x28
NV_ESC_RM_FREE = 0x29
NV_ESC_RM_CONTROL = 0x2A
NV_ESC_RM_ALLOC = 0x2B
NV_ESC_RM_DUP_OBJECT = 0x34
NV_ESC_RM_SHARE = 0x35
NV_ESC_RM_I2C_ACCESS = 0x39
NV_ESC_RM_IDLE_CHANNELS = 0x41
NV_ESC_RM_VID_HEAP_CONTROL = 0x4A
NV_ESC_RM_ACCESS_REGISTRY = 0x4D
NV_ESC_RM_MAP_MEMORY = 0x4E
NV_ESC_RM_UNMAP_MEMORY = 0x4F
NV_ESC_RM_GET_EVENT_DATA = 0x52
NV_ESC_RM_ALLOC_CONTEXT_DMA2 = 0x54
NV_ESC_RM_MAP_MEMORY_DMA = 0x57
NV_ESC_RM_UNMAP_MEMORY_DMA = 0x58
NV_ESC_RM_BIND_CONTEXT_DMA = 0x59
NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO = 0x5E

# The argument of escapes this module has no struct for: (C type, size);
# RM_MAP/UNMAP_MEMORY_DMA's (NVOS46/47) sizes are in the version table.
OTHER_ESCAPE_ARGS = {
    NV_ESC_RM_ALLOC_OBJECT: ("NVOS05_PARAMETERS", 20),
    NV_ESC_RM_SHARE: ("NVOS57_PARAMETERS", 24),
    NV_ESC_RM_I2C_ACCESS: ("NVOS_I2C_ACCESS_PARAMS", 32),
    NV_ESC_RM_IDLE_CHANNELS: ("NVOS30_PARAMETERS", 56),
    NV_ESC_RM_ACCESS_REGISTRY: ("NVOS38_PARAMETERS", 72),
    NV_ESC_RM_BIND_CONTEXT_DMA: ("NVOS49_PARAMETERS", 16),
    NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO: ("NVOS56_PARAMETERS", 40),
    NV_ESC_RM_GET_EVENT_DATA: ("NVOS41_PARAMETERS", 16),
}

# kernel-open/common/inc/nv-ioctl.h: the largest argument IOCTL_XFER_CMD takes
NV_ABSOLUTE_MAX_IOCTL_SIZE = 16384

# Device nodes (nv.c, nvidia-modprobe)
NV_MAJOR_DEVICE_NUMBER = 195
NV_MINOR_DEVICE_NUMBER_CONTROL_DEVICE = 255
NV_CTL_PATH = "/dev/nvidiactl"


def nv_gpu_path(minor):
    return f"/dev/nvidia{minor}"


# ---------------------------------------------------------------------------
# Status codes (src/common/sdk/nvidia/inc/nvstatuscodes.h)

NV_OK = 0x00000000
NV_ERR_GENERIC = 0x0000FFFF
NV_ERR_BUFFER_TOO_SMALL = 0x00000002
NV_ERR_GPU_UUID_NOT_FOUND = 0x00000012
NV_ERR_ILLEGAL_ACTION = 0x00000016
NV_ERR_IN_USE = 0x00000017
NV_ERR_INSERT_DUPLICATE_NAME = 0x00000019
NV_ERR_INSUFFICIENT_RESOURCES = 0x0000001A
NV_ERR_INSUFFICIENT_PERMISSIONS = 0x0000001B
NV_ERR_INVALID_ACCESS_TYPE = 0x0000001D
NV_ERR_INVALID_ADDRESS = 0x0000001E
NV_ERR_INVALID_ARGUMENT = 0x0000001F
NV_ERR_INVALID_BASE = 0x00000020
NV_ERR_INVALID_CHANNEL = 0x00000021
NV_ERR_INVALID_CLASS = 0x00000022
NV_ERR_INVALID_CLIENT = 0x00000023
NV_ERR_INVALID_COMMAND = 0x00000024
NV_ERR_INVALID_DATA = 0x00000025
NV_ERR_INVALID_DEVICE = 0x00000026
NV_ERR_INVALID_EVENT = 0x00000028
NV_ERR_INVALID_FLAGS = 0x00000029
NV_ERR_INVALID_FUNCTION = 0x0000002A
NV_ERR_INVALID_INDEX = 0x0000002C
NV_ERR_INVALID_LIMIT = 0x0000002E
NV_ERR_INVALID_OBJECT = 0x00000031
NV_ERR_INVALID_OBJECT_HANDLE = 0x00000033
NV_ERR_INVALID_OBJECT_NEW = 0x00000034
NV_ERR_INVALID_OBJECT_OLD = 0x00000035
NV_ERR_INVALID_OBJECT_PARENT = 0x00000036
NV_ERR_INVALID_OFFSET = 0x00000037
NV_ERR_INVALID_OPERATION = 0x00000038
NV_ERR_INVALID_OWNER = 0x00000039
NV_ERR_INVALID_PARAM_STRUCT = 0x0000003A
NV_ERR_INVALID_PARAMETER = 0x0000003B
NV_ERR_INVALID_POINTER = 0x0000003D
NV_ERR_INVALID_REQUEST = 0x0000003F
NV_ERR_INVALID_STATE = 0x00000040
NV_ERR_INVALID_STRING_LENGTH = 0x00000041
NV_ERR_NO_MEMORY = 0x00000051
NV_ERR_NOT_SUPPORTED = 0x00000056
NV_ERR_OBJECT_NOT_FOUND = 0x00000057
NV_ERR_OPERATING_SYSTEM = 0x00000059
NV_ERR_OUT_OF_RANGE = 0x0000005B
NV_ERR_OTHER_DEVICE_FOUND = 0x0000005A
NV_ERR_STATE_IN_USE = 0x00000063
NV_ERR_UVM_ADDRESS_IN_USE = 0x00000068
NV_ERR_RESOURCE_LOST = 0x0000006E
NV_ERR_TIMEOUT = 0x00000065

NV_STATUS = {name: value for name, value in globals().items()
             if name == "NV_OK" or name.startswith("NV_ERR_")}
NV_STATUS_NAMES = {v: k for k, v in NV_STATUS.items()}


def status_name(status):
    """'NV_ERR_NO_MEMORY (0x51)' for a known status, '0x...' for another."""
    name = NV_STATUS_NAMES.get(status)
    return f"{name} ({status:#x})" if name else f"NV status {status:#x}"


# ---------------------------------------------------------------------------
# Classes (src/common/sdk/nvidia/inc/class/cl*.h)

NV01_ROOT = 0x0
NV01_ROOT_NON_PRIV = 0x1
NV01_ROOT_CLIENT = 0x41
NV01_DEVICE_0 = 0x80
NV20_SUBDEVICE_0 = 0x2080
NV01_MEMORY_SYSTEM = 0x3E
NV01_CONTEXT_DMA = 0x02
NV01_EVENT = 0x05
NV01_EVENT_KERNEL_CALLBACK = 0x78
NV01_EVENT_OS_EVENT = 0x79
NV01_EVENT_KERNEL_CALLBACK_EX = 0x7E
NV01_MEMORY_LOCAL_USER = 0x40
NV01_MEMORY_VIRTUAL = 0x70
NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x71
NV01_MEMORY_LOCAL_PRIVILEGED = 0x3F
NV01_MEMORY_HW_RESOURCES = 0xB1
NVA084_KERNEL_HOST_VGPU_DEVICE = 0xA084
NV_EVENT_BUFFER = 0x90CD
NV01_MEMORY_LOCAL_PHYSICAL = 0xC2
NV50_MEMORY_VIRTUAL = 0x50A0
FERMI_VASPACE_A = 0x90F1
FERMI_CONTEXT_SHARE_A = 0x9067
HOPPER_DMA_COPY_A = 0xC8B5
KEPLER_CHANNEL_GROUP_A = 0xA06C
VOLTA_CHANNEL_GPFIFO_A = 0xC36F
HOPPER_CHANNEL_GPFIFO_A = 0xC86F
VOLTA_USERMODE_A = 0xC361
HOPPER_USERMODE_A = 0xC661
ACCESS_COUNTER_NOTIFY_BUFFER = 0xC365
HOPPER_COMPUTE_A = 0xCBC0
MPS_COMPUTE = 0x900E

# cl2080_notification.h
NV2080_ENGINE_TYPE_GR0 = 0x1

# clc361.h: the usermode region and its doorbell
NVC361_NV_USERMODE__SIZE = 0x10000
NVC361_NOTIFY_CHANNEL_PENDING = 0x90

# clc36f.h Nvc36fControl (USERD, Volta and later)
NVC36F_USERD_GP_GET = 0x88
NVC36F_USERD_GP_PUT = 0x8C
NVC36F_USERD_SIZE = 0x200

# nvlimits.h
NV_MAX_SUBDEVICES = 8

# ---------------------------------------------------------------------------
# Controls (src/common/sdk/nvidia/inc/ctrl/...)

NV2080_CTRL_CMD_GPU_GET_PIDS = 0x2080018D
NV2080_CTRL_CMD_GPU_GET_PID_INFO = 0x2080018E
NV2080_CTRL_CMD_FB_GET_INFO = 0x20801301
NV2080_CTRL_CMD_FB_GET_INFO_V2 = 0x20801303
NV2080_CTRL_CMD_FB_GET_NUMA_INFO = 0x20801351
NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06C0101
NVA06C_CTRL_CMD_SET_TIMESLICE = 0xA06C0103
NVA06C_CTRL_CMD_GET_TIMESLICE = 0xA06C0104
NVA06C_CTRL_CMD_PREEMPT = 0xA06C0105
NVA06F_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06F0103
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108

# ctrl2080fb.h: FB info indices (values are in KiB)
NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE = 0x07
NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE = 0x08
NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE = 0x09
NV2080_CTRL_FB_INFO_INDEX_MAPPABLE_HEAP_SIZE = 0x0A
NV2080_CTRL_FB_INFO_INDEX_FB_TAX_SIZE_KB = 0x10
NV2080_CTRL_FB_INFO_INDEX_LARGEST_FREE_REGION_SIZE_KB = 0x12
NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE = 0x16
NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE = 0x20

# ctrl2080gpu.h
NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT = 950
NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_CLASS = 0
NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT = 200
NV2080_CTRL_GPU_PID_INFO_INDEX_VIDEO_MEMORY_USAGE = 0

# ---------------------------------------------------------------------------
# Field values (nvos.h)

NVOS32_FUNCTION_ALLOC_SIZE = 2
NVOS32_FUNCTION_FREE = 3
NVOS32_FUNCTION_INFO = 5
NVOS32_FUNCTION_ALLOC_TILED_PITCH_HEIGHT = 6
NVOS32_FUNCTION_ALLOC_SIZE_RANGE = 14
NVOS32_FUNCTION_HW_ALLOC = 19
NVOS32_FUNCTION_HW_FREE = 20
NVOS32_FUNCTION_ALLOC_OS_DESCRIPTOR = 27

NVOS32_TYPE_IMAGE = 0
NVOS32_ALLOC_FLAGS_USE_BEGIN_END = 0x00020000
NVOS32_ALLOC_FLAGS_VIRTUAL = 0x00080000
NVOS32_ALLOC_FLAGS_LAZY = 0x00000400
NVOS32_ALLOC_FLAGS_EXTERNALLY_MANAGED = 0x00400000
NVOS32_ALLOC_FLAGS_SPARSE = 0x04000000
NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED = 0x00004000
NVOS32_ALLOC_FLAGS_FIXED_ADDRESS_ALLOCATE = 0x00000010
NVOS32_FREE_FLAGS_MEMORY_HANDLE_PROVIDED = 0x00000001

# NVOS32_ATTR_PAGE_SIZE 24:23, NVOS32_ATTR_LOCATION 26:25
NVOS32_ATTR_PAGE_SIZE_SHIFT = 23
NVOS32_ATTR_PAGE_SIZE_DEFAULT = 0
NVOS32_ATTR_PAGE_SIZE_4KB = 1
NVOS32_ATTR_PAGE_SIZE_BIG = 2
NVOS32_ATTR_PAGE_SIZE_HUGE = 3
NVOS32_ATTR_LOCATION_SHIFT = 25
NVOS32_ATTR_LOCATION_VIDMEM = 0
NVOS32_ATTR_LOCATION_PCI = 1
NVOS32_ATTR_LOCATION_ANY = 3
# NVOS32_ATTR2_PAGE_SIZE_HUGE 21:20
NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT = 20
NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB = 1
# NVOS32_ATTR2_MEMORY_PROTECTION 26:25 (CC and APM)
NVOS32_ATTR2_MEMORY_PROTECTION_SHIFT = 25
NVOS32_ATTR2_MEMORY_PROTECTION_PROTECTED = 1
NVOS32_ATTR2_MEMORY_PROTECTION_UNPROTECTED = 2
NVOS32_ALLOC_FLAGS_PROTECTED = 0x01000000


def nvos32_attr(location=NVOS32_ATTR_LOCATION_VIDMEM,
                page_size=NVOS32_ATTR_PAGE_SIZE_DEFAULT):
    return ((location << NVOS32_ATTR_LOCATION_SHIFT)
            | (page_size << NVOS32_ATTR_PAGE_SIZE_SHIFT))


# NVOS46_FLAGS_DMA_OFFSET_FIXED 15:15
NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT = 15
NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE = 0x00000001

# nvos.h: FERMI_VASPACE_A, the device's vaMode, FERMI_CONTEXT_SHARE_A
NV_VASPACE_ALLOCATION_INDEX_GPU_NEW = 0x00
NV_VASPACE_ALLOCATION_INDEX_GPU_HOST = 0x01
NV_VASPACE_ALLOCATION_INDEX_GPU_DEVICE = 0x03
NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 0x8
NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 0x40
NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES = 0x0
NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE = 0x1
NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES = 0x2
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC = 0x0
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 0x1
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED = 0x2

NVOS54_FLAGS_IRQL_RAISED = 0x00000001
NVOS54_FLAGS_LOCK_BYPASS = 0x00000002

# kernel-open/common/inc/nv-ioctl.h
NV_RM_API_VERSION_STRING_LENGTH = 64
NV_RM_API_VERSION_CMD_STRICT = 0
NV_RM_API_VERSION_CMD_RELAXED = ord("1")
NV_RM_API_VERSION_CMD_QUERY = ord("2")
NV_RM_API_VERSION_REPLY_UNRECOGNIZED = 0
NV_RM_API_VERSION_REPLY_RECOGNIZED = 1

# ---------------------------------------------------------------------------
# Layouts.  NvHandle/NvU32/NvV32 are u32; NvP64 and NV_ALIGN_BYTES(8) fields
# are u64, 8-aligned, which is ctypes' natural x86_64 alignment too.

NvHandle = c_uint32
NvP64 = c_uint64
NvBool = c_uint8


class _Struct(ctypes.Structure):
    """A C struct; ``_c_name_`` names the C type when it differs, ``_since_``
    the first (major, minor) driver release that has it."""

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}"
                           for n, *_ in self._fields_ if not n.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _make_struct(c_name, fields, tag):
    return type(f"{c_name}_{tag}", (_Struct,),
                {"_fields_": fields, "_c_name_": c_name})


# --- kernel-open/common/inc/nv-ioctl.h

class nv_pci_info_t(_Struct):
    _fields_ = [("domain", c_uint32), ("bus", c_uint8), ("slot", c_uint8),
                ("function", c_uint8), ("vendor_id", c_uint16),
                ("device_id", c_uint16)]


class nv_ioctl_xfer_t(_Struct):
    _fields_ = [("cmd", c_uint32), ("size", c_uint32), ("ptr", NvP64)]


class nv_ioctl_card_info_t(_Struct):
    _fields_ = [("valid", NvBool), ("pci_info", nv_pci_info_t),
                ("gpu_id", c_uint32), ("interrupt_line", c_uint16),
                ("reg_address", c_uint64), ("reg_size", c_uint64),
                ("fb_address", c_uint64), ("fb_size", c_uint64),
                ("minor_number", c_uint32), ("dev_name", c_uint8 * 10)]


class nv_ioctl_status_code_t(_Struct):
    _fields_ = [("domain", c_uint32), ("bus", c_uint8), ("slot", c_uint8),
                ("status", c_uint32)]


class nv_ioctl_rm_api_version_t(_Struct):
    _fields_ = [("cmd", c_uint32), ("reply", c_uint32),
                ("versionString", c_char * NV_RM_API_VERSION_STRING_LENGTH)]


class nv_ioctl_sys_params_t(_Struct):
    _fields_ = [("memblock_size", c_uint64)]


# nv-ioctl-numa.h: NUMA_INFO (GPU files)
NV_IOCTL_NUMA_INFO_MAX_OFFLINE_ADDRESSES = 64
NV_IOCTL_NUMA_STATUS_DISABLED = 0


class nv_offline_addresses_t(_Struct):
    _fields_ = [("addresses", c_uint64 * NV_IOCTL_NUMA_INFO_MAX_OFFLINE_ADDRESSES),
                ("numEntries", c_uint32)]


class nv_ioctl_numa_info_t(_Struct):
    _fields_ = [("nid", c_int32), ("status", c_int32),
                ("memblock_size", c_uint64), ("numa_mem_addr", c_uint64),
                ("numa_mem_size", c_uint64), ("use_auto_online", c_uint8),
                ("offline_addresses", nv_offline_addresses_t)]


class nv_ioctl_register_fd_t(_Struct):
    _fields_ = [("ctl_fd", c_int32)]


class nv_ioctl_wait_open_complete_t(_Struct):
    _since_ = (550, 0)      # NV_ESC_WAIT_OPEN_COMPLETE is new in 550
    _fields_ = [("rc", c_int32), ("adapterStatus", c_uint32)]


class nv_ioctl_alloc_os_event_t(_Struct):
    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle), ("fd", c_uint32),
                ("Status", c_uint32)]


# --- src/common/sdk/nvidia/inc/nvos.h

class NVOS00_PARAMETERS(_Struct):
    _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                ("hObjectOld", NvHandle), ("status", c_uint32)]


class NVOS02_PARAMETERS(_Struct):
    _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                ("hObjectNew", NvHandle), ("hClass", c_uint32),
                ("flags", c_uint32), ("pMemory", NvP64), ("limit", c_uint64),
                ("status", c_uint32)]


class nv_ioctl_nvos02_parameters_with_fd(_Struct):
    _fields_ = [("params", NVOS02_PARAMETERS), ("fd", c_int32)]


# RM_ALLOC_CONTEXT_DMA2: RM allocates hClass, whatever it is, in client
# hObjectParent under hMemory's parent, with the fields as its
# NV_CONTEXT_DMA_ALLOCATION_PARAMS (RmDeprecatedAllocContextDma)
class NVOS39_PARAMETERS(_Struct):
    _fields_ = [("hObjectParent", NvHandle), ("hSubDevice", NvHandle),
                ("hObjectNew", NvHandle), ("hClass", c_uint32),
                ("flags", c_uint32), ("selector", c_uint32),
                ("hMemory", NvHandle), ("offset", c_uint64),
                ("limit", c_uint64), ("status", c_uint32)]


# class/cl0002.h: NV01_CONTEXT_DMA's params, a window [offset, offset +
# limit] of hMemory
# nvos.h: NVOS32_DESCRIPTOR_TYPE_*
NVOS32_DESCRIPTOR_TYPE_VIRTUAL_ADDRESS = 0
NVOS32_DESCRIPTOR_TYPE_OS_PAGE_ARRAY = 1
NVOS32_DESCRIPTOR_TYPE_OS_IO_MEMORY = 2


class NV_OS_DESC_MEMORY_ALLOCATION_PARAMS(_Struct):
    """NV01_MEMORY_SYSTEM_OS_DESCRIPTOR's params (nvos.h)."""
    _fields_ = [("type", c_uint32), ("flags", c_uint32), ("attr", c_uint32),
                ("attr2", c_uint32), ("descriptor", NvP64), ("limit", c_uint64),
                ("descriptorType", c_uint32), ("tag", c_uint32)]


class NV_CONTEXT_DMA_ALLOCATION_PARAMS(_Struct):
    _fields_ = [("hSubDevice", NvHandle), ("flags", c_uint32),
                ("hMemory", NvHandle), ("offset", c_uint64),
                ("limit", c_uint64)]


# class/cl0005.h: an event object's params; its notifier is hSrcResource of
# client hParentClient (0: the allocating one)
class NV0005_ALLOC_PARAMETERS(_Struct):
    _fields_ = [("hParentClient", NvHandle), ("hSrcResource", NvHandle),
                ("hClass", c_uint32), ("notifyIndex", c_uint32),
                ("data", c_uint64)]


# NVOS03 flags of a context DMA: ACCESS 1:0, HASH_TABLE 29:29 (whose
# ENABLE, 0, RM no longer supports)
NVOS03_FLAGS_ACCESS_READ_ONLY = 0x1
NVOS03_FLAGS_HASH_TABLE_DISABLE = 0x1
NVOS03_FLAGS_HASH_TABLE_SHIFT = 29


class NVOS21_PARAMETERS(_Struct):
    _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                ("hObjectNew", NvHandle), ("hClass", c_uint32),
                ("pAllocParms", NvP64), ("paramsSize", c_uint32),
                ("status", c_uint32)]


class NVOS64_PARAMETERS(_Struct):
    _fields_ = [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                ("hObjectNew", NvHandle), ("hClass", c_uint32),
                ("pAllocParms", NvP64), ("pRightsRequested", NvP64),
                ("paramsSize", c_uint32), ("flags", c_uint32),
                ("status", c_uint32)]


# NVOS32 (RM_VID_HEAP_CONTROL) is 184 bytes in every version, but 550 added
# numaNode to data.AllocSize, so it comes from for_version() too.
_NVOS32_ALLOC_SIZE_FIELDS = [
    ("owner", c_uint32), ("hMemory", NvHandle), ("type", c_uint32),
    ("flags", c_uint32), ("attr", c_uint32), ("format", c_uint32),
    ("comprCovg", c_uint32), ("zcullCovg", c_uint32),
    ("partitionStride", c_uint32), ("width", c_uint32), ("height", c_uint32),
    ("size", c_uint64), ("alignment", c_uint64), ("offset", c_uint64),
    ("limit", c_uint64), ("address", NvP64), ("rangeBegin", c_uint64),
    ("rangeEnd", c_uint64), ("attr2", c_uint32), ("ctagOffset", c_uint32)]


class _NVOS32Free(_Struct):
    _fields_ = [("owner", c_uint32), ("hMemory", NvHandle), ("flags", c_uint32)]


class _NVOS32HwFree(_Struct):
    _fields_ = [("hResourceHandle", NvHandle), ("flags", c_uint32)]


class _NVOS32Info(_Struct):
    _fields_ = [("attr", c_uint32), ("offset", c_uint64), ("size", c_uint64),
                ("base", c_uint64)]


class _NVOS32AllocOsDesc(_Struct):
    _fields_ = [("hMemory", NvHandle), ("type", c_uint32), ("flags", c_uint32),
                ("attr", c_uint32), ("attr2", c_uint32), ("descriptor", NvP64),
                ("limit", c_uint64), ("descriptorType", c_uint32)]


# NVOS32_ATTR_COHERENCY 31:29 and NVOS02_FLAGS_COHERENCY 15:12 (nvos.h),
# whose values agree
NVOS32_ATTR_COHERENCY_SHIFT = 29
NVOS02_FLAGS_COHERENCY_SHIFT = 12
NVOS32_ATTR_COHERENCY_UNCACHED = 0
NVOS32_ATTR_COHERENCY_CACHED = 1
NVOS32_ATTR_COHERENCY_WRITE_COMBINE = 2
NVOS32_ATTR_COHERENCY_WRITE_BACK = 5


def _nvos32(alloc_size_fields, tag):
    alloc_size = type(f"_NVOS32AllocSize_{tag}", (_Struct,),
                      {"_fields_": alloc_size_fields})
    data = type(f"_NVOS32Data_{tag}", (ctypes.Union,), {"_fields_": [
        ("AllocSize", alloc_size), ("Free", _NVOS32Free),
        ("HwFree", _NVOS32HwFree), ("Info", _NVOS32Info),
        ("AllocOsDesc", _NVOS32AllocOsDesc), ("_raw", c_uint64 * 18)]})
    return _make_struct("NVOS32_PARAMETERS", [
        ("hRoot", NvHandle), ("hObjectParent", NvHandle),
        ("function", c_uint32), ("hVASpace", NvHandle),
        ("ivcHeapNumber", ctypes.c_int16), ("status", c_uint32),
        ("total", c_uint64), ("free", c_uint64), ("data", data)], tag)


class NVOS33_PARAMETERS(_Struct):
    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle),
                ("hMemory", NvHandle), ("offset", c_uint64),
                ("length", c_uint64), ("pLinearAddress", NvP64),
                ("status", c_uint32), ("flags", c_uint32)]


class nv_ioctl_nvos33_parameters_with_fd(_Struct):
    _fields_ = [("params", NVOS33_PARAMETERS), ("fd", c_int32)]


class NVOS34_PARAMETERS(_Struct):
    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle),
                ("hMemory", NvHandle), ("pLinearAddress", NvP64),
                ("status", c_uint32), ("flags", c_uint32)]


class NVOS05_PARAMETERS(_Struct):
    """RM_ALLOC_OBJECT: an RM_ALLOC without params."""
    _fields_ = [(n, NvHandle) for n in
                ("hRoot", "hObjectParent", "hObjectNew", "hClass")] + \
        [("status", c_uint32)]


class NVOS49_PARAMETERS(_Struct):
    """RM_BIND_CONTEXT_DMA: NV0002_CTRL_CMD_BIND_CONTEXTDMA's old form."""
    _fields_ = [("hClient", NvHandle), ("hChannel", NvHandle),
                ("hCtxDma", NvHandle), ("status", c_uint32)]


NV0002_CTRL_CMD_BIND_CONTEXTDMA = 0x20102


class NV0002_CTRL_BIND_CONTEXTDMA_PARAMS(_Struct):
    _fields_ = [("hChannel", NvHandle)]


class NVOS56_PARAMETERS(_Struct):
    """RM_UPDATE_DEVICE_MAPPING_INFO: a CPU mapping's new address."""
    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle),
                ("hMemory", NvHandle), ("pOldCpuAddress", NvP64),
                ("pNewCpuAddress", NvP64), ("status", c_uint32)]


class NVOS54_PARAMETERS(_Struct):
    _fields_ = [("hClient", NvHandle), ("hObject", NvHandle),
                ("cmd", c_uint32), ("flags", c_uint32), ("params", NvP64),
                ("paramsSize", c_uint32), ("status", c_uint32)]


class NVOS55_PARAMETERS(_Struct):
    _fields_ = [("hClient", NvHandle), ("hParent", NvHandle),
                ("hObject", NvHandle), ("hClientSrc", NvHandle),
                ("hObjectSrc", NvHandle), ("flags", c_uint32),
                ("status", c_uint32)]


# rs_access.h: a share policy, in RM_SHARE's NVOS57 and in
# NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY's params
class RS_SHARE_POLICY(_Struct):
    _fields_ = [("target", c_uint32), ("accessMask", c_uint32),
                ("type", c_uint16), ("action", c_uint8)]


class NVOS57_PARAMETERS(_Struct):
    _fields_ = [("hClient", NvHandle), ("hObject", NvHandle),
                ("sharePolicy", RS_SHARE_POLICY), ("status", c_uint32)]


class NVOS30_PARAMETERS(_Struct):
    """NV_ESC_RM_IDLE_CHANNELS."""
    _fields_ = [("hClient", NvHandle), ("hDevice", NvHandle),
                ("hChannel", NvHandle), ("numChannels", c_uint32),
                ("phClients", NvP64), ("phDevices", NvP64),
                ("phChannels", NvP64), ("flags", c_uint32),
                ("timeout", c_uint32), ("status", c_uint32)]


# NVOS30_FLAGS_CHANNEL: bits 7:4 of flags
NVOS30_FLAGS_CHANNEL_LIST = 0
NVOS30_FLAGS_CHANNEL_SINGLE = 1

NV0000_CTRL_CMD_IDLE_CHANNELS = 0x283
NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS = 0x801714
NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS_MAX_CHANNELS = 4096


class NV0000_CTRL_GPU_IDLE_CHANNELS_PARAMS(_Struct):
    _fields_ = [("hDevice", NvHandle), ("hChannel", NvHandle),
                ("numChannels", c_uint32), ("phClients", NvP64),
                ("phDevices", NvP64), ("phChannels", NvP64),
                ("flags", c_uint32), ("timeout", c_uint32)]


class NV0080_CTRL_FIFO_IDLE_CHANNELS_PARAMS(_Struct):
    _fields_ = [("numChannels", c_uint32),
                ("hChannels",
                 NvHandle * NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS_MAX_CHANNELS),
                ("flags", c_uint32), ("timeout", c_uint32)]


class NVOS38_PARAMETERS(_Struct):
    """NV_ESC_RM_ACCESS_REGISTRY."""
    _fields_ = [("hClient", NvHandle), ("hObject", NvHandle),
                ("AccessType", c_uint32), ("DevNodeLength", c_uint32),
                ("pDevNode", NvP64), ("ParmStrLength", c_uint32),
                ("pParmStr", NvP64), ("BinaryDataLength", c_uint32),
                ("pBinaryData", NvP64), ("Data", c_uint32),
                ("Entry", c_uint32), ("status", c_uint32)]


NVOS38_ACCESS_TYPE_READ_DWORD = 1
NVOS38_ACCESS_TYPE_WRITE_DWORD = 2
NVOS38_ACCESS_TYPE_READ_BINARY = 6
NVOS38_ACCESS_TYPE_WRITE_BINARY = 7
NVOS38_MAX_REGISTRY_STRING_LENGTH = 256
NVOS38_MAX_REGISTRY_BINARY_LENGTH = 256


RS_SHARE_TYPE_NONE = 0
RS_SHARE_TYPE_ALL = 1
RS_SHARE_TYPE_OS_SECURITY_TOKEN = 2
RS_SHARE_TYPE_CLIENT = 3
RS_SHARE_TYPE_PID = 4
RS_SHARE_ACTION_FLAG_REVOKE = 1 << 0
RS_SHARE_ACTION_FLAG_REQUIRE = 1 << 1
RS_SHARE_ACTION_FLAG_COMPOSE = 1 << 2
RS_ACCESS_DUP_OBJECT = 0
NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY = 0xd04


# ctrl0000unix.h: objects exported to a control file by fd and imported from
# it (os.c, rmobjexportimport.c); the same from 535 to 580
class _NV0000_RM_OBJECT(_Struct):
    _fields_ = [("hDevice", NvHandle), ("hParent", NvHandle),
                ("hObject", NvHandle)]


class _NV0000_EXPORT_OBJECT_DATA(ctypes.Union):
    _fields_ = [("rmObject", _NV0000_RM_OBJECT)]


class NV0000_CTRL_OS_UNIX_EXPORT_OBJECT(_Struct):
    _fields_ = [("type", c_uint32), ("data", _NV0000_EXPORT_OBJECT_DATA)]


class NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_PARAMS(_Struct):
    _fields_ = [("object", NV0000_CTRL_OS_UNIX_EXPORT_OBJECT),
                ("fd", ctypes.c_int32), ("flags", c_uint32)]


class NV0000_CTRL_OS_UNIX_IMPORT_OBJECT_FROM_FD_PARAMS(_Struct):
    _fields_ = [("fd", ctypes.c_int32),
                ("object", NV0000_CTRL_OS_UNIX_EXPORT_OBJECT)]


NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE = 64
NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_MAX_OBJECTS = 512
NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS = 128


class NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_PARAMS(_Struct):
    _fields_ = [("fd", ctypes.c_int32), ("hDevice", NvHandle),
                ("maxObjects", c_uint16),
                ("metadata", ctypes.c_uint8
                 * NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE),
                ("objects", NvHandle
                 * NV0000_CTRL_OS_UNIX_EXPORT_OBJECTS_TO_FD_MAX_OBJECTS),
                ("numObjects", c_uint16), ("index", c_uint16)]


class NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_FROM_FD_PARAMS(_Struct):
    _fields_ = [("fd", ctypes.c_int32), ("hParent", NvHandle),
                ("objects", NvHandle
                 * NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS),
                ("objectTypes", ctypes.c_uint8
                 * NV0000_CTRL_OS_UNIX_IMPORT_OBJECTS_TO_FD_MAX_OBJECTS),
                ("numObjects", c_uint16), ("index", c_uint16)]


NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD = 0x3d05
NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD = 0x3d06
NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECTS_TO_FD = 0x3d0b
NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECTS_FROM_FD = 0x3d0c
NV0000_CTRL_CMD_OS_UNIX_GET_EXPORT_OBJECT_INFO = 0x3d08
NV_U32_MAX = 0xFFFFFFFF
NV_MAX_DEVICES = 32         # nvlimits.h: an object under no device

# NV0000_CTRL_OS_UNIX_GET_EXPORT_OBJECT_INFO_PARAMS: what an export fd's
# table was made with; 545 added gpuInstanceId (the row's export_gpu_instance)
_EXPORT_INFO_HEAD = [("fd", ctypes.c_int32), ("deviceInstance", c_uint32)]
_EXPORT_INFO_TAIL = [("maxObjects", c_uint16),
                     ("metadata", ctypes.c_uint8
                      * NV0000_OS_UNIX_EXPORT_OBJECT_FD_BUFFER_SIZE)]
NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM = 1
NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_NONE = 0
NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_VIDMEM = 1
NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_TYPE_SYSMEM = 2


# The alloc params of NV01_MEMORY_SYSTEM / NV01_MEMORY_LOCAL_USER; 545 added
# numaNode (120 -> 128 bytes), so the class comes from for_version().
_MEMORY_ALLOCATION_FIELDS = [
    ("owner", c_uint32), ("type", c_uint32), ("flags", c_uint32),
    ("width", c_uint32), ("height", c_uint32), ("pitch", c_int32),
    ("attr", c_uint32), ("attr2", c_uint32), ("format", c_uint32),
    ("comprCovg", c_uint32), ("zcullCovg", c_uint32), ("rangeLo", c_uint64),
    ("rangeHi", c_uint64), ("size", c_uint64), ("alignment", c_uint64),
    ("offset", c_uint64), ("limit", c_uint64), ("address", NvP64),
    ("ctagOffset", c_uint32), ("hVASpace", NvHandle),
    ("internalflags", c_uint32), ("tag", c_uint32)]

# --- class/cl0080.h, class/cl2080.h


class NV0080_ALLOC_PARAMETERS(_Struct):
    _fields_ = [("deviceId", c_uint32), ("hClientShare", NvHandle),
                ("hTargetClient", NvHandle), ("hTargetDevice", NvHandle),
                ("flags", c_uint32), ("vaSpaceSize", c_uint64),
                ("vaStartInternal", c_uint64), ("vaLimitInternal", c_uint64),
                ("vaMode", c_uint32)]


class NV2080_ALLOC_PARAMETERS(_Struct):
    _fields_ = [("subDeviceId", c_uint32)]


# --- nvos.h: VA spaces and context shares

# NV_VASPACE_ALLOCATION_PARAMETERS: 580 added pasid (48 -> 56 bytes).
_VASPACE_ALLOCATION_FIELDS = [
    ("index", c_uint32), ("flags", c_uint32), ("vaSize", c_uint64),
    ("vaStartInternal", c_uint64), ("vaLimitInternal", c_uint64),
    ("bigPageSize", c_uint32), ("vaBase", c_uint64)]


class NV_CTXSHARE_ALLOCATION_PARAMETERS(_Struct):
    _fields_ = [("hVASpace", NvHandle), ("flags", c_uint32),
                ("subctxId", c_uint32)]


# NVOS46 (RM_MAP_MEMORY_DMA): 580 added flags2 and kindOverride (56 -> 64);
# NVOS47 (RM_UNMAP_MEMORY_DMA): 550 added size (40 -> 48).
_NVOS46_HEAD = [("hClient", NvHandle), ("hDevice", NvHandle),
                ("hDma", NvHandle), ("hMemory", NvHandle),
                ("offset", c_uint64), ("length", c_uint64),
                ("flags", c_uint32)]
_NVOS47_HEAD = [("hClient", NvHandle), ("hDevice", NvHandle),
                ("hDma", NvHandle), ("hMemory", NvHandle),
                ("flags", c_uint32), ("dmaOffset", c_uint64)]


# --- nvos.h: usermode and graphics/compute object params

class NV_HOPPER_USERMODE_A_PARAMS(_Struct):
    _fields_ = [("bBar1Mapping", NvBool), ("bPriv", NvBool)]


class NV_GR_ALLOCATION_PARAMETERS(_Struct):
    _fields_ = [("version", c_uint32), ("flags", c_uint32), ("size", c_uint32),
                ("caps", c_uint32)]


# --- ctrl/ctrl2080/ctrl2080fb.h

class NV2080_CTRL_FB_INFO(_Struct):
    _fields_ = [("index", c_uint32), ("data", c_uint32)]


class NV2080_CTRL_FB_GET_INFO_PARAMS(_Struct):
    _fields_ = [("fbInfoListSize", c_uint32), ("fbInfoList", NvP64)]


NV2080_CTRL_FB_NUMA_INFO_MAX_OFFLINE_ADDRESSES = 64


class NV2080_CTRL_FB_GET_NUMA_INFO_PARAMS(_Struct):
    _fields_ = [("numaNodeId", c_int32), ("numaMemAddr", c_uint64),
                ("numaMemSize", c_uint64),
                ("numaOfflineAddressesCount", c_uint32),
                ("numaOfflineAddresses",
                 c_uint64 * NV2080_CTRL_FB_NUMA_INFO_MAX_OFFLINE_ADDRESSES)]


# --- ctrl/ctrl0041.h: a memory object's surface information (list by
# pointer, copied by embedded_param_copy.c); PHYS_SIZE_LO/HI from 580

NV0041_CTRL_CMD_GET_SURFACE_INFO = 0x410110
# ctrl0041.h, 550 on: where a Memory's byte lies (RMCTRL_FLAGS_PRIVILEGED
# from 580); ctrl0000client.h: whether two handles name one memory
NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR = 0x410103
NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_VIDMEM = 0
NV0041_CTRL_CMD_GET_SURFACE_PHYS_ATTR_APERTURE_SYSMEM = 1
NV0000_CTRL_CMD_CLIENT_OBJECTS_ARE_DUPLICATES = 0xD07
NV0041_CTRL_SURFACE_INFO_INDEX_ATTRS = 1
NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_LO = 2
NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE_HI = 3
NV0041_CTRL_SURFACE_INFO_INDEX_COMPR_COVERAGE = 5
NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_SIZE = 7
NV0041_CTRL_SURFACE_INFO_INDEX_PHYS_ATTR = 8
NV0041_CTRL_SURFACE_INFO_INDEX_ADDR_SPACE_TYPE = 9
NV0041_CTRL_SURFACE_INFO_PHYS_SIZE_SCALE_FACTOR = 0x1000
NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_SYSMEM = 1
NV0000_CTRL_CMD_CLIENT_GET_ADDR_SPACE_TYPE_VIDMEM = 2


class NV0041_CTRL_SURFACE_INFO(_Struct):
    _fields_ = [("index", c_uint32), ("data", c_uint32)]


class NV0041_CTRL_GET_SURFACE_INFO_PARAMS(_Struct):
    _fields_ = [("surfaceInfoListSize", c_uint32), ("surfaceInfoList", NvP64)]


# --- ctrl/ctrl2080/ctrl2080gpu.h

class NV2080_CTRL_GPU_GET_PIDS_PARAMS(_Struct):
    _fields_ = [("idType", c_uint32), ("id", c_uint32),
                ("pidTblCount", c_uint32),
                ("pidTbl", c_uint32 * NV2080_CTRL_GPU_GET_PIDS_MAX_COUNT)]


class NV2080_CTRL_GPU_PID_INFO_VIDEO_MEMORY_USAGE_DATA(_Struct):
    _fields_ = [("memPrivate", c_uint64), ("memSharedOwned", c_uint64),
                ("memSharedDuped", c_uint64),
                ("protectedMemPrivate", c_uint64),
                ("protectedMemSharedOwned", c_uint64),
                ("protectedMemSharedDuped", c_uint64)]


class NV2080_CTRL_GPU_PID_INFO_DATA(ctypes.Union):
    _fields_ = [("vidMemUsage",
                 NV2080_CTRL_GPU_PID_INFO_VIDEO_MEMORY_USAGE_DATA)]


class NV2080_CTRL_SMC_SUBSCRIPTION_INFO(_Struct):
    _fields_ = [("computeInstanceId", c_uint32), ("gpuInstanceId", c_uint32)]


class NV2080_CTRL_GPU_PID_INFO(_Struct):
    _fields_ = [("pid", c_uint32), ("index", c_uint32), ("result", c_uint32),
                ("data", NV2080_CTRL_GPU_PID_INFO_DATA),
                ("smcSubscription", NV2080_CTRL_SMC_SUBSCRIPTION_INFO)]


class NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(_Struct):
    _fields_ = [("pidInfoListCount", c_uint32),
                ("pidInfoList",
                 NV2080_CTRL_GPU_PID_INFO * NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT)]


# --- nvos.h (TSG), alloc/alloc_channel.h, ctrl/ctrla06c.h, ctrl/ctrlc36f.h

class NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(_Struct):
    _fields_ = [("hObjectError", NvHandle), ("hObjectEccError", NvHandle),
                ("hVASpace", NvHandle), ("engineType", c_uint32),
                ("bIsCallingContextVgpuPlugin", NvBool)]


class NV_MEMORY_DESC_PARAMS(_Struct):
    _fields_ = [("base", c_uint64), ("size", c_uint64),
                ("addressSpace", c_uint32), ("cacheAttrib", c_uint32)]


_CHANNEL_ALLOC_FIELDS = [
    ("hObjectError", NvHandle), ("hObjectBuffer", NvHandle),
    ("gpFifoOffset", c_uint64), ("gpFifoEntries", c_uint32),
    ("flags", c_uint32), ("hContextShare", NvHandle), ("hVASpace", NvHandle),
    ("hUserdMemory", NvHandle * NV_MAX_SUBDEVICES),
    ("userdOffset", c_uint64 * NV_MAX_SUBDEVICES),
    ("engineType", c_uint32), ("cid", c_uint32), ("subDeviceId", c_uint32),
    ("hObjectEccError", NvHandle),
    ("instanceMem", NV_MEMORY_DESC_PARAMS),
    ("userdMem", NV_MEMORY_DESC_PARAMS),
    ("ramfcMem", NV_MEMORY_DESC_PARAMS),
    ("mthdbufMem", NV_MEMORY_DESC_PARAMS),
    ("hPhysChannelGroup", NvHandle), ("internalFlags", c_uint32),
    ("errorNotifierMem", NV_MEMORY_DESC_PARAMS),
    ("eccErrorNotifierMem", NV_MEMORY_DESC_PARAMS),
    ("ProcessID", c_uint32), ("SubProcessID", c_uint32),
    ("encryptIv", c_uint32 * 3), ("decryptIv", c_uint32 * 3),
    ("hmacNonce", c_uint32 * 8)]


# NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS is NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS
# (ctrla06f/ctrla06fgpfifo.h); 575 added bSkipEnable (2 -> 3 bytes).
_GPFIFO_SCHEDULE_FIELDS = [("bEnable", NvBool), ("bSkipSubmit", NvBool)]


class NVA06C_CTRL_TIMESLICE_PARAMS(_Struct):
    _fields_ = [("timesliceUs", c_uint64)]


class NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS(_Struct):
    _fields_ = [("workSubmitToken", c_uint32)]


# The stub's GPFIFO entry (docs/nvstub.md: a work item, not a pushbuffer
# pointer) and NVIDIA's 8-byte entry size.
class NvstubWorkItem(_Struct):
    _c_name_ = None     # the stub's own, not an NVIDIA type
    _fields_ = [("duration_us", c_uint32), ("reserved", c_uint32)]


NV_GPFIFO_ENTRY_SIZE = 8

# ---------------------------------------------------------------------------
# Per-driver-version table


@dataclass(frozen=True)
class _Row:
    since: tuple        # first (major, minor) this row applies to
    fb_info_max_list: int       # NV2080_CTRL_FB_INFO_MAX_LIST_SIZE
    fb_info_index_max: int      # NV2080_CTRL_FB_INFO_INDEX_MAX
    nvos46_size: int            # sizeof(NVOS46_PARAMETERS), RM_MAP_MEMORY_DMA
    nvos47_size: int            # sizeof(NVOS47_PARAMETERS), RM_UNMAP_MEMORY_DMA
    mem_alloc_numa_node: bool   # NV_MEMORY_ALLOCATION_PARAMS.numaNode (545)
    nvos32_numa_node: bool      # NVOS32 data.AllocSize.numaNode (550)
    channel_tpc_config_id: bool  # NV_CHANNEL_ALLOC_PARAMS.tpcConfigID (570)
    schedule_skip_enable: bool  # GPFIFO_SCHEDULE_PARAMS.bSkipEnable (575)
    export_gpu_instance: bool   # GET_EXPORT_OBJECT_INFO.gpuInstanceId (545)
    fb_get_info_v1_deprecated: bool  # FB_GET_INFO rerouted to V2 (550)
    device_check: str           # how NV01_DEVICE_0 recognises a GPU file


# Oldest first.  535 is the first release with NVOS21/64.paramsSize, which
# everything here assumes.  FB_GET_INFO (V1) left the subdevice's method
# table (generated/g_subdevice_nvoc.c) in 550 for the deprecated-control shim.
_ROWS = (
    _Row((535, 0), 0x36, 0x35, 56, 40, False, False, False, False, False, False, "rdev"),
    _Row((545, 0), 0x37, 0x36, 56, 40, True, False, False, False, True, False, "rdev"),
    _Row((550, 0), 0x37, 0x36, 56, 48, True, True, False, False, True, True, "fops"),
    _Row((560, 0), 0x39, 0x38, 56, 48, True, True, False, False, True, True, "fops"),
    _Row((570, 0), 0x39, 0x38, 56, 48, True, True, True, False, True, True, "fops"),
    _Row((575, 0), 0x39, 0x38, 56, 48, True, True, True, True, True, True, "fops"),
    _Row((580, 0), 0x80, 0x3B, 64, 48, True, True, True, True, True, True, "fops"),
)


@dataclass(frozen=True)
class DriverAbi:
    """The version-dependent part of the ABI, for one driver version."""
    version: str
    device_check: str
    fb_info_index_max: int
    nvos46_size: int
    nvos47_size: int
    # From 550 FB_GET_INFO (V1) is a deprecated control rerouted to V2
    # (rmapi_deprecated_control.c): paramsSize is not checked and the list
    # may hold at most V2's entries (NV_ERR_OUT_OF_RANGE).
    fb_get_info_v1_deprecated: bool
    NV_MEMORY_ALLOCATION_PARAMS: type
    NV2080_CTRL_FB_GET_INFO_V2_PARAMS: type
    NV_CHANNEL_ALLOC_PARAMS: type
    NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS: type
    NVOS32_PARAMETERS: type
    NVOS46_PARAMETERS: type
    NVOS47_PARAMETERS: type
    NV_VASPACE_ALLOCATION_PARAMETERS: type
    NV0000_CTRL_OS_UNIX_GET_EXPORT_OBJECT_INFO_PARAMS: type

    @property
    def mem_alloc_params_size(self):
        return ctypes.sizeof(self.NV_MEMORY_ALLOCATION_PARAMS)

    @property
    def fb_info_v2_size(self):
        return ctypes.sizeof(self.NV2080_CTRL_FB_GET_INFO_V2_PARAMS)

    @property
    def channel_alloc_params_size(self):
        return ctypes.sizeof(self.NV_CHANNEL_ALLOC_PARAMS)

    @property
    def fb_info_max_list(self):
        return len(self.NV2080_CTRL_FB_GET_INFO_V2_PARAMS().fbInfoList)

    @property
    def since_550(self):
        """The 550 changes: device fd check by f_op, device factory checks,
        FB_GET_INFO deprecated, WAIT_OPEN_COMPLETE."""
        return self.device_check == "fops"

    def structs(self):
        """Every struct class of this ABI: the fixed ones and this row's."""
        return fixed_structs(self.version) + [self.NV_MEMORY_ALLOCATION_PARAMS,
                                  self.NV2080_CTRL_FB_GET_INFO_V2_PARAMS,
                                  self.NV_CHANNEL_ALLOC_PARAMS,
                                  self.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS,
                                  self.NVOS32_PARAMETERS,
                                  self.NVOS46_PARAMETERS,
                                  self.NVOS47_PARAMETERS,
                                  self.NV_VASPACE_ALLOCATION_PARAMETERS,
                                  self.NV0000_CTRL_OS_UNIX_GET_EXPORT_OBJECT_INFO_PARAMS]


_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


def parse_version(version):
    m = _VERSION_RE.match(version.strip())
    if not m:
        raise ValueError(f"not an NVIDIA driver version: {version!r}")
    return tuple(int(x) for x in m.groups() if x is not None)


@cache
def _abi_for_row(row):
    tag = f"{row.since[0]}"
    mem = list(_MEMORY_ALLOCATION_FIELDS)
    if row.mem_alloc_numa_node:
        mem.append(("numaNode", c_int32))
    chan = list(_CHANNEL_ALLOC_FIELDS)
    if row.channel_tpc_config_id:
        chan.append(("tpcConfigID", c_uint32))
    fb_v2 = [("fbInfoListSize", c_uint32),
             ("fbInfoList", NV2080_CTRL_FB_INFO * row.fb_info_max_list)]
    alloc_size = list(_NVOS32_ALLOC_SIZE_FIELDS)
    if row.nvos32_numa_node:
        alloc_size.append(("numaNode", c_int32))
    sched = list(_GPFIFO_SCHEDULE_FIELDS)
    if row.schedule_skip_enable:
        sched.append(("bSkipEnable", NvBool))
    os46 = list(_NVOS46_HEAD)
    if row.nvos46_size == 64:
        os46 += [("flags2", c_uint32), ("kindOverride", c_uint32)]
    os46 += [("dmaOffset", c_uint64), ("status", c_uint32)]
    os47 = list(_NVOS47_HEAD)
    if row.nvos47_size == 48:
        os47.append(("size", c_uint64))
    os47.append(("status", c_uint32))
    vas = list(_VASPACE_ALLOCATION_FIELDS)
    if row.nvos46_size == 64:       # the same release (580)
        vas.append(("pasid", c_uint32))
    info = list(_EXPORT_INFO_HEAD)
    if row.export_gpu_instance:
        info.append(("gpuInstanceId", c_uint32))
    info += _EXPORT_INFO_TAIL
    return {
        "NV0000_CTRL_OS_UNIX_GET_EXPORT_OBJECT_INFO_PARAMS": _make_struct(
            "NV0000_CTRL_OS_UNIX_GET_EXPORT_OBJECT_INFO_PARAMS", info, tag),
        "NV_VASPACE_ALLOCATION_PARAMETERS": _make_struct(
            "NV_VASPACE_ALLOCATION_PARAMETERS", vas, tag),
        "NVOS46_PARAMETERS": _make_struct("NVOS46_PARAMETERS", os46, tag),
        "NVOS47_PARAMETERS": _make_struct("NVOS47_PARAMETERS", os47, tag),
        "NV_MEMORY_ALLOCATION_PARAMS": _make_struct(
            "NV_MEMORY_ALLOCATION_PARAMS", mem, tag),
        "NV2080_CTRL_FB_GET_INFO_V2_PARAMS": _make_struct(
            "NV2080_CTRL_FB_GET_INFO_V2_PARAMS", fb_v2, tag),
        "NV_CHANNEL_ALLOC_PARAMS": _make_struct(
            "NV_CHANNEL_ALLOC_PARAMS", chan, tag),
        "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS": _make_struct(
            "NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS", sched, tag),
        "NVOS32_PARAMETERS": _nvos32(alloc_size, tag),
    }


def for_version(version):
    """The ABI row of driver ``version`` ('580.126.20')."""
    key = parse_version(version)[:2]
    rows = [r for r in _ROWS if r.since <= key]
    if not rows:
        raise ValueError(f"driver {version} is older than the oldest "
                         f"supported ({_ROWS[0].since[0]})")
    row = rows[-1]
    return DriverAbi(version=version, device_check=row.device_check,
                     fb_info_index_max=row.fb_info_index_max,
                     nvos46_size=row.nvos46_size, nvos47_size=row.nvos47_size,
                     fb_get_info_v1_deprecated=row.fb_get_info_v1_deprecated,
                     **_abi_for_row(row))


def fixed_structs(version=None):
    """Every version-independent struct class defined here (that driver
    ``version`` has, when given)."""
    key = parse_version(version)[:2] if version else (9999, 0)
    return [obj for obj in globals().values()
            if isinstance(obj, type) and issubclass(obj, _Struct)
            and obj is not _Struct and not obj.__name__.startswith("_")
            and getattr(obj, "_c_name_", "") is not None
            and getattr(obj, "_since_", (0, 0)) <= key]


def c_name(cls):
    return getattr(cls, "_c_name_", None) or cls.__name__


# ---------------------------------------------------------------------------
# ioctl command words as the wire carries them

NV_IOCTL_CARD_INFO_ENTRY = ctypes.sizeof(nv_ioctl_card_info_t)


def cmd_of(nr, struct_or_size):
    size = (struct_or_size if isinstance(struct_or_size, int)
            else ctypes.sizeof(struct_or_size))
    return nv_ioctl(nr, size)


IOCTL_RM_FREE = cmd_of(NV_ESC_RM_FREE, NVOS00_PARAMETERS)
IOCTL_RM_CONTROL = cmd_of(NV_ESC_RM_CONTROL, NVOS54_PARAMETERS)
IOCTL_RM_ALLOC_NVOS21 = cmd_of(NV_ESC_RM_ALLOC, NVOS21_PARAMETERS)
IOCTL_RM_ALLOC_NVOS64 = cmd_of(NV_ESC_RM_ALLOC, NVOS64_PARAMETERS)
IOCTL_RM_ALLOC_MEMORY = cmd_of(NV_ESC_RM_ALLOC_MEMORY,
                               nv_ioctl_nvos02_parameters_with_fd)
NVOS32_PARAMETERS_SIZE = 184      # every version (nvos.h)
IOCTL_RM_VID_HEAP_CONTROL = nv_ioctl(NV_ESC_RM_VID_HEAP_CONTROL,
                                     NVOS32_PARAMETERS_SIZE)
IOCTL_RM_MAP_MEMORY = cmd_of(NV_ESC_RM_MAP_MEMORY,
                             nv_ioctl_nvos33_parameters_with_fd)
IOCTL_RM_UNMAP_MEMORY = cmd_of(NV_ESC_RM_UNMAP_MEMORY, NVOS34_PARAMETERS)
IOCTL_RM_DUP_OBJECT = cmd_of(NV_ESC_RM_DUP_OBJECT, NVOS55_PARAMETERS)
IOCTL_REGISTER_FD = cmd_of(NV_ESC_REGISTER_FD, nv_ioctl_register_fd_t)
IOCTL_CHECK_VERSION_STR = cmd_of(NV_ESC_CHECK_VERSION_STR,
                                 nv_ioctl_rm_api_version_t)
IOCTL_SYS_PARAMS = cmd_of(NV_ESC_SYS_PARAMS, nv_ioctl_sys_params_t)
IOCTL_XFER_CMD = cmd_of(NV_ESC_IOCTL_XFER_CMD, nv_ioctl_xfer_t)
