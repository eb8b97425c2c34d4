# SPDX-License-Identifier: Apache-2.0
"""xpud's CDI face: keeps /var/run/cdi/xpu.json at the spec of the ready
slices, and answers the API's cdi_spec and cdi_refresh.

xpud calls update() after its start and every reconcile pass (the file is
written when what it would hold differs from what it holds) and after every
change through the API -- create, set, destroy, bind, unbind, release --
(written then even when the same: a resize changes no field of the spec,
but a consumer watching the directory sees each change).  A spec with no
device is not written (CDI libraries from 1.0 refuse one): the file is
removed while no slice is ready.  remove() at a clean stop.

NVIDIA's own spec (nvidia-ctk cdi generate's nvidia.yaml or .json) is read
again whenever its file changes; its library mounts and hooks go into the
spec-wide edits (spec.nvidia_edits).  A spec that cannot be read, or whose
mounts and hooks are malformed, is left out with one warning: the slices'
devices are written without it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
from collections.abc import Callable

from ..api import ApiError
from ..config import CdiConfig
from . import HOOK_NAME, SPEC_FILE, simpleyaml, spec
from .writer import SpecWriteError, SpecWriter, encode

log = logging.getLogger(__name__)

# Where nvidia-ctk and nvidia-cdi-refresh write NVIDIA's spec; the dynamic
# directory first, as CDI gives it precedence.
NVIDIA_SPECS = ("/var/run/cdi/nvidia.yaml", "/var/run/cdi/nvidia.json",
                "/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json")
HOOK_NAMES = ("prestart", "createRuntime", "createContainer",
              "startContainer", "poststart", "poststop")


def find_hook(configured: str = "") -> str:
    """The path of xpu-cdi-hook: as configured, else beside the running
    program (the launchers `make install` writes, a virtualenv's scripts),
    else in PATH; else where `make install` puts it by default."""
    if configured:
        return configured
    for d in (os.path.dirname(os.path.abspath(sys.argv[0])),
              os.path.dirname(sys.executable)):
        p = os.path.join(d, HOOK_NAME)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    found = shutil.which(HOOK_NAME)
    return os.path.abspath(found) if found else "/usr/local/bin/" + HOOK_NAME


def find_nvidia_spec(setting: str, spec_dir: str = "") -> str | None:
    """The NVIDIA spec to read: SETTING when a path, none for "none", else
    the first that exists of SPEC_DIR's and the standard ones."""
    if setting == "none":
        return None
    if setting:
        return setting
    candidates = []
    if spec_dir:
        candidates += [os.path.join(spec_dir, "nvidia.yaml"),
                       os.path.join(spec_dir, "nvidia.json")]
    candidates += [p for p in NVIDIA_SPECS if p not in candidates]
    for p in candidates:
        if os.path.isfile(p):
            return p
    return None


def load_spec_file(path: str) -> dict:
    """A CDI spec file, JSON or (other suffixes) YAML; raises ValueError
    or OSError."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text) if path.endswith(".json") else \
        simpleyaml.load(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        raise ValueError("not a CDI spec (no kind)")  # noqa: TRY004
    return doc


def _strings(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def check_nvidia_edits(edits: dict) -> str | None:
    """Why the mounts and hooks taken from NVIDIA's spec would make xpu's
    spec invalid, or None."""
    for i, m in enumerate(edits.get("mounts", [])):
        if not isinstance(m, dict) or not all(
                isinstance(m.get(k), str) and m.get(k)
                for k in ("hostPath", "containerPath")):
            return f"mounts[{i}] has no hostPath or containerPath"
        if "options" in m and not _strings(m["options"]):
            return f"mounts[{i}].options is not a list of strings"
        if "type" in m and not isinstance(m["type"], str):
            return f"mounts[{i}].type is not a string"
        if set(m) - {"hostPath", "containerPath", "options", "type"}:
            return f"mounts[{i}] has fields CDI 0.5 does not know"
    for i, h in enumerate(edits.get("hooks", [])):
        if not isinstance(h, dict) or h.get("hookName") not in HOOK_NAMES \
                or not isinstance(h.get("path"), str) or not h["path"]:
            return f"hooks[{i}] has no valid hookName or path"
        for k in ("args", "env"):
            if k in h and not _strings(h[k]):
                return f"hooks[{i}].{k} is not a list of strings"
        if "timeout" in h and (not isinstance(h["timeout"], int)
                               or isinstance(h["timeout"], bool)):
            return f"hooks[{i}].timeout is not a whole number"
        if set(h) - {"hookName", "path", "args", "env", "timeout"}:
            return f"hooks[{i}] has fields CDI 0.5 does not know"
    return None


class Refresher:
    """Keeps SETTINGS.spec_dir/xpu.json at the spec of the slices
    list_slices() gives (the service's `list`).  SOCKET is xpud's, for the
    hook's arguments."""

    def __init__(self, settings: CdiConfig, socket: str,
                 list_slices: Callable[[], list] | None = None):
        self.socket = socket
        self.list_slices = list_slices
        self._lock = threading.Lock()
        self._said: dict[object, str] = {}
        self._nvidia_key: tuple | None = None
        self._nvidia: dict | None = None
        self._written: bytes | None = None
        self.settings = settings
        self.writer: SpecWriter | None = None
        self.hook = ""
        self.configure(settings)

    def _say(self, subject: object, level: int, message: str) -> None:
        """MESSAGE about SUBJECT once, not at every pass; "" when all is
        well again."""
        if self._said.get(subject, "") == message:
            return
        if message:
            log.log(level, "%s", message)
            self._said[subject] = message
        else:
            self._said.pop(subject, None)

    def configure(self, settings: CdiConfig) -> None:
        """Take SETTINGS (at start and at each reload).  A spec written
        under other settings is removed."""
        with self._lock:
            old = self.writer
            self.settings = settings
            self.writer = (SpecWriter(settings.spec_dir)
                           if settings.spec_dir else None)
            if old is not None and (self.writer is None or
                                    old.path != self.writer.path):
                self._remove(old)
            self._written = None
            if self.writer is not None:
                self.writer.remove_stale_temporaries()
            self.hook = find_hook(settings.hook)
            if not os.path.isfile(self.hook):
                self._say("hook", logging.WARNING,
                          f"CDI: the hook {self.hook} does not exist: "
                          "containers given a slice will fail to start "
                          "(install it, or set hook in [cdi])")
            else:
                self._say("hook", logging.INFO, "")

    def options(self) -> spec.SpecOptions:
        return spec.SpecOptions(vendor=self.settings.vendor, hook=self.hook,
                                socket=self.socket,
                                extra_nodes=spec.host_nodes())

    def nvidia_spec(self) -> tuple[str | None, dict | None]:
        """(path, parsed) of NVIDIA's spec, read again when its file
        changed; (path or None, None) when there is none to use."""
        path = find_nvidia_spec(self.settings.nvidia_spec,
                                self.settings.spec_dir)
        if path is None:
            self._nvidia_key, self._nvidia = None, None
            self._say("nvidia", logging.INFO, "")
            return None, None
        try:
            st = os.stat(path)
            key = (path, st.st_ino, st.st_mtime_ns, st.st_size)
            if key != self._nvidia_key:
                doc = load_spec_file(path)
                why = check_nvidia_edits(spec.nvidia_edits(doc))
                if why:
                    raise ValueError(why)
                self._nvidia_key, self._nvidia = key, doc
                log.info("CDI: library mounts and hooks from %s", path)
        except (OSError, ValueError) as e:
            what = e.strerror if isinstance(e, OSError) else str(e)
            self._say("nvidia", logging.WARNING,
                      f"CDI: NVIDIA's spec {path} is not used: {what}")
            self._nvidia_key, self._nvidia = None, None
            return path, None
        self._say("nvidia", logging.INFO, "")
        return path, self._nvidia

    def build(self, slices: list) -> dict:
        _, nvidia = self.nvidia_spec()
        return spec.build_spec(slices, self.options(), nvidia)

    def update(self, slices: list, force: bool = False) -> None:
        """Write the spec of SLICES when it differs from the file (always
        when FORCE); remove the file when no slice is ready."""
        with self._lock:
            try:
                self._update(slices, force)
            except SpecWriteError as e:
                self._say("write", logging.WARNING, f"CDI: {e}")
            else:
                self._say("write", logging.INFO, "")

    def _update(self, slices: list, force: bool) -> None:
        doc = self.build(slices)
        for name, why in spec.skipped(slices):
            self._say(("skipped", name), logging.INFO,
                      f"CDI: slice '{name}' has no device: {why}")
        for name in [k[1] for k in self._said if isinstance(k, tuple)
                     and k[0] == "skipped"]:
            if name not in {n for n, _ in spec.skipped(slices)}:
                self._say(("skipped", name), logging.INFO, "")
        if self.writer is None:
            return
        if not doc["devices"]:
            if self.writer.remove():
                log.info("CDI: removed %s: no slice is ready",
                         self.writer.path)
            self._written = None
            return
        data = encode(doc)
        if not force and data == self._written and \
                self.writer.read() == data:
            return
        self.writer.write(doc)
        if data != self._written:
            log.info("CDI: wrote %s (%d device%s)", self.writer.path,
                     len(doc["devices"]),
                     "" if len(doc["devices"]) == 1 else "s")
        self._written = data

    def _remove(self, writer: SpecWriter) -> None:
        try:
            if writer.remove():
                log.info("CDI: removed %s", writer.path)
        except SpecWriteError as e:
            log.warning("CDI: %s", e)

    def remove(self) -> None:
        """At a clean stop: the spec goes with xpud."""
        with self._lock:
            if self.writer is not None:
                self._remove(self.writer)
            self._written = None

    # -- the API's ops (docs/api.md) -----------------------------------------

    def op_cdi_spec(self, slice: str | None = None) -> dict:
        slices = self.list_slices()
        if slice is None:
            with self._lock:
                return self.build(slices)
        s = next((s for s in slices if s["name"] == slice), None)
        if s is None:
            raise ApiError("not_found", f"no slice '{slice}' (xpuctl list "
                           "shows the slices)")
        if s.get("state") != "ready" or not s.get("gpu_node") or \
                not s.get("ctl_node"):
            why = f": {s['error']}" if s.get("error") else ""
            raise ApiError("conflict", f"slice '{slice}' is {s['state']}"
                           f"{why}; a container can be given only a ready "
                           f"slice (xpuctl show {slice})")
        with self._lock:
            doc = self.build([])
            opts = self.options()
        doc["devices"] = [{"name": s["name"],
                           "containerEdits": spec.device_edits(s, opts)}]
        doc["cdiVersion"] = spec.minimum_version(doc)
        return doc

    def op_cdi_refresh(self) -> dict:
        slices = self.list_slices()
        with self._lock:
            self._nvidia_key = None   # read NVIDIA's spec again
            try:
                self._update(slices, force=True)
            except SpecWriteError as e:
                raise ApiError("internal", str(e)) from None
            path, nvidia = self.nvidia_spec()
            written = self.writer is not None and self._written is not None
            return {
                "path": str(self.writer.path) if written else None,
                "devices": len(spec.build_spec(slices)["devices"]),
                "nvidia_spec": path if nvidia is not None else None,
            }


__all__ = ["SPEC_FILE", "Refresher", "find_hook", "find_nvidia_spec",
           "load_spec_file"]
