# SPDX-License-Identifier: Apache-2.0
"""xpud's desired state on disk: /var/lib/xpu/state.json.

What xpuctl changed is kept here, so that a restart of xpud (or of the node)
brings back the same slices: the slices made with `xpuctl create` and the
cgroup bindings of every slice.  Slices defined in the configuration are the
configuration's; only their bindings are kept here.

    {"schema": 1,
     "slices": [{"name": ..., "gpu_uuid": ..., "memory_limit_bytes": ...,
                 "compute_share": ..., "weight": ..., "priority": ...,
                 "cgroups": [...]}],
     "config_bindings": {"NAME": ["/cgroup/path", ...]}}

A slice with a bound on the system memory the driver allocates for it adds
"host_memory_limit_bytes" (absent: 0, no bound).

Containers (xpu/cdi) add, only where they have something: a slice's
"transient_cgroups" (bound while they have processes) and "owner" (an
ephemeral slice: {"tag", "pid", "pid_start", "bound", "released"}), and
"transient_bindings" {NAME: [...]} for configuration slices.  An xpud that
predates them ignores them.

compute_share is in tenths of a percent here (an exact integer), unlike the
socket API's percentage.

Writes are atomic: a temporary file in the same directory, fsync, rename over
the old file, fsync of the directory.  A file that cannot be read as this
schema is corrupt: it is renamed to state.json.corrupt-<UTC time>, one line
says so, and xpud starts from the configuration.  A file of a newer schema
is not corrupt but unknown: xpud refuses to start rather than overwrite it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, model
from .errors import StateError

DEFAULT_DIR = "/var/lib/xpu"
FILE_NAME = "state.json"
SCHEMA = 1

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SliceRecord:
    """A slice made through the API; transient: cgroups bound while they
    have processes (containers'); owner: an ephemeral slice's."""

    spec: model.SliceSpec
    cgroups: tuple[str, ...] = ()
    transient: tuple[str, ...] = ()
    owner: model.Owner | None = None


@dataclass
class State:
    slices: list[SliceRecord] = field(default_factory=list)
    config_bindings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The transient bindings of configuration slices.
    transient_bindings: dict[str, tuple[str, ...]] = field(
        default_factory=dict)


class _Corrupt(Exception):
    pass


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise _Corrupt(what)


def _cgroups(value: object, where: str) -> tuple[str, ...]:
    _expect(isinstance(value, list)
            and all(isinstance(c, str) and c.startswith("/") for c in value),
            f"{where}: cgroups must be a list of absolute paths")
    return tuple(value)


def _slice_from_json(obj: object, i: int) -> SliceRecord:
    where = f"slices[{i}]"
    _expect(isinstance(obj, dict), f"{where} is not an object")
    try:
        name = model.check_name(obj.get("name"))
        gpu = model.parse_gpu_ref(obj.get("gpu_uuid"))
        _expect(isinstance(gpu, str), f"{where}: gpu_uuid is not a UUID")
        share = obj.get("compute_share")
        _expect(isinstance(share, int) and not isinstance(share, bool)
                and 0 <= share <= 1000, f"{where}: bad compute_share")
        spec = model.SliceSpec(
            name=name,
            gpu_uuid=gpu,
            memory_limit_bytes=model.check_memory(
                obj.get("memory_limit_bytes")),
            compute_share=share,
            weight=model.check_weight(obj.get("weight")),
            priority=model.check_choice(obj.get("priority"),
                                        model.PRIORITIES),
            host_memory_limit_bytes=model.check_host_memory(
                obj.get("host_memory_limit_bytes",
                        model.NO_HOST_MEMORY_LIMIT)))
    except (TypeError, ValueError) as e:
        raise _Corrupt(f"{where}: {e}") from None
    return SliceRecord(spec, _cgroups(obj.get("cgroups", []), where),
                       _cgroups(obj.get("transient_cgroups", []), where),
                       _owner(obj.get("owner"), where))


def _owner(obj: object, where: str) -> model.Owner | None:
    if obj is None:
        return None
    _expect(isinstance(obj, dict), f"{where}: owner is not an object")
    try:
        tag = model.check_owner(obj.get("tag"))
    except (TypeError, ValueError) as e:
        raise _Corrupt(f"{where}: {e}") from None
    for key in ("pid", "pid_start"):
        v = obj.get(key)
        _expect(v is None or (isinstance(v, int) and not isinstance(v, bool)
                              and v >= 0), f"{where}: owner.{key} is bad")
    for key in ("bound", "released"):
        _expect(isinstance(obj.get(key, False), bool),
                f"{where}: owner.{key} is not true or false")
    return model.Owner(tag, obj.get("pid"), obj.get("pid_start"),
                       obj.get("bound", False), obj.get("released", False))


def decode(text: str) -> State:
    """The State in TEXT.  Raises _Corrupt, or StateError for a schema
    newer than this xpud's."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise _Corrupt(f"not JSON: {e}") from None
    _expect(isinstance(doc, dict), "not a JSON object")
    schema = doc.get("schema")
    _expect(isinstance(schema, int) and not isinstance(schema, bool)
            and schema >= 1, "no schema number")
    if schema > SCHEMA:
        raise StateError(
            f"schema {schema} is newer than this xpud understands "
            f"({SCHEMA}): it was written by a newer xpud; upgrade xpud, or "
            "move the file away to start from the configuration")
    slices = doc.get("slices", [])
    _expect(isinstance(slices, list), "slices is not a list")
    state = State()
    names = set()
    for i, s in enumerate(slices):
        rec = _slice_from_json(s, i)
        _expect(rec.spec.name not in names,
                f"slices[{i}]: slice '{rec.spec.name}' twice")
        names.add(rec.spec.name)
        state.slices.append(rec)
    bindings = doc.get("config_bindings", {})
    _expect(isinstance(bindings, dict), "config_bindings is not an object")
    for name, cgroups in bindings.items():
        try:
            model.check_name(name)
        except (TypeError, ValueError) as e:
            raise _Corrupt(f"config_bindings: {e}") from None
        state.config_bindings[name] = _cgroups(cgroups,
                                               f"config_bindings.{name}")
    transient = doc.get("transient_bindings", {})
    _expect(isinstance(transient, dict),
            "transient_bindings is not an object")
    for name, cgroups in transient.items():
        try:
            model.check_name(name)
        except (TypeError, ValueError) as e:
            raise _Corrupt(f"transient_bindings: {e}") from None
        state.transient_bindings[name] = _cgroups(
            cgroups, f"transient_bindings.{name}")
    return state


def _slice_to_json(r: SliceRecord) -> dict:
    doc = {"name": r.spec.name,
           "gpu_uuid": r.spec.gpu_uuid,
           "memory_limit_bytes": r.spec.memory_limit_bytes,
           "compute_share": r.spec.compute_share,
           "weight": r.spec.weight,
           "priority": r.spec.priority,
           "cgroups": list(r.cgroups)}
    # Written only when there is something: files without them stay as an
    # xpud before containers (and host-memory bounds) wrote them.
    if r.spec.host_memory_limit_bytes:
        doc["host_memory_limit_bytes"] = r.spec.host_memory_limit_bytes
    if r.transient:
        doc["transient_cgroups"] = list(r.transient)
    if r.owner is not None:
        doc["owner"] = {"tag": r.owner.tag, "pid": r.owner.pid,
                        "pid_start": r.owner.pid_start,
                        "bound": r.owner.bound,
                        "released": r.owner.released}
    return doc


def encode(state: State) -> str:
    doc = {
        "schema": SCHEMA,
        "written_by": f"xpud {__version__}",
        "slices": [_slice_to_json(r) for r in
                   sorted(state.slices, key=lambda r: r.spec.name)],
        "config_bindings": {name: list(cg) for name, cg in
                            sorted(state.config_bindings.items()) if cg},
    }
    transient = {name: list(cg) for name, cg in
                 sorted(state.transient_bindings.items()) if cg}
    if transient:
        doc["transient_bindings"] = transient
    return json.dumps(doc, indent=2) + "\n"


class StateStore:
    """The state file in DIRECTORY.  clock gives the time that names a
    corrupt file kept aside (a parameter so that tests can fix it)."""

    def __init__(self, directory: str = DEFAULT_DIR,
                 clock: Callable[[], float] = time.time):
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.clock = clock

    def load(self) -> State | None:
        """The saved state, or None when there is none to trust: no file
        yet, or a corrupt one (then moved aside, with one log line).

        Raises StateError when the file must not be touched or cannot be
        read."""
        self._remove_stale_temporaries()
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as e:
            self._set_aside(f"not UTF-8 text ({e.reason} at byte {e.start})")
            return None
        except OSError as e:
            raise StateError(f"{self.path}: cannot read: {e.strerror}") \
                from None
        try:
            return decode(text)
        except _Corrupt as e:
            self._set_aside(str(e))
            return None
        except StateError as e:
            raise StateError(f"{self.path}: {e}") from None

    def _set_aside(self, why: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.clock()))
        aside = self.path.with_name(f"{FILE_NAME}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{FILE_NAME}.corrupt-{stamp}.{n}")
        try:
            os.rename(self.path, aside)
        except OSError as e:
            raise StateError(f"{self.path} is corrupt ({why}) and cannot be "
                             f"moved aside: {e.strerror}") from None
        log.warning("state file %s is corrupt (%s): moved it to %s; "
                    "starting from the configuration", self.path, why,
                    aside.name)

    def _remove_stale_temporaries(self) -> None:
        # Left by a crash between creating a temporary and renaming it.
        try:
            for p in self.directory.glob(f".{FILE_NAME}.*.tmp"):
                p.unlink()
        except OSError:
            pass

    def save(self, state: State) -> None:
        """Replace the state file with STATE, atomically and durably."""
        data = encode(state).encode("utf-8")
        try:
            self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.",
                                       suffix=".tmp", dir=self.directory)
        except OSError as e:
            raise StateError(f"cannot write in {self.directory}: "
                             f"{e.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fchmod(f.fileno(), 0o644)
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise StateError(f"cannot write {self.path}: {e.strerror}") \
                from None
        # The rename is durable once the directory is.
        try:
            dfd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as e:
            raise StateError(f"cannot sync {self.directory}: {e.strerror}") \
                from None
