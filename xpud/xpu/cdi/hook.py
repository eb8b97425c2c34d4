# SPDX-License-Identifier: Apache-2.0
"""xpu-cdi-hook: the OCI createRuntime hook of xpu's CDI devices.

    xpu-cdi-hook [--socket PATH] bind SLICE      (the container's state on stdin)

The runtime runs it after the container's namespaces and cgroup exist and
before its program starts, with the container's state on stdin; crun and
runc give a createRuntime hook the container's pid as the host sees it
(a createContainer hook gets 0 from crun).  The hook reads that process's
cgroup v2 path from /proc/PID/cgroup and asks xpud to bind it to SLICE,
transiently: the binding ends when the cgroup has no process left, and an
ephemeral slice with it (docs/containers.md).

From then on every open of the NVIDIA driver's nodes by the container's
processes is in the slice, whatever inode the runtime gave them.  Any
failure -- no pid, no cgroup v2, xpud down or refusing -- is one line on
stderr and exit status 1, which makes the runtime stop the container: it
never starts outside the slice it was given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from .. import api, cmdline
from ..client import Client
from ..errors import XpuError
from . import HOOK_NAME

PROG = HOOK_NAME
MAX_STATE = 1 << 20


class HookError(XpuError):
    pass


def container_pid(state_text: str) -> int:
    """The pid in an OCI state document."""
    try:
        state = json.loads(state_text)
    except ValueError as e:
        raise HookError(f"the container's state on stdin is not JSON: "
                        f"{e}") from None
    pid = state.get("pid") if isinstance(state, dict) else None
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise HookError(
            f"the container's state has no pid ({pid!r}): run {PROG} as a "
            "createRuntime hook, which gets the container's host pid")
    return pid


def cgroup_of(pid: int, proc: str = "/proc") -> str:
    """The cgroup v2 path of PID, as /proc/PID/cgroup names it."""
    try:
        with open(f"{proc}/{pid}/cgroup") as f:
            text = f.read()
    except OSError as e:
        raise HookError(f"cannot read the cgroup of the container's process "
                        f"{pid}: {e.strerror}") from None
    for line in text.splitlines():
        if line.startswith("0::"):
            path = line[3:]
            if path in ("", "/"):
                raise HookError(f"process {pid} is in the root cgroup: the "
                                "runtime gave the container no cgroup")
            return path
    raise HookError(f"process {pid} has no cgroup v2 path: xpu binds "
                    "containers through the unified cgroup hierarchy "
                    "(boot with systemd.unified_cgroup_hierarchy=1)")


def bind(socket: str, slice_name: str, state_text: str) -> str:
    pid = container_pid(state_text)
    cgroup = cgroup_of(pid)
    with Client(socket) as c:
        c.call("bind", name=slice_name, cgroup=cgroup, transient=True)
    return cgroup


def build_parser() -> cmdline.ArgumentParser:
    p = cmdline.ArgumentParser(
        prog=PROG,
        description="The createRuntime hook of xpu's CDI devices: binds the "
                    "container's cgroup to a slice.  The container's state "
                    "comes on stdin, as OCI runtimes give it.")
    p.add_argument("--socket", metavar="PATH", default=api.DEFAULT_SOCKET,
                   help="xpud's socket (default: %(default)s)")
    p.add_argument("--debug", action="store_true",
                   help="show a traceback on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    b = sub.add_parser("bind", help="bind the container's cgroup to SLICE")
    b.add_argument("slice", metavar="SLICE")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        text = sys.stdin.read(MAX_STATE)
        bind(args.socket, args.slice, text)
        return 0

    return cmdline.run(PROG, args.debug, body)


if __name__ == "__main__":
    sys.exit(main())
