# SPDX-License-Identifier: Apache-2.0
"""The committed gRPC code is what grpcio-tools makes of our .proto files
(`make proto`), and those files keep kubelet's wire facts: service paths,
field numbers and types (taken from k8s.io/kubelet's api.proto files)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xpu.k8s._proto import (
    deviceplugin_v1beta1_pb2,
    dra_v1_pb2,
    pluginregistration_v1_pb2,
    podresources_v1_pb2,
)

XPUD = Path(__file__).resolve().parents[3] / "xpud"
PROTO = XPUD / "xpu" / "k8s" / "_proto"


def test_generated_code_is_up_to_date(tmp_path):
    pytest.importorskip("grpc_tools")
    protos = sorted(p.relative_to(XPUD) for p in PROTO.glob("*.proto"))
    assert len(protos) == 4
    r = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", ".",
         f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}",
         *map(str, protos)], cwd=XPUD, capture_output=True, text=True,
        check=False)
    assert r.returncode == 0, r.stderr
    made = sorted((tmp_path / "xpu/k8s/_proto").glob("*.py"))
    assert len(made) == 8
    for f in made:
        assert f.read_text() == (PROTO / f.name).read_text(), (
            f"{f.name} is stale: run make proto")


def fields(msg):
    return {f.name: (f.number, f.type)
            for f in msg.DESCRIPTOR.fields}


def test_kubelet_wire_facts():
    d = deviceplugin_v1beta1_pb2.DESCRIPTOR
    assert d.package == "v1beta1"
    assert [m.full_name for m in d.services_by_name["DevicePlugin"].methods] \
        == ["v1beta1.DevicePlugin.GetDevicePluginOptions",
            "v1beta1.DevicePlugin.ListAndWatch",
            "v1beta1.DevicePlugin.GetPreferredAllocation",
            "v1beta1.DevicePlugin.Allocate",
            "v1beta1.DevicePlugin.PreStartContainer"]
    assert d.services_by_name["Registration"].full_name == \
        "v1beta1.Registration"
    car = fields(deviceplugin_v1beta1_pb2.ContainerAllocateResponse)
    assert {k: v[0] for k, v in car.items()} == {
        "envs": 1, "mounts": 2, "devices": 3, "annotations": 4,
        "cdi_devices": 5}
    assert fields(deviceplugin_v1beta1_pb2.RegisterRequest)["options"][0] == 4
    cpr = fields(deviceplugin_v1beta1_pb2.ContainerPreferredAllocationRequest)
    assert {k: v[0] for k, v in cpr.items()} == {
        "available_deviceIDs": 1, "must_include_deviceIDs": 2,
        "allocation_size": 3}
    r = pluginregistration_v1_pb2.DESCRIPTOR
    assert r.services_by_name["Registration"].full_name == \
        "pluginregistration.Registration"
    assert fields(pluginregistration_v1_pb2.PluginInfo)[
        "supported_versions"][0] == 4
    x = dra_v1_pb2.DESCRIPTOR
    assert x.services_by_name["DRAPlugin"].full_name == \
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    dev = dra_v1_pb2.Device.DESCRIPTOR.fields_by_name["share_id"]
    assert dev.number == 5 and dev.has_presence   # proto3 optional
    assert {k: v[0] for k, v in fields(dra_v1_pb2.Claim).items()} == {
        "namespace": 1, "uid": 2, "name": 3}
    p = podresources_v1_pb2.DESCRIPTOR
    assert p.services_by_name["PodResourcesLister"].full_name == \
        "v1.PodResourcesLister"
    assert fields(podresources_v1_pb2.ContainerResources)[
        "dynamic_resources"][0] == 5


def test_wire_compatible_bytes():
    # An AllocateResponse as kubelet's Go code encodes it: field 5 (CDI
    # devices) is a length-delimited message holding field 1, the name.
    r = deviceplugin_v1beta1_pb2.ContainerAllocateResponse()
    r.cdi_devices.add(name="xpu.dev/slice=a")
    assert r.SerializeToString() == b"\x2a\x11\x0a\x0fxpu.dev/slice=a"
