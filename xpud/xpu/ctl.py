# SPDX-License-Identifier: Apache-2.0
"""The admin device of xpu.ko, /dev/xpuctl."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
from dataclasses import dataclass

from . import uapi
from .errors import XpuError

DEFAULT_PATH = "/dev/" + uapi.XPU_CTL_NAME


class CtlError(XpuError):
    """The device could not be opened or refused a command.

    The message is one line, fit to show to the user as it is."""


@dataclass(frozen=True)
class ModuleVersion:
    """The version of the loaded xpu.ko, as XPU_IOC_VERSION reports it."""

    api: int
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


class Ctl:
    """An open /dev/xpuctl.  Use as a context manager, or call close()."""

    def __init__(self, path: str = DEFAULT_PATH):
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError as e:
            raise CtlError(f"{path} does not exist: is xpu.ko loaded?") from e
        except PermissionError as e:
            raise CtlError(f"{path}: permission denied (it is root's)") from e
        except OSError as e:
            raise CtlError(f"{path}: {e.strerror}") from e

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ioctl(self, name: str, cmd: int, arg: ctypes.Structure) -> None:
        try:
            fcntl.ioctl(self._fd, cmd, arg)
        except OSError as e:
            if e.errno == errno.ENOTTY:
                raise CtlError(f"{self.path} does not know {name}: "
                               "not an xpu device, or xpu.ko is too old") from e
            raise CtlError(f"{self.path}: {name}: {e.strerror}") from e

    def version(self) -> ModuleVersion:
        arg = uapi.XpuVersion(argsz=ctypes.sizeof(uapi.XpuVersion))
        self._ioctl("XPU_IOC_VERSION", uapi.XPU_IOC_VERSION, arg)
        return ModuleVersion(api=arg.api, major=arg.major, minor=arg.minor,
                             patch=arg.patch)
