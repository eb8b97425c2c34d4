# SPDX-License-Identifier: Apache-2.0
"""A test kubelet: the parts of kubelet that talk to device plugins and DRA
drivers, built from xpu's own copies of kubelet's .proto files and speaking
gRPC over UNIX sockets as kubelet does.

- Device plugins: serves Registration on DIR/kubelet.sock; on Register it
  dials the plugin's endpoint, asks GetDevicePluginOptions and keeps a
  ListAndWatch stream; admit() does what kubelet's device manager does for a
  container: GetPreferredAllocation (when offered) among the healthy free
  devices, Allocate, then PreStartContainer (when required), recording the
  allocation as kubelet's pod resources API (List) then reports it.
  restart() is a kubelet restart: its socket is made anew and the plugin
  sockets in the directory are removed, as kubelet does at start.
- DRA: watches a plugins_registry directory for a socket, calls GetInfo and
  NotifyRegistrationStatus as kubelet's plugin watcher does, then calls
  NodePrepareResources / NodeUnprepareResources on the endpoint it named.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures

import grpc
from xpu.k8s._proto import deviceplugin_v1beta1_pb2 as dp
from xpu.k8s._proto import deviceplugin_v1beta1_pb2_grpc as dp_grpc
from xpu.k8s._proto import dra_v1_pb2 as dra
from xpu.k8s._proto import dra_v1_pb2_grpc as dra_grpc
from xpu.k8s._proto import pluginregistration_v1_pb2 as reg
from xpu.k8s._proto import pluginregistration_v1_pb2_grpc as reg_grpc
from xpu.k8s._proto import podresources_v1_pb2 as pr
from xpu.k8s._proto import podresources_v1_pb2_grpc as pr_grpc


def wait_for(cond, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _chan(path):
    return grpc.insecure_channel(f"unix://{os.path.abspath(path)}")


class PluginConn:
    """kubelet's end of one registered device plugin."""

    def __init__(self, kubelet, req: dp.RegisterRequest):
        self.resource = req.resource_name
        self.options = req.options
        self.path = os.path.join(kubelet.dir, req.endpoint)
        self.channel = _chan(self.path)
        self.stub = dp_grpc.DevicePluginStub(self.channel)
        self.devices: dict[str, str] = {}   # ID -> health
        self.updates = 0
        self.lock = threading.Lock()
        self.stream = None
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        try:
            self.stub.GetDevicePluginOptions(dp.Empty(), timeout=10)
            self.stream = self.stub.ListAndWatch(dp.Empty())
            for resp in self.stream:
                with self.lock:
                    self.devices = {d.ID: d.health for d in resp.devices}
                    self.updates += 1
        except grpc.RpcError:
            pass  # the plugin went away, or we closed the stream

    def close(self):
        if self.stream is not None:
            self.stream.cancel()
        self.channel.close()

    def healthy(self) -> list[str]:
        with self.lock:
            return [i for i, h in self.devices.items() if h == "Healthy"]


class Kubelet(dp_grpc.RegistrationServicer, pr_grpc.PodResourcesListerServicer):
    def __init__(self, directory: str, pod_resources_socket: str):
        self.dir = directory
        self.pr_path = pod_resources_socket
        self.plugins: dict[str, PluginConn] = {}
        self.registrations: list[str] = []
        # pod resources: (namespace, pod) -> {container: {resource: [ids]}}
        self.pods: dict[tuple[str, str], dict[str, dict[str, list[str]]]] = {}
        self.lock = threading.Lock()
        self.server = None
        self.pr_server = None
        self.start()

    # -- lifecycle ---------------------------------------------------------------

    def start(self):
        path = os.path.join(self.dir, "kubelet.sock")
        if os.path.exists(path):
            os.unlink(path)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        dp_grpc.add_RegistrationServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()
        if self.pr_server is None:
            self.pr_server = grpc.server(
                futures.ThreadPoolExecutor(max_workers=4))
            pr_grpc.add_PodResourcesListerServicer_to_server(self,
                                                             self.pr_server)
            self.pr_server.add_insecure_port(f"unix://{self.pr_path}")
            self.pr_server.start()

    def stop(self):
        for p in self.plugins.values():
            p.close()
        self.plugins.clear()
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None

    def close(self):
        self.stop()
        if self.pr_server is not None:
            self.pr_server.stop(0).wait()

    def restart(self):
        """As kubelet at start: every socket in the directory is removed
        (its own made anew), plugins must register again."""
        self.stop()
        for f in os.listdir(self.dir):
            p = os.path.join(self.dir, f)
            if not os.path.isdir(p):
                os.unlink(p)
        self.start()

    # -- Registration ----------------------------------------------------------

    def Register(self, request, context):
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"version {request.version} is not supported")
        old = self.plugins.pop(request.resource_name, None)
        if old is not None:
            old.close()
        self.plugins[request.resource_name] = PluginConn(self, request)
        self.registrations.append(request.resource_name)
        return dp.Empty()

    # -- the device manager ---------------------------------------------------

    def allocated(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for ctrs in self.pods.values():
            for res in ctrs.values():
                for r, ids in res.items():
                    out.setdefault(r, set()).update(ids)
        return out

    def admit(self, namespace: str, pod: str,
              containers: dict[str, dict[str, int]]):
        """Admit a pod: for each container and resource, choose devices,
        Allocate them and PreStartContainer.  Returns {container:
        [ContainerAllocateResponse, ...]}."""
        responses = {}
        with self.lock:
            record = self.pods.setdefault((namespace, pod), {})
            for cname, requests in containers.items():
                record[cname] = {}
                for res, n in requests.items():
                    conn = self.plugins[res]
                    used = self.allocated().get(res, set())
                    free = sorted(set(conn.healthy()) - used)
                    if len(free) < n:
                        raise RuntimeError(f"{res}: {len(free)} free, {n} "
                                           "asked (UnexpectedAdmissionError)")
                    ids = free[:n]
                    if conn.options.get_preferred_allocation_available:
                        pref = conn.stub.GetPreferredAllocation(
                            dp.PreferredAllocationRequest(container_requests=[
                                dp.ContainerPreferredAllocationRequest(
                                    available_deviceIDs=free,
                                    allocation_size=n)]), timeout=10)
                        got = list(pref.container_responses[0].deviceIDs)
                        if len(got) == n and set(got) <= set(free):
                            ids = got
                    resp = conn.stub.Allocate(dp.AllocateRequest(
                        container_requests=[dp.ContainerAllocateRequest(
                            devices_ids=ids)]), timeout=10)
                    record[cname][res] = ids
                    responses.setdefault(cname, []).append(
                        resp.container_responses[0])
            for cname, requests in containers.items():
                for res in requests:
                    conn = self.plugins[res]
                    if conn.options.pre_start_required:
                        conn.stub.PreStartContainer(
                            dp.PreStartContainerRequest(
                                devices_ids=record[cname][res]), timeout=30)
        return responses

    def record(self, namespace: str, pod: str,
               containers: dict[str, dict[str, list[str]]]):
        """What admit() records of a pod ({container: {resource: [device
        IDs]}}), without asking a device plugin: what List then says."""
        with self.lock:
            self.pods[(namespace, pod)] = {
                c: {r: list(ids) for r, ids in res.items()}
                for c, res in containers.items()}

    def remove(self, namespace: str, pod: str):
        with self.lock:
            self.pods.pop((namespace, pod), None)

    # -- pod resources ---------------------------------------------------------

    def List(self, request, context):
        # No lock: a plugin calls List from inside admit()
        # (PreStartContainer), and kubelet answers it without waiting on
        # admission.
        out = pr.ListPodResourcesResponse()
        for (ns, name), ctrs in list(self.pods.items()):
            p = out.pod_resources.add(name=name, namespace=ns)
            for cname, res in list(ctrs.items()):
                c = p.containers.add(name=cname)
                for r, ids in list(res.items()):
                    # a ContainerDevices for each device, as kubelet
                    # answers (pkg/kubelet/apis/podresources,
                    # containerDevicesFromResourceDeviceInstances)
                    for i in ids:
                        c.devices.add(resource_name=r, device_ids=[i])
        return out


class DraKubelet:
    """kubelet's plugin watcher and DRA manager, for one driver."""

    def __init__(self, registry_dir: str):
        self.registry_dir = registry_dir
        self.info = None
        self.channel = None
        self.stub = None

    def find_and_register(self, timeout=10.0):
        sock = wait_for(lambda: next(
            (os.path.join(self.registry_dir, f)
             for f in sorted(os.listdir(self.registry_dir))
             if f.endswith(".sock")), None), timeout, "a registration socket")
        with _chan(sock) as ch:
            stub = reg_grpc.RegistrationStub(ch)
            self.info = stub.GetInfo(reg.InfoRequest(), timeout=10)
            ok = (self.info.type == "DRAPlugin"
                  and "v1.DRAPlugin" in self.info.supported_versions)
            stub.NotifyRegistrationStatus(reg.RegistrationStatus(
                plugin_registered=ok,
                error="" if ok else "not a DRA v1 plugin"), timeout=10)
        if not ok:
            raise AssertionError(f"kubelet would refuse {self.info}")
        self.channel = _chan(self.info.endpoint)
        self.stub = dra_grpc.DRAPluginStub(self.channel)
        return self.info

    def prepare(self, *claims):
        return self.stub.NodePrepareResources(dra.NodePrepareResourcesRequest(
            claims=[dra.Claim(namespace=ns, uid=uid, name=name)
                    for ns, name, uid in claims]), timeout=45)

    def unprepare(self, *claims):
        return self.stub.NodeUnprepareResources(
            dra.NodeUnprepareResourcesRequest(
                claims=[dra.Claim(namespace=ns, uid=uid, name=name)
                        for ns, name, uid in claims]), timeout=45)

    def close(self):
        if self.channel is not None:
            self.channel.close()
