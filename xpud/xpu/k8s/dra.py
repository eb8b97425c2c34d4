# SPDX-License-Identifier: Apache-2.0
"""A Dynamic Resource Allocation driver for xpu (resource.k8s.io/v1,
kubelet's dra v1 gRPC: Kubernetes 1.34 and later).

Each GPU is one device of the node's ResourceSlice (pool = the node's name),
named gpu-<index>, with consumable capacity (allowMultipleAllocations):
`memory` (bytes) and `compute` (percent), so that one GPU serves several
claims; the scheduler sums what claims consume.  A request that names no
capacity consumes the default: one share, 1 % of compute and 1 % of memory,
which is what DeviceClass xpu-shares.xpu.dev (extendedResourceName
VENDOR/xpu-shares) hands out per unit.

The kubelet plugin registers on plugins_registry (GetInfo,
NotifyRegistrationStatus) and serves NodePrepareResources and
NodeUnprepareResources: Prepare reads the claim from the API server (kubelet
sends only its name and UID), makes one slice per allocated GPU, sized by
what the claim's results consumed there, and returns its CDI device
(VENDOR/slice=SLICE); Unprepare destroys them.  Both are idempotent: what
was prepared is checkpointed in a file (atomic replace) before Prepare
answers, so a second Prepare answers the same without making anything, and
after a restart of the plugin too; slices are named dra-<claim UID>-<n>, so
that one made just before a crash is found again.

A slice's bound on system memory (class 25, docs/memory.md) is the node's
(xpu-k8s node --host-memory; none by default), or what an opaque config of
the claim or its DeviceClass asks for the request it serves:

    config:
    - requests: [gpu]            # optional: every request when absent
      opaque:
        driver: xpu.dev
        parameters: {apiVersion: xpu.dev/v1alpha1, kind: SliceConfig,
                     hostMemory: 16Gi}       # a quantity; "0": none

A claim's config wins over its class's.  A bound looser than the node's
(larger, or 0 where the node has one) is refused, as is a config of this
driver that is not a SliceConfig or names an unknown field: Prepare fails,
and makes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from concurrent import futures
from decimal import Decimal

import grpc

from .. import model, sizes
from . import kubelet, node, resources
from ._proto import dra_v1_pb2 as dra
from ._proto import dra_v1_pb2_grpc as dra_grpc
from ._proto import pluginregistration_v1_pb2 as reg
from ._proto import pluginregistration_v1_pb2_grpc as reg_grpc
from .apiserver import ApiServer, ApiServerError

log = logging.getLogger(__name__)

DRA_SERVICE = "v1.DRAPlugin"
API = "/apis/resource.k8s.io/v1"


# The opaque parameters this driver reads (claims' and DeviceClasses'
# config): apiVersion DRIVER/CONFIG_VERSION, kind CONFIG_KIND.
CONFIG_VERSION = "v1alpha1"
CONFIG_KIND = "SliceConfig"
_CONFIG_FIELDS = ("apiVersion", "kind", "hostMemory")


def device_name(index: int) -> str:
    return f"gpu-{index}"


def host_memory_quantity(value) -> int:
    """A SliceConfig's hostMemory, a Kubernetes quantity ("16Gi",
    "17179869184"; "0": none), in bytes.  Raises TypeError, ValueError."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"hostMemory {value!r} is not a quantity: write a "
                        "string such as \"16Gi\", or \"0\" for none")
    try:
        q = resources.parse_quantity(value)
        if q != q.to_integral_value():
            raise ValueError("it is not a whole number of bytes")
        return model.check_host_memory(int(q))
    except ValueError as e:
        raise ValueError(f"hostMemory '{value}': {e}") from None


def slice_config(parameters, driver: str) -> int | None:
    """The host bound (bytes; 0: none) opaque PARAMETERS of DRIVER ask
    for, or None when they name none.  Raises TypeError,
    ValueError."""
    version = f"{driver}/{CONFIG_VERSION}"
    if not isinstance(parameters, dict):
        raise TypeError(f"the parameters of {driver} are not an object: "
                        f"write apiVersion: {version}, kind: {CONFIG_KIND}")
    got = (parameters.get("apiVersion"), parameters.get("kind"))
    if got != (version, CONFIG_KIND):
        raise ValueError(f"the parameters of {driver} are apiVersion "
                         f"{got[0]!r}, kind {got[1]!r}: it reads apiVersion "
                         f"{version}, kind {CONFIG_KIND}")
    unknown = sorted(set(parameters) - set(_CONFIG_FIELDS))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} in {CONFIG_KIND} "
                         "(known: hostMemory)")
    if "hostMemory" not in parameters:
        return None
    return host_memory_quantity(parameters["hostMemory"])


def host_bounds(allocation: dict, driver: str, requests,
                node_bound: int) -> dict[str, int]:
    """The host bound (bytes; 0: none) of each of REQUESTS (results'
    request names) from ALLOCATION's opaque configs of DRIVER: the claim's
    over the class's, else NODE_BOUND.  A bound looser than NODE_BOUND
    raises ValueError, as does a config that is not a SliceConfig."""
    configs = []
    for c in (allocation.get("devices") or {}).get("config") or []:
        opaque = c.get("opaque") or {}
        if opaque.get("driver") != driver:
            continue
        source = "claim" if c.get("source") == "FromClaim" else "class"
        try:
            bound = slice_config(opaque.get("parameters"), driver)
        except (TypeError, ValueError) as e:
            raise ValueError(f"the {source}'s config: {e}") from None
        configs.append((source == "claim", c.get("requests") or [], bound))
    configs.sort(key=lambda c: c[0])  # the class's first: the claim's win
    out = {}
    for req in requests:
        asked = None
        for _, names, bound in configs:
            # A subrequest (firstAvailable) is "request/subrequest".
            if names and req not in names and req.split("/")[0] not in names:
                continue
            if bound is not None:
                asked = bound
        if asked is None:
            asked = node_bound
        elif node_bound and not 0 < asked <= node_bound:
            what = sizes.format_size(asked) if asked else "0 (none)"
            raise ValueError(
                f"request {req} asks hostMemory {what}, looser than this "
                f"node's bound, {sizes.format_size(node_bound)} (xpu-k8s "
                "node --host-memory): ask at most that, or leave hostMemory "
                "out")
        out[req] = asked
    return out


def loosest(bounds) -> int:
    """The bound of one slice serving requests of BOUNDS: the largest; 0
    (none) when one has none."""
    bounds = list(bounds)
    return 0 if 0 in bounds else max(bounds)


def resource_slice(driver: str, node_name: str, gpus: list[node.Gpu],
                   generation: int = 1) -> dict:
    """The node's ResourceSlice: every GPU, with consumable capacity."""
    devices = []
    for g in sorted(gpus, key=lambda g: g.index):
        mib = g.memory_total // sizes.MIB
        share = max(mib // resources.SHARES_PER_GPU, 1)
        devices.append({
            "name": device_name(g.index),
            "attributes": {
                "uuid": {"string": g.uuid},
                "index": {"int": g.index},
                "minor": {"int": g.minor},
                "productName": {"string": g.name or "unknown"},
            },
            "capacity": {
                "memory": {
                    "value": str(g.memory_total),
                    "requestPolicy": {
                        "default": f"{share}Mi",
                        "validRange": {"min": "1Mi", "step": "1Mi"},
                    },
                },
                "compute": {
                    "value": str(resources.SHARES_PER_GPU),
                    "requestPolicy": {
                        "default": "1",
                        "validRange": {"min": "0",
                                       "max": str(resources.SHARES_PER_GPU),
                                       "step": "1"},
                    },
                },
            },
            "allowMultipleAllocations": True,
        })
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation,
                     "resourceSliceCount": 1},
            "devices": devices,
        },
    }


class Checkpoint:
    """Prepared claims by UID, in a JSON file replaced atomically."""

    def __init__(self, path: str):
        self.path = path
        self.claims: dict[str, dict] = {}
        if os.path.exists(path):
            try:
                with open(path) as f:
                    doc = json.load(f)
                if doc.get("version") != 1:
                    raise ValueError(f"version {doc.get('version')!r}")
                self.claims = doc["claims"]
            except (OSError, ValueError, KeyError) as e:
                # Unprepare still finds slices by their names.
                log.warning("checkpoint %s is unreadable, starting empty: "
                            "%s", path, e)

    def save(self) -> None:
        d = os.path.dirname(self.path) or "."
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".checkpoint.")
        with os.fdopen(fd, "w") as f:
            json.dump({"version": 1, "claims": self.claims}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class Driver(dra_grpc.DRAPluginServicer, reg_grpc.RegistrationServicer):
    def __init__(self, node_name: str, xpud_socket: str, api: ApiServer,
                 names: resources.Names,
                 driver: str = resources.DEFAULT_DRIVER,
                 plugins_dir: str = kubelet.PLUGINS_DIR,
                 registry_dir: str = kubelet.PLUGINS_REGISTRY_DIR,
                 host_memory: int = model.NO_HOST_MEMORY_LIMIT):
        self.node_name = node_name
        # The host bound of a slice whose claim asks none, and the loosest
        # a claim may ask (0: none).
        self.host_memory = host_memory
        self.xpud_socket = xpud_socket
        self.api = api
        self.names = names
        self.driver = driver
        self.dir = os.path.join(plugins_dir, driver)
        self.endpoint = os.path.join(self.dir, "dra.sock")
        self.reg_path = os.path.join(registry_dir, f"{driver}-reg.sock")
        self.checkpoint = Checkpoint(os.path.join(self.dir,
                                                  "checkpoint.json"))
        self.lock = threading.Lock()
        self.registered = threading.Event()
        self.servers: list[grpc.Server] = []

    # -- serving -------------------------------------------------------------

    def start(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(os.path.dirname(self.reg_path), exist_ok=True)
        for path, add in ((self.endpoint,
                           dra_grpc.add_DRAPluginServicer_to_server),
                          (self.reg_path,
                           reg_grpc.add_RegistrationServicer_to_server)):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            add(self, s)
            s.add_insecure_port(f"unix://{path}")
            s.start()
            self.servers.append(s)

    def stop(self) -> None:
        for s in self.servers:
            s.stop(grace=1).wait()
        self.servers = []
        for p in (self.reg_path, self.endpoint):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def publish(self) -> dict:
        """Create or replace the node's ResourceSlice."""
        gpus, _ = node.snapshot(self.xpud_socket)
        rs = resource_slice(self.driver, self.node_name, gpus)
        path = f"{API}/resourceslices"
        name = rs["metadata"]["name"]
        try:
            old = self.api.get(f"{path}/{name}")
        except ApiServerError as e:
            if e.status != 404:
                raise
            return self.api.post(path, rs)
        rs["metadata"]["resourceVersion"] = \
            old["metadata"].get("resourceVersion", "")
        gen = old["spec"].get("pool", {}).get("generation", 0)
        if old["spec"].get("devices") != rs["spec"]["devices"]:
            gen += 1
        rs["spec"]["pool"]["generation"] = max(gen, 1)
        return self.api.put(f"{path}/{name}", rs)

    # -- plugin registration -------------------------------------------------

    def GetInfo(self, request, context):
        return reg.PluginInfo(type="DRAPlugin", name=self.driver,
                              endpoint=self.endpoint,
                              supported_versions=[DRA_SERVICE])

    def NotifyRegistrationStatus(self, request, context):
        if request.plugin_registered:
            log.info("kubelet registered DRA driver %s", self.driver)
            self.registered.set()
        else:
            log.error("kubelet refused DRA driver %s: %s", self.driver,
                      request.error)
        return reg.RegistrationStatusResponse()

    # -- DRA -----------------------------------------------------------------------

    def NodePrepareResources(self, request, context):
        out = dra.NodePrepareResourcesResponse()
        with self.lock:
            for c in request.claims:
                r = out.claims[c.uid]
                try:
                    for d in self._prepare(c):
                        r.devices.append(d)
                except (ValueError, node.NodeError, ApiServerError) as e:
                    log.warning("claim %s/%s (%s): %s", c.namespace, c.name,
                                c.uid, e)
                    r.error = str(e)
        return out

    def _devices(self, rec: dict) -> list:
        out = []
        for d in rec["devices"]:
            dev = dra.Device(request_names=[d["request"]],
                             pool_name=d["pool"], device_name=d["device"],
                             cdi_device_ids=d["cdi"])
            if d.get("share_id"):
                dev.share_id = d["share_id"]
            out.append(dev)
        return out

    def _prepare(self, c) -> list:
        rec = self.checkpoint.claims.get(c.uid)
        if rec is not None:
            return self._devices(rec)  # prepared already
        claim = self.api.get(f"{API}/namespaces/{c.namespace}/"
                             f"resourceclaims/{c.name}")
        if claim.get("metadata", {}).get("uid") != c.uid:
            raise ValueError(f"claim {c.namespace}/{c.name} has UID "
                             f"{claim.get('metadata', {}).get('uid')}, not "
                             f"{c.uid}: it was made again")
        alloc = ((claim.get("status") or {}).get("allocation") or {})
        results = [r for r in (alloc.get("devices") or {}).get("results", [])
                   if r.get("driver") == self.driver
                   and r.get("pool") == self.node_name]
        if not results:
            raise ValueError(f"claim {c.namespace}/{c.name} has no device of "
                             f"{self.driver} on node {self.node_name} "
                             "allocated")
        try:
            bounds = host_bounds(alloc, self.driver,
                                 sorted({r.get("request", "")
                                         for r in results}),
                                 self.host_memory)
        except ValueError as e:
            raise ValueError(f"claim {c.namespace}/{c.name}: {e}") from None
        gpus, slices = node.snapshot(self.xpud_socket)
        by_name = {device_name(g.index): g for g in gpus}
        want: dict[str, list] = {}   # device -> [memory, compute]
        hosts: dict[str, list] = {}  # device -> its requests' host bounds
        for r in results:
            g = by_name.get(r.get("device"))
            if g is None:
                raise ValueError(f"device {r.get('device')} is not a GPU of "
                                 f"this node (its GPUs: "
                                 f"{', '.join(sorted(by_name)) or 'none'})")
            cap = r.get("consumedCapacity")
            if cap:
                mem = resources.parse_quantity(cap.get("memory", 0))
                cpt = resources.parse_quantity(cap.get("compute", 0))
            else:  # the whole GPU
                mem = Decimal(g.memory_total)
                cpt = Decimal(resources.SHARES_PER_GPU)
            w = want.setdefault(r["device"], [Decimal(0), Decimal(0)])
            w[0] += mem
            w[1] += cpt
            hosts.setdefault(r["device"], []).append(
                bounds[r.get("request", "")])
        made: dict[str, str] = {}
        try:
            for i, (dev, (mem, cpt)) in enumerate(sorted(want.items())):
                name = resources.dra_slice(c.uid, i)
                g = by_name[dev]
                if any(s["name"] == name for s in slices):
                    made[dev] = name  # made before a crash
                    continue
                memory = -(-int(mem) // sizes.MIB) * sizes.MIB
                extra = {}
                host = loosest(hosts[dev])
                if host:
                    extra["host_memory_limit_bytes"] = host
                node.ask(self.xpud_socket, "create", name=name, gpu=g.uuid,
                         memory_limit_bytes=max(memory, sizes.MIB),
                         compute_share=float(cpt), **extra)
                made[dev] = name
                log.info("made slice '%s' on GPU %d for claim %s/%s", name,
                         g.index, c.namespace, c.name)
        except node.NodeError:
            for name in made.values():
                self._destroy(name)
            raise
        devices = []
        given = set()
        for r in results:
            s = made[r["device"]]
            devices.append({"request": r.get("request", ""),
                            "pool": r["pool"], "device": r["device"],
                            "slice": s, "share_id": r.get("shareID"),
                            # One CDI device per slice, however many shares.
                            "cdi": [] if s in given
                            else [self.names.cdi_device(s)]})
            given.add(s)
        self.checkpoint.claims[c.uid] = {"namespace": c.namespace,
                                         "name": c.name, "devices": devices}
        self.checkpoint.save()
        return self._devices(self.checkpoint.claims[c.uid])

    def _destroy(self, name: str) -> None:
        try:
            node.ask(self.xpud_socket, "destroy", name=name)
        except node.NodeError as e:
            if "no slice" not in str(e):
                raise

    def NodeUnprepareResources(self, request, context):
        out = dra.NodeUnprepareResourcesResponse()
        with self.lock:
            for c in request.claims:
                r = out.claims[c.uid]
                try:
                    self._unprepare(c)
                except node.NodeError as e:
                    r.error = str(e)
        return out

    def _unprepare(self, c) -> None:
        rec = self.checkpoint.claims.get(c.uid)
        names = {d["slice"] for d in rec["devices"]} if rec else set()
        base = resources.dra_slice(c.uid, 0)[:-1]
        names |= {s["name"] for s in node.ask(self.xpud_socket, "list")
                  if s["name"].startswith(base)
                  and resources.DRA_SLICE.fullmatch(s["name"])}
        for name in sorted(names):
            self._destroy(name)
            log.info("destroyed slice '%s' of claim %s/%s", name,
                     c.namespace, c.name)
        if rec is not None:
            del self.checkpoint.claims[c.uid]
            self.checkpoint.save()
