# SPDX-License-Identifier: Apache-2.0
"""One node's GPUs as Kubernetes may use them, from xpud's own truth, and
the reservations the scheduler extender makes on the node.

Room on a GPU = its memory, less every slice's limit (Kubernetes' or not),
less the memory processes hold outside any slice (xpud's `gpus`:
memory_used_outside_slices_bytes, from NVML where it is known), less what
reservations not yet made into slices hold.  Compute room = 100 % less every
slice's share, less the reservations'.

Reservations are how two extender replicas never double-book a node: the
extender's bind asks the node (agent.py) to reserve, and the node answers
from its own state under one lock, so of two binds that both fit alone but
not together, the second is refused.  A reservation is keyed by the pod's
UID, so a repeated bind finds its own; it is consumed when kubelet starts
the container (PreStartContainer names the pod through kubelet's pod
resources API), and expires after a TTL when the pod never came (a lost
bind), so a lost or repeated bind costs nothing lasting.  The node never
needs a reservation to admit a pod: kubelet's Allocate works from xpud's
state alone, and reservations only steer which GPU it picks.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

from .. import client as xpu_client
from ..api import ApiError
from ..errors import ConnectError

log = logging.getLogger(__name__)

BINPACK = "binpack"
SPREAD = "spread"
POLICIES = (BINPACK, SPREAD)
DEFAULT_TTL_S = 300.0


class NodeError(Exception):
    """xpud cannot be asked, or refused; str() is one line."""


class NoRoom(Exception):
    """The request does not fit; str() says why, in one line."""


@dataclass
class Gpu:
    uuid: str
    index: int
    minor: int
    name: str
    memory_total: int           # bytes
    memory_free: int            # bytes, for new slices
    compute_free: int           # percent
    memory_outside: int = 0     # bytes used outside slices
    healthy: bool = True


def ask(socket: str, op: str, **args):
    """One request to xpud; NodeError with its message when it fails."""
    try:
        with xpu_client.Client(socket, timeout=10.0) as c:
            return c.call(op, **args)
    except (ApiError, ConnectError) as e:
        raise NodeError(str(e)) from None


def gpus_from(gpus: list, slices: list) -> list[Gpu]:
    """Room on each GPU from xpud's `gpus` and `list` results."""
    out = []
    for g in gpus:
        uuid = g.get("gpu_uuid")
        total = g.get("memory_total_bytes")
        if not uuid or not total:
            continue  # not usable: no UUID yet, or size unknown
        mine = [s for s in slices if s.get("gpu_uuid") == uuid]
        limits = sum(s["memory_limit_bytes"] for s in mine)
        outside = g.get("memory_used_outside_slices_bytes") or 0
        shares = sum(s.get("compute_share") or 0 for s in mine)
        out.append(Gpu(uuid=uuid, index=g["index"], minor=g["gpu_minor"],
                       name=g.get("name", ""), memory_total=total,
                       memory_free=max(total - limits - outside, 0),
                       compute_free=max(int(100 - shares), 0),
                       memory_outside=outside,
                       healthy=g.get("state") == "ready"))
    return out


def snapshot(socket: str) -> tuple[list[Gpu], list[dict]]:
    slices = ask(socket, "list")
    return gpus_from(ask(socket, "gpus"), slices), slices


def pick(gpus: list[Gpu], memory: int, compute: int, policy: str,
         prefer: str | None = None) -> Gpu:
    """The GPU for a slice of MEMORY bytes and COMPUTE percent: PREFER when
    it fits, else by POLICY (binpack: the fullest that fits; spread: the
    emptiest).  Raises NoRoom."""
    fit = [g for g in gpus if g.healthy and g.memory_free >= memory
           and g.compute_free >= compute]
    if not fit:
        best = max(gpus, key=lambda g: g.memory_free, default=None)
        if best is None:
            raise NoRoom("no GPU that xpud can slice")
        raise NoRoom(
            f"no GPU has {memory >> 20} MiB and {compute} % free (the most "
            f"free: GPU {best.index}, {best.memory_free >> 20} MiB and "
            f"{best.compute_free} %)")
    for g in fit:
        if g.uuid == prefer:
            return g
    key = (lambda g: (g.memory_free, g.compute_free, g.index))
    return min(fit, key=key) if policy == BINPACK else \
        max(fit, key=lambda g: (g.memory_free, g.compute_free, -g.index))


# -- reservations --------------------------------------------------------------

RESERVED = "reserved"     # booked by the extender's bind
ALLOCATED = "allocated"   # Allocate made a slice of its size on its GPU


@dataclass
class Entry:
    """One container of a reserved pod."""

    container: str
    gpu_uuid: str
    memory: int        # bytes
    compute: int       # percent
    state: str = RESERVED
    slice: str | None = None


@dataclass
class Reservation:
    uid: str
    namespace: str
    name: str
    expires: float
    entries: list[Entry] = field(default_factory=list)


class Reservations:
    """The node's reservations, kept in a JSON file (atomic replace) so that
    a restart of xpu-k8s forgets no booking."""

    def __init__(self, path: str | None, ttl_s: float = DEFAULT_TTL_S,
                 clock=time.time):
        self.path = path
        self.ttl_s = ttl_s
        self.clock = clock
        self.lock = threading.RLock()
        self._by_uid: dict[str, Reservation] = {}
        self._load()

    def _load(self) -> None:
        if not self.path or not os.path.exists(self.path):
            return
        try:
            with open(self.path) as f:
                doc = json.load(f)
            for r in doc["reservations"]:
                entries = [Entry(**e) for e in r.pop("entries")]
                self._by_uid[r["uid"]] = Reservation(**r, entries=entries)
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("reservations file %s is unreadable, starting with "
                        "none: %s", self.path, e)
            self._by_uid = {}

    def _save(self) -> None:
        if not self.path:
            return
        d = os.path.dirname(self.path) or "."
        os.makedirs(d, exist_ok=True)
        doc = {"reservations": [asdict(r) for r in self._by_uid.values()]}
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".reservations.")
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def expire(self) -> None:
        with self.lock:
            now = self.clock()
            gone = [u for u, r in self._by_uid.items() if r.expires <= now]
            for u in gone:
                r = self._by_uid.pop(u)
                log.info("reservation of pod %s/%s expired (the pod never "
                         "started here)", r.namespace, r.name)
            if gone:
                self._save()

    def list(self) -> list[Reservation]:
        with self.lock:
            self.expire()
            return list(self._by_uid.values())

    def held(self, gpus: list[Gpu]) -> list[Gpu]:
        """GPUS less what reservations hold: a reserved entry its memory and
        compute; an allocated one its compute (its slice holds the memory,
        with compute 0 until the container starts)."""
        out = {g.uuid: Gpu(**asdict(g)) for g in gpus}
        for r in self.list():
            for e in r.entries:
                g = out.get(e.gpu_uuid)
                if g is None:
                    continue
                if e.state == RESERVED:
                    g.memory_free = max(g.memory_free - e.memory, 0)
                g.compute_free = max(g.compute_free - e.compute, 0)
        return list(out.values())

    def reserve(self, gpus: list[Gpu], uid: str, namespace: str, name: str,
                containers: list[tuple[str, int, int]],
                policy: str) -> Reservation:
        """Book CONTAINERS ((name, memory bytes, compute %) each) of pod UID
        on GPUS (xpud's room now).  The same UID again returns its booking
        unchanged.  Raises NoRoom, and then books nothing."""
        with self.lock:
            old = self._by_uid.get(uid)
            if old is not None:
                return old
            room = self.held(gpus)
            entries = []
            for cname, memory, compute in containers:
                try:
                    g = pick(room, memory, compute, policy)
                except NoRoom as e:
                    raise NoRoom(f"container {cname}: {e}") from None
                g.memory_free -= memory
                g.compute_free -= compute
                entries.append(Entry(cname, g.uuid, memory, compute))
            r = Reservation(uid, namespace, name, self.clock() + self.ttl_s,
                            entries)
            self._by_uid[uid] = r
            self._save()
            return r

    def release(self, uid: str) -> bool:
        with self.lock:
            r = self._by_uid.pop(uid, None)
            if r is not None:
                self._save()
            return r is not None

    def prefer(self, memory: int) -> str | None:
        """The GPU of a booked container of MEMORY bytes not yet
        allocated, if any."""
        for r in self.list():
            for e in r.entries:
                if e.state == RESERVED and e.memory == memory:
                    return e.gpu_uuid
        return None

    def allocated(self, gpu_uuid: str, memory: int, slice_name: str) -> None:
        """Allocate made SLICE_NAME of MEMORY bytes on GPU_UUID: one booked
        container of that size there is now held by it (which one does not
        matter: they are alike in memory; compute stays booked)."""
        with self.lock:
            for r in self.list():
                for e in r.entries:
                    if (e.state, e.gpu_uuid, e.memory) == (RESERVED, gpu_uuid,
                                                           memory):
                        e.state, e.slice = ALLOCATED, slice_name
                        self._save()
                        return

    def consume(self, namespace: str, name: str, container: str,
                slice_name: str) -> Entry | None:
        """The container started (PreStartContainer): its booking ends.
        The entry Allocate marked for SLICE_NAME is freed too, if it was
        another pod's look-alike, back to RESERVED for that pod."""
        with self.lock:
            found = None
            for r in list(self._by_uid.values()):
                if (r.namespace, r.name) != (namespace, name):
                    continue
                for e in r.entries:
                    if e.container == container:
                        found = e
                r.entries = [e for e in r.entries if e is not found]
                if not r.entries:
                    del self._by_uid[r.uid]
            for r in self._by_uid.values():
                for e in r.entries:
                    if e.slice == slice_name:
                        e.state, e.slice = RESERVED, None
            self._save()
            return found
