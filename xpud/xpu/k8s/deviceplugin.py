# SPDX-License-Identifier: Apache-2.0
"""kubelet device plugins (deviceplugin/v1beta1) for three resources:

  VENDOR/slice       the node's slices made outside Kubernetes (xpuctl, the
                     configuration file): one device per slice, its name
  VENDOR/xpu-memory  MEMORY_UNIT of video memory per device; devices
                     "m<GPU index>-<n>"
  VENDOR/xpu-shares  1 % of a GPU's compute per device; "c<GPU index>-<n>"

A container's xpu-memory devices name one GPU (GetPreferredAllocation picks
them so: the GPU the extender booked for a request of that size, else by
policy among those xpud has room on); Allocate makes a slice of that size
there, named k8s-<hash of the device IDs>, with the node's host-memory
bound (xpu-k8s node --host-memory; none by default), and returns its
CDI device (cdi_devices, kubelet >= 1.28) and, for older kubelets, the same
nodes as device specs (/dev/nvidia<minor>, /dev/nvidiactl) and env.  kubelet
never says which container an Allocate is for, and asks each resource
separately; so the slice's compute share is set at PreStartContainer, when
kubelet's pod resources API names the container that holds these devices
and its xpu-shares count.  When the pod is gone (no container holds the
devices any more), the slice is destroyed.

Devices beyond what Kubernetes may use (memory and compute given to other
slices, memory used outside slices) are reported Unhealthy, so kubelet's
allocatable is the GPUs' real room; every device is Unhealthy while xpud
cannot be reached.  Each plugin registers with kubelet at start and again
whenever kubelet's socket is made anew (kubelet restarted) or its own socket
was removed (kubelet clears the directory when it starts).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from concurrent import futures

import grpc

from .. import model
from ..cdi.spec import UVM_NODES, XPU_UVM_NODE
from . import kubelet, node, resources
from ._proto import deviceplugin_v1beta1_pb2 as dp
from ._proto import deviceplugin_v1beta1_pb2_grpc as dp_grpc

log = logging.getLogger(__name__)



class Config:
    def __init__(self, xpud_socket: str, names: resources.Names,
                 plugin_dir: str = kubelet.DEVICE_PLUGIN_DIR,
                 pod_resources: str = kubelet.POD_RESOURCES_SOCKET,
                 memory_unit: int = resources.DEFAULT_MEMORY_UNIT,
                 policy: str = node.BINPACK, poll_s: float = 5.0,
                 gc_grace_s: float = 30.0, dev_dir: str = "/dev",
                 host_memory: int = model.NO_HOST_MEMORY_LIMIT):
        self.xpud_socket = xpud_socket
        self.names = names
        self.plugin_dir = plugin_dir
        self.pod_resources = pod_resources
        self.memory_unit = memory_unit
        self.policy = policy
        self.poll_s = poll_s
        self.gc_grace_s = gc_grace_s
        self.dev_dir = dev_dir
        # The host bound of each slice it makes (0: none).
        self.host_memory = host_memory


class State:
    """xpud's state as the plugins last read it; waiters are woken when it
    changes."""

    def __init__(self):
        self.cond = threading.Condition()
        self.version = 0
        self.gpus: list[node.Gpu] = []
        self.slices: list[dict] = []
        self.error: str | None = "not read yet"

    def update(self, gpus, slices, error) -> None:
        with self.cond:
            if (gpus, slices, error) != (self.gpus, self.slices, self.error):
                self.gpus, self.slices, self.error = gpus, slices, error
                self.version += 1
                self.cond.notify_all()


def _owned(s: dict) -> bool:
    """A slice Kubernetes' own, or a container's (an ephemeral slice of
    xpu-container-runtime): not one to offer whole."""
    return resources.is_ours(s["name"]) or bool(s.get("owner"))


class Plugin(dp_grpc.DevicePluginServicer):
    """One resource's device plugin; subclasses give its devices."""

    suffix = ""
    options = dp.DevicePluginOptions()

    def __init__(self, manager: Manager):
        self.m = manager
        self.cfg = manager.cfg
        self.resource = f"{self.cfg.names.vendor}/{self.suffix}"
        self.endpoint = f"xpu-{self.suffix}.sock"
        self.path = os.path.join(self.cfg.plugin_dir, self.endpoint)
        self.server: grpc.Server | None = None
        self.stopping = threading.Event()

    # -- serving -------------------------------------------------------------

    def start(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.stopping.clear()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        dp_grpc.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix://{self.path}")
        self.server.start()

    def stop(self) -> None:
        self.stopping.set()
        with self.m.state.cond:
            self.m.state.cond.notify_all()
        if self.server is not None:
            self.server.stop(grace=1).wait()
            self.server = None

    def socket_id(self):
        return kubelet.socket_id(self.path)

    # -- the API ---------------------------------------------------------------

    def devices(self, st: State) -> list[dp.Device]:
        raise NotImplementedError

    def GetDevicePluginOptions(self, request, context):
        return self.options

    def ListAndWatch(self, request, context):
        st = self.m.state
        seen = -1
        while not self.stopping.is_set() and context.is_active():
            with st.cond:
                if st.version == seen:
                    st.cond.wait(timeout=1.0)
                    if st.version == seen:
                        continue
                seen = st.version
                devs = self.devices(st)
            yield dp.ListAndWatchResponse(devices=devs)

    def GetPreferredAllocation(self, request, context):
        out = dp.PreferredAllocationResponse()
        for req in request.container_requests:
            ids = self.prefer(list(req.available_deviceIDs),
                              list(req.must_include_deviceIDs),
                              req.allocation_size)
            out.container_responses.add(deviceIDs=ids)
        return out

    def prefer(self, available, must, size) -> list[str]:
        rest = [i for i in sorted(available, key=_id_key) if i not in must]
        return (list(must) + rest)[:size]

    def Allocate(self, request, context):
        out = dp.AllocateResponse()
        for req in request.container_requests:
            try:
                out.container_responses.append(
                    self.allocate(list(req.devices_ids)))
            except (node.NodeError, node.NoRoom, ValueError) as e:
                log.warning("%s: Allocate %s refused: %s", self.resource,
                            _short(req.devices_ids), e)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              f"{self.resource}: {e}")
        return out

    def allocate(self, ids) -> dp.ContainerAllocateResponse:
        raise NotImplementedError

    def PreStartContainer(self, request, context):
        try:
            self.prestart(list(request.devices_ids))
        except (node.NodeError, kubelet.KubeletError, ValueError) as e:
            log.warning("%s: PreStartContainer refused: %s", self.resource, e)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"{self.resource}: {e}")
        return dp.PreStartContainerResponse()

    def prestart(self, ids) -> None:
        pass

    # -- helpers ----------------------------------------------------------------

    def slice_response(self, s: dict) -> dp.ContainerAllocateResponse:
        """What gives a container slice S: its CDI device, and the same
        nodes as device specs and env for kubelets before CDI."""
        if not s.get("gpu_node") or not s.get("ctl_node"):
            raise ValueError(f"slice '{s['name']}' has no device nodes yet "
                             f"({s.get('error') or s.get('state')})")
        r = dp.ContainerAllocateResponse()
        r.cdi_devices.add(name=self.cfg.names.cdi_device(s["name"]))
        r.devices.add(container_path=f"/dev/nvidia{s['gpu_minor']}",
                      host_path=s["gpu_node"], permissions="rw")
        r.devices.add(container_path="/dev/nvidiactl",
                      host_path=s["ctl_node"], permissions="rw")
        for n in UVM_NODES:
            p = os.path.join(self.cfg.dev_dir, os.path.basename(n))
            if not os.path.exists(p):
                continue
            # the container's /dev/nvidia-uvm is xpu.ko's UVM node where
            # the host has it: its UVM files are held for the slice, found
            # by the container's cgroup (docs/security.md, class 39)
            xp = os.path.join(self.cfg.dev_dir,
                              os.path.basename(XPU_UVM_NODE))
            if n == "/dev/nvidia-uvm" and os.path.exists(xp):
                p = xp
            r.devices.add(container_path=n, host_path=p, permissions="rw")
        r.envs["XPU_SLICE"] = s["name"]
        r.envs["XPU_MEMORY_LIMIT_BYTES"] = str(s["memory_limit_bytes"])
        return r


def _id_key(i: str):
    """m0-12 sorts by GPU, then number."""
    head, _, n = i.partition("-")
    return (head, int(n)) if n.isdigit() else (i, 0)


def _short(ids) -> str:
    ids = list(ids)
    return ",".join(ids[:3]) + (f",... ({len(ids)})" if len(ids) > 3 else "")


class SlicePlugin(Plugin):
    suffix = resources.SLICE_SUFFIX
    options = dp.DevicePluginOptions(get_preferred_allocation_available=True)

    def devices(self, st):
        bad = st.error is not None
        return [dp.Device(ID=s["name"], health=kubelet.HEALTHY
                          if s.get("state") == "ready" and not bad
                          else kubelet.UNHEALTHY)
                for s in st.slices if not _owned(s)]

    def allocate(self, ids):
        if len(ids) != 1:
            raise ValueError(f"a container takes one slice, {len(ids)} were "
                             "asked for")
        s = node.ask(self.cfg.xpud_socket, "show", name=ids[0])
        if _owned(s):
            raise ValueError(f"slice '{ids[0]}' is Kubernetes' own")
        return self.slice_response(s)


class MemoryPlugin(Plugin):
    suffix = resources.MEMORY_SUFFIX
    options = dp.DevicePluginOptions(pre_start_required=True,
                                     get_preferred_allocation_available=True)

    def devices(self, st):
        unit = self.cfg.memory_unit
        out = []
        for g in st.gpus:
            n = g.memory_total // unit
            # Room for Kubernetes: all but what others hold.
            others = sum(s["memory_limit_bytes"] for s in st.slices
                         if s.get("gpu_uuid") == g.uuid and not _owned(s))
            ok = 0 if st.error or not g.healthy else \
                max(g.memory_total - others - g.memory_outside, 0) // unit
            out += [dp.Device(ID=f"m{g.index}-{k}",
                              health=kubelet.HEALTHY if k < ok
                              else kubelet.UNHEALTHY) for k in range(n)]
        return out

    def gpu_of(self, ids) -> node.Gpu:
        by_index = {g.index: g for g in self.m.state.gpus}
        counts = Counter(i.partition("-")[0] for i in ids)
        head = counts.most_common(1)[0][0] if counts else ""
        try:
            return by_index[int(head[1:])]
        except (ValueError, KeyError):
            raise ValueError(f"device {ids[0]!r} names no GPU of this "
                             "node") from None

    def prefer(self, available, must, size):
        unit = self.cfg.memory_unit
        by_gpu: dict[str, list[str]] = {}
        for i in sorted(available, key=_id_key):
            by_gpu.setdefault(i.partition("-")[0], []).append(i)
        gpus = [g for g in self.m.state.gpus
                if len(by_gpu.get(f"m{g.index}", ())) >= size]
        if must:
            head = must[0].partition("-")[0]
            gpus = [g for g in gpus if f"m{g.index}" == head]
        want = self.m.reservations.prefer(size * unit)
        chosen = None
        for g in gpus:
            if g.uuid == want and g.memory_free >= size * unit:
                chosen = g
        if chosen is None:
            try:
                chosen = node.pick(self.m.reservations.held(gpus), size * unit,
                                   0, self.cfg.policy)
            except node.NoRoom:
                return super().prefer(available, must, size)
        ids = by_gpu[f"m{chosen.index}"]
        rest = [i for i in ids if i not in must]
        return (list(must) + rest)[:size]

    def allocate(self, ids):
        memory = len(ids) * self.cfg.memory_unit
        name = resources.dp_slice(ids)
        slices = node.ask(self.cfg.xpud_socket, "list")
        for s in slices:  # asked again for the same devices: the same slice
            if s["name"] == name:
                return self._response(s)
        gpu = self.gpu_of(ids)
        gpus = node.gpus_from(node.ask(self.cfg.xpud_socket, "gpus"), slices)
        if not any(g.uuid == gpu.uuid and g.memory_free >= memory
                   for g in gpus):
            # Another GPU then, if one has room: kubelet's count of this
            # GPU's devices is not xpud's truth (memory used outside).
            gpu = node.pick(gpus, memory, 0, self.cfg.policy)
        extra = {}
        if self.cfg.host_memory:
            extra["host_memory_limit_bytes"] = self.cfg.host_memory
        s = node.ask(self.cfg.xpud_socket, "create", name=name,
                     gpu=gpu.uuid, memory_limit_bytes=memory, **extra)
        log.info("made slice '%s' (%d MiB on GPU %d) for devices %s", name,
                 memory >> 20, gpu.index, _short(ids))
        self.m.reservations.allocated(gpu.uuid, memory, name)
        self.m.refresh()
        return self._response(s)

    def _response(self, s):
        r = self.slice_response(s)
        r.envs["XPU_GPU_UUID"] = s["gpu_uuid"]
        return r

    def prestart(self, ids):
        name = resources.dp_slice(ids)
        s = next((s for s in node.ask(self.cfg.xpud_socket, "list")
                  if s["name"] == name), None)
        if s is None:
            raise ValueError(f"no slice was made for devices {_short(ids)} "
                             "(was it destroyed by hand?)")
        pods = kubelet.pod_resources(self.cfg.pod_resources)
        found = kubelet.container_devices(pods, self.resource, ids)
        if found is None:
            raise ValueError("kubelet's pod resources API names no container "
                             f"holding devices {_short(ids)}")
        pod, ctr = found
        compute = len(kubelet.devices_of(ctr, self.cfg.names.shares))
        if s.get("compute_share") != compute:
            node.ask(self.cfg.xpud_socket, "set", name=s["name"],
                     compute_share=compute)
        self.m.reservations.consume(pod.namespace, pod.name, ctr.name,
                                    s["name"])
        log.info("slice '%s' is %s/%s container %s's (%d %% compute)",
                 s["name"], pod.namespace, pod.name, ctr.name, compute)
        self.m.refresh()


class SharesPlugin(Plugin):
    suffix = resources.SHARES_SUFFIX
    options = dp.DevicePluginOptions(pre_start_required=True)

    def devices(self, st):
        out = []
        for g in st.gpus:
            others = sum(s.get("compute_share") or 0 for s in st.slices
                         if s.get("gpu_uuid") == g.uuid and not _owned(s))
            ok = 0 if st.error or not g.healthy else \
                max(int(resources.SHARES_PER_GPU - others), 0)
            out += [dp.Device(ID=f"c{g.index}-{k}",
                              health=kubelet.HEALTHY if k < ok
                              else kubelet.UNHEALTHY)
                    for k in range(resources.SHARES_PER_GPU)]
        return out

    def allocate(self, ids):
        # The slice is the memory's (PreStartContainer gives it this share).
        r = dp.ContainerAllocateResponse()
        r.envs["XPU_COMPUTE_SHARE"] = str(len(ids))
        return r

    def prestart(self, ids):
        pods = kubelet.pod_resources(self.cfg.pod_resources)
        found = kubelet.container_devices(pods, self.resource, ids)
        if found is None:
            raise ValueError("kubelet's pod resources API names no container "
                             f"holding devices {_short(ids)}")
        pod, ctr = found
        if not kubelet.devices_of(ctr, self.cfg.names.memory):
            raise ValueError(
                f"{pod.namespace}/{pod.name} container {ctr.name} asks for "
                f"{self.resource} without {self.cfg.names.memory}: a slice "
                "needs its memory; ask for both")


class Manager:
    """The three plugins, xpud's state, kubelet's restarts and the slices
    of pods that are gone."""

    def __init__(self, cfg: Config, reservations: node.Reservations):
        self.cfg = cfg
        self.reservations = reservations
        self.state = State()
        self.plugins = [SlicePlugin(self), MemoryPlugin(self),
                        SharesPlugin(self)]
        self.stop_event = threading.Event()
        self._orphans: dict[str, float] = {}
        self._thread: threading.Thread | None = None
        self._kubelet_id = None
        self._registered: dict[str, object] = {}

    def refresh(self) -> None:
        try:
            gpus, slices = node.snapshot(self.cfg.xpud_socket)
            self.state.update(gpus, slices, None)
        except node.NodeError as e:
            if self.state.error != str(e):
                log.error("xpud: %s; every device is Unhealthy until it "
                          "answers", e)
            self.state.update(self.state.gpus, self.state.slices, str(e))

    def check_size(self) -> None:
        """kubelet refuses a ListAndWatch message over 4 MiB: say so at
        start rather than be dropped by every kubelet."""
        for p in self.plugins:
            size = dp.ListAndWatchResponse(
                devices=p.devices(self.state)).ByteSize()
            if size > kubelet.MAX_MESSAGE:
                raise ValueError(
                    f"{p.resource}: {size} bytes of devices, over kubelet's "
                    f"{kubelet.MAX_MESSAGE}: give a larger --memory-unit "
                    "(the same to the extender)")

    def start(self) -> None:
        self.refresh()
        self.check_size()
        os.makedirs(self.cfg.plugin_dir, exist_ok=True)
        self._serve_and_register()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="deviceplugin")
        self._thread.start()

    def _serve_and_register(self) -> None:
        ksock = os.path.join(self.cfg.plugin_dir, kubelet.KUBELET_SOCKET)
        self._kubelet_id = kubelet.socket_id(ksock)
        for p in self.plugins:
            p.stop()
            p.start()
            self._registered[p.resource] = None
        self._register_all()

    def _register_all(self) -> None:
        ksock = os.path.join(self.cfg.plugin_dir, kubelet.KUBELET_SOCKET)
        for p in self.plugins:
            if self._registered.get(p.resource) is not None:
                continue
            try:
                kubelet.register(ksock, p.endpoint, p.resource, p.options,
                                 timeout=5.0)
            except kubelet.KubeletError as e:
                log.warning("%s: not registered yet: %s", p.resource, e)
                continue
            self._registered[p.resource] = p.socket_id()
            log.info("%s: registered with kubelet (%s)", p.resource,
                     p.path)

    def stop(self) -> None:
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for p in self.plugins:
            p.stop()

    def _run(self) -> None:
        last_poll = 0.0
        while not self.stop_event.wait(0.2):
            ksock = os.path.join(self.cfg.plugin_dir, kubelet.KUBELET_SOCKET)
            kid = kubelet.socket_id(ksock)
            gone = any(p.socket_id() is None for p in self.plugins)
            if (kid is not None and kid != self._kubelet_id) or gone:
                log.info("kubelet restarted (its socket is new, or ours was "
                         "removed): serving and registering again")
                self._serve_and_register()
            elif any(v is None for v in self._registered.values()) and kid:
                self._register_all()
            now = time.monotonic()
            if now - last_poll >= self.cfg.poll_s:
                last_poll = now
                self.refresh()
                self.reservations.expire()
                self.collect()

    def collect(self) -> None:
        """Destroy the slices of pods that are gone: no container in
        kubelet's pod resources holds their devices any more."""
        mine = [s for s in self.state.slices
                if resources.DP_SLICE.fullmatch(s["name"])]
        if not mine:
            self._orphans.clear()
            return
        try:
            pods = kubelet.pod_resources(self.cfg.pod_resources)
        except kubelet.KubeletError as e:
            log.debug("no garbage collection this time: %s", e)
            return
        held = {name for p in pods for c in p.containers
                for name in kubelet.held_slices(c, self.cfg.names)}
        now = time.monotonic()
        for s in mine:
            if s["name"] in held:
                self._orphans.pop(s["name"], None)
                continue
            first = self._orphans.setdefault(s["name"], now)
            if now - first < self.cfg.gc_grace_s:
                continue
            try:
                node.ask(self.cfg.xpud_socket, "destroy", name=s["name"])
                log.info("destroyed slice '%s': its pod is gone", s["name"])
                self._orphans.pop(s["name"], None)
            except node.NodeError as e:
                log.info("slice '%s' outlives its pod for now: %s",
                         s["name"], e)
        self.refresh()
