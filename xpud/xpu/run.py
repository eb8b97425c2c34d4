# SPDX-License-Identifier: Apache-2.0
"""`xpuctl run NAME -- COMMAND...`: COMMAND in a private mount namespace in
which the slice's nodes stand at the standard NVIDIA names.

In that namespace

    /dev/nvidiactl          is the slice's control node (/dev/xpuN-ctl),
    /dev/nvidia<minor>      is the slice's GPU node (/dev/xpuN),
    /dev/nvidia<other>      of every other GPU is /dev/null,
    /dev/nvidia-uvm         is the slice's UVM node (/dev/xpuN-uvm), where
                            xpu.ko has one: UVM files held for the slice
                            (docs/security.md, class 39),

and everything else (/dev/nvidia-uvm-tools, /dev/nvidia-modeset, ...) is
left as it is.  These are bind mounts of the very inodes xpud registered with xpu.ko,
so every open of the NVIDIA devices by COMMAND is in the slice.  The host's
/dev is never changed: the mounts are made after unshare(CLONE_NEWNS) and
making every mount private, so none of them propagates back.

xpuctl then execs COMMAND: COMMAND's exit status is xpuctl's, and a shell
reports a COMMAND killed by signal N as 128+N, as for any command.

This is no security boundary against root inside the namespace (it may
mknod or umount); it is how a root-started job gets the slice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import EXIT_PERMISSION, XpuError

NV_MAJOR = 195
NV_CTL_MINOR = 255
CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

EXIT_CANNOT_EXECUTE = 126   # as a shell: found but not executable
EXIT_NOT_FOUND_CMD = 127    # as a shell: no such command

_GPU_NODE = re.compile(r"nvidia(\d+)\Z")


class RunError(XpuError):
    """The namespace could not be made."""


class RunPermissionError(RunError):
    exit_status = EXIT_PERMISSION


class ExecError(XpuError):
    """COMMAND could not be executed; the status is a shell's."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.exit_status = status


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    why: str      # what SOURCE is, for messages


def plan(s: dict, dev_dir: str = "/dev", listdir=None) -> list[Bind]:
    """The bind mounts that put slice S (an API Slice object) at the NVIDIA
    names under DEV_DIR.  Raises RunError when the slice cannot be run in."""
    name = s["name"]
    if s.get("state") != "ready":
        why = f": {s['error']}" if s.get("error") else ""
        raise RunError(f"slice '{name}' is {s.get('state')}{why} "
                       f"(xpuctl show {name} says more)")
    gpu_node, ctl_node, minor = (s.get("gpu_node"), s.get("ctl_node"),
                                 s.get("gpu_minor"))
    if not gpu_node or not ctl_node or minor is None:
        raise RunError(f"slice '{name}' has no device nodes yet: xpud makes "
                       f"them at its next pass (xpuctl show {name})")
    binds = [Bind(ctl_node, os.path.join(dev_dir, "nvidiactl"),
                  "the slice's control node"),
             Bind(gpu_node, os.path.join(dev_dir, f"nvidia{minor}"),
                  "the slice's GPU node")]
    entries = sorted((listdir or os.listdir)(dev_dir))
    if s.get("uvm_node") and "nvidia-uvm" in entries:
        binds.append(Bind(s["uvm_node"], os.path.join(dev_dir, "nvidia-uvm"),
                          "the slice's UVM node"))
    for entry in entries:
        m = _GPU_NODE.match(entry)
        if m and int(m.group(1)) != minor:
            binds.append(Bind(os.devnull, os.path.join(dev_dir, entry),
                              "another GPU, hidden"))
    return binds


def check(binds: Sequence[Bind], lstat=None) -> None:
    """Every source and target is where it should be: raises RunError."""
    lstat = lstat or os.lstat
    for b in binds:
        for path, role in ((b.source, "source"), (b.target, "target")):
            try:
                st = lstat(path)
            except FileNotFoundError:
                if role == "target":
                    raise RunError(
                        f"{path} is missing: the NVIDIA device nodes must "
                        "exist on the host (nvidia-modprobe makes them)"
                    ) from None
                raise RunError(f"{path} ({b.why}) is missing: restart xpud "
                               "to make it again") from None
            if not stat.S_ISCHR(st.st_mode):
                raise RunError(f"{path} is not a character device; "
                               f"{b.why} cannot be put there")


class Libc:
    """unshare(2) and mount(2) through ctypes (os.unshare is Python 3.12+)."""

    def __init__(self):
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or None,
                                 use_errno=True)
        self._libc.unshare.argtypes = [ctypes.c_int]
        self._libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.c_char_p, ctypes.c_ulong,
                                     ctypes.c_void_p]

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")

    def unshare(self, flags: int) -> None:
        self._check(self._libc.unshare(flags), "unshare")

    def mount(self, source: str | None, target: str, flags: int) -> None:
        self._check(self._libc.mount(
            os.fsencode(source) if source else None, os.fsencode(target),
            None, flags, None), f"mount {target}")


def enter(binds: Sequence[Bind], libc=None) -> None:
    """Make this process's mount namespace private and mount BINDS in it."""
    libc = libc or Libc()
    try:
        libc.unshare(CLONE_NEWNS)
    except OSError as e:
        if e.errno == errno.EPERM:
            raise RunPermissionError(
                "xpuctl run needs root (CAP_SYS_ADMIN) to make a private "
                "mount namespace: run it with sudo, or give the slice to a "
                "container by bind-mounting its nodes") from None
        raise RunError(f"cannot make a private mount namespace: "
                       f"{e.strerror}") from None
    try:
        # Nothing mounted from here on may reach the host's namespace.
        libc.mount(None, "/", MS_REC | MS_PRIVATE)
        for b in binds:
            libc.mount(b.source, b.target, MS_BIND)
    except OSError as e:
        raise RunError(f"cannot prepare the slice's namespace: "
                       f"{e.strerror}") from None


def execute(cmd: Sequence[str], execvp=None) -> None:
    """exec CMD; returns only by raising ExecError, with a shell's status."""
    try:
        (execvp or os.execvp)(cmd[0], list(cmd))
    except FileNotFoundError:
        raise ExecError(f"{cmd[0]}: command not found",
                        EXIT_NOT_FOUND_CMD) from None
    except PermissionError:
        raise ExecError(f"{cmd[0]}: permission denied (not executable?)",
                        EXIT_CANNOT_EXECUTE) from None
    except OSError as e:
        raise ExecError(f"{cmd[0]}: cannot execute: {e.strerror}",
                        EXIT_CANNOT_EXECUTE) from None
