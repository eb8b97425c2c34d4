# SPDX-License-Identifier: Apache-2.0
"""xpu-container-runtime: an OCI runtime that gives a container the slice
its environment asks for, then executes the real runtime (crun or runc).

    podman run --runtime /usr/local/bin/xpu-container-runtime \\
        -e XPU_MEMORY=8GiB -e XPU_COMPUTE=25 IMAGE ...

It takes the command line of runc and crun (`[GLOBAL OPTIONS] COMMAND
[OPTIONS] CONTAINER`), and passes every command through to the real runtime
unchanged, with two exceptions:

create, run  When the bundle's config.json sets XPU_* variables (oci.py),
             asks xpud for the slice -- a new ephemeral one named
             ctr-<first 12 hex digits of the id>, owned by the container's
             id, or the existing one XPU_SLICE names -- and rewrites
             config.json with the slice's CDI edits (the ones `--device
             xpu.dev/slice=NAME` would give: its nodes, XPU_SLICE, the hook
             that binds the container's cgroup, NVIDIA's libraries), then
             executes the real runtime.  A bad value, a refusal of xpud or
             an xpud that cannot be reached stops the start with one line
             on stderr (and in the runtime's --log), and nothing is left
             behind: the container never runs without the slice it asked
             for.  A container without XPU_* variables passes untouched.
             A Kubernetes pod's container gets no new slice (pod_request()),
             and joins only a slice whose devices kubelet gave it
             (pod_holds()): the one its CDI device's hook binds, or, with
             no CDI device, the one kubelet's pod resources API says it
             holds (pod_given()).
delete       Releases the container's ephemeral slices (best effort: xpud
             also destroys a slice whose container has ended), then
             executes the real runtime.

Settings: the [container_runtime] table of xpud's configuration file
(/etc/xpu/xpud.toml, or the file $XPU_CONFIG names): oci_runtime (default:
crun when found, else runc), socket (xpud's, /run/xpu/xpud.sock) and
host_memory (the bound on system memory the driver allocates for each
slice it makes, and the loosest XPU_HOST_MEMORY may ask; default 0: none)
and kubernetes (true: every container is held as a pod's; default false:
those whose CRI annotations say so), pod_resources (kubelet's pod
resources socket, /var/lib/kubelet/pod-resources/kubelet.sock).  The
resources' names are of the [cdi] vendor (xpu.dev), as xpu-k8s's --vendor.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .. import config as xpu_config
from .. import sizes
from ..api import ApiError
from ..client import Client
from ..errors import XpuError
from . import RUNTIME_NAME, oci, spec

PROG = RUNTIME_NAME
SEARCH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
               "/sbin", "/bin")
DEFAULT_RUNTIMES = ("crun", "runc")

# runc's and crun's global options that take a value.
_GLOBAL_VALUE = {"--root", "--log", "--log-format", "--log-level", "--criu",
                 "--rootless", "--cgroup-manager"}
# create's and run's options that take a value.
_CREATE_VALUE = {"--bundle", "-b", "--console-socket", "--pid-file",
                 "--preserve-fds", "--config", "-f"}
_DELETE_VALUE: set[str] = set()


class RuntimeError_(XpuError):
    pass


class PodRefused(RuntimeError_):
    """What a Kubernetes pod's container may not ask: its one line is
    whole."""


@dataclass
class CommandLine:
    """ARGV split: the global options, the command and its arguments."""

    argv: list[str]
    command: str | None
    index: int            # of the command in argv (len(argv) when none)

    def global_value(self, name: str) -> str | None:
        return _option(self.argv[:self.index], name, _GLOBAL_VALUE)

    def args(self) -> list[str]:
        return self.argv[self.index + 1:]


def _option(args: Sequence[str], name: str, valued: set[str],
            short: str | None = None) -> str | None:
    """The value of option NAME (or SHORT) in ARGS: --name=V, --name V,
    -sV, -s V; the last one given wins."""
    found = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        if a.startswith(name + "="):
            found = a[len(name) + 1:]
        elif a == name or (short and a == short):
            if i + 1 < len(args):
                found = args[i + 1]
            i += 1
        elif short and a.startswith(short) and not a.startswith("--"):
            found = a[len(short):].lstrip("=")
        elif a in valued:
            i += 1
        i += 1
    return found


def positionals(args: Sequence[str], valued: set[str]) -> list[str]:
    out = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out += args[i + 1:]
            break
        if a.startswith("-") and a != "-":
            if "=" not in a and a in valued:
                i += 1
        else:
            out.append(a)
        i += 1
    return out


def parse(argv: Sequence[str]) -> CommandLine:
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-"):
            if "=" not in a and a in _GLOBAL_VALUE:
                i += 1
            i += 1
            continue
        return CommandLine(list(argv), a, i)
    return CommandLine(list(argv), None, len(argv))


def slice_name(container_id: str) -> str:
    """The ephemeral slice's name: ctr- and the id's first 12 hex digits
    (the short id podman and docker show), or of its SHA-256 when the id
    is not hexadecimal."""
    if re.fullmatch(r"[0-9a-f]{12,}", container_id):
        return "ctr-" + container_id[:12]
    return "ctr-" + hashlib.sha256(container_id.encode()).hexdigest()[:12]


def find_runtime(setting: str, me: str, environ=os.environ,
                 search_dirs: Sequence[str] = SEARCH_DIRS) -> str:
    """The real runtime's path: SETTING (a path, or a name looked up in
    PATH and the system's directories), else crun, else runc.  Never this
    program (ME) itself."""
    def lookup(name: str) -> str | None:
        if name.startswith("/"):
            return name if os.access(name, os.X_OK) else None
        dirs = [d for d in environ.get("PATH", "").split(":") if d]
        for d in dirs + [d for d in search_dirs if d not in dirs]:
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        return None

    names = (setting,) if setting else DEFAULT_RUNTIMES
    for name in names:
        p = lookup(name)
        if p is None:
            continue
        if os.path.realpath(p) == os.path.realpath(me):
            raise RuntimeError_(
                f"oci_runtime {name} is {PROG} itself: set it to crun or "
                "runc in [container_runtime]")
        return p
    if setting:
        raise RuntimeError_(
            f"the OCI runtime '{setting}' of [container_runtime] is not "
            "found or not executable")
    raise RuntimeError_("neither crun nor runc is installed: install one, "
                        "or set oci_runtime in [container_runtime]")


def pick_gpu(gpus: list, memory: int):
    """The GPU with the most memory not given to slices (its UUID); the
    first GPU when memory sizes are unknown."""
    known = [g for g in gpus if g.get("gpu_uuid")]
    if not known:
        raise RuntimeError_("xpud lists no GPU with a UUID: nothing to make "
                            "a slice on (xpuctl gpus)")

    def left(g):
        total = g.get("memory_total_bytes")
        if total is None:
            return -1
        return total - g.get("memory_assigned_bytes", 0)

    best = max(known, key=lambda g: (left(g), -g["index"]))
    return best["gpu_uuid"]


def host_bound(req: oci.Request, ceiling: int) -> int:
    """The host bound of the new slice REQ asks for (0: none): its
    XPU_HOST_MEMORY, else CEILING ([container_runtime] host_memory).  A
    container may ask a tighter bound than CEILING, never a looser one."""
    asked = req.host_memory_limit_bytes
    if req.slice is not None or asked is None:
        return ceiling
    if ceiling and not 0 < asked <= ceiling:
        what = sizes.format_size(asked) if asked else "0 (no bound)"
        raise RuntimeError_(
            f"XPU_HOST_MEMORY={what} is looser than this host's bound for "
            f"containers, {sizes.format_size(ceiling)} ([container_runtime] "
            "host_memory): ask at most that, or leave XPU_HOST_MEMORY out "
            "(the container is not started)")
    return asked


POD_ASKS = ("a pod's slice comes from its resources (xpu.dev/xpu-memory, "
            "xpu.dev/slice) or its resource claims, not from its "
            "environment")


def pod_request(req: oci.Request, cfg: dict) -> None:
    """Refuse what a Kubernetes pod's container may not ask with its
    environment, before xpud is asked anything: a new slice (Kubernetes'
    scheduler never counted it), or a slice other than the one its CDI
    device's hook binds it to.  kubelet puts the pod's own env after what
    the device plugin's Allocate set, so a pod may write any XPU_ variable;
    what it cannot write is its devices and its hooks."""
    if req.slice is None:
        raise PodRefused(
            "XPU_MEMORY asks for a new slice, which a Kubernetes pod gets by "
            "asking for xpu.dev/xpu-memory (and xpu.dev/xpu-shares) in its "
            "resources, not by its environment (the container is not "
            "started)")
    bound = oci.bound_slices(cfg)
    if bound and req.slice not in bound:
        raise PodRefused(
            f"XPU_SLICE={req.slice} names another slice than the one "
            f"Kubernetes gave this container, {', '.join(bound)} (its CDI "
            f"device): {POD_ASKS} (the container is not started)")


def pod_holds(name: str, shown: dict, cfg: dict, lstat=os.stat) -> None:
    """Refuse XPU_SLICE=NAME for a Kubernetes pod's container unless its
    linux.devices hold the slice's nodes (SHOWN: xpud's show of it): the
    device plugin gives them as device specs (and CDI as device nodes),
    and a pod that is not privileged cannot add a device.  A slice's
    nodes carry the driver's numbers (xpu.ko knows them by inode), so
    this ties the container to the slice's GPU; the slice itself is tied
    by pod_request()'s hook, where CDI put one."""
    have = oci.devices(cfg)
    numbers = {(kind, major, minor) for _, kind, major, minor in have}
    for key in ("gpu_node", "ctl_node"):
        path = shown.get(key)
        if not path:
            raise PodRefused(
                f"XPU_SLICE={name}: the slice has no device nodes yet "
                f"({shown.get('error') or shown.get('state')}) (the "
                "container is not started)")
        try:
            st = lstat(path)
        except OSError as e:
            raise PodRefused(
                f"XPU_SLICE={name}: cannot read the slice's node {path}: "
                f"{e.strerror} (the container is not started)") from None
        major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        if stat.S_ISCHR(st.st_mode) and ("c", major, minor) in numbers:
            continue
        gpus = [f"{p} ({m}:{n})" for p, kind, m, n in have
                if kind == "c" and p.startswith("/dev/nvidia")]
        raise PodRefused(
            f"XPU_SLICE={name} names a slice whose devices this Kubernetes "
            f"container was not given ({path} is {major}:{minor}; its GPU "
            f"devices: {', '.join(gpus) or 'none'}): {POD_ASKS} (the "
            "container is not started)")


# How long kubelet's pod resources API may take to answer a start.
POD_RESOURCES_TIMEOUT_S = 3.0


def pod_given(name: str, cfg: dict, socket: str,
              vendor: str = xpu_config.DEFAULT_CDI_VENDOR,
              timeout: float | None = None) -> None:
    """Refuse XPU_SLICE=NAME for a Kubernetes pod's container that no xpu
    CDI device binds unless kubelet's pod resources API (at SOCKET) says
    this container holds NAME: the device plugin's slice of its
    VENDOR/xpu-memory devices, or a whole VENDOR/slice.  Its device nodes
    alone cannot say: every slice of a GPU has nodes of the same numbers
    (pod_holds()).  The container is found by the pod namespace, pod name
    and container name its CRI annotated it with, which the pod cannot
    write."""
    from ..k8s import kubelet, resources  # gRPC: for a pod's container only
    who = oci.pod_containers(cfg)
    if not who:
        raise PodRefused(
            f"XPU_SLICE={name}: this Kubernetes container's CRI did not "
            "annotate its pod's namespace and name and its own name "
            "(containerd's io.kubernetes.cri.sandbox-namespace, "
            "sandbox-name and container-name; CRI-O's "
            "io.kubernetes.pod.namespace, io.kubernetes.pod.name and "
            "io.kubernetes.container.name), by which kubelet says which "
            "slice it holds (the container is not started)")
    if len(who) > 1:
        named = " and ".join(f"{n}/{p} container {c}" for n, p, c in who)
        raise PodRefused(
            f"XPU_SLICE={name}: this Kubernetes container's annotations "
            f"name two containers, {named}: {POD_ASKS} (the container is "
            "not started)")
    namespace, pod, container = who[0]
    where = f"{namespace}/{pod} container {container}"
    try:
        names = resources.Names(vendor)
    except ValueError as e:
        raise PodRefused(f"[cdi] vendor: {e}, by which kubelet names xpu's "
                         "resources (the container is not started)") \
            from None
    try:
        if not stat.S_ISSOCK(os.stat(socket).st_mode):
            raise PodRefused(
                f"XPU_SLICE={name}: cannot ask kubelet which slice {where} "
                f"holds: {socket} is not a socket ([container_runtime] "
                "pod_resources) (the container is not started)")
    except OSError as e:
        raise PodRefused(
            f"XPU_SLICE={name}: cannot ask kubelet which slice {where} "
            f"holds: {socket}: {e.strerror} ([container_runtime] "
            "pod_resources) (the container is not started)") from None
    try:
        pods = kubelet.pod_resources(
            socket, timeout=POD_RESOURCES_TIMEOUT_S if timeout is None
            else timeout)
    except kubelet.KubeletError as e:
        raise PodRefused(
            f"XPU_SLICE={name}: cannot ask kubelet which slice {where} "
            f"holds: {e} (the container is not started)") from None
    found = [c for p in pods if (p.namespace, p.name) == (namespace, pod)
             for c in p.containers if c.name == container]
    if not found:
        raise PodRefused(
            f"XPU_SLICE={name}: kubelet's pod resources API lists no "
            f"{where}, so no slice is known to be its: {POD_ASKS} (the "
            "container is not started)")
    held = list(dict.fromkeys(s for c in found
                              for s in kubelet.held_slices(c, names)))
    if name not in held:
        raise PodRefused(
            f"XPU_SLICE={name} names another slice than the one Kubernetes "
            f"gave {where}, {', '.join(held) or 'none'} (kubelet's pod "
            f"resources): {POD_ASKS} (the container is not started)")


def write_json(path: str, doc: dict) -> None:
    """Replace PATH with DOC atomically, keeping its mode."""
    d = os.path.dirname(path) or "."
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".xpu.tmp", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _api(e: ApiError) -> RuntimeError_:
    return RuntimeError_(f"xpud refused: {e.message}")


class Runtime:
    def __init__(self, cmdline: CommandLine, settings, me: str,
                 environ=os.environ, lstat=os.stat,
                 vendor: str = xpu_config.DEFAULT_CDI_VENDOR):
        self.cmdline = cmdline
        self.settings = settings
        self.me = me
        self.environ = environ
        self.lstat = lstat     # of the slices' nodes
        self.vendor = vendor   # of the resources' names ([cdi] vendor)

    def client(self) -> Client:
        return Client(self.settings.socket)

    def create(self) -> None:
        """Give the container of a create (or run) its slice, if it asks
        for one."""
        args = self.cmdline.args()
        ids = positionals(args, _CREATE_VALUE)
        if not ids:
            return  # the real runtime says what is missing
        container = ids[-1]
        bundle = _option(args, "--bundle", _CREATE_VALUE, "-b") or "."
        name = _option(args, "--config", _CREATE_VALUE, "-f") or \
            "config.json"
        path = os.path.join(bundle, name)
        try:
            with open(path) as f:
                cfg = json.load(f)
        except (OSError, ValueError):
            return  # the real runtime reports it, in its own words
        env = (cfg.get("process") or {}).get("env") or []
        try:
            req = oci.request(env)
        except oci.RequestError as e:
            raise RuntimeError_(f"{e} (the container is not started)") \
                from None
        if req is None:
            # Under Kubernetes too: a CDI device's edits are in config.json
            # already, and device nodes alone name no slice.
            return
        pod = self.settings.kubernetes or oci.kubernetes(cfg)
        if pod:
            pod_request(req, cfg)
        host = host_bound(req, self.settings.host_memory_limit_bytes)
        made = None
        try:
            with self.client() as c:
                if req.slice is not None:
                    target = req.slice
                    if pod:
                        pod_holds(target, c.call("show", name=target), cfg,
                                  self.lstat)
                        if not oci.bound_slices(cfg):
                            # no CDI device's hook decided (pod_request())
                            pod_given(target, cfg,
                                      self.settings.pod_resources,
                                      self.vendor)
                else:
                    target = slice_name(container)
                    # What a previous start of this container left.
                    c.call("release", owner=container)
                    gpu = req.gpu if req.gpu is not None else \
                        pick_gpu(c.call("gpus"), req.memory_limit_bytes)
                    extra = {k: v for k, v in (
                        ("compute_share", req.compute_share),
                        ("priority", req.priority)) if v is not None}
                    if host:
                        extra["host_memory_limit_bytes"] = host
                    c.call("create", name=target, gpu=gpu,
                           memory_limit_bytes=req.memory_limit_bytes,
                           owner=container, owner_pid=os.getpid(), **extra)
                    made = container
                doc = c.call("cdi_spec", slice=target)
                dev = spec.device(doc, target)
                edits = [doc.get("containerEdits") or {},
                         dev["containerEdits"]]
                write_json(path, oci.apply_edits(cfg, edits))
        except ApiError as e:
            self._undo(made)
            raise _api(e) from None
        except PodRefused:
            raise                   # before anything was made
        except XpuError as e:
            self._undo(made)
            raise RuntimeError_(f"{e} (the container asks for a slice and "
                                "is not started)") from None
        except OSError as e:
            self._undo(made)
            raise RuntimeError_(f"cannot rewrite {path}: {e.strerror}") \
                from None

    def _undo(self, owner: str | None) -> None:
        if owner is None:
            return
        try:
            with self.client() as c:
                c.call("release", owner=owner)
        except XpuError:
            pass  # xpud destroys it when this process has ended

    def delete(self) -> None:
        args = self.cmdline.args()
        if "--regex" in args or "-r" in args:
            return  # the names are patterns: xpud reaps what ends
        ids = positionals(args, _DELETE_VALUE)
        if not ids:
            return
        try:
            with self.client() as c:
                c.call("release", owner=ids[-1])
        except XpuError as e:
            # The container is gone either way; xpud reaps its slice.
            print(f"{PROG}: warning: {e}", file=sys.stderr)

    def run(self) -> None:
        """Prepare, then execute the real runtime (never returns)."""
        real = find_runtime(self.settings.oci_runtime, self.me, self.environ)
        if self.cmdline.command in ("create", "run"):
            self.create()
        elif self.cmdline.command == "delete":
            self.delete()
        os.execv(real, [real] + self.cmdline.argv)


def log_error(cmdline: CommandLine, message: str) -> None:
    """MESSAGE in the runtime's --log too, in its --log-format, where
    conmon and containerd's shim look for a runtime's error."""
    path = cmdline.global_value("--log")
    if not path:
        return
    if cmdline.global_value("--log-format") == "json":
        line = json.dumps({"level": "error", "msg": message,
                           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                 time.gmtime())})
    else:
        line = f"{PROG}: error: {message}"
    try:
        with open(path, "a") as f:
            f.write(line + "\n")
    except OSError:
        pass


def load_config(environ=os.environ) -> xpu_config.Config:
    path = environ.get("XPU_CONFIG") or xpu_config.DEFAULT_PATH
    return xpu_config.load(path, missing_ok="XPU_CONFIG" not in environ)


def load_settings(environ=os.environ):
    return load_config(environ).container_runtime


USAGE = f"""usage: {PROG} [RUNTIME OPTIONS] COMMAND [OPTIONS] CONTAINER

An OCI runtime for podman --runtime, Docker's "runtimes" and containerd's
BinaryName: a container whose environment sets XPU_MEMORY=SIZE (with
XPU_COMPUTE=PCT, XPU_GPU=UUID|INDEX, XPU_PRIORITY=low|normal|high,
XPU_HOST_MEMORY=SIZE), or XPU_SLICE=NAME, gets that slice; everything
else passes to the real runtime (crun, else runc; [container_runtime]
oci_runtime in /etc/xpu/xpud.toml or the file $XPU_CONFIG names).  A
Kubernetes pod's container (its CRI's annotations, or kubernetes = true)
gets no new slice, and joins only a slice whose devices it was given (by
its CDI device, else as kubelet's pod resources API says).  See
containers.md.
"""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--help"], ["-h"]):
        print(USAGE, end="")
        return 0
    cmdline = parse(argv)
    try:
        cfg = load_config()
        Runtime(cmdline, cfg.container_runtime, sys.argv[0],
                vendor=cfg.cdi.vendor).run()
    except XpuError as e:
        message = str(e)
    except OSError as e:  # execv failed
        message = f"cannot execute the OCI runtime: {e.strerror}"
    print(f"{PROG}: error: {message}", file=sys.stderr)
    log_error(cmdline, message)
    return 1


if __name__ == "__main__":
    sys.exit(main())
