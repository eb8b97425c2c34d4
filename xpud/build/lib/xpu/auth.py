# SPDX-License-Identifier: Apache-2.0
"""Who is on the other end of the socket, and what they may do.

Changes are for uid 0 only; reads for uid 0 and for members of group `xpu`.

The peer's uid, gid and pid come from SO_PEERCRED, its supplementary groups
from SO_PEERGROUPS (Linux 4.13): both are the credentials the peer process had
when it called connect(), kept by the kernel with the socket, so they cannot be
swapped afterwards and there is no race with the peer exiting.  They are the
credentials the kernel also checked against the socket file's mode 0660 and
group `xpu` when the peer connected, so both checks agree.  On an older kernel
the groups are read from /proc/PID/status (the Groups: line), after checking
that the process there still has the peer's uid.

The alternative, os.getgrouplist() of the peer's user name, was rejected: it
answers from the group database, not from the process, so a process that had
dropped its groups (a sandboxed service, setgroups([])) would still be let in,
and a membership added after the user logged in would count for xpud but not
for the socket file.
"""

from __future__ import annotations

import errno
import grp
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .api import CHANGE, SOCKET_GROUP, ApiError, Op

SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux's number
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class PeerCred:
    pid: int
    uid: int
    gid: int
    groups: tuple[int, ...] = ()


def groups_from_status(text: str, uid: int) -> tuple[int, ...] | None:
    """The supplementary groups in the text of /proc/PID/status, or None
    when its real uid is not UID (the process is gone and its pid reused,
    or it changed its credentials since it connected)."""
    groups = None
    real_uid = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "Uid":
            real_uid = int(value.split()[0])
        elif key == "Groups":
            groups = tuple(int(g) for g in value.split())
    if real_uid != uid:
        return None
    return groups or ()


def _peergroups(sock: socket.socket) -> tuple[int, ...]:
    for ngroups in (64, 65536):  # NGROUPS_MAX is 65536
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS,
                                  4 * ngroups)
        except OSError as e:
            if e.errno == errno.ERANGE:
                continue
            raise
        return struct.unpack(f"{len(raw) // 4}I", raw)
    raise OSError(errno.ERANGE, "too many groups")


def peer_credentials(sock: socket.socket, proc: str = "/proc") -> PeerCred:
    """The credentials of SOCK's peer when it connected."""
    pid, uid, gid = _CRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    try:
        groups = _peergroups(sock)
    except OSError as e:
        if e.errno not in (errno.ENOPROTOOPT, errno.EINVAL):
            raise
        groups = ()
        # pid 0: the peer is in a pid namespace we cannot see into.
        if pid > 0:
            try:
                text = (Path(proc) / str(pid) / "status").read_text()
            except OSError:
                text = ""
            groups = groups_from_status(text, uid) or ()
    return PeerCred(pid, uid, gid, tuple(groups))


class Authorizer:
    """Decides whether a peer may call an op.  GROUP's gid is looked up
    for every check, so that `groupadd xpu` takes effect at once."""

    def __init__(self, group: str = SOCKET_GROUP,
                 getgrnam: Callable[[str], grp.struct_group] = grp.getgrnam):
        self.group = group
        self._getgrnam = getgrnam

    def group_id(self) -> int | None:
        try:
            return self._getgrnam(self.group).gr_gid
        except KeyError:
            return None

    def check(self, op: Op, peer: PeerCred) -> None:
        """Return if PEER may call OP, else raise ApiError('permission')
        that says what is needed."""
        if peer.uid == 0:
            return
        if op.access == CHANGE:
            raise ApiError(
                "permission",
                f"permission denied: '{op.name}' changes slices and needs "
                f"root (you are uid {peer.uid}); run it as root, e.g. with "
                "sudo")
        gid = self.group_id()
        if gid is None:
            raise ApiError(
                "permission",
                f"permission denied: '{op.name}' needs root or group "
                f"'{self.group}', and this host has no group '{self.group}' "
                f"(an administrator can create it: groupadd --system "
                f"{self.group}, then restart xpud)")
        if peer.gid == gid or gid in peer.groups:
            return
        raise ApiError(
            "permission",
            f"permission denied: '{op.name}' needs root or membership in "
            f"group '{self.group}', and uid {peer.uid} is not a member (an "
            f"administrator can add it: usermod -aG {self.group} USER; it "
            "takes effect at the next login)")
