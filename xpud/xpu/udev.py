# SPDX-License-Identifier: Apache-2.0
"""Device events through pyudev: NVIDIA GPUs and xpu's devices appearing and
disappearing make xpud read the inventory and the kernel again.

What counts (relevant()):
  - a PCI device of NVIDIA's (vendor 0x10de) with a display class (0x03xxxx):
    a GPU bound, unbound, added or removed;
  - the modules nvidia, nvidia_uvm, nvidia_modeset, nvstub (the simulated
    driver) and xpu, loaded or unloaded;
  - the misc device xpuctl (xpu.ko's admin device) and the nvidia-caps and
    nvidia-uvm character devices, added or removed.

Events come from udevd when it runs (/run/udev/control exists), else straight
from the kernel (root only), so that a node without udevd (the test VM) is
watched too.  A burst of events ends in one reconcile: the daemon coalesces
requests.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

NVIDIA_VENDOR = "0x10de"
MODULES = {"nvidia", "nvidia_uvm", "nvidia_modeset", "nvstub", "xpu"}
CHAR_DEVICES = {"xpuctl", "nvidia-caps", "nvidia-uvm"}
ACTIONS = {"add", "remove", "bind", "unbind", "change", "move"}


def relevant(action: str | None, subsystem: str | None, sys_name: str,
             attrs: Mapping[str, str]) -> str | None:
    """Why an event matters to xpud, or None."""
    if action not in ACTIONS:
        return None
    if subsystem == "pci":
        if attrs.get("vendor") == NVIDIA_VENDOR and \
                attrs.get("class", "").startswith("0x03"):
            return f"GPU {sys_name}: {action}"
        return None
    if subsystem == "module" and sys_name in MODULES:
        return f"module {sys_name}: {action}"
    if subsystem in ("misc", "nvidia-caps", "nvidia-uvm") and \
            sys_name in CHAR_DEVICES:
        return f"device {sys_name}: {action}"
    return None


def _attrs(device, names=("vendor", "class")) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            value = device.attributes.asstring(name)
        except (KeyError, UnicodeDecodeError, OSError):
            continue
        out[name] = value.strip()
    return out


def _monitor(udev_control: str = "/run/udev/control"):
    import pyudev  # only when watching

    source = "udev" if os.path.exists(udev_control) else "kernel"
    context = pyudev.Context()
    monitor = pyudev.Monitor.from_netlink(context, source=source)
    for subsystem in ("pci", "module", "misc"):
        monitor.filter_by(subsystem)
    monitor.start()
    return monitor, source


class UdevWatcher:
    """A Watcher (daemon.py) of device events."""

    def __init__(self, monitor_factory=_monitor):
        self._factory = monitor_factory
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self.monitor = None
        self.seen: list[str] = []   # the relevant events, for tests

    def start(self, changed: Callable[[str], None]) -> None:
        try:
            self.monitor, source = self._factory()
        except Exception as e:  # noqa: BLE001 -- no udev: periodic resync
            log.info("no device events (%s): GPUs and xpu.ko are looked "
                     "at again periodically", e)
            return
        log.info("watching device events (from %s)", source)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._loop, args=(changed,),
                                        name="xpud-udev", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
            os.close(self._wake_r)
            os.close(self._wake_w)
        self.monitor = None

    def _loop(self, changed: Callable[[str], None]) -> None:
        poller = select.poll()
        poller.register(self.monitor.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_r in ready:
                return
            try:
                device = self.monitor.poll(timeout=0)
            except OSError as e:  # ENOBUFS: a burst was lost, look anyway
                changed(f"device events lost ({e.strerror})")
                continue
            if device is None:
                continue
            self.handle(device, changed)

    def handle(self, device, changed: Callable[[str], None]) -> str | None:
        why = relevant(device.action, device.subsystem, device.sys_name,
                       _attrs(device) if device.subsystem == "pci" else {})
        if why is not None:
            self.seen.append(why)
            log.info("device event: %s", why)
            changed(f"udev: {why}")
        return why
