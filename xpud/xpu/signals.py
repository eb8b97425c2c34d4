# SPDX-License-Identifier: Apache-2.0
"""Signal handlers that may take locks.

Python runs a signal handler in the main thread, between two bytecodes of
whatever that thread was doing: inside threading.Event.wait() or .clear(),
say, with the Event's internal lock held.  A handler that then sets the
Event, or takes any other lock the main thread may hold, waits for its own
thread for ever: xpud could hang on SIGTERM that way, and the signal came
just as it entered its main loop.  With SignalRelay the handlers run on a
thread of their own instead: the interpreter's C-level handler writes the
signal's number to a pipe (signal.set_wakeup_fd), and the relay thread
reads it and calls the handler, as any other thread would.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self  # 3.11; an annotation only

log = logging.getLogger(__name__)

Handler = Callable[[int], None]


def _pending(signum, frame):
    """The Python-level handler: nothing; the relay thread does the work."""


class SignalRelay:
    """A context manager, entered in the main thread: while it is, each
    signal of HANDLERS is caught and its handler called with the signal's
    number on the relay thread.  The previous handlers (and wakeup fd) come
    back on exit.  A handler's exception is logged, and the relay goes on."""

    def __init__(self, handlers: Mapping[int, Handler],
                 name: str = "signals"):
        self.handlers = dict(handlers)
        self.name = name
        self._r = self._w = -1
        self._old: dict[int, object] = {}
        self._old_fd = -1
        self._woken = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("signals are caught in the main thread only")
        self._r, self._w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._w, False)     # set_wakeup_fd requires it
        try:
            self._old_fd = signal.set_wakeup_fd(self._w,
                                                warn_on_full_buffer=False)
            self._woken = True
            for sig in self.handlers:
                self._old[sig] = signal.signal(sig, _pending)
        except BaseException:
            self._restore()
            raise
        self._thread = threading.Thread(target=self._relay, name=self.name,
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
        if self._woken:
            signal.set_wakeup_fd(self._old_fd)
            self._woken = False
        if self._w >= 0:
            os.close(self._w)           # the relay reads the end of the pipe
            self._w = -1
        if self._thread is not None:
            # Bounded: a handler that never returns must not hold the exit.
            self._thread.join(5.0)
            alive = self._thread.is_alive()
            self._thread = None
            if alive:
                log.warning("a signal handler has not returned in 5 s")
                return          # its pipe stays open while it may read
        if self._r >= 0:
            os.close(self._r)
            self._r = -1

    def _relay(self) -> None:
        while True:
            data = os.read(self._r, 512)
            if not data:
                return
            for signum in data:
                handler = self.handlers.get(signum)
                if handler is None:
                    continue    # another signal with a Python handler
                try:
                    handler(signum)
                except Exception:   # keep relaying
                    log.exception("the handler of signal %d failed", signum)
