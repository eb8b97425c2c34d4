# SPDX-License-Identifier: Apache-2.0
"""xpu.ko's admin device /dev/xpuctl and XPU_IOC_VERSION, from user space.

Runs as root in the VM with xpu.ko loaded (tests/vm/run).  Without the device
the tests skip, unless XPU_KO is set, which says the rig loaded the module: then
a missing device is a failure.
"""

import ctypes
import errno
import fcntl
import mmap
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ioctl_opt import IO, IOR, IOWR

TOP = Path(__file__).resolve().parents[2]

try:
    from xpu import ctl, uapi
except ImportError:  # xpud is not installed: use the tree's
    sys.path.insert(0, str(TOP / "xpud"))
    from xpu import ctl, uapi

DEV = "/dev/" + uapi.XPU_CTL_NAME
SYS_VERSION = Path("/sys/module/xpu/version")
MISC_MAJOR = 10
VERSION_SIZE = ctypes.sizeof(uapi.XpuVersion)


@pytest.fixture
def fd():
    if not os.path.exists(DEV):
        if os.environ.get("XPU_KO"):
            pytest.fail(f"{DEV} is missing although the rig loaded "
                        f"{os.environ['XPU_KO']}")
        pytest.skip(f"{DEV} is missing: xpu.ko is not loaded")
    fd = os.open(DEV, os.O_RDWR | os.O_CLOEXEC)
    yield fd
    os.close(fd)


def module_version():
    return SYS_VERSION.read_text().strip()


def ioctl_errno(fd, cmd, arg):
    with pytest.raises(OSError) as e:
        fcntl.ioctl(fd, cmd, arg)
    return e.value.errno


def test_device_is_a_root_only_misc_device(fd):
    st = os.fstat(fd)
    assert stat.S_ISCHR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == 0
    assert os.major(st.st_rdev) == MISC_MAJOR
    sysfs = Path("/sys/class/misc") / uapi.XPU_CTL_NAME / "dev"
    assert sysfs.read_text().strip() == \
        f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def test_others_cannot_open_it(fd):
    code = ("import os, sys\n"
            "try:\n"
            f"    os.open({DEV!r}, os.O_RDONLY)\n"
            "except PermissionError:\n"
            "    sys.exit(13)\n")
    r = subprocess.run([sys.executable, "-c", code], user=65534, group=65534,
                       extra_groups=[], check=False)
    assert r.returncode == 13


def test_it_does_not_seek(fd):
    with pytest.raises(OSError) as e:
        os.lseek(fd, 0, os.SEEK_SET)
    assert e.value.errno == errno.ESPIPE


def test_version_is_the_module_version(fd):
    arg = uapi.XpuVersion(argsz=VERSION_SIZE)
    assert fcntl.ioctl(fd, uapi.XPU_IOC_VERSION, arg) == 0
    assert arg.argsz == VERSION_SIZE
    assert arg.flags == 0
    assert arg.api == uapi.XPU_API_VERSION
    assert f"{arg.major}.{arg.minor}.{arg.patch}" == module_version()


def test_version_through_xpu_ctl(fd):
    with ctl.Ctl(DEV) as c:
        ver = c.version()
    assert str(ver) == module_version()
    assert ver.api == uapi.XPU_API_VERSION


@pytest.mark.parametrize("argsz", [0, 4, 8, VERSION_SIZE - 1])
def test_argsz_too_small_is_einval(fd, argsz):
    arg = uapi.XpuVersion(argsz=argsz)
    assert ioctl_errno(fd, uapi.XPU_IOC_VERSION, arg) == errno.EINVAL


@pytest.mark.parametrize("flags", [1, 2, 1 << 31, 0xFFFFFFFF])
def test_unknown_flags_are_einval(fd, flags):
    arg = uapi.XpuVersion(argsz=VERSION_SIZE, flags=flags)
    assert ioctl_errno(fd, uapi.XPU_IOC_VERSION, arg) == errno.EINVAL


class NewerVersion(ctypes.Structure):
    """struct xpu_version as a newer caller might know it."""

    _fields_ = [*uapi.XpuVersion._fields_, ("future", ctypes.c_uint64 * 2)]


def test_a_newer_caller_gets_what_the_kernel_knows(fd):
    arg = NewerVersion(argsz=ctypes.sizeof(NewerVersion))
    arg.future[0] = arg.future[1] = 0xA5A5A5A5A5A5A5A5
    cmd = IOWR(uapi.XPU_IOC_TYPE, 0x00, NewerVersion)
    assert fcntl.ioctl(fd, cmd, arg) == 0
    assert arg.argsz == VERSION_SIZE
    assert f"{arg.major}.{arg.minor}.{arg.patch}" == module_version()
    assert list(arg.future) == [0xA5A5A5A5A5A5A5A5] * 2


@pytest.mark.parametrize("cmd", [
    IOWR(uapi.XPU_IOC_TYPE, 0xFF, uapi.XpuVersion),
    IOWR(uapi.XPU_IOC_TYPE, 0x7F, uapi.XpuVersion),
    IOWR(ord("F"), 0x00, uapi.XpuVersion),
    IOR(uapi.XPU_IOC_TYPE, 0x00, uapi.XpuVersion),
    IO(uapi.XPU_IOC_TYPE, 0x00),
    0,
], ids=["nr-ff", "nr-7f", "nvidia-type", "read-only", "no-data", "zero"])
def test_unknown_commands_are_enotty(fd, cmd):
    arg = uapi.XpuVersion(argsz=VERSION_SIZE)
    assert ioctl_errno(fd, cmd, arg) == errno.ENOTTY


def test_bad_pointer_is_efault(fd):
    assert ioctl_errno(fd, uapi.XPU_IOC_VERSION, 0) == errno.EFAULT


def test_unwritable_struct_is_efault(fd):
    """The kernel reads a valid struct but cannot write the answer back."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    page = mmap.mmap(-1, mmap.PAGESIZE)
    view = uapi.XpuVersion.from_buffer(page)
    view.argsz = VERSION_SIZE
    addr = ctypes.addressof(view)
    assert libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ) == 0
    try:
        assert libc.ioctl(fd, uapi.XPU_IOC_VERSION, addr) == -1
        assert ctypes.get_errno() == errno.EFAULT
        assert view.major == view.minor == view.patch == 0
    finally:
        libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE)
        del view
        page.close()


def test_xpuctl_version_prints_the_kernel_version(fd):
    xpuctl = shutil.which("xpuctl")
    env = dict(os.environ)
    if xpuctl:
        cmd = [xpuctl, "--version"]
    else:
        cmd = [sys.executable, "-m", "xpu.cli", "--version"]
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(TOP / "xpud"), env.get("PYTHONPATH")]))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == \
        f"xpu.ko {module_version()} (api {uapi.XPU_API_VERSION})"
