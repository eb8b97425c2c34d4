# SPDX-License-Identifier: Apache-2.0
"""Device events (udev.py): which ones make xpud look again, and the
watcher's thread on a fake monitor.  Real uevents are tested in the VM
(tests/vmtests/test_xpud_events.py), where no udevd runs and the kernel's
own events are read."""

import logging
import os
import queue
import threading

import pytest
from xpu import udev

GPU = {"vendor": "0x10de", "class": "0x030200"}


@pytest.mark.parametrize("event, why", [
    (("add", "pci", "0000:18:00.0", GPU), "GPU 0000:18:00.0: add"),
    (("remove", "pci", "0000:18:00.0", GPU), "GPU 0000:18:00.0: remove"),
    (("bind", "pci", "0000:18:00.0", GPU), "GPU 0000:18:00.0: bind"),
    (("unbind", "pci", "0000:19:00.0", GPU), "GPU 0000:19:00.0: unbind"),
    (("add", "pci", "0000:18:00.1", {"vendor": "0x10de",
                                     "class": "0x040300"}), None),  # audio
    (("add", "pci", "0000:03:00.0", {"vendor": "0x8086",
                                     "class": "0x030000"}), None),
    (("add", "pci", "0000:18:00.0", {}), None),
    (("add", "module", "nvidia", {}), "module nvidia: add"),
    (("remove", "module", "xpu", {}), "module xpu: remove"),
    (("add", "module", "nvstub", {}), "module nvstub: add"),
    (("add", "module", "ext4", {}), None),
    (("add", "misc", "xpuctl", {}), "device xpuctl: add"),
    (("change", "misc", "xpuctl", {}), "device xpuctl: change"),
    (("add", "misc", "fuse", {}), None),
    ((None, "module", "xpu", {}), None),
    (("online", "module", "xpu", {}), None),
])
def test_relevant(event, why):
    assert udev.relevant(*event) == why


class Attributes:
    def __init__(self, values):
        self.values = values

    def asstring(self, name):
        return self.values[name] + "\n"


class Device:
    def __init__(self, action, subsystem, sys_name, attrs=None):
        self.action, self.subsystem, self.sys_name = action, subsystem, \
            sys_name
        self.attributes = Attributes(attrs or {})


class FakeMonitor:
    """pyudev.Monitor's fileno() and poll(), fed by the test."""

    def __init__(self):
        self.r, self.w = os.pipe()
        self.q = queue.Queue()

    def fileno(self):
        return self.r

    def send(self, device):
        self.q.put(device)
        os.write(self.w, b"x")

    def poll(self, timeout=None):
        os.read(self.r, 1)
        return self.q.get_nowait()


def test_the_watcher_asks_for_a_reconcile(caplog):
    mon = FakeMonitor()
    w = udev.UdevWatcher(lambda: (mon, "kernel"))
    reasons = queue.Queue()
    with caplog.at_level(logging.INFO, logger="xpu"):
        w.start(reasons.put)
        mon.send(Device("add", "misc", "fuse"))           # not ours
        mon.send(Device("add", "pci", "0000:18:00.0", GPU))
        assert reasons.get(timeout=20) == "udev: GPU 0000:18:00.0: add"
        mon.send(Device("remove", "module", "xpu"))
        assert reasons.get(timeout=20) == "udev: module xpu: remove"
        w.stop()
    assert reasons.empty()
    assert w.seen == ["GPU 0000:18:00.0: add", "module xpu: remove"]
    assert "watching device events (from kernel)" in caplog.text
    assert "device event: module xpu: remove" in caplog.text


def test_without_udev_nothing_is_watched(caplog):
    def broken():
        raise OSError(93, "Protocol not supported")

    w = udev.UdevWatcher(broken)
    with caplog.at_level(logging.INFO, logger="xpu"):
        w.start(lambda why: pytest.fail(why))
    w.stop()
    assert "no device events ([Errno 93] Protocol not supported)" in \
        caplog.text
    assert threading.active_count() >= 1
