# SPDX-License-Identifier: Apache-2.0
"""Telling systemd how xpud is doing (sd_notify(3)), through sdnotify.

Nothing is sent when NOTIFY_SOCKET is not set (xpud --foreground by hand).
The watchdog interval is half of WATCHDOG_USEC, as sd_watchdog_enabled(3)
advises, and only when WATCHDOG_PID is unset or ours.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping


def _default_notifier():
    import sdnotify  # only when systemd asked for notifications
    n = sdnotify.SystemdNotifier()
    # Never wait for the reader: a full queue (a manager that does not
    # read) must not stop xpud from serving, or from stopping.  sdnotify
    # drops what cannot be sent.
    if n.socket is not None:
        n.socket.setblocking(False)
    return n


class Notifier:
    def __init__(self, environ: Mapping[str, str] = os.environ,
                 factory: Callable[[], object] = _default_notifier):
        self._n = factory() if environ.get("NOTIFY_SOCKET") else None
        self.watchdog_interval: float | None = None
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        if self._n and usec.isdigit() and int(usec) > 0 and (
                not pid or pid == str(os.getpid())):
            self.watchdog_interval = int(usec) / 2e6

    @property
    def enabled(self) -> bool:
        return self._n is not None

    def send(self, *assignments: str) -> None:
        if self._n is not None:
            self._n.notify("\n".join(assignments))

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    def reloading(self) -> None:
        # MONOTONIC_USEC is what Type=notify-reload wants with RELOADING=1.
        self.send("RELOADING=1",
                  f"MONOTONIC_USEC={time.monotonic_ns() // 1000}",
                  "STATUS=reloading the configuration")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def stopping(self) -> None:
        self.send("STOPPING=1", "STATUS=stopping")
