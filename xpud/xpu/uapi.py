# SPDX-License-Identifier: Apache-2.0
"""The interface of /dev/xpuctl: Python's copy of kmod/include/uapi/xpu.h.

Every XPU_* name here is the header's, with the header's value, and every
struct of the header has a ctypes twin with the same fields, listed in STRUCTS
under its C name.  tests/unit/test_uapi.py compiles the header and compares the
two; change them together.  The rules the structs follow (argsz, flags, explicit
padding) are written down in the header.
"""

import ctypes
import platform

from ioctl_opt import IOWR

# ioctl_opt encodes commands as asm-generic/ioctl.h does: x86_64 and arm64,
# where NVIDIA's drivers run, and most other architectures.  These lay the
# direction and size bits out differently; better to refuse than to send
# commands the kernel would read as something else.
_OTHER_IOCTL_ENCODING = ("alpha", "mips", "parisc", "ppc", "powerpc", "sparc")
if platform.machine().startswith(_OTHER_IOCTL_ENCODING):
    raise ImportError(
        f"xpu: ioctl numbers for {platform.machine()} are not supported yet")

XPU_IOC_TYPE = 0xE6
XPU_API_VERSION = 1
XPU_CTL_NAME = "xpuctl"


class XpuVersion(ctypes.Structure):
    """struct xpu_version, the argument of XPU_IOC_VERSION."""

    _fields_ = [
        ("argsz", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("api", ctypes.c_uint32),
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("patch", ctypes.c_uint32),
    ]


XPU_VERSION_FLAGS_ALL = 0

XPU_IOC_VERSION = IOWR(XPU_IOC_TYPE, 0x00, XpuVersion)

STRUCTS = {
    "xpu_version": XpuVersion,
}
