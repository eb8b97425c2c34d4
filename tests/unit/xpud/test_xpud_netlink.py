# SPDX-License-Identifier: Apache-2.0
"""xpu.ko's events as xpud hears them (netlink.py, events.py): messages laid
out by hand as the kernel's genetlink puts them, decoded; the watcher's
thread on a datagram socket pair standing in for the netlink socket; lost
events; a kernel without the family.  The family itself is tested in the VM
(tests/vmtests/test_xpud_events.py)."""

import errno
import logging
import os
import socket
import struct
import threading

import pytest
from xpu import netlink, uapi
from xpu.events import EventHub, describe

FAMILY_ID = 0x1A  # any: the kernel assigns it


def nla(kind, payload):
    """One netlink attribute, padded to 4 bytes as nla_put() does."""
    head = struct.pack("=HH", 4 + len(payload), kind)
    return head + payload + bytes(-len(payload) % 4)


def message(cmd, *attrs, seq=0):
    """nlmsghdr + genlmsghdr(cmd, version 1) + ATTRS."""
    body = struct.pack("=BBH", cmd, uapi.XPU_GENL_VERSION, 0) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), FAMILY_ID, 0, seq, 0) + body


def u32(kind, v):
    return nla(kind, struct.pack("=I", v))


def u64(kind, v):
    return nla(kind, struct.pack("=Q", v))


def slice_attrs(id=3, name=b"train", minor=1, limit=8 << 30):
    return (u32(uapi.XPU_EA_SLICE_ID, id),
            nla(uapi.XPU_EA_SLICE_NAME, name + b"\0"),
            u32(uapi.XPU_EA_GPU_MINOR, minor),
            nla(uapi.XPU_EA_PAD, b""),  # as nla_put_u64_64bit may add
            u64(uapi.XPU_EA_MEMORY_LIMIT, limit))


class Parser:
    """The parse() of XpuEventSocket, without a netlink socket."""

    def __init__(self):
        from pyroute2.netlink.marshal import Marshal
        self.marshal = Marshal()
        self.msg_class = netlink.classes()[0]
        self.marshal.msg_map[FAMILY_ID] = self.msg_class

    def parse(self, data):
        return [m for m in self.marshal.parse(data)
                if isinstance(m, self.msg_class)]


def test_a_denied_allocation_decodes():
    data = message(uapi.XPU_EVENT_ALLOC_DENIED, *slice_attrs(),
                   u32(uapi.XPU_EA_PID, 4242),
                   u64(uapi.XPU_EA_SIZE, (8 << 30) + 1),
                   u64(uapi.XPU_EA_MEMORY_USED, 1 << 20),
                   u32(99, 7))  # an attribute of a newer xpu.ko: ignored
    [m] = Parser().parse(data)
    assert netlink.to_event(m, now=1700000000.25) == {
        "time": 1700000000.25, "event": "alloc_denied", "slice_id": 3,
        "name": "train", "gpu_minor": 1, "memory_limit_bytes": 8 << 30,
        "memory_used_bytes": 1 << 20, "pid": 4242,
        "size_bytes": (8 << 30) + 1}


@pytest.mark.parametrize("cmd, name, verb", [
    (uapi.XPU_EVENT_SLICE_CREATED, "slice_created", "created"),
    (uapi.XPU_EVENT_SLICE_DESTROYED, "slice_destroyed", "destroyed"),
    (uapi.XPU_EVENT_SLICE_CHANGED, "slice_changed", "changed"),
])
def test_slice_events_decode(cmd, name, verb):
    [m] = Parser().parse(message(cmd, *slice_attrs()))
    ev = netlink.to_event(m, now=1.0)
    assert ev == {"time": 1.0, "event": name, "slice_id": 3, "name": "train",
                  "gpu_minor": 1, "memory_limit_bytes": 8 << 30}
    assert describe(ev) == (f"slice 3 'train' {verb} on GPU 1, limit "
                            f"{8 << 30} bytes")


def test_an_unknown_command_is_skipped():
    [m] = Parser().parse(message(uapi.XPU_EVENT_MAX + 1, *slice_attrs()))
    assert netlink.to_event(m) is None
    hub = EventHub()
    w = netlink.NetlinkWatcher(hub)
    assert w.handle(m, lambda why: pytest.fail(why)) is None
    assert set(hub.counters().values()) == {0}


class PairSocket:
    """Stands in for XpuEventSocket: open() gives one end of a datagram
    pair, whose recv() fails with ENOBUFS when told to."""

    def __init__(self):
        self.kernel, mine = socket.socketpair(socket.AF_UNIX,
                                              socket.SOCK_DGRAM)
        self.mine = Overflowing(fileno=os.dup(mine.fileno()))
        mine.close()
        self.parser = Parser()
        self.closed = False

    def open(self):
        return self.mine

    def parse(self, data):
        return self.parser.parse(data)

    def close(self):
        self.closed = True
        self.kernel.close()


class Overflowing(socket.socket):
    overflow = threading.Event()

    def recv(self, *args):
        if self.overflow.is_set():
            self.overflow.clear()
            raise OSError(errno.ENOBUFS, os.strerror(errno.ENOBUFS))
        return super().recv(*args)


def test_the_watcher_publishes_logs_and_asks_for_a_reconcile(caplog):
    hub = EventHub()
    fake = PairSocket()
    w = netlink.NetlinkWatcher(hub, socket_factory=lambda: fake)
    sub = hub.subscribe()
    reasons = []
    got = threading.Semaphore(0)

    def changed(why):
        reasons.append(why)
        got.release()

    with caplog.at_level(logging.INFO, logger="xpu"):
        w.start(changed)
        assert got.acquire(timeout=20)  # listening: look again
        assert hub.unavailable is None
        fake.kernel.send(message(uapi.XPU_EVENT_SLICE_CREATED,
                                 *slice_attrs()))
        assert got.acquire(timeout=20)
        ev = sub.get(20)
        assert (ev["event"], ev["name"]) == ("slice_created", "train")
        # Denials are counted, not reconciled, and logged once a while.
        for _ in range(3):
            fake.kernel.send(message(uapi.XPU_EVENT_ALLOC_DENIED,
                                     *slice_attrs(),
                                     u64(uapi.XPU_EA_SIZE, 1 << 40)))
        assert [sub.get(20)["event"] for _ in range(3)] == \
            ["alloc_denied"] * 3
        # A lost event: counted, told to listeners, and a reconcile.
        Overflowing.overflow.set()
        fake.kernel.send(message(uapi.XPU_EVENT_SLICE_DESTROYED,
                                 *slice_attrs()))
        assert got.acquire(timeout=20)
        assert sub.get(20)["event"] == "events_lost"
        # What was still queued comes after.
        assert got.acquire(timeout=20)
        assert sub.get(20)["event"] == "slice_destroyed"
        w.stop()
    assert fake.closed
    assert reasons[0] == "listening to xpu.ko's events"
    assert reasons[1] == ("kernel: slice 3 'train' created on GPU 1, limit "
                          f"{8 << 30} bytes")
    assert reasons[2] == "events were lost"
    assert reasons[3].startswith("kernel: slice 3 'train' destroyed")
    assert len(reasons) == 4
    assert hub.counters() == {"slice_created": 1, "slice_destroyed": 1,
                              "slice_changed": 0, "alloc_denied": 3,
                              "events_lost": 1}
    denied = [r for r in caplog.records if "denied" in r.getMessage()]
    assert len(denied) == 1
    assert any("overflowed" in r.getMessage() for r in caplog.records)


def test_without_the_family_there_are_no_events(caplog):
    hub = EventHub()

    def missing():
        raise OSError(errno.ENOENT, "No such file or directory")

    w = netlink.NetlinkWatcher(hub, socket_factory=missing)
    with caplog.at_level(logging.INFO, logger="xpu"):
        w.start(lambda why: pytest.fail(why))
        w._thread.join(20)
    assert not w._thread.is_alive()
    assert hub.unavailable.startswith("xpu.ko sends no events (not loaded, "
                                      "or older than its netlink family)")
    w.stop()
    assert any("sends no events" in r.getMessage() for r in caplog.records)


def test_a_slow_listener_is_told_what_it_lost():
    hub = EventHub(queue_size=2)
    sub = hub.subscribe()
    for i in range(5):
        hub.publish({"time": i, "event": "slice_changed"})
    lost = sub.get(1)
    assert (lost["event"], lost["count"]) == ("events_lost", 3)
    assert [sub.get(1)["time"] for _ in range(2)] == [0, 1]
    assert sub.get(0.01) is None
    sub.close()
    hub.publish({"time": 9, "event": "slice_changed"})  # counted only
    assert hub.counters()["slice_changed"] == 6


def test_events_asked_for_before_the_watcher_starts_are_said_to_be_coming():
    """xpud serves its socket before it starts its watchers, so a client can
    ask for events in between: it is told xpud is starting to listen (the
    API's 'unsupported ... starting'), not that xpud is not listening and
    should be restarted (a flaky test_xpud_events.py in session 21's CI)."""
    hub = EventHub()
    netlink.NetlinkWatcher(hub)
    assert "starting" in hub.unavailable
