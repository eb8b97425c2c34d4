# SPDX-License-Identifier: Apache-2.0
"""kubelet's sockets and the small clients xpu-k8s needs of them."""

from __future__ import annotations

import os
import re
import stat

import grpc

from . import resources
from ._proto import deviceplugin_v1beta1_pb2 as dp
from ._proto import deviceplugin_v1beta1_pb2_grpc as dp_grpc
from ._proto import podresources_v1_pb2 as pr
from ._proto import podresources_v1_pb2_grpc as pr_grpc

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET = "kubelet.sock"
DEVICE_PLUGIN_VERSION = "v1beta1"
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
PLUGINS_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
PLUGINS_DIR = "/var/lib/kubelet/plugins"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
# kubelet reads plugin messages with gRPC's default limit.
MAX_MESSAGE = 4 * 1024 * 1024


class KubeletError(Exception):
    """kubelet cannot be reached or refused; str() is one line."""


def channel(path: str) -> grpc.Channel:
    return grpc.insecure_channel(f"unix://{os.path.abspath(path)}")


def socket_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of the socket at PATH, None when there is none: a
    new one means kubelet started again."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return None
    return st.st_dev, st.st_ino


def register(kubelet_socket: str, endpoint: str, resource: str,
             options: dp.DevicePluginOptions, timeout: float = 10.0) -> None:
    """Register a device plugin (ENDPOINT: its socket's file name in the
    device-plugins directory) with kubelet."""
    with channel(kubelet_socket) as ch:
        try:
            grpc.channel_ready_future(ch).result(timeout=timeout)
            dp_grpc.RegistrationStub(ch).Register(
                dp.RegisterRequest(version=DEVICE_PLUGIN_VERSION,
                                   endpoint=endpoint, resource_name=resource,
                                   options=options), timeout=timeout)
        except grpc.FutureTimeoutError:
            raise KubeletError(f"kubelet does not answer on {kubelet_socket}"
                               ) from None
        except grpc.RpcError as e:
            raise KubeletError(f"kubelet refused {resource}: "
                               f"{e.details()}") from None


def pod_resources(path: str = POD_RESOURCES_SOCKET,
                  timeout: float = 10.0) -> list:
    """kubelet's pod resources List: which container holds which devices."""
    with channel(path) as ch:
        try:
            r = pr_grpc.PodResourcesListerStub(ch).List(
                pr.ListPodResourcesRequest(), timeout=timeout)
        except grpc.RpcError as e:
            what = re.sub(r"\s+", " ", e.details() or "").strip()
            raise KubeletError(f"kubelet's pod resources API ({path}): "
                               f"{what or e.code().name}") from None
    return list(r.pod_resources)


def devices_of(container, resource: str) -> list[str]:
    """The device IDs of RESOURCE that CONTAINER (of a pod resources List)
    holds.  kubelet lists each device in a ContainerDevices of its own (one
    per NUMA node of it: pkg/kubelet/apis/podresources,
    containerDevicesFromResourceDeviceInstances), so they are gathered
    across all of them, each once."""
    return list(dict.fromkeys(i for d in container.devices
                              if d.resource_name == resource
                              for i in d.device_ids))


def container_devices(pods: list, resource: str, ids) -> tuple | None:
    """(pod, container) of the container that holds exactly IDS of
    RESOURCE, as kubelet's pod resources List says; None if none does."""
    want = set(ids)
    for p in pods:
        for c in p.containers:
            if set(devices_of(c, resource)) == want:
                return p, c
    return None


def held_slices(container, names: resources.Names) -> list[str]:
    """The slices of xpu's device plugin that CONTAINER (of a pod resources
    List) holds: the one it made of the container's NAMES.memory devices
    (resources.dp_slice: the same name for the same devices), and each
    whole slice of NAMES.slice (its device ID is the slice's name)."""
    out = []
    memory = devices_of(container, names.memory)
    if memory:
        out.append(resources.dp_slice(memory))
    return list(dict.fromkeys(out + devices_of(container, names.slice)))
