# SPDX-License-Identifier: Apache-2.0
"""The DRA kubelet plugin against the test kubelet's plugin watcher and DRA
manager (gRPC on UNIX sockets), the test API server and a real xpud on the
in-memory kernel: GetInfo -> NotifyRegistrationStatus -> Prepare twice ->
Unprepare, a restart between, and the ResourceSlice it publishes."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
from conftest import GIB
from testkubelet.apiserver import ApiServer
from xpu.k8s import dra, resources
from xpu.k8s.apiserver import ApiServer as Client

MIB = 1 << 20
UID = "5b3c1a2e-0000-4000-8000-00000000abcd"


def claim(results, uid=UID, name="c1"):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.xpu.dev"}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}


def result(device, memory=None, compute=None, share="s-1", pool="node0"):
    r = {"request": "gpu", "driver": "xpu.dev", "pool": pool,
         "device": device, "shareID": share}
    if memory is not None:
        r["consumedCapacity"] = {"memory": memory, "compute": compute}
    return r


@pytest.fixture
def driver(make_xpud, kubelet_dirs):
    api = ApiServer()
    x = make_xpud()
    made = []

    def start():
        d = dra.Driver("node0", x.socket, Client(api.url),
                       resources.Names(),
                       plugins_dir=str(kubelet_dirs / "plugins"),
                       registry_dir=str(kubelet_dirs / "plugins_registry"))
        d.start()
        made.append(d)
        return d

    yield x, api, start
    for d in made:
        d.stop()
    api.close()


def test_register_prepare_twice_unprepare(driver, dra_kubelet):
    x, api, start = driver
    d = start()
    info = dra_kubelet.find_and_register()
    assert (info.type, info.name, list(info.supported_versions)) == (
        "DRAPlugin", "xpu.dev", ["v1.DRAPlugin"])
    assert d.registered.is_set()
    api.claims[("ns", "c1")] = claim([result("gpu-1", "1Gi", "25")])
    first = dra_kubelet.prepare(("ns", "c1", UID))
    r = first.claims[UID]
    assert r.error == ""
    [dev] = r.devices
    [s] = x.service.op_list()
    assert (s["gpu_index"], s["memory_limit_bytes"], s["compute_share"],
            s["name"]) == (1, GIB, 25, "dra-5b3c1a2e0000-0")
    assert (list(dev.request_names), dev.pool_name, dev.device_name,
            list(dev.cdi_device_ids), dev.share_id) == (
        ["gpu"], "node0", "gpu-1", [f"xpu.dev/slice={s['name']}"], "s-1")
    # Again: the same answer, nothing new made (idempotent).
    assert dra_kubelet.prepare(("ns", "c1", UID)) == first
    assert len(x.service.op_list()) == 1
    # A restart of the plugin: the checkpoint answers.
    d.stop()
    start()
    dra_kubelet.close()
    dra_kubelet.find_and_register()
    assert dra_kubelet.prepare(("ns", "c1", UID)) == first
    assert len(x.service.op_list()) == 1
    un = dra_kubelet.unprepare(("ns", "c1", UID))
    assert un.claims[UID].error == ""
    assert x.service.op_list() == []
    # Again: nothing to do, no error.
    assert dra_kubelet.unprepare(("ns", "c1", UID)).claims[UID].error == ""


def test_shares_of_one_gpu_make_one_slice(driver, dra_kubelet):
    x, api, start = driver
    start()
    dra_kubelet.find_and_register()
    # xpu.dev/xpu-shares: 3 through the DeviceClass's extendedResourceName:
    # three allocations of GPU 0, each the default (1 % and 1 % memory).
    api.claims[("ns", "c1")] = claim([
        result("gpu-0", "20Mi", "1", share=f"s{i}") for i in range(3)])
    r = dra_kubelet.prepare(("ns", "c1", UID)).claims[UID]
    [s] = x.service.op_list()
    assert (s["memory_limit_bytes"], s["compute_share"]) == (60 * MIB, 3)
    assert [list(d.cdi_device_ids) for d in r.devices] == [
        [f"xpu.dev/slice={s['name']}"], [], []]
    assert [d.share_id for d in r.devices] == ["s0", "s1", "s2"]


def test_prepare_errors(driver, dra_kubelet):
    x, api, start = driver
    start()
    dra_kubelet.find_and_register()
    api.claims[("ns", "c1")] = claim([result("gpu-0", "1Gi", "10")],
                                     uid="other")
    r = dra_kubelet.prepare(("ns", "c1", UID)).claims[UID]
    assert r.error == (f"claim ns/c1 has UID other, not {UID}: it was made "
                       "again")
    api.claims[("ns", "c1")] = claim([result("gpu-7", "1Gi", "10")])
    r = dra_kubelet.prepare(("ns", "c1", UID)).claims[UID]
    assert r.error == ("device gpu-7 is not a GPU of this node (its GPUs: "
                       "gpu-0, gpu-1)")
    # Two GPUs, the second over-full: nothing is left of the first.
    x.service.op_create("big", 1, 2 * GIB)
    api.claims[("ns", "c1")] = claim([result("gpu-0", "1Gi", "10", "a"),
                                      result("gpu-1", "1Gi", "10", "b")])
    r = dra_kubelet.prepare(("ns", "c1", UID)).claims[UID]
    assert "not given to slices" in r.error
    assert [s["name"] for s in x.service.op_list()] == ["big"]
    r = dra_kubelet.prepare(("ns", "nope", UID)).claims[UID]
    assert "404" in r.error and "not found" in r.error


def test_resource_slice_published_and_valid(driver):
    _, api, start = driver
    d = start()
    d.publish()
    [rs] = api.slices.values()
    assert rs["spec"]["nodeName"] == "node0"
    assert [dv["name"] for dv in rs["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    cap = rs["spec"]["devices"][0]["capacity"]
    assert cap["memory"]["value"] == str(2 * GIB)
    assert cap["memory"]["requestPolicy"]["default"] == "20Mi"
    assert cap["compute"]["value"] == "100"
    for version in ("1.34.0", "1.37.0"):
        kubernetes_validate.validate(json.loads(json.dumps(rs)), version,
                                     strict=True)
    # Published again with nothing changed: the same generation.
    d.publish()
    assert api.slices[rs["metadata"]["name"]]["spec"]["pool"][
        "generation"] == 1
