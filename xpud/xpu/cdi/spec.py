# SPDX-License-Identifier: Apache-2.0
"""The CDI spec of xpu's slices: a pure function of the slice list.

    {"cdiVersion": "0.5.0",
     "kind": "xpu.dev/slice",
     "devices": [
       {"name": "train",
        "containerEdits": {
          "env": ["XPU_SLICE=train"],
          "deviceNodes": [
            {"path": "/dev/nvidiactl", "hostPath": "/dev/xpu3-ctl",
             "type": "c", "major": 195, "minor": 255, "permissions": "rw"},
            {"path": "/dev/nvidia0", "hostPath": "/dev/xpu3",
             "type": "c", "major": 195, "minor": 0, "permissions": "rw"}],
          "hooks": [
            {"hookName": "createRuntime",
             "path": "/usr/local/bin/xpu-cdi-hook",
             "args": ["xpu-cdi-hook", "--socket", "/run/xpu/xpud.sock",
                      "bind", "train"]}]}}],
     "containerEdits": {
       "deviceNodes": [{"path": "/dev/nvidia-uvm", ...}, ...],
       "mounts": [...NVIDIA's library mounts...],
       "hooks": [...NVIDIA's hooks...]}}

Why each part (docs/containers.md says more):
- The nodes: an OCI runtime running as root makes the container's nodes with
  mknod from type, major and minor, so the container's /dev/nvidiactl is a
  new inode, not the slice's node; what puts its opens in the slice is the
  hook, which binds the container's cgroup to the slice (xpu.ko: an open of
  the driver's nodes by a task in a bound cgroup is in the slice).  hostPath
  still names the slice's node, for a runtime that bind-mounts.  The device
  cgroup rules CDI derives from these nodes let the container open them,
  "rw", and nothing else of major 195.
- The hook is createRuntime: crun gives it the container's host pid, whose
  /proc/PID/cgroup names the container's cgroup (createContainer gets pid 0
  and a namespaced cgroup).
- cdiVersion: the lowest the fields allow (minimum_version), so that older
  runtimes load it: hostPath needs 0.5.0, which Debian 12's podman 4.3.1
  (CDI 0.5) reads; 0.6.0 or later it ignores.  No field of a later version
  (annotations, ...) is used.
"""

from __future__ import annotations

import copy
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .. import api
from . import CLASS, DEFAULT_VENDOR, HOOK_NAME, kind

NV_MAJOR = 195
NV_CTL_MINOR = 255
# Nodes every CUDA container needs besides the GPU's: UVM (cudaMallocManaged
# and the runtime's own setup) and its tools node (profilers).
UVM_NODES = ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
# xpu.ko's UVM node: its open is a UVM file of the host's driver that xpu.ko
# holds for the opener's slice (found by the container's cgroup, as for the
# driver's nodes), so that what UVM retains of the slice's channels stays
# charged to it (docs/security.md, class 39).  A container's /dev/nvidia-uvm
# is this node where the host has it; the device cgroup CDI derives then
# lets the container open it and not the driver's own UVM node.
XPU_UVM_NODE = "/dev/xpu-uvm"

# The CDI library's rule for a device name: a letter or digit first and
# last; letters, digits, '_', '-', '.' and ':' between.
_DEVICE_NAME_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class SpecOptions:
    """What the spec depends on besides the slices.

    vendor: the kind's vendor domain; hook: the absolute path of
    xpu-cdi-hook; socket: xpud's socket, passed to the hook; extra_nodes:
    CDI deviceNode objects every container of the spec gets (host_nodes()
    makes them for the UVM nodes that exist)."""

    vendor: str = DEFAULT_VENDOR
    hook: str = "/usr/local/bin/" + HOOK_NAME
    socket: str = api.DEFAULT_SOCKET
    extra_nodes: tuple[dict, ...] = ()


def valid_device_name(name: str) -> bool:
    return bool(_DEVICE_NAME_RE.fullmatch(name))


def usable(s: dict) -> str | None:
    """Why slice S (an API Slice) cannot be a device, or None."""
    if s.get("state") != "ready":
        return f"it is {s.get('state')}"
    if not s.get("gpu_node") or not s.get("ctl_node") or \
            s.get("gpu_minor") is None:
        return "its device nodes are not made yet"
    if not valid_device_name(s["name"]):
        return ("a CDI device name must start and end with a letter or a "
                "digit")
    return None


def skipped(slices: Iterable[dict]) -> list[tuple[str, str]]:
    """(name, why) of the slices build_spec leaves out."""
    return [(s["name"], why) for s in slices
            if (why := usable(s)) is not None]


def hook_args(options: SpecOptions, slice_name: str) -> list[str]:
    return [HOOK_NAME, "--socket", options.socket, "bind", slice_name]


def device_edits(s: dict, options: SpecOptions) -> dict:
    """The containerEdits of slice S's device."""
    minor = s["gpu_minor"]
    return {
        "env": [f"XPU_SLICE={s['name']}"],
        "deviceNodes": [
            {"path": "/dev/nvidiactl", "hostPath": s["ctl_node"],
             "type": "c", "major": NV_MAJOR, "minor": NV_CTL_MINOR,
             "permissions": "rw"},
            {"path": f"/dev/nvidia{minor}", "hostPath": s["gpu_node"],
             "type": "c", "major": NV_MAJOR, "minor": minor,
             "permissions": "rw"}],
        "hooks": [{"hookName": "createRuntime", "path": options.hook,
                   "args": hook_args(options, s["name"])}],
    }


def nvidia_edits(nvidia_spec: dict | None) -> dict:
    """What xpu's spec takes from NVIDIA's: the mounts and hooks of its
    spec-wide containerEdits (the driver's libraries and binaries, and the
    hooks that make their symlinks and the linker cache).  Not its device
    nodes (the slice gives those), nor its environment, nor its devices'
    own edits (device nodes of whole GPUs)."""
    if not nvidia_spec:
        return {}
    edits = nvidia_spec.get("containerEdits") or {}
    out = {}
    for key in ("mounts", "hooks"):
        if edits.get(key):
            out[key] = copy.deepcopy(edits[key])
    return out


def common_edits(options: SpecOptions, nvidia_spec: dict | None) -> dict:
    """The spec-wide containerEdits: every container of the spec gets
    them once, whichever of its devices it asked for."""
    out = {}
    if options.extra_nodes:
        out["deviceNodes"] = [dict(n) for n in options.extra_nodes]
    out.update(nvidia_edits(nvidia_spec))
    return out


def build_spec(slices: Sequence[dict], options: SpecOptions = SpecOptions(),
               nvidia_spec: dict | None = None) -> dict:
    """The CDI spec of SLICES (API Slice objects): one device per usable
    slice (usable()), by name, then the spec-wide edits."""
    devices = [{"name": s["name"], "containerEdits": device_edits(s, options)}
               for s in sorted(slices, key=lambda s: s["name"])
               if usable(s) is None]
    spec = {"cdiVersion": "", "kind": kind(options.vendor),
            "devices": devices}
    common = common_edits(options, nvidia_spec)
    if common:
        spec["containerEdits"] = common
    spec["cdiVersion"] = minimum_version(spec)
    return spec


def device(spec: dict, name: str) -> dict | None:
    for d in spec.get("devices", []):
        if d.get("name") == name:
            return d
    return None


# -- versions ---------------------------------------------------------------
# From the CDI specification's table of released versions: the field each
# version added.  A runtime refuses a spec that uses a field newer than its
# cdiVersion, and ignores a cdiVersion newer than it knows.

def _edits(spec: dict) -> list[dict]:
    out = [spec.get("containerEdits") or {}]
    out += [d.get("containerEdits") or {} for d in spec.get("devices", [])]
    return out


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def minimum_version(spec: dict) -> str:
    """The lowest cdiVersion whose fields SPEC uses."""
    edits = _edits(spec)
    need = "0.3.0"

    def at_least(v: str) -> None:
        nonlocal need
        if _version_key(v) > _version_key(need):
            need = v

    if any(m.get("type") for e in edits for m in e.get("mounts", [])):
        at_least("0.4.0")
    if any(n.get("hostPath") for e in edits for n in e.get("deviceNodes", [])):
        at_least("0.5.0")
    if any(d.get("name", "")[:1].isdigit() for d in spec.get("devices", [])):
        at_least("0.5.0")
    if spec.get("annotations") or any(d.get("annotations")
                                      for d in spec.get("devices", [])):
        at_least("0.6.0")
    if "." in spec.get("kind", "").partition("/")[2]:
        at_least("0.6.0")
    if any(e.get("intelRdt") or e.get("additionalGids") for e in edits):
        at_least("0.7.0")
    if any(e.get("netDevices") for e in edits):
        at_least("1.1.0")
    return need


# -- the host's side: what build_spec is given ---------------------------------

def host_nodes(paths: Iterable[str] = UVM_NODES,
               lstat: Callable[[str], os.stat_result] = os.stat,
               instead: dict[str, str] | None = None) -> tuple:
    """CDI deviceNode objects for the character devices of PATHS that
    exist (type, major and minor from the host).  INSTEAD maps a path to
    the host node that stands there in the container when the host has it
    (default: /dev/nvidia-uvm is xpu.ko's UVM node, XPU_UVM_NODE), where
    the host has both."""
    if instead is None:
        instead = {"/dev/nvidia-uvm": XPU_UVM_NODE}

    def char(path):
        try:
            st = lstat(path)
        except OSError:
            return None
        return st if stat.S_ISCHR(st.st_mode) else None

    out = []
    for p in paths:
        st = char(p)
        if st is None:
            continue
        node = {"path": p, "type": "c"}
        host = instead.get(p)
        if host is not None and (other := char(host)) is not None:
            st = other
            node["hostPath"] = host
        node.update(major=os.major(st.st_rdev), minor=os.minor(st.st_rdev),
                    permissions="rw")
        out.append(node)
    return tuple(out)


__all__ = ["CLASS", "SpecOptions", "build_spec", "common_edits", "device",
           "device_edits", "host_nodes", "minimum_version", "skipped",
           "usable", "valid_device_name"]
