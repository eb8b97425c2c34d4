# SPDX-License-Identifier: Apache-2.0
"""The slice service: owns the desired state and keeps the kernel at it.

Desired state = the slices of the configuration file + the slices made with
xpuctl (saved in the state file) + the cgroup bindings of both.  Each slice
belongs to one of the two: a configuration slice is changed by editing the
file and reloading xpud, and xpuctl set/destroy refuse it; an xpuctl slice
is not in the file.

Reconciling compares the desired state with what the backend (the kernel)
holds and creates, updates and destroys kernel slices, makes their nodes and
binds their cgroups.  It runs at start, on reload, on every change and when
the daemon asks (device events, a periodic resync).  It never stops a
running workload by itself: a kernel slice in use is destroyed only through
`xpuctl destroy --force`.  When there was no state file to trust (first
start, or a corrupt file set aside) the kernel's slices that the
configuration does not name are adopted as xpuctl slices rather than
destroyed, so a lost state file costs no running workload.

A change through the API is written to the state file first, then applied;
if the kernel refuses it, it is undone in the state file and the refusal is
the reply.  A crash in between leaves the intent on disk, and the next start
applies it.

Containers add two kinds of state (xpu/cdi, docs/containers.md): a
*transient* binding, made by a container's hook, lasts while its cgroup has
processes; an *ephemeral* slice (made with an owner tag, by
xpu-container-runtime) is destroyed when its owner releases it, when the
cgroups bound to it have emptied, or when the process that made it ended
before binding one.  reap() does that; the daemon calls it every REAP_S
seconds while there is anything to reap.

Listeners (add_listener) hear of every change with the slices as `list`
gives them: the CDI spec is written from that.

Every op_* method is an op of api.OPS, called with its checked arguments;
each raises api.ApiError with a one-line message.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import posixpath
import threading
from dataclasses import dataclass

from . import __version__, api, inventory, model, sizes, usage
from .api import API_VERSION, ApiError
from .backend import Backend, BackendError, Busy, GpuState, KernelSlice
from .config import Config
from .errors import XpuError
from .events import EventHub
from .state import SliceRecord, State, StateStore

log = logging.getLogger(__name__)

ORIGIN_CONFIG = "config"
ORIGIN_API = "api"
# A kernel slice xpud no longer wants but could not destroy yet.
ORIGIN_KERNEL = "kernel"

READY = "ready"
PENDING = "pending"
REMOVING = "removing"

# How often reap() runs while there are transient bindings or ephemeral
# slices: the delay between a container's end and its slice's.
REAP_S = 2.0


@dataclass(frozen=True)
class Desired:
    """A slice as xpud wants it.  gpu is a UUID, or for a configuration
    slice whatever the file says (an index is resolved at each reconcile)."""

    name: str
    origin: str
    gpu: model.GpuRef
    memory_limit_bytes: int
    compute_share: int = model.DEFAULT_COMPUTE_SHARE
    weight: int = model.DEFAULT_WEIGHT
    priority: str = model.DEFAULT_PRIORITY
    cgroups: tuple[str, ...] = ()
    defined_in: str | None = None
    transient: tuple[str, ...] = ()
    owner: model.Owner | None = None
    host_memory_limit_bytes: int = model.NO_HOST_MEMORY_LIMIT

    def spec(self, gpu_uuid: str) -> model.SliceSpec:
        return model.SliceSpec(self.name, gpu_uuid, self.memory_limit_bytes,
                               self.compute_share, self.weight, self.priority,
                               self.host_memory_limit_bytes)

    @classmethod
    def from_spec(cls, spec: model.SliceSpec, origin: str,
                  cgroups: tuple[str, ...] = (),
                  transient: tuple[str, ...] = (),
                  owner: model.Owner | None = None) -> Desired:
        return cls(spec.name, origin, spec.gpu_uuid, spec.memory_limit_bytes,
                   spec.compute_share, spec.weight, spec.priority,
                   tuple(cgroups), transient=tuple(transient), owner=owner,
                   host_memory_limit_bytes=spec.host_memory_limit_bytes)

    def all_cgroups(self) -> tuple[str, ...]:
        return self.cgroups + self.transient


@dataclass(frozen=True)
class Health:
    """How reconciling goes, for /metrics: the passes since xpud started;
    what they could not apply, summed over the passes (each slice left
    pending or not removed, each GPU whose settings are not applied, counts
    once per pass; an unreadable kernel, or a pass that failed with an
    exception, once); the slices pending after the last pass; the
    driver's retains of a channel xpu.ko could not watch to their return,
    as of the last pass (None: not known)."""

    reconciles: int = 0
    reconcile_errors: int = 0
    slices_pending: int = 0
    uvm_retains_unwatched: int | None = None


def _invalid(what: str, e: ValueError) -> ApiError:
    return ApiError("invalid", f"{what}: {e}")


class Service:
    def __init__(self, backend: Backend, store: StateStore, config: Config,
                 cgroup_root: str = "/sys/fs/cgroup"):
        self.backend = backend
        self.store = store
        self.config = config
        self.cgroup_root = posixpath.normpath(cgroup_root)
        # One request or reconcile at a time: it protects everything below.
        self._lock = threading.RLock()
        self._desired: dict[str, Desired] = {}
        self._gpus: list[GpuState] = []
        self._kernel: dict[str, KernelSlice] = {}
        self._errors: dict[str, str] = {}     # slice name -> why pending
        self._gpu_errors: dict[str, str] = {}  # GPU UUID -> why pending
        self._said: dict[object, str] = {}    # what was logged, per subject
        # xpu.ko's events (netlink.py feeds it), for op_events.
        self.events = EventHub()
        # Replaced whole after each pass, so read without the lock.
        self._health = Health()
        self._failed = 0  # what the running pass could not apply
        # Called with (the slices as op_list gives them, force) after each
        # change: force after a change through the API.
        self._listeners: list = []

    def add_listener(self, listener) -> None:
        """LISTENER(slices, force) is called after every reconcile pass
        (force False) and every change through the API (force True), with
        the service's lock held; it must not call back into a change."""
        self._listeners.append(listener)

    def _changed(self, force: bool) -> None:
        if not self._listeners:
            return
        names = sorted(set(self._desired) | set(self._kernel))
        views = [self._view(n) for n in names]
        for listener in self._listeners:
            try:
                listener(views, force)
            except Exception:  # a face must not break the service
                log.exception("a listener of slice changes failed")

    # -- start, reload, reconcile ------------------------------------------

    def start(self) -> str:
        """Load the saved state, merge the configuration, reconcile.
        Returns a one-line summary.  Raises StateError."""
        with self._lock:
            state = self.store.load()
            bindings: dict[str, tuple[str, ...]] = {}
            transient: dict[str, tuple[str, ...]] = {}
            if state is not None:
                for r in state.slices:
                    self._desired[r.spec.name] = Desired.from_spec(
                        r.spec, ORIGIN_API, r.cgroups, r.transient, r.owner)
                bindings = state.config_bindings
                transient = state.transient_bindings
            self._merge_config(self.config, bindings, transient)
            summary = self.reconcile(adopt=state is None)
            self._save()
            if self.reap():
                summary = self._summary()
            return summary

    def reload(self, config: Config) -> str:
        """Take CONFIG (already checked) as the configuration."""
        with self._lock:
            self.config = config
            self._merge_config(config, {})
            self._save()
            return self.reconcile()

    def _merge_config(self, config: Config,
                      bindings: dict[str, tuple[str, ...]],
                      transient: dict[str, tuple[str, ...]] | None = None
                      ) -> None:
        transient = transient or {}
        new = {n: d for n, d in self._desired.items() if d.origin == ORIGIN_API}
        for i, sc in enumerate(config.slices):
            if sc.name in new:
                self._say(("conflict", sc.name), logging.WARNING,
                          f"{sc.where}: slice[{i}]: the name '{sc.name}' is "
                          "taken by a slice made with xpuctl create; this "
                          "entry is ignored (destroy that slice, or rename "
                          "the entry)")
                continue
            self._say(("conflict", sc.name), logging.INFO, "")
            old = self._desired.get(sc.name)
            if old is not None and old.origin == ORIGIN_CONFIG:
                cgroups, temp = old.cgroups, old.transient
            else:
                cgroups = bindings.get(sc.name, ())
                temp = transient.get(sc.name, ())
            new[sc.name] = Desired(sc.name, ORIGIN_CONFIG, sc.gpu,
                                   sc.memory_limit_bytes, sc.compute_share,
                                   sc.weight, sc.priority, cgroups, sc.where,
                                   transient=temp,
                                   host_memory_limit_bytes=(
                                       sc.host_memory_limit_bytes))
        self._desired = new

    def _save(self) -> None:
        state = State()
        for d in self._desired.values():
            if d.origin == ORIGIN_API:
                state.slices.append(SliceRecord(d.spec(str(d.gpu)),
                                                d.cgroups, d.transient,
                                                d.owner))
            else:
                if d.cgroups:
                    state.config_bindings[d.name] = d.cgroups
                if d.transient:
                    state.transient_bindings[d.name] = d.transient
        self.store.save(state)

    def _say(self, subject: object, level: int, message: str) -> None:
        """Log MESSAGE about SUBJECT once, not at every reconcile; an empty
        message means all is well again."""
        before = self._said.get(subject, "")
        if message == before:
            return
        if message:
            log.log(level, "%s", message)
            self._said[subject] = message
        else:
            del self._said[subject]

    def reconcile(self, adopt: bool = False) -> str:
        """Bring the kernel to the desired state as far as it goes; what
        does not go is logged once and shown as pending.  ADOPT: take kernel
        slices nobody asked for as xpuctl slices (no saved state)."""
        with self._lock:
            self._failed = 0
            done = False
            try:
                summary = self._reconcile_pass(adopt)
                done = True
                return summary
            finally:
                h = self._health
                pending = sum(1 for n in self._desired
                              if n in self._errors or n not in self._kernel)
                self._health = Health(
                    h.reconciles + 1,
                    h.reconcile_errors + self._failed + (0 if done else 1),
                    pending, self.backend.uvm_retains_unwatched())

    def health(self) -> Health:
        """How reconciling goes; from any thread, without the lock."""
        return self._health

    def _reconcile_pass(self, adopt: bool) -> str:
        with self._lock:
            try:
                self._gpus = self.backend.list_gpus()
                kernel = self.backend.list_slices()
            except BackendError as e:
                self._failed += 1
                self._say("backend", logging.ERROR,
                          f"cannot read the kernel's state: {e}")
                return f"cannot read the kernel's state: {e}"
            self._say("backend", logging.INFO, "")
            self._kernel = {k.spec.name: k for k in kernel}
            gpus = self._gpu_list()
            self._reconcile_gpus()
            if adopt:
                self._adopt()
            for name in sorted(self._desired):
                d = self._desired[name]
                try:
                    self._apply(d, gpus)
                    err = ""
                except (ApiError, BackendError) as e:
                    err = str(e)
                if err:
                    self._errors[name] = err
                    self._failed += 1
                else:
                    self._errors.pop(name, None)
                self._say(("slice", name), logging.WARNING,
                          f"slice '{name}' is pending: {err}" if err else "")
            for name in sorted(set(self._kernel) - set(self._desired)):
                if adopt:
                    continue  # not adoptable: left alone (logged)
                try:
                    self.backend.destroy_slice(name, force=False)
                except BackendError as e:
                    self._errors[name] = str(e)
                    self._failed += 1
                    self._say(("slice", name), logging.WARNING,
                              f"slice '{name}' is no longer wanted but "
                              f"stays: {e}")
                    continue
                del self._kernel[name]
                self._errors.pop(name, None)
                self._say(("slice", name), logging.INFO, "")
                log.info("destroyed slice '%s': nothing asks for it any "
                         "more", name)
            self._changed(force=False)
            return self._summary()

    def _adopt(self) -> None:
        adopted = False
        for name, k in sorted(self._kernel.items()):
            if name in self._desired:
                continue
            try:
                model.check_name(name)
            except ValueError as e:
                log.warning("slice '%s' of xpu.ko is left alone: %s", name, e)
                continue
            self._desired[name] = Desired.from_spec(k.spec, ORIGIN_API,
                                                    k.cgroups)
            log.info("adopted slice '%s' from xpu.ko (no saved state named "
                     "it)", name)
            adopted = True
        if adopted:
            self._save()

    def _gpu_list(self) -> list[model.Gpu]:
        return [g.gpu for g in self._gpus]

    def _reconcile_gpus(self) -> None:
        for gs in self._gpus:
            g = gs.gpu
            want = self.config.settings_for(g)
            if g.uuid is None:
                err = (f"{g.label()}: the driver has not reported its UUID "
                       "yet")
            elif gs.settings == want:
                err = ""
            else:
                try:
                    self.backend.set_gpu(g.uuid, want)
                    err = ""
                except BackendError as e:
                    err = str(e)
            key = g.uuid or g.bus_id
            if err:
                self._gpu_errors[key] = err
                self._failed += 1
            else:
                self._gpu_errors.pop(key, None)
            self._say(("gpu", key), logging.WARNING,
                      f"{g.label()}: settings not applied: {err}" if err
                      else "")
        for gc in self.config.gpus:
            try:
                inventory.resolve(gc.gpu, self._gpu_list())
                err = ""
            except inventory.GpuNotFound as e:
                err = f"{gc.where}: {e}; its settings wait for it"
            self._say(("gpu-config", gc.gpu), logging.WARNING, err)

    def _summary(self) -> str:
        ready = sum(1 for n in self._desired if n not in self._errors)
        pending = len(self._desired) - ready
        removing = len(set(self._kernel) - set(self._desired))
        parts = [f"{ready} slice{'s' if ready != 1 else ''} ready"]
        if pending:
            parts.append(f"{pending} pending")
        if removing:
            parts.append(f"{removing} to remove")
        n = len(self._gpus)
        parts.append(f"{n} GPU{'s' if n != 1 else ''}")
        return ", ".join(parts)

    def _check_budget(self, spec: model.SliceSpec, gpu: model.Gpu) -> None:
        others = [k.spec for k in self._kernel.values()
                  if k.spec.gpu_uuid == spec.gpu_uuid
                  and k.spec.name != spec.name]
        total = gpu.memory_total_bytes
        used = sum(s.memory_limit_bytes for s in others)
        if total is not None and used + spec.memory_limit_bytes > total:
            free = max(total - used, 0)
            raise ApiError(
                "conflict",
                f"{gpu.label()} has {sizes.format_size(free)} of "
                f"{sizes.format_size(total)} not given to slices; "
                f"'{spec.name}' asks for "
                f"{sizes.format_size(spec.memory_limit_bytes)}")
        shares = sum(s.compute_share for s in others)
        if shares + spec.compute_share > sizes.SHARE_MAX:
            raise ApiError(
                "conflict",
                f"compute shares on {gpu.label()} would add up to "
                f"{sizes.format_share(shares + spec.compute_share)}; "
                f"{sizes.format_share(sizes.SHARE_MAX - shares)} is left")

    def _apply(self, d: Desired, gpus: list[model.Gpu]) -> None:
        """Make the kernel hold D.  Raises ApiError or BackendError."""
        try:
            gpu = inventory.resolve(d.gpu, gpus)
        except inventory.GpuNotFound as e:
            raise ApiError("not_found", str(e)) from None
        if gpu.uuid is None:
            raise ApiError("not_found", f"{gpu.label()}: the driver has not "
                           "reported its UUID yet")
        spec = d.spec(gpu.uuid)
        k = self._kernel.get(d.name)
        if k is not None and k.spec.gpu_uuid != spec.gpu_uuid:
            # Moving a slice means a new one: only when nobody uses it.
            self.backend.destroy_slice(d.name, force=False)
            del self._kernel[d.name]
            k = None
        if k is None:
            self._check_budget(spec, gpu)
            k = self.backend.create_slice(spec)
            log.info("created slice '%s' on %s", d.name, gpu.label())
        elif k.spec != spec:
            self._check_budget(spec, gpu)
            k = self.backend.update_slice(spec)
            log.info("updated slice '%s'", d.name)
        self._kernel[d.name] = k
        nodes = self.backend.make_nodes(d.name)
        k = dataclasses.replace(k, nodes=tuple(nodes))
        self._kernel[d.name] = k
        have = set(k.cgroups)
        # A transient cgroup that is gone is no longer wanted (reap() drops
        # it from the desired state).
        want = d.cgroups + tuple(t for t in d.transient
                                 if os.path.isdir(self.cgroup_root + t))
        for cg in want:
            if cg not in have:
                self.backend.bind_cgroup(d.name, cg)
                have.add(cg)
                self._kernel[d.name] = dataclasses.replace(
                    k, cgroups=tuple(sorted(have)))
        for cg in sorted(have - set(want)):
            self.backend.unbind_cgroup(d.name, cg)
            have.discard(cg)
            self._kernel[d.name] = dataclasses.replace(
                k, cgroups=tuple(sorted(have)))

    # -- the API ------------------------------------------------------------

    def _get(self, name: str) -> Desired:
        d = self._desired.get(name)
        if d is None:
            raise ApiError("not_found", f"no slice '{name}' (xpuctl list "
                           "shows the slices)")
        return d

    def _owned_by_api(self, d: Desired, verb: str) -> None:
        if d.origin == ORIGIN_CONFIG:
            raise ApiError(
                "conflict",
                f"slice '{d.name}' is defined in the configuration "
                f"({d.defined_in}): {verb} it there, then reload xpud "
                "(systemctl reload xpud)")

    def _change(self, name: str, new: Desired | None, apply) -> None:
        """Record NEW (None: remove) for NAME, save, run APPLY; undo both
        when APPLY fails."""
        old = self._desired.get(name)
        if new is None:
            del self._desired[name]
        else:
            self._desired[name] = new
        try:
            self._save()
        except XpuError as e:
            self._restore(name, old)
            raise ApiError("internal", str(e)) from None
        try:
            apply()
        except (ApiError, BackendError) as e:
            self._restore(name, old)
            try:
                self._save()
            except XpuError as se:
                log.error("cannot undo a refused change in the state "
                          "file: %s", se)
            if isinstance(e, ApiError):
                raise
            raise ApiError(e.code, str(e)) from None
        self._errors.pop(name, None)
        self._say(("slice", name), logging.INFO, "")
        self._changed(force=True)

    def _restore(self, name: str, old: Desired | None) -> None:
        if old is None:
            self._desired.pop(name, None)
        else:
            self._desired[name] = old

    def _refresh_kernel(self) -> None:
        try:
            self._kernel = {k.spec.name: k
                            for k in self.backend.list_slices()}
        except BackendError as e:
            log.debug("cannot list the kernel's slices: %s", e)

    def op_version(self) -> dict:
        result = {"xpud": __version__, "api": API_VERSION, "kernel": None,
                  "kernel_api": None, "kernel_error": None,
                  "uvm_interposed": None, "uvm_retentions_seen": None,
                  "uvm_retains_unwatched": None,
                  "call_pages_guarded": None}
        with self._lock:
            try:
                result["kernel"], result["kernel_api"] = \
                    self.backend.kernel_version()
            except BackendError as e:
                result["kernel_error"] = str(e)
            else:
                result["uvm_interposed"] = self.backend.uvm_interposed()
                result["uvm_retentions_seen"] = \
                    self.backend.uvm_retentions_seen()
                result["uvm_retains_unwatched"] = \
                    self.backend.uvm_retains_unwatched()
                result["call_pages_guarded"] = \
                    self.backend.call_pages_guarded()
        return result

    def op_gpus(self) -> list:
        with self._lock:
            try:
                self._gpus = self.backend.list_gpus()
            except BackendError as e:
                raise ApiError(e.code, str(e)) from None
            self._refresh_kernel()  # the slices' memory in use
            return [self._gpu_view(gs) for gs in self._gpus]

    def op_list(self) -> list:
        with self._lock:
            self._refresh_kernel()
            names = sorted(set(self._desired) | set(self._kernel))
            return [self._view(n) for n in names]

    def op_show(self, name: str) -> dict:
        with self._lock:
            self._refresh_kernel()
            if name not in self._kernel:
                self._get(name)  # not_found unless desired
            return self._view(name)

    def op_create(self, name: str, gpu, memory_limit_bytes: int,
                  compute_share=None, weight: int | None = None,
                  priority: str | None = None, owner: str | None = None,
                  owner_pid: int | None = None,
                  host_memory_limit_bytes: int | None = None) -> dict:
        with self._lock:
            try:
                model.check_name(name)
            except (TypeError, ValueError) as e:
                raise _invalid("name", e) from None
            who = _owner(owner, owner_pid)
            if name in self._desired or name in self._kernel:
                raise ApiError("exists", f"slice '{name}' exists already "
                               f"(xpuctl show {name})")
            try:
                ref = model.parse_gpu_ref(gpu)
            except (TypeError, ValueError) as e:
                raise _invalid("gpu", e) from None
            try:
                g = inventory.resolve(ref, self._gpu_list())
            except inventory.GpuNotFound as e:
                raise ApiError("not_found", str(e)) from None
            if g.uuid is None:
                raise ApiError("not_found", f"{g.label()}: the driver has "
                               "not reported its UUID yet")
            d = self._checked(
                Desired(name, ORIGIN_API, g.uuid, memory_limit_bytes,
                        owner=who),
                memory_limit_bytes, compute_share, weight, priority,
                host_memory_limit_bytes)
            gpus = self._gpu_list()

            def apply():
                try:
                    self._apply(d, gpus)
                except (ApiError, BackendError):
                    self._undo_create(name)
                    raise

            self._change(name, d, apply)
            return self._view(name)

    def _undo_create(self, name: str) -> None:
        # A slice created but not completed (its nodes failed, say) goes.
        if name in self._kernel:
            try:
                self.backend.destroy_slice(name, force=False)
                del self._kernel[name]
            except BackendError as e:
                log.error("slice '%s' was half made and cannot be "
                          "destroyed: %s", name, e)

    def _checked(self, d: Desired, memory_limit_bytes, compute_share,
                 weight, priority, host_memory_limit_bytes=None) -> Desired:
        """D with the values given (not None), each checked."""
        checks = (
            ("memory_limit_bytes", memory_limit_bytes, model.check_memory),
            ("compute_share", compute_share, sizes.parse_share),
            ("weight", weight, model.check_weight),
            ("priority", priority,
             lambda v: model.check_choice(v, model.PRIORITIES)),
            ("host_memory_limit_bytes", host_memory_limit_bytes,
             model.check_host_memory))
        changes = {}
        for field, value, check in checks:
            if value is None:
                continue
            try:
                changes[field] = check(value)
            except (TypeError, ValueError) as e:
                raise _invalid(field, e) from None
        return dataclasses.replace(d, **changes)

    def op_set(self, name: str, memory_limit_bytes: int | None = None,
               compute_share=None, weight: int | None = None,
               priority: str | None = None,
               host_memory_limit_bytes: int | None = None) -> dict:
        with self._lock:
            d = self._get(name)
            if (memory_limit_bytes, compute_share, weight, priority,
                    host_memory_limit_bytes) == (None,) * 5:
                raise ApiError("invalid", "set: nothing to change: give "
                               "memory_limit_bytes, compute_share, weight, "
                               "priority or host_memory_limit_bytes")
            self._owned_by_api(d, "change")
            new = self._checked(d, memory_limit_bytes, compute_share, weight,
                                priority, host_memory_limit_bytes)
            gpus = self._gpu_list()
            self._change(name, new, lambda: self._apply(new, gpus))
            return self._view(name)

    def op_destroy(self, name: str, force: bool = False) -> dict:
        with self._lock:
            d = self._get(name)
            self._owned_by_api(d, "remove")

            def apply():
                if name in self._kernel:
                    self.backend.destroy_slice(name, force=force)
                    del self._kernel[name]

            self._change(name, None, apply)
            self._errors.pop(name, None)
            log.info("destroyed slice '%s'%s", name,
                     " (forced)" if force else "")
            return {"name": name}

    def _cgroup(self, path: str, must_exist: bool) -> str:
        """PATH as /proc/PID/cgroup names it; it may be given as a path
        under the cgroup2 mount or already in that form."""
        if not path.startswith("/"):
            raise ApiError(
                "invalid", f"cgroup '{path}' must be an absolute path: "
                f"{self.cgroup_root}/... or as /proc/PID/cgroup shows it")
        if ".." in path.split("/"):
            raise ApiError("invalid", f"cgroup '{path}' must not hold '..'")
        p = posixpath.normpath(path)
        root = self.cgroup_root
        if p == root or p.startswith(root + "/"):
            p = p[len(root):] or "/"
        if p == "/":
            raise ApiError("invalid", "binding the root cgroup would put "
                           "every process of the node in the slice")
        if must_exist and not os.path.isdir(root + p):
            raise ApiError("not_found", f"cgroup {p} does not exist (no "
                           f"directory {root}{p})")
        return p

    def op_bind(self, name: str, cgroup: str,
                transient: bool = False) -> dict:
        with self._lock:
            d = self._get(name)
            cg = self._cgroup(cgroup, must_exist=True)
            for other in self._desired.values():
                if other.name != name and cg in other.all_cgroups():
                    raise ApiError(
                        "conflict", f"cgroup {cg} is bound to slice "
                        f"'{other.name}'; a cgroup belongs to one slice at "
                        f"most (xpuctl unbind {other.name} --cgroup {cg})")
            if cg in d.all_cgroups():
                return self._view(name)
            if transient:
                owner = d.owner
                if owner is not None and not owner.bound:
                    owner = dataclasses.replace(owner, bound=True)
                new = dataclasses.replace(d, transient=d.transient + (cg,),
                                          owner=owner)
            else:
                new = dataclasses.replace(d, cgroups=d.cgroups + (cg,))
            gpus = self._gpu_list()
            self._change(name, new, lambda: self._apply(new, gpus))
            return self._view(name)

    def op_unbind(self, name: str, cgroup: str) -> dict:
        with self._lock:
            d = self._get(name)
            cg = self._cgroup(cgroup, must_exist=False)
            if cg not in d.all_cgroups():
                raise ApiError("not_found", f"slice '{name}' is not bound to "
                               f"cgroup {cg}")
            new = dataclasses.replace(
                d, cgroups=tuple(c for c in d.cgroups if c != cg),
                transient=tuple(c for c in d.transient if c != cg))
            gpus = self._gpu_list()
            self._change(name, new, lambda: self._apply(new, gpus))
            return self._view(name)

    def usage(self) -> usage.Usage:
        """What each slice uses, from one read of the kernel (usage.py):
        what `top` answers and /metrics exports.  Any thread; it never
        takes the lock, so it never waits for a reconcile or a request.
        Raises BackendError."""
        gpus = self._gpus  # replaced whole, never changed in place
        return usage.figures(self.backend.read_usage(),
                             [gs.gpu for gs in gpus])

    def op_top(self) -> dict:
        try:
            return self.usage().to_api()
        except BackendError as e:
            raise ApiError(e.code, str(e)) from None
    def op_release(self, owner: str) -> dict:
        """Destroy the ephemeral slices of OWNER; those still in use are
        destroyed by reap() once they are not."""
        with self._lock:
            try:
                model.check_owner(owner)
            except (TypeError, ValueError) as e:
                raise _invalid("owner", e) from None
            mine = sorted(n for n, d in self._desired.items()
                          if d.owner is not None and d.owner.tag == owner)
            for n in mine:
                d = self._desired[n]
                self._desired[n] = dataclasses.replace(
                    d, owner=dataclasses.replace(d.owner, released=True))
            if mine:
                try:
                    self._save()
                except XpuError as e:
                    raise ApiError("internal", str(e)) from None
                self.reap()
            return {"released": [n for n in mine if n not in self._desired],
                    "pending": [n for n in mine if n in self._desired]}

    def reap_due(self) -> bool:
        """Whether reap() has anything to look at."""
        with self._lock:
            return any(d.transient or d.owner is not None
                       for d in self._desired.values())

    def reap(self) -> bool:
        """Drop transient bindings whose cgroups have emptied or gone, and
        destroy the ephemeral slices that are done with (see the module's
        docstring).  Returns whether anything changed."""
        with self._lock:
            changed = False
            for name in sorted(self._desired):
                d = self._desired[name]
                live = tuple(c for c in d.transient if self._populated(c))
                if live != d.transient:
                    for c in sorted(set(d.transient) - set(live)):
                        self._unbind_quietly(name, c)
                        log.info("slice '%s': cgroup %s has no processes "
                                 "left: unbound", name, c)
                    d = dataclasses.replace(d, transient=live)
                    self._desired[name] = d
                    changed = True
                why = _done(d)
                if why is None:
                    continue
                try:
                    if name in self._kernel:
                        self.backend.destroy_slice(name, force=False)
                        del self._kernel[name]
                except Busy as e:
                    self._say(("reap", name), logging.WARNING,
                              f"ephemeral slice '{name}' stays while it is "
                              f"in use: {e}")
                    continue
                except BackendError as e:
                    self._say(("reap", name), logging.WARNING,
                              f"ephemeral slice '{name}' cannot be "
                              f"destroyed: {e}")
                    continue
                self._say(("reap", name), logging.INFO, "")
                del self._desired[name]
                self._errors.pop(name, None)
                changed = True
                log.info("destroyed ephemeral slice '%s' of %s: %s", name,
                         d.owner.tag, why)
            if changed:
                try:
                    self._save()
                except XpuError as e:
                    log.error("cannot save the state after reaping: %s", e)
                self._changed(force=True)
            return changed

    def _unbind_quietly(self, name: str, cgroup: str) -> None:
        # An emptied cgroup that stays must not put later processes in the
        # slice; a removed one has nothing to unbind.
        if name not in self._kernel:
            return
        try:
            self.backend.unbind_cgroup(name, cgroup)
        except BackendError as e:
            log.warning("slice '%s': cannot unbind cgroup %s: %s", name,
                        cgroup, e)
        k = self._kernel.get(name)
        if k is not None and cgroup in k.cgroups:
            self._kernel[name] = dataclasses.replace(
                k, cgroups=tuple(c for c in k.cgroups if c != cgroup))

    def _populated(self, cgroup: str) -> bool:
        """Whether CGROUP (as /proc/PID/cgroup names it) exists and it or
        a cgroup below has a process."""
        path = self.cgroup_root + cgroup
        try:
            with open(os.path.join(path, "cgroup.events")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "populated":
                        return value.strip() != "0"
        except FileNotFoundError:
            return False
        except OSError:
            pass
        return os.path.isdir(path)

    def op_events(self) -> api.Stream:
        why = self.events.unavailable
        if why is not None:
            raise ApiError("unsupported", f"no events: {why} (xpud's log "
                           "says more; restart xpud after loading xpu.ko)")
        sub = self.events.subscribe()
        return api.Stream({"counters": self.events.counters()}, sub.get,
                          sub.close)

    # -- views: the result fields of docs/api.md -----------------------------

    def _gpu_view(self, gs: GpuState) -> dict:
        g = gs.gpu
        want = self.config.settings_for(g)
        mine = []
        for d in self._desired.values():
            try:
                if inventory.resolve(d.gpu, [g]) is g:
                    mine.append(d)
            except inventory.GpuNotFound:
                pass
        err = self._gpu_errors.get(g.uuid or g.bus_id)
        in_slices = sum(k.memory_used_bytes or 0 for k in self._kernel.values()
                        if k.spec.gpu_uuid == g.uuid)
        outside = (max(g.memory_used_bytes - in_slices, 0)
                   if g.memory_used_bytes is not None else None)
        return {
            "index": g.index,
            "gpu_uuid": g.uuid,
            "gpu_minor": g.minor,
            "name": g.name,
            "bus_id": g.bus_id,
            "memory_total_bytes": g.memory_total_bytes,
            "mode": want.mode,
            "policy": want.policy,
            "period_ms": want.period_ms,
            "slices": len(mine),
            "memory_assigned_bytes": sum(d.memory_limit_bytes for d in mine),
            "compute_assigned": sizes.share_percent(
                sum(d.compute_share for d in mine)),
            "memory_used_bytes": g.memory_used_bytes,
            "memory_used_outside_slices_bytes": outside,
            "memory_orphaned_bytes": gs.memory_orphaned_bytes,
            "channel_ids": gs.channel_ids,
            "state": PENDING if err else READY,
            "error": err,
        }

    def _view(self, name: str) -> dict:
        d = self._desired.get(name)
        k = self._kernel.get(name)
        if d is None:  # in the kernel only: being removed
            d = Desired.from_spec(k.spec, ORIGIN_KERNEL, k.cgroups)
        gpu = None
        try:
            gpu = inventory.resolve(d.gpu, self._gpu_list())
        except inventory.GpuNotFound:
            pass
        err = self._errors.get(name)
        if d.origin == ORIGIN_KERNEL:
            state = REMOVING
        elif err or k is None:
            state = PENDING
        else:
            state = READY
        return {
            "name": d.name,
            "origin": d.origin,
            "gpu_uuid": gpu.uuid if gpu else (
                d.gpu if isinstance(d.gpu, str) else None),
            "gpu_index": gpu.index if gpu else (
                d.gpu if isinstance(d.gpu, int) else None),
            "gpu_minor": gpu.minor if gpu else None,
            "memory_limit_bytes": d.memory_limit_bytes,
            "memory_used_bytes": k.memory_used_bytes if k else None,
            "host_memory_limit_bytes": d.host_memory_limit_bytes,
            "host_memory_used_bytes": (k.host_memory_used_bytes
                                       if k else None),
            "rm_handles": k.rm_handles if k else None,
            "rm_handles_limit": k.rm_handles_limit if k else None,
            "os_events": k.os_events if k else None,
            "os_events_limit": k.os_events_limit if k else None,
            "records": dict(k.records) if k and k.records is not None
            else None,
            "records_limit": k.records_limit if k else None,
            "doorbell_files": k.doorbell_files if k else None,
            "doorbell_files_limit": k.doorbell_files_limit if k else None,
            "compute_share": sizes.share_percent(d.compute_share),
            "weight": d.weight,
            "priority": d.priority,
            "cgroups": list(d.cgroups),
            "transient_cgroups": list(d.transient),
            "owner": d.owner.tag if d.owner else None,
            "nodes": list(k.nodes) if k else [],
            "id": k.id if k else None,
            "gpu_node": next((n for n in k.nodes
                              if not n.endswith(("-ctl", "-uvm"))), None)
            if k else None,
            "ctl_node": next((n for n in k.nodes
                              if n.endswith("-ctl")), None) if k else None,
            # xpu.ko's UVM node of the slice (class 39), where it has one
            "uvm_node": next((n for n in k.nodes
                              if n.endswith("-uvm")), None) if k else None,
            "processes": k.processes if k else None,
            "denied_allocs": k.denied_allocs if k else None,
            # The share of the GPU's time the slice held over the last
            # second, in percent, as xpu.ko's scheduler counts it.
            "compute_obtained": (k.share_obtained / 10
                                 if k and k.share_obtained is not None
                                 else None),
            "state": state,
            "error": err or None,
            "defined_in": d.defined_in,
        }


def _owner(tag: str | None, pid: int | None) -> model.Owner | None:
    """The Owner of create's arguments, its process's start time read."""
    if tag is None:
        if pid is not None:
            raise ApiError("invalid", "owner_pid: give it with owner")
        return None
    try:
        model.check_owner(tag)
    except (TypeError, ValueError) as e:
        raise _invalid("owner", e) from None
    if pid is None:
        return model.Owner(tag)
    start = process_start(pid) if pid > 0 else None
    if start is None:
        raise ApiError("invalid", f"owner_pid: no process {pid}")
    return model.Owner(tag, pid, start)


def process_start(pid: int) -> int | None:
    """PID's start time (clock ticks after boot, /proc/PID/stat field 22),
    or None when no such process runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _done(d: Desired) -> str | None:
    """Why ephemeral slice D should go now, or None."""
    o = d.owner
    if o is None:
        return None
    if o.released:
        return "released"
    if o.bound and not d.transient:
        return "its containers have ended"
    if not o.bound and o.pid is not None and \
            process_start(o.pid) != o.pid_start:
        return f"process {o.pid} ended before binding a cgroup"
    return None
