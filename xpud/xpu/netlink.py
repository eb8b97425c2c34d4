# SPDX-License-Identifier: Apache-2.0
"""xpu.ko's events: the generic netlink family "xpu", group "events"
(kmod/include/uapi/xpu.h), heard through pyroute2.

NetlinkWatcher is one of the daemon's watchers: in its own thread it reads
the family's multicast group, turns each message into an event (events.py),
logs it, publishes it on the EventHub (which counts it) and asks the daemon to
reconcile when a slice changed in the kernel.  When the socket's buffer
overflowed (ENOBUFS) events were lost: it counts that, tells the listeners
with an `events_lost` event and asks for a reconcile, which lists the
kernel's slices again.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable

from . import uapi
from .events import FIELDS, LOST, NAMES, EventHub, describe

log = logging.getLogger(__name__)


# XPU_EA_* -> (number, pyroute2's type).
ATTRS = (
    ("XPU_EA_UNSPEC", 0, "none"),
    ("XPU_EA_SLICE_ID", uapi.XPU_EA_SLICE_ID, "uint32"),
    ("XPU_EA_SLICE_NAME", uapi.XPU_EA_SLICE_NAME, "asciiz"),
    ("XPU_EA_GPU_MINOR", uapi.XPU_EA_GPU_MINOR, "uint32"),
    ("XPU_EA_MEMORY_LIMIT", uapi.XPU_EA_MEMORY_LIMIT, "uint64"),
    ("XPU_EA_MEMORY_USED", uapi.XPU_EA_MEMORY_USED, "uint64"),
    ("XPU_EA_PID", uapi.XPU_EA_PID, "uint32"),
    ("XPU_EA_SIZE", uapi.XPU_EA_SIZE, "uint64"),
    ("XPU_EA_PAD", uapi.XPU_EA_PAD, "hex"),
)


NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
NLMSG_ERROR = 2
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1


@functools.cache
def classes():
    """(XpuEventMsg, XpuEventSocket), made at first use: pyroute2's message
    classes are imported only when xpud listens."""
    from pyroute2.netlink import CTRL_CMD_GETFAMILY, NLM_F_REQUEST, ctrlmsg, genlmsg
    from pyroute2.netlink.marshal import Marshal

    class XpuEventMsg(genlmsg):
        """A message of the family; attribute numbers as in uapi/xpu.h."""

        nla_map = tuple((n, name, t) for name, n, t in ATTRS)

    class XpuEventSocket:
        """The family "xpu", joined to its group "events", on a plain
        netlink socket: pyroute2 lays out and decodes the messages (the
        nlctrl lookup, the events); the socket is ours, read in our own
        thread, so that ENOBUFS comes back as it is and nothing else reads
        it."""

        def __init__(self, family: str = uapi.XPU_GENL_NAME,
                     group: str = uapi.XPU_GENL_MCGRP_EVENTS):
            self.family, self.group = family, group
            self.prid = None
            self.mcast_groups: dict[str, int] = {}
            self.marshal = Marshal()
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                      NETLINK_GENERIC)

        def _lookup(self) -> None:
            """CTRL_CMD_GETFAMILY: the family's id and its groups' ids."""
            req = ctrlmsg()
            req["cmd"] = CTRL_CMD_GETFAMILY
            req["version"] = 1
            req["attrs"] = [["CTRL_ATTR_FAMILY_NAME", self.family]]
            req["header"]["type"] = GENL_ID_CTRL
            req["header"]["flags"] = NLM_F_REQUEST
            req["header"]["sequence_number"] = 1
            req.encode()
            self.sock.settimeout(10.0)
            self.sock.sendto(req.data, (0, 0))
            while True:
                data = self.sock.recv(65536)
                length, kind, _, seq = struct.unpack_from("=IHHI", data)
                if seq != 1:
                    continue
                if kind == NLMSG_ERROR:
                    (err,) = struct.unpack_from("=i", data, 16)
                    raise OSError(-err, f"generic netlink family "
                                  f"'{self.family}': {os.strerror(-err)}")
                reply = ctrlmsg(data[:length])
                reply.decode()
                break
            self.prid = reply.get_attr("CTRL_ATTR_FAMILY_ID")
            self.mcast_groups = {
                g.get_attr("CTRL_ATTR_MCAST_GRP_NAME"):
                    g.get_attr("CTRL_ATTR_MCAST_GRP_ID")
                for g in reply.get_attr("CTRL_ATTR_MCAST_GROUPS", [])}
            self.marshal.msg_map[self.prid] = XpuEventMsg

        def open(self) -> socket.socket:
            self.sock.bind((0, 0))
            self._lookup()
            if self.group not in self.mcast_groups:
                raise OSError(errno.ENOENT, f"the family '{self.family}' "
                              f"has no group '{self.group}'")
            self.sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
                                 self.mcast_groups[self.group])
            self.sock.settimeout(None)
            return self.sock

        def parse(self, data: bytes) -> list:
            return [m for m in self.marshal.parse(data)
                    if isinstance(m, XpuEventMsg)]

        def close(self) -> None:
            self.sock.close()

    return XpuEventMsg, XpuEventSocket


def open_socket():
    return classes()[1]()


def to_event(msg, now: float | None = None) -> dict | None:
    """The event of a decoded message; None for a command this xpud does
    not know (a newer xpu.ko)."""
    name = NAMES.get(msg["cmd"])
    if name is None:
        return None
    ev = {"time": round(time.time() if now is None else now, 3),
          "event": name}
    for attr, field in FIELDS.items():
        value = msg.get_attr(attr)
        if value is not None:
            ev[field] = value
    return ev


class NetlinkWatcher:
    """A Watcher (daemon.py) of xpu.ko's events."""

    def __init__(self, hub: EventHub, socket_factory=open_socket,
                 deny_log_interval_s: float = 10.0):
        self.hub = hub
        # xpud serves its socket before it starts its watchers: a client
        # asking for events meanwhile is told that they are coming, not
        # that xpud is not listening (and should be restarted).
        hub.unavailable = "xpud is starting to listen to xpu.ko"
        self._factory = socket_factory
        self._deny_log_interval = deny_log_interval_s
        self._last_deny_log: dict[str, float] = {}
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self._nl = None
        self._sock: socket.socket | None = None
        self.listening = threading.Event()  # set once joined, for tests

    def start(self, changed: Callable[[str], None]) -> None:
        self.hub.unavailable = "xpud is starting to listen to xpu.ko"
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._run, args=(changed,),
                                        name="xpud-events", daemon=True)
        self._thread.start()

    def _open(self) -> bool:
        try:
            self._nl = self._factory()
            self._sock = self._nl.open()
        except Exception as e:  # noqa: BLE001 -- no family: no events
            self._close_sockets()
            why = ("xpu.ko sends no events (not loaded, or older than its "
                   f"netlink family): {e}")
            self.hub.unavailable = why
            log.info("%s; the kernel's slices are re-read periodically", why)
            return False
        self.hub.unavailable = None
        log.info("listening to xpu.ko's events (generic netlink '%s', group "
                 "'%s')", uapi.XPU_GENL_NAME, uapi.XPU_GENL_MCGRP_EVENTS)
        self.listening.set()
        return True

    def _run(self, changed: Callable[[str], None]) -> None:
        if self._open():
            # Whatever happened while xpud was not listening: look again.
            changed("listening to xpu.ko's events")
            self._loop(changed)

    def stop(self) -> None:
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            # Bounded: a thread stuck in the kernel must not keep xpud from
            # stopping (it is a daemon thread).
            self._thread.join(5.0)
            self._thread = None
            os.close(self._wake_r)
            os.close(self._wake_w)
        self._close_sockets()
        self.hub.unavailable = "xpud is stopping"

    def _close_sockets(self) -> None:
        for s in (self._nl, self._sock):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        self._sock = self._nl = None

    def _loop(self, changed: Callable[[str], None]) -> None:
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_r in ready:
                return
            try:
                data = self._sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    self.lost(changed)
                    continue
                log.error("xpu.ko's events: %s; no more events until xpud "
                          "restarts", e.strerror)
                self.hub.unavailable = f"reading events failed: {e.strerror}"
                return
            try:
                msgs = self._nl.parse(data)
            except Exception:
                log.exception("cannot decode an event of xpu.ko")
                continue
            for m in msgs:
                self.handle(m, changed)

    def lost(self, changed: Callable[[str], None]) -> None:
        log.warning("xpu.ko's events overflowed xpud's buffer: reading the "
                    "slices again")
        self.hub.publish({"time": round(time.time(), 3), "event": LOST,
                          "count": 1})
        changed("events were lost")

    def handle(self, msg, changed: Callable[[str], None]) -> dict | None:
        ev = to_event(msg)
        if ev is None:
            log.debug("an event of an unknown kind (%s): skipped",
                      msg["cmd"])
            return None
        self.hub.publish(ev)
        if ev["event"] == "alloc_denied":
            # One line per slice per interval: a loop of refused
            # allocations must not flood the journal.
            key = str(ev.get("slice_id"))
            now = time.monotonic()
            if now - self._last_deny_log.get(key, -1e9) >= \
                    self._deny_log_interval:
                self._last_deny_log[key] = now
                log.info("%s", describe(ev))
        else:
            log.info("%s", describe(ev))
            changed(f"kernel: {describe(ev)}")
        return ev
