# SPDX-License-Identifier: Apache-2.0
"""The device plugins against the test kubelet, over real gRPC on UNIX
sockets, with a real xpud (its service and socket server) on the in-memory
kernel: Register -> ListAndWatch -> GetPreferredAllocation -> Allocate ->
PreStartContainer, a kubelet restart, and the slice of a pod that is gone."""

from __future__ import annotations

import dataclasses

import grpc
import pytest
from conftest import GIB, small_gpus
from testkubelet import wait_for
from xpu.cdi import oci
from xpu.cdi import spec as cdi_spec
from xpu.k8s import deviceplugin, node, resources

MIB = 1 << 20
NAMES = resources.Names()


@pytest.fixture
def plugins(make_xpud, test_kubelet, kubelet_dirs):
    xpud = make_xpud()
    made = []

    def start(memory_unit=64 * MIB, x=None, **kw):
        x = x or xpud
        cfg = deviceplugin.Config(
            x.socket, NAMES, plugin_dir=str(kubelet_dirs / "device-plugins"),
            pod_resources=str(kubelet_dirs / "pod-resources.sock"),
            memory_unit=memory_unit, poll_s=0.1, gc_grace_s=0.2,
            dev_dir=str(kubelet_dirs), **kw)
        m = deviceplugin.Manager(cfg, node.Reservations(
            str(kubelet_dirs / "reservations.json")))
        m.start()
        made.append(m)
        return m

    yield xpud, start
    for m in made:
        m.stop()


def registered(k, n=3):
    return wait_for(lambda: len(k.plugins) == n and all(
        p.updates for p in k.plugins.values()), what="registration")


def test_register_and_list(plugins, test_kubelet):
    xpud, start = plugins
    xpud.service.op_create("train", 0, 512 * MIB)
    start()
    registered(test_kubelet)
    assert set(test_kubelet.plugins) == {
        "xpu.dev/slice", "xpu.dev/xpu-memory", "xpu.dev/xpu-shares"}
    mem = test_kubelet.plugins["xpu.dev/xpu-memory"]
    # 2 GiB GPUs in 64 MiB units: 32 devices each; GPU 0 has 512 MiB in a
    # slice outside Kubernetes, so 8 of its devices are Unhealthy.
    assert len(mem.devices) == 64
    assert len(mem.healthy()) == 64 - 8
    assert mem.devices["m0-31"] == "Unhealthy"
    assert mem.devices["m1-31"] == "Healthy"
    shares = test_kubelet.plugins["xpu.dev/xpu-shares"]
    assert len(shares.healthy()) == 200
    sl = test_kubelet.plugins["xpu.dev/slice"]
    assert sl.devices == {"train": "Healthy"}
    # A new slice is sent at once (ListAndWatch).
    xpud.service.op_create("infer", 1, 256 * MIB, compute_share=30)
    wait_for(lambda: "infer" in sl.devices, what="the new slice")
    wait_for(lambda: len(shares.healthy()) == 170, what="compute taken")


def test_allocate_shares_makes_a_slice(plugins, test_kubelet):
    xpud, start = plugins
    m = start()
    registered(test_kubelet)
    out = test_kubelet.admit("ns", "pod-a", {
        "main": {"xpu.dev/xpu-memory": 4, "xpu.dev/xpu-shares": 25}})
    memr = next(r for r in out["main"] if r.cdi_devices)
    [s] = [s for s in xpud.service.op_list()]
    assert s["memory_limit_bytes"] == 256 * MIB
    assert s["compute_share"] == 25          # set at PreStartContainer
    ids = test_kubelet.pods[("ns", "pod-a")]["main"]["xpu.dev/xpu-memory"]
    assert s["name"] == resources.dp_slice(ids)
    assert [d.name for d in memr.cdi_devices] == [f"xpu.dev/slice={s['name']}"]
    # xpud's CDI spec (issue 20's pure function, on what `list` says) has
    # that very device, its nodes the ones the device specs name.
    spec = cdi_spec.build_spec(xpud.service.op_list())
    dev = cdi_spec.device(spec, s["name"])
    assert f"{spec['kind']}={dev['name']}" == memr.cdi_devices[0].name
    nodes = {n["path"]: n["hostPath"]
             for n in dev["containerEdits"]["deviceNodes"]}
    assert nodes == {d.container_path: d.host_path for d in memr.devices
                     if d.container_path in nodes}
    assert len(nodes) == 2
    paths = {d.container_path: d.host_path for d in memr.devices}
    assert paths["/dev/nvidiactl"] == s["ctl_node"]
    assert paths[f"/dev/nvidia{s['gpu_minor']}"] == s["gpu_node"]
    assert memr.envs["XPU_SLICE"] == s["name"]
    sharesr = next(r for r in out["main"] if not r.cdi_devices)
    assert sharesr.envs["XPU_COMPUTE_SHARE"] == "25"
    # What the container's environment gets from both plugins joins that
    # slice under xpu-container-runtime too (a node whose default runtime
    # it is): the plugins' other XPU_ variables describe, and ask nothing.
    env = [f"{k}={v}" for r in out["main"] for k, v in r.envs.items()]
    assert len(env) == 4
    assert oci.request(env) == oci.Request(slice=s["name"])
    # Preferred allocation put all four memory devices on one GPU.
    ids = test_kubelet.pods[("ns", "pod-a")]["main"]["xpu.dev/xpu-memory"]
    assert len({i.split("-")[0] for i in ids}) == 1
    # The pod goes: its slice goes (after the grace period).
    test_kubelet.remove("ns", "pod-a")
    wait_for(lambda: xpud.service.op_list() == [], what="garbage collection")
    assert m.state.error is None


@pytest.mark.parametrize("host_memory", [0, 4 * GIB])
def test_allocate_gives_the_nodes_host_bound(plugins, test_kubelet,
                                             host_memory):
    xpud, start = plugins
    start(host_memory=host_memory)
    registered(test_kubelet)
    test_kubelet.admit("ns", "p", {"c": {"xpu.dev/xpu-memory": 2}})
    [s] = xpud.service.op_list()
    assert s["host_memory_limit_bytes"] == host_memory
    [k] = xpud.backend.slices.values()
    assert k.spec.host_memory_limit_bytes == host_memory


def test_a_whole_slice_keeps_its_own_host_bound(plugins, test_kubelet):
    xpud, start = plugins
    xpud.service.op_create("train", 1, 512 * MIB,
                           host_memory_limit_bytes=GIB)
    start(host_memory=4 * GIB)
    registered(test_kubelet)
    test_kubelet.admit("ns", "p", {"c": {"xpu.dev/slice": 1}})
    [s] = xpud.service.op_list()
    assert s["host_memory_limit_bytes"] == GIB


def test_binpack_and_spread(plugins, test_kubelet):
    xpud, start = plugins
    start(policy=node.SPREAD)
    registered(test_kubelet)
    for pod in ("a", "b"):
        test_kubelet.admit("ns", pod, {"c": {"xpu.dev/xpu-memory": 2}})
    gpus = {s["gpu_index"] for s in xpud.service.op_list()}
    assert gpus == {0, 1}  # spread: one on each


def test_binpack(plugins, test_kubelet):
    xpud, start = plugins
    start(policy=node.BINPACK)
    registered(test_kubelet)
    for pod in ("a", "b"):
        test_kubelet.admit("ns", pod, {"c": {"xpu.dev/xpu-memory": 2}})
    assert len({s["gpu_index"] for s in xpud.service.op_list()}) == 1


def test_whole_slice(plugins, test_kubelet):
    xpud, start = plugins
    xpud.service.op_create("train", 1, 512 * MIB)
    start()
    registered(test_kubelet)
    out = test_kubelet.admit("ns", "p", {"c": {"xpu.dev/slice": 1}})
    [r] = out["c"]
    assert [d.name for d in r.cdi_devices] == ["xpu.dev/slice=train"]
    assert r.envs["XPU_SLICE"] == "train"
    # Two slices in one container cannot both be its /dev/nvidiactl.
    xpud.service.op_create("other", 0, 512 * MIB)
    wait_for(lambda: len(test_kubelet.plugins["xpu.dev/slice"].healthy())
             == 2, what="the second slice")
    test_kubelet.remove("ns", "p")
    with pytest.raises(grpc.RpcError) as e:
        test_kubelet.admit("ns", "q", {"c": {"xpu.dev/slice": 2}})
    assert "a container takes one slice, 2 were asked for" in e.value.details()


def test_shares_without_memory_refused_at_prestart(plugins, test_kubelet):
    xpud, start = plugins
    start()
    registered(test_kubelet)
    with pytest.raises(grpc.RpcError) as e:
        test_kubelet.admit("ns", "p", {"c": {"xpu.dev/xpu-shares": 10}})
    assert e.value.details() == (
        "xpu.dev/xpu-shares: ns/p container c asks for xpu.dev/xpu-shares "
        "without xpu.dev/xpu-memory: a slice needs its memory; ask for both")
    assert xpud.service.op_list() == []


def test_memory_used_outside_slices_is_unhealthy(make_xpud, plugins,
                                                 test_kubelet):
    _, start = plugins
    x = make_xpud(small_gpus(used=(GIB, None)), name="xpud2")
    start(x=x)
    registered(test_kubelet)
    mem = test_kubelet.plugins["xpu.dev/xpu-memory"]
    assert sum(1 for i in mem.healthy() if i.startswith("m0-")) == 16


def test_kubelet_restart(plugins, test_kubelet):
    _, start = plugins
    start()
    registered(test_kubelet)
    first = list(test_kubelet.registrations)
    test_kubelet.restart()
    wait_for(lambda: len(test_kubelet.registrations) == 2 * len(first),
             what="registration after the restart")
    registered(test_kubelet)
    out = test_kubelet.admit("ns", "p", {"c": {"xpu.dev/xpu-memory": 1}})
    assert out["c"][0].cdi_devices


def test_xpud_down_makes_devices_unhealthy(plugins, test_kubelet):
    xpud, start = plugins
    start()
    registered(test_kubelet)
    xpud.server.stop()
    mem = test_kubelet.plugins["xpu.dev/xpu-memory"]
    wait_for(lambda: mem.healthy() == [], what="unhealthy devices")


def test_allocate_refused_when_xpud_has_no_room(plugins, test_kubelet):
    xpud, start = plugins
    m = start()
    registered(test_kubelet)
    # The GPUs fill behind kubelet's back (another program, say).
    xpud.service.op_create("x0", 0, 2 * GIB)
    xpud.service.op_create("x1", 1, 2 * GIB)
    # kubelet still thinks it has devices (before the next poll).
    m.state.gpus = [dataclasses.replace(g, memory_free=2 * GIB)
                    for g in m.state.gpus]
    conn = test_kubelet.plugins["xpu.dev/xpu-memory"]
    with pytest.raises(grpc.RpcError) as e:
        conn.stub.Allocate(deviceplugin.dp.AllocateRequest(
            container_requests=[deviceplugin.dp.ContainerAllocateRequest(
                devices_ids=["m0-0"])]), timeout=10)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no GPU has 64 MiB and 0 % free" in e.value.details()


def test_too_many_memory_devices_for_kubelet(make_xpud, kubelet_dirs):
    # Two 141 GiB GPUs in 1 MiB units: a ListAndWatch message over the 4 MiB
    # kubelet reads; refused at start with what to do.
    big = small_gpus(mem=(141 * GIB, 141 * GIB))
    x = make_xpud(big, name="xpud-big")
    cfg = deviceplugin.Config(
        x.socket, NAMES, plugin_dir=str(kubelet_dirs / "device-plugins"),
        pod_resources=str(kubelet_dirs / "pod-resources.sock"),
        memory_unit=MIB)
    m = deviceplugin.Manager(cfg, node.Reservations(None))
    with pytest.raises(ValueError) as e:
        m.start()
    assert str(e.value).startswith("xpu.dev/xpu-memory: ")
    assert str(e.value).endswith(
        "over kubelet's 4194304: give a larger --memory-unit (the same to "
        "the extender)")
    m.stop()
    # In 16 MiB units it fits.
    cfg.memory_unit = 16 * MIB
    m = deviceplugin.Manager(cfg, node.Reservations(None))
    m.refresh()
    m.check_size()


@pytest.mark.parametrize("xpu_uvm", [True, False])
def test_a_container_s_uvm_node_is_xpu_s_where_the_host_has_it(
        plugins, test_kubelet, kubelet_dirs, xpu_uvm):
    """/dev/nvidia-uvm in the container is the host's xpu-uvm (xpu.ko's UVM
    node: its UVM files are held for the slice, class 39) where it exists,
    else the driver's; the tools node is the driver's."""
    names = ["nvidia-uvm", "nvidia-uvm-tools"] + (["xpu-uvm"] if xpu_uvm
                                                  else [])
    for n in names:
        (kubelet_dirs / n).write_text("")
    _, start = plugins
    start()
    registered(test_kubelet)
    out = test_kubelet.admit("ns", "pod-u", {"main": {"xpu.dev/xpu-memory": 1}})
    memr = next(r for r in out["main"] if r.cdi_devices)
    paths = {d.container_path: d.host_path for d in memr.devices}
    assert paths["/dev/nvidia-uvm"] == str(
        kubelet_dirs / ("xpu-uvm" if xpu_uvm else "nvidia-uvm"))
    assert paths["/dev/nvidia-uvm-tools"] == str(
        kubelet_dirs / "nvidia-uvm-tools")
