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


def claim(results, uid=UID, name="c1", config=None):
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": name, "namespace": "ns", "uid": uid},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "gpu.xpu.dev"}}]}},
         "status": {"allocation": {"devices": {"results": results}}}}
    if config is not None:
        # As the scheduler copies them: the class's and the claim's.
        c["status"]["allocation"]["devices"]["config"] = config
    return c


def slice_config(host_memory="8Gi", source="FromClaim", requests=None,
                 driver="xpu.dev", **params):
    c = {"source": source, "opaque": {"driver": driver, "parameters": {
        "apiVersion": f"{driver}/v1alpha1", "kind": "SliceConfig",
        **({} if host_memory is None else {"hostMemory": host_memory}),
        **params}}}
    if requests is not None:
        c["requests"] = requests
    return c


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

    def start(host_memory=0):
        d = dra.Driver("node0", x.socket, Client(api.url),
                       resources.Names(),
                       plugins_dir=str(kubelet_dirs / "plugins"),
                       registry_dir=str(kubelet_dirs / "plugins_registry"),
                       host_memory=host_memory)
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


# -- the host-memory bound -----------------------------------------------------------

@pytest.mark.parametrize("node_bound, config, bound", [
    (0, None, 0),                                  # none by default
    (0, [slice_config("8Gi")], 8 * GIB),
    (0, [slice_config(8 * GIB)], 8 * GIB),         # a number of bytes
    (0, [slice_config("0")], 0),
    (0, [slice_config(None)], 0),                  # a config without it
    (16 * GIB, None, 16 * GIB),                    # the node's
    (16 * GIB, [slice_config("8Gi")], 8 * GIB),    # tighter: taken
    (16 * GIB, [slice_config("16Gi")], 16 * GIB),
    # The claim's config wins over its class's, in either order.
    (0, [slice_config("4Gi", "FromClass"), slice_config("2Gi")], 2 * GIB),
    (0, [slice_config("2Gi"), slice_config("4Gi", "FromClass")], 2 * GIB),
    (0, [slice_config("4Gi", "FromClass")], 4 * GIB),
    # A config for another request, or another driver, is not this one's.
    (0, [slice_config("4Gi", requests=["other"])], 0),
    (0, [slice_config("4Gi", requests=["gpu"])], 4 * GIB),
    (0, [{"source": "FromClaim", "opaque": {"driver": "gpu.example.com",
                                            "parameters": {"x": 1}}}], 0),
])
def test_prepare_gives_the_slice_its_host_bound(driver, dra_kubelet,
                                                node_bound, config, bound):
    x, api, start = driver
    start(host_memory=node_bound)
    dra_kubelet.find_and_register()
    api.claims[("ns", "c1")] = claim([result("gpu-0", "1Gi", "10")],
                                     config=config)
    r = dra_kubelet.prepare(("ns", "c1", UID)).claims[UID]
    assert r.error == ""
    [s] = x.service.op_list()
    assert s["host_memory_limit_bytes"] == bound
    [k] = x.backend.slices.values()
    assert k.spec.host_memory_limit_bytes == bound


def test_one_slice_of_several_requests_takes_the_loosest_bound(
        driver, dra_kubelet):
    x, api, start = driver
    start()
    dra_kubelet.find_and_register()
    a, b = result("gpu-0", "1Gi", "10"), result("gpu-0", "1Gi", "10", "s-2")
    b["request"] = "more"
    api.claims[("ns", "c1")] = claim([a, b], config=[
        slice_config("2Gi", requests=["gpu"]),
        slice_config("6Gi", requests=["more"])])
    assert dra_kubelet.prepare(("ns", "c1", UID)).claims[UID].error == ""
    [s] = x.service.op_list()
    assert s["host_memory_limit_bytes"] == 6 * GIB
    # One request without a bound: the slice has none.
    dra_kubelet.unprepare(("ns", "c1", UID))
    api.claims[("ns", "c1")] = claim([a, b], config=[
        slice_config("2Gi", requests=["gpu"])])
    assert dra_kubelet.prepare(("ns", "c1", UID)).claims[UID].error == ""
    [s] = x.service.op_list()
    assert s["host_memory_limit_bytes"] == 0
    # A subrequest (firstAvailable) takes its request's config.
    dra_kubelet.unprepare(("ns", "c1", UID))
    a = dict(a, request="gpu/small")
    api.claims[("ns", "c1")] = claim([a], config=[
        slice_config("2Gi", requests=["gpu"])])
    assert dra_kubelet.prepare(("ns", "c1", UID)).claims[UID].error == ""
    [s] = x.service.op_list()
    assert s["host_memory_limit_bytes"] == 2 * GIB


@pytest.mark.parametrize("node_bound, config, message", [
    (16 * GIB, [slice_config("32Gi")],
     ("request gpu asks hostMemory 32GiB, looser than this node's bound, "
      "16GiB (xpu-k8s node --host-memory): ask at most that, or leave "
      "hostMemory out")),
    (16 * GIB, [slice_config("0")],
     "request gpu asks hostMemory 0 (none), looser than this node's bound"),
    (16 * GIB, [slice_config("32Gi", "FromClass")],
     "request gpu asks hostMemory 32GiB, looser than this node's bound"),
    (0, [slice_config("8G")], None),  # Kubernetes' G: 8*10^9 bytes, fine
    (0, [slice_config("-1Gi")],
     "the claim's config: hostMemory '-1Gi': '-1Gi' is not a quantity"),
    (0, [slice_config(-1)],
     "the claim's config: hostMemory '-1': -1 is negative"),
    (0, [slice_config("lots")],
     "the claim's config: hostMemory 'lots': 'lots' is not a quantity"),
    (0, [slice_config("512Ki")],
     ("the claim's config: hostMemory '512Ki': 512KiB is below the smallest "
      "bound, 1MiB")),
    (0, [slice_config("1.5")],
     ("the claim's config: hostMemory '1.5': it is not a whole number of "
      "bytes")),
    (0, [slice_config("16Ei")],
     ("the claim's config: hostMemory '16Ei': 18446744073709551616 bytes "
      "is out of range")),
    (0, [slice_config(1.5)],
     "the claim's config: hostMemory 1.5 is not a quantity: write a string"),
    (0, [slice_config(hostmemory="8Gi", host_memory=None)],
     ("the claim's config: unknown field 'hostmemory' in SliceConfig "
      "(known: hostMemory)")),
    (0, [slice_config(kind="GpuConfig")],
     ("the claim's config: the parameters of xpu.dev are apiVersion "
      "'xpu.dev/v1alpha1', kind 'GpuConfig': it reads apiVersion "
      "xpu.dev/v1alpha1, kind SliceConfig")),
    (0, [{"source": "FromClass", "opaque": {"driver": "xpu.dev",
                                            "parameters": "8Gi"}}],
     "the class's config: the parameters of xpu.dev are not an object"),
    # Strict: a bad config of this driver fails even for another request.
    (0, [slice_config("lots", requests=["other"])],
     "the claim's config: hostMemory 'lots'"),
])
def test_a_bad_host_bound_makes_nothing(driver, dra_kubelet, node_bound,
                                        config, message):
    x, api, start = driver
    start(host_memory=node_bound)
    dra_kubelet.find_and_register()
    api.claims[("ns", "c1")] = claim([result("gpu-0", "1Gi", "10"),
                                      result("gpu-1", "1Gi", "10", "b")],
                                     config=config)
    r = dra_kubelet.prepare(("ns", "c1", UID)).claims[UID]
    if message is None:
        assert r.error == ""
        assert {s["host_memory_limit_bytes"]
                for s in x.service.op_list()} == {8 * 10**9}
        return
    assert r.error.startswith(f"claim ns/c1: {message}"), r.error
    assert "\n" not in r.error
    assert x.service.op_list() == [] and x.backend.slices == {}
    # Nothing was checkpointed: Prepare again says the same.
    assert dra_kubelet.prepare(("ns", "c1", UID)).claims[UID].error == \
        r.error


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
