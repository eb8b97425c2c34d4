# SPDX-License-Identifier: Apache-2.0
"""What xpu-container-runtime does to a container's OCI config.json, as
pure functions: read the XPU_* variables of its environment (request()),
and apply a slice's CDI container edits to it (apply_edits()) the way CDI
runtimes apply them, so that a container gets the same whether it asked
with `--device xpu.dev/slice=NAME` or with XPU_SLICE=NAME.

The variables (docs/containers.md):

    XPU_MEMORY=SIZE        a new slice of SIZE (512MiB, 8GiB: binary units)
    XPU_COMPUTE=PCT        its compute share, 0 to 100 in steps of 0.1
    XPU_GPU=UUID|INDEX     its GPU (default: the one with most memory left)
    XPU_PRIORITY=CLASS     low, normal or high
    XPU_HOST_MEMORY=SIZE   its bound on the system memory the driver
                           allocates for it (pinned host pages); 0: none
    XPU_SLICE=NAME         join the existing slice NAME instead

What xpu's device plugin sets beside XPU_SLICE to describe the slice it
gave a pod's container (DESCRIPTIONS) asks for nothing and is let pass with
XPU_SLICE.  Any other XPU_ variable is refused, so that a misspelt one never
leaves a container running without its slice; so is a slice asked for twice
(a name and a size), XPU_COMPUTE, XPU_GPU, XPU_PRIORITY or XPU_HOST_MEMORY
without XPU_MEMORY, and a description without XPU_SLICE.

A Kubernetes pod's container (kubernetes(): its CRI's annotations) is held to
what the pod cannot forge, since kubelet puts the pod's own env after the
device plugin's: the runtime reads its devices (devices()), the slice
bindings its CDI edits carry (bound_slices()) and the pod and container its
CRI named (pod_containers()), by which kubelet's pod resources API says what
it holds; runtime.py decides.
"""

from __future__ import annotations

import copy
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import model, sizes
from ..errors import XpuError
from . import HOOK_NAME

# What a new slice takes, then the name of an existing one.
LIMITS = ("XPU_MEMORY", "XPU_COMPUTE", "XPU_GPU", "XPU_PRIORITY",
          "XPU_HOST_MEMORY")
VARIABLES = LIMITS + ("XPU_SLICE",)
# What xpu's device plugin tells a container of the slice it was given,
# beside XPU_SLICE (deviceplugin.py, docs/kubernetes.md), for its programs:
# a pod's container must start under a runtime that reads XPU_ variables.
DESCRIPTIONS = ("XPU_MEMORY_LIMIT_BYTES", "XPU_GPU_UUID", "XPU_COMPUTE_SHARE")


# The annotations a CRI puts on each container of a pod, which a pod cannot
# set or remove: containerd's (pkg/cri/annotations: ContainerType
# "io.kubernetes.cri.container-type", SandboxID "io.kubernetes.cri.sandbox-id")
# and CRI-O's (pkg/annotations: "io.kubernetes.cri-o.ContainerType",
# "io.kubernetes.cri-o.SandboxID").
KUBERNETES_ANNOTATIONS = ("io.kubernetes.cri.container-type",
                          "io.kubernetes.cri.sandbox-id",
                          "io.kubernetes.cri-o.ContainerType",
                          "io.kubernetes.cri-o.SandboxID")


# Which pod's container it is, as (namespace, pod, container) keys.
# containerd's (pkg/cri/annotations: SandboxNamespace, SandboxName,
# ContainerName), which its CRI sets on every container after the pod's own
# pass-through annotations; CRI-O's: kubelet's container labels
# (k8s.io/kubelet/pkg/types: KubernetesPodNamespaceLabel,
# KubernetesPodNameLabel, KubernetesContainerNameLabel), which CRI-O copies
# into the annotations after the pod's own (internal/factory/container,
# SpecAddAnnotations), so that kubelet's values win there too.
POD_CONTAINER_ANNOTATIONS = (
    ("io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name",
     "io.kubernetes.cri.container-name"),
    ("io.kubernetes.pod.namespace", "io.kubernetes.pod.name",
     "io.kubernetes.container.name"))


# What Kubernetes allows in a namespace's, a pod's and a container's name (a
# DNS subdomain; a label is one); keys holding anything else name nothing.
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class RequestError(XpuError):
    """A container's XPU_* variables are wrong: one line, what and what
    to do."""


@dataclass(frozen=True)
class Request:
    """What a container's environment asks for: an existing slice (slice)
    or a new one (memory_limit_bytes, and the optional rest)."""

    slice: str | None = None
    memory_limit_bytes: int | None = None
    compute_share: float | int | None = None   # percent, as the API takes
    gpu: model.GpuRef | None = None
    priority: str | None = None
    # None: not asked (the runtime's default applies); 0: no bound.
    host_memory_limit_bytes: int | None = None


def environment(env: Sequence[str]) -> dict[str, str]:
    """An OCI process.env list as a dict; the last of a name wins, as for
    execve's callers."""
    out = {}
    for item in env:
        name, sep, value = item.partition("=")
        if sep:
            out[name] = value
    return out


def request(env: Sequence[str]) -> Request | None:
    """The slice ENV (an OCI process.env) asks for, or None when it sets no
    XPU_ variable.  Raises RequestError."""
    vars = {k: v for k, v in environment(env).items()
            if k.startswith("XPU_")}
    if not vars:
        return None
    unknown = sorted(set(vars) - set(VARIABLES) - set(DESCRIPTIONS))
    if unknown:
        raise RequestError(
            f"unknown variable {unknown[0]}: xpu reads "
            + ", ".join(VARIABLES) + " (docs/containers.md)")

    def value(name: str, parse: Callable):
        if name not in vars:
            return None
        text = vars[name]
        if not text.strip():
            raise RequestError(f"{name} is empty: give it a value or leave "
                               "it out")
        try:
            return parse(text)
        except (TypeError, ValueError) as e:
            raise RequestError(f"{name}={text}: {e}") from None

    name = value("XPU_SLICE", model.check_name)
    memory = value("XPU_MEMORY",
                   lambda t: model.check_memory(sizes.parse_size(t)))
    compute = value("XPU_COMPUTE",
                    lambda t: sizes.share_percent(sizes.parse_share(t)))
    gpu = value("XPU_GPU", model.parse_gpu_ref)
    priority = value("XPU_PRIORITY",
                     lambda t: model.check_choice(t, model.PRIORITIES))
    host = value("XPU_HOST_MEMORY",
                 lambda t: model.check_host_memory(sizes.parse_size(t)))
    others = [n for n in LIMITS if n in vars]
    described = [n for n in DESCRIPTIONS if n in vars]
    if described and name is None:
        raise RequestError(
            f"{described[0]} describes the slice xpu's device plugin gave a "
            "pod, beside XPU_SLICE, and asks for nothing: ask for a new "
            "slice with XPU_MEMORY=SIZE, or name one with XPU_SLICE")
    if name is not None:
        if others:
            raise RequestError(
                f"XPU_SLICE={name} joins an existing slice, whose limits "
                f"are its own: leave out {', '.join(others)}, or XPU_SLICE "
                "for a new slice")
        return Request(slice=name)
    if memory is None:
        raise RequestError(
            f"{others[0]} without XPU_MEMORY: a new slice needs its memory "
            "limit (XPU_MEMORY=8GiB), or name an existing slice with "
            "XPU_SLICE")
    return Request(memory_limit_bytes=memory, compute_share=compute,
                   gpu=gpu, priority=priority, host_memory_limit_bytes=host)


# -- what a Kubernetes container holds ---------------------------------------------

def kubernetes(config: dict) -> bool:
    """Whether CONFIG (an OCI config.json) is of a Kubernetes pod's
    container: its CRI (containerd, CRI-O) annotated it so."""
    annotations = config.get("annotations")
    if not isinstance(annotations, dict):
        return False
    return any(k in annotations for k in KUBERNETES_ANNOTATIONS)


def pod_containers(config: dict) -> list[tuple[str, str, str]]:
    """The (namespace, pod, container) CONFIG's annotations name, one for
    each CRI's keys that are all there and not empty, each once.  More than
    one means they disagree: CRI-O copies a pod's own annotations too, so a
    pod can write containerd's keys there, never over CRI-O's."""
    annotations = config.get("annotations")
    if not isinstance(annotations, dict):
        return []
    out = []
    for keys in POD_CONTAINER_ANNOTATIONS:
        values = tuple(annotations.get(k) for k in keys)
        if all(isinstance(v, str) and _K8S_NAME.fullmatch(v)
               for v in values) and values not in out:
            out.append(values)
    return out


def devices(config: dict) -> list[tuple[str, str, int, int]]:
    """CONFIG's linux.devices: (path, type, major, minor) each, those
    well formed only."""
    linux = config.get("linux")
    found = linux.get("devices") if isinstance(linux, dict) else None
    out = []
    for d in found if isinstance(found, list) else []:
        if not isinstance(d, dict):
            continue
        path, kind = d.get("path"), d.get("type")
        major, minor = d.get("major"), d.get("minor")
        if isinstance(path, str) and isinstance(kind, str) and \
                type(major) is int and type(minor) is int:
            out.append((path, kind, major, minor))
    return out


def bound_slices(config: dict) -> list[str]:
    """The slices CONFIG's createRuntime hooks bind the container to: the
    hook of an xpu CDI device (`xpu-cdi-hook ... bind NAME`), which a CDI
    runtime (containerd, CRI-O) put there from the device kubelet gave."""
    hooks = config.get("hooks")
    found = hooks.get("createRuntime") if isinstance(hooks, dict) else None
    out = []
    for h in found if isinstance(found, list) else []:
        args = h.get("args") if isinstance(h, dict) else None
        if not isinstance(args, list) or len(args) < 3 or \
                not all(isinstance(a, str) for a in args):
            continue
        if os.path.basename(args[0]) == HOOK_NAME and args[-2] == "bind" \
                and args[-1] not in out:
            out.append(args[-1])
    return out


# -- applying CDI edits --------------------------------------------------------

def _fill_node(node: dict, lstat: Callable) -> dict:
    """A CDI deviceNode with type, major and minor filled in from its host
    node when missing, as CDI runtimes do."""
    node = dict(node)
    if node.get("type") and node.get("major"):
        return node
    host = node.get("hostPath") or node["path"]
    try:
        st = lstat(host)
    except OSError as e:
        raise XpuError(f"the device {host} for {node['path']} cannot be "
                       f"read: {e.strerror}") from None
    if stat.S_ISCHR(st.st_mode):
        kind = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        raise XpuError(f"{host} is not a device node")
    node.setdefault("type", kind)
    node["major"] = os.major(st.st_rdev)
    node["minor"] = os.minor(st.st_rdev)
    return node


def apply_edits(config: dict, edits: Sequence[dict],
                lstat: Callable = os.stat) -> dict:
    """CONFIG (an OCI runtime config, as config.json holds it) with the CDI
    containerEdits EDITS applied in order, as a new dict; CONFIG is not
    changed.  Environment variables replace those of the same name; device
    nodes replace those at the same path and get a device-cgroup rule;
    mounts are appended; hooks are appended to their list, and a hook that
    is already there (the same path and arguments) is not added twice."""
    out = copy.deepcopy(config)
    for e in edits:
        if e.get("env"):
            process = out.setdefault("process", {})
            env = list(process.get("env") or [])
            for item in e["env"]:
                name = item.partition("=")[0]
                env = [x for x in env if x.partition("=")[0] != name]
                env.append(item)
            process["env"] = env
        for node in e.get("deviceNodes") or []:
            n = _fill_node(node, lstat)
            linux = out.setdefault("linux", {})
            devices = [d for d in linux.get("devices") or []
                       if d.get("path") != n["path"]]
            dev = {"path": n["path"], "type": n["type"],
                   "major": n["major"], "minor": n["minor"]}
            user = (out.get("process") or {}).get("user") or {}
            for key in ("uid", "gid"):
                if key in n:
                    dev[key] = n[key]
                elif user.get(key):
                    # As CDI: the container's user owns the node.
                    dev[key] = user[key]
            devices.append(dev)
            linux["devices"] = devices
            rules = linux.setdefault("resources", {}).setdefault(
                "devices", [])
            rules.append({"allow": True, "type": n["type"],
                          "major": n["major"], "minor": n["minor"],
                          "access": n.get("permissions") or "rwm"})
        for m in e.get("mounts") or []:
            mount = {"destination": m["containerPath"],
                     "source": m["hostPath"]}
            if m.get("type"):
                mount["type"] = m["type"]
            if m.get("options"):
                mount["options"] = list(m["options"])
            out.setdefault("mounts", []).append(mount)
        for h in e.get("hooks") or []:
            hook = {"path": h["path"]}
            for key in ("args", "env", "timeout"):
                if key in h:
                    hook[key] = copy.deepcopy(h[key])
            hooks = out.setdefault("hooks", {}).setdefault(h["hookName"],
                                                           [])
            if hook not in hooks:
                hooks.append(hook)
    return out
