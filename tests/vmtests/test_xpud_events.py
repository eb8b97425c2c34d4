# SPDX-License-Identifier: Apache-2.0
"""xpu.ko's events on the generic netlink family "xpu" (kmod/events.c):
heard directly, lost on purpose, and through xpud and `xpuctl events`.

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests/test_xpud_events.py
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time

import nvtest
import pytest
import xpudtest
from xpu import api, ctl, netlink, uapi
from xpu.client import Client
from xpudtest import LIMIT, MIB, WAIT, ask, create, finish


@pytest.fixture(scope="module", autouse=True)
def _require_xpu():
    xpudtest.require_slice_interface()


nodedir = xpudtest.nodedir
xpud = xpudtest.xpud


@pytest.fixture
def listener():
    """(the pyroute2 socket, the datagram socket) joined to 'events'."""
    nl = netlink.open_socket()
    try:
        sock = nl.open()
    except Exception as e:  # noqa: BLE001 -- NetlinkError is no OSError
        nl.close()
        pytest.fail(f"xpu.ko's netlink family is missing: {e}")
    sock.settimeout(WAIT)
    yield nl, sock
    sock.close()
    nl.close()


def events(listener, n):
    nl, sock = listener
    out = []
    while len(out) < n:
        for m in nl.parse(sock.recv(65536)):
            ev = netlink.to_event(m)
            assert ev is not None, m
            out.append(ev)
    return out


class RawSlice:
    """A slice on GPU 0 with its nodes made and attached by hand."""

    def __init__(self, c, nodedir, name="t-ev", limit=LIMIT):
        self.c = c
        self.info = c.slice_create(name, 0, limit)
        self.gpu = str(nodedir / f"g{self.info.id}")
        self.ctl = str(nodedir / f"c{self.info.id}")
        os.mknod(self.gpu, 0o20600, os.makedev(195, 0))
        os.mknod(self.ctl, 0o20600, os.makedev(195, 255))
        c.node_attach(self.info.id, self.gpu, uapi.XPU_NODE_GPU)
        c.node_attach(self.info.id, self.ctl, uapi.XPU_NODE_CTL)

    def denied(self, size, times=1):
        """TIMES allocations of SIZE bytes in a child inside the slice,
        each refused; returns the child's pid."""
        r = nvtest.run_child(f"""
            ctl = client.Ctl({self.ctl!r})
            gpu = client.GpuFile(0, {self.gpu!r})
            rm = client.RmClient(ctl)
            dev = rm.device(0, gpu_file=gpu)
            refused = 0
            for _ in range({times}):
                try:
                    dev.alloc_vidmem({size})
                except client.NvStatusError as e:
                    refused += e.status == abi.NV_ERR_NO_MEMORY
            dev.close(); rm.close(); gpu.close(); ctl.close()
            report(pid=os.getpid(), refused=refused)
        """)
        assert r["refused"] == times
        return r["pid"]


def test_the_family_and_its_group(listener):
    nl, _ = listener
    assert nl.prid > 0
    assert set(nl.mcast_groups) == {uapi.XPU_GENL_MCGRP_EVENTS}


def test_create_change_deny_destroy(listener, nodedir):
    with ctl.Ctl() as c:
        s = RawSlice(c, nodedir)
        c.slice_set(s.info.id, memory_limit=2 * LIMIT)
        pid = s.denied(4 * LIMIT)
        c.slice_destroy(s.info.id)
    got = events(listener, 4)
    base = {"slice_id": s.info.id, "name": "t-ev", "gpu_minor": 0}
    for ev in got:
        assert ev.pop("time") == pytest.approx(time.time(), abs=WAIT)
    assert got[0] == dict(base, event="slice_created",
                          memory_limit_bytes=LIMIT)
    assert got[1] == dict(base, event="slice_changed",
                          memory_limit_bytes=2 * LIMIT)
    assert got[2] == dict(base, event="alloc_denied",
                          memory_limit_bytes=2 * LIMIT, pid=pid,
                          size_bytes=4 * LIMIT, memory_used_bytes=0)
    assert got[3] == dict(base, event="slice_destroyed",
                          memory_limit_bytes=2 * LIMIT)


def test_a_listener_that_does_not_read_gets_enobufs(listener, nodedir):
    _, sock = listener
    # The smallest buffer the kernel allows: a few messages fill it.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    with ctl.Ctl() as c:
        s = RawSlice(c, nodedir)
        s.denied(2 * LIMIT, times=20)    # ten events, in the first second
        with pytest.raises(OSError) as e:
            while True:
                sock.recv(65536)   # what fitted, then the overflow
        assert e.value.errno == errno.ENOBUFS
        # The kernel delivers again once the queue is drained (it stays
        # congested until then): read what is queued, then the next event.
        sock.setblocking(False)
        while True:
            try:
                sock.recv(65536)
            except BlockingIOError:
                break
        sock.settimeout(xpudtest.WAIT)
        c.slice_destroy(s.info.id)
    assert events(listener, 1)[0]["event"] == "slice_destroyed"


def test_a_tenant_refused_in_a_loop_cannot_flood_the_listeners(listener,
                                                                nodedir):
    """A tenant can be refused as fast as it can call: every refusal is
    counted, but at most ten a second per slice are told (docs/xpud.md),
    so a loop of refusals cannot keep xpud busy parsing events nor push
    out the other slices' events. Without the bound, all 2000 came."""
    _, sock = listener
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    with ctl.Ctl() as c:
        s = RawSlice(c, nodedir)
        t0 = time.monotonic()
        s.denied(2 * LIMIT, times=2000)
        took = time.monotonic() - t0
        assert c.slice_get(s.info.id).denied_allocs == 2000
        c.slice_destroy(s.info.id)
    denied = 0
    while True:
        ev = events(listener, 1)[0]
        if ev["event"] == "slice_destroyed":
            break
        denied += ev["event"] == "alloc_denied"
    assert 1 <= denied <= 10 * (int(took) + 2), (denied, took)


def _stream(x):
    """A Client streaming xpud's events, once xpud listens to xpu.ko (in
    its own thread after READY: slow on a loaded emulated guest)."""
    deadline = time.monotonic() + 5 * WAIT
    while True:
        c = Client(x.socket, timeout=WAIT)
        st = c.stream("events")
        try:
            first = next(st)
        except api.ApiError as e:
            c.close()
            assert e.code == "unsupported" and "starting" in e.message, e
            assert time.monotonic() < deadline, e.message
            time.sleep(0.1)
            continue
        assert set(first["counters"]) == {
            "slice_created", "slice_destroyed", "slice_changed",
            "alloc_denied", "events_lost"}
        return c, st


def _log_has(x, text):
    """Wait until xpud's log has TEXT."""
    deadline = time.monotonic() + WAIT
    while text not in x.log.read_text():
        assert x.proc.poll() is None, x.log.read_text()
        assert time.monotonic() < deadline, x.log.read_text()
        time.sleep(0.1)


def test_xpud_streams_the_events(xpud):
    """One xpud: the API's stream, `xpuctl events`, device events."""
    c, st = _stream(xpud)
    try:
        s = create(xpud, "t-ev")
        assert next(st)["event"] == "slice_created"
        p, seen = xpud.run_client("t-ev")
        try:
            assert ask(p, f"alloc {LIMIT + MIB}")["ok"] is False
            ev = next(st)
            assert (ev["event"], ev["pid"], ev["slice_id"], ev["name"]) == (
                "alloc_denied", seen["pid"], s["id"], "t-ev")
            assert ev["size_bytes"] >= LIMIT + MIB
        finally:
            assert finish(p) == 0
        xpud.call("destroy", name="t-ev")
        ev = next(st)
        assert (ev["event"], ev["slice_id"]) == ("slice_destroyed", s["id"])
    finally:
        c.close()
    log = xpud.log.read_text()
    assert "listening to xpu.ko's events" in log
    assert f"slice {s['id']} 't-ev' created on GPU 0" in log
    assert "denied" in log

    # xpuctl events: it subscribes once started; make events until it has
    # two.
    p = subprocess.Popen(
        [sys.executable, "-m", "xpu.cli", "--socket", xpud.socket, "events",
         "-o", "json", "--count", "2"], env=xpud.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + WAIT
    while p.poll() is None:
        assert time.monotonic() < deadline, "xpuctl events saw nothing"
        xpud.call("create", name="t-cli", gpu=1, memory_limit_bytes=LIMIT)
        xpud.call("destroy", name="t-cli")
        time.sleep(0.2)  # pacing, not waiting: the loop ends on exit
    out, err = p.communicate(timeout=WAIT)
    assert (p.returncode, err) == (0, "")
    evs = [json.loads(line) for line in out.splitlines()]
    assert len(evs) == 2
    assert {e["event"] for e in evs} <= {"slice_created", "slice_destroyed"}
    assert all(e["name"] == "t-cli" and e["gpu_minor"] == 1 for e in evs)

    # Device events: no udevd in the VM, xpud reads the kernel's uevents.
    _log_has(xpud, "watching device events (from ")
    # A uevent of the module, as at its load or unload.
    with open("/sys/module/xpu/uevent", "w") as f:
        f.write("change")
    _log_has(xpud, "device event: module xpu: change")
    # Of the admin device, as when xpu.ko makes it.
    with open("/sys/class/misc/xpuctl/uevent", "w") as f:
        f.write("add")
    _log_has(xpud, "device event: device xpuctl: add")
