# SPDX-License-Identifier: Apache-2.0
"""Slice events as xpud hands them on: their names and fields (docs/api.md,
"Event"), a line for a person, and the hub that counts them and fans them out
to `xpuctl events` listeners.  netlink.py hears them from xpu.ko.
"""

from __future__ import annotations

import queue
import threading
import time

from . import uapi

NAMES = {
    uapi.XPU_EVENT_SLICE_CREATED: "slice_created",
    uapi.XPU_EVENT_SLICE_DESTROYED: "slice_destroyed",
    uapi.XPU_EVENT_SLICE_CHANGED: "slice_changed",
    uapi.XPU_EVENT_ALLOC_DENIED: "alloc_denied",
}
LOST = "events_lost"

# XPU_EA_* -> the event's field.
FIELDS = {
    "XPU_EA_SLICE_ID": "slice_id",
    "XPU_EA_SLICE_NAME": "name",
    "XPU_EA_GPU_MINOR": "gpu_minor",
    "XPU_EA_MEMORY_LIMIT": "memory_limit_bytes",
    "XPU_EA_MEMORY_USED": "memory_used_bytes",
    "XPU_EA_PID": "pid",
    "XPU_EA_SIZE": "size_bytes",
}


def describe(ev: dict) -> str:
    """One line for a person (the log, `xpuctl events`)."""
    what = ev["event"]
    if what == LOST:
        return f"{ev.get('count', 1)} event(s) lost: the slices are read again"
    s = f"slice {ev.get('slice_id')} '{ev.get('name')}'"
    if what == "alloc_denied":
        return (f"{s}: {ev.get('size_bytes')} bytes asked by pid "
                f"{ev.get('pid')} denied ({ev.get('memory_used_bytes')} of "
                f"{ev.get('memory_limit_bytes')} used)")
    verb = {"slice_created": "created", "slice_destroyed": "destroyed",
            "slice_changed": "changed"}[what]
    return (f"{s} {verb} on GPU {ev.get('gpu_minor')}, limit "
            f"{ev.get('memory_limit_bytes')} bytes")


class Subscription:
    """One listener's queue; get() waits for the next event."""

    def __init__(self, hub: EventHub, size: int):
        self._hub = hub
        self._q: queue.Queue = queue.Queue(size)
        self._lock = threading.Lock()
        self._dropped = 0

    def put(self, ev: dict) -> None:
        try:
            self._q.put_nowait(ev)
        except queue.Full:  # a slow listener loses events, not xpud
            with self._lock:
                self._dropped += 1

    def get(self, timeout: float) -> dict | None:
        """The next event, an `events_lost` event when this listener's
        queue overflowed, or None after TIMEOUT seconds."""
        with self._lock:
            n, self._dropped = self._dropped, 0
        if n:
            return {"time": round(time.time(), 3), "event": LOST,
                    "count": n}
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._hub._unsubscribe(self)


class EventHub:
    """Counts events and hands each to every subscription."""

    def __init__(self, queue_size: int = 1024):
        self._lock = threading.Lock()
        self._subs: set[Subscription] = set()
        self._counts: dict[str, int] = {}
        self.queue_size = queue_size
        # None: no source yet; else why events cannot come (or "").
        self.unavailable: str | None = "xpud is not listening to xpu.ko"

    def subscribe(self) -> Subscription:
        s = Subscription(self, self.queue_size)
        with self._lock:
            self._subs.add(s)
        return s

    def _unsubscribe(self, s: Subscription) -> None:
        with self._lock:
            self._subs.discard(s)

    def publish(self, ev: dict) -> None:
        n = ev.get("count", 1) if ev["event"] == LOST else 1
        with self._lock:
            self._counts[ev["event"]] = self._counts.get(ev["event"], 0) + n
            subs = list(self._subs)
        for s in subs:
            s.put(ev)

    def counters(self) -> dict[str, int]:
        with self._lock:
            return {name: self._counts.get(name, 0)
                    for name in (*NAMES.values(), LOST)}


