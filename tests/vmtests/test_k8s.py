# SPDX-License-Identifier: Apache-2.0
"""xpu-k8s end to end on xpu.ko and the simulated driver: a real xpud, the
real `xpu-k8s node` process, and the test kubelet (tests/testkubelet)
speaking kubelet's gRPC over UNIX sockets.

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests/test_k8s.py

The device plugin: Register -> ListAndWatch -> GetPreferredAllocation ->
Allocate (a slice made in xpu.ko) -> PreStartContainer (its compute share);
the container is started as a runtime does with the device specs Allocate
returned (bind mounts in a private mount namespace), and its client sees
the slice's size and is refused past it; the pod gone, the slice goes.
DRA: GetInfo -> Prepare twice -> Unprepare, with the claim on the test API
server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import xpudtest
from nvclient import abi
from testkubelet import DraKubelet, Kubelet, wait_for
from testkubelet.apiserver import ApiServer
from xpu.k8s import resources
from xpudtest import CLIENT, MIB, WAIT, Xpud, ask, finish, kernel_slices

UNIT = 64 * MIB


@pytest.fixture(scope="module", autouse=True)
def _require_xpu():
    xpudtest.require_slice_interface()


nodedir = xpudtest.nodedir


@pytest.fixture
def k8s(tmp_path, nodedir):
    """xpud, `xpu-k8s node --dra` and kubelet's sockets, all real."""
    x = Xpud(tmp_path, nodedir).start()
    d = Path(tempfile.mkdtemp(prefix="kubelet-", dir="/tmp"))
    for sub in ("device-plugins", "plugins", "plugins_registry"):
        (d / sub).mkdir()
    kubelet = Kubelet(str(d / "device-plugins"), str(d / "pod-resources.sock"))
    api = ApiServer()
    log = tmp_path / "xpu-k8s.log"
    with log.open("w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "xpu.k8s.main", "--xpud-socket", x.socket,
             "--memory-unit", f"{UNIT >> 20}MiB", "--apiserver", api.url,
             "node", "--node-name", "node0", "--no-agent", "--dra",
             "--gc-grace", "1", "--host-memory", "1GiB",
             "--device-plugin-dir", str(d / "device-plugins"),
             "--pod-resources-socket", str(d / "pod-resources.sock"),
             "--plugins-dir", str(d / "plugins"),
             "--plugins-registry-dir", str(d / "plugins_registry"),
             "--state-dir", str(d / "state")],
            env=x.env, stdout=subprocess.DEVNULL, stderr=f)
    dra = DraKubelet(str(d / "plugins_registry"))
    try:
        yield x, kubelet, dra, api, d
    finally:
        proc.terminate()
        rc = proc.wait(timeout=WAIT)
        dra.close()
        kubelet.close()
        api.close()
        x.cleanup()
        print(f"--- xpu-k8s's log ---\n{log.read_text()}")
        print(f"--- xpud's log ---\n{x.log.read_text()}")
        assert rc == 0


def run_container(resp):
    """Start the slice client as a runtime does with ContainerAllocateResponse
    RESP's device specs: each host node bind-mounted at its container path,
    in a private mount namespace."""
    binds = "; ".join(f"mount --bind {d.host_path} {d.container_path}"
                      for d in resp.devices)
    p = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
         f"{binds}; exec {sys.executable} {CLIENT}"], text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd="/")
    line = p.stdout.readline()
    assert line, f"client failed ({p.wait()}): {p.stderr.read()}"
    return p, json.loads(line)


def test_device_plugin_gives_a_container_its_slice(k8s):
    x, kubelet, _, _, _ = k8s
    wait_for(lambda: len(kubelet.plugins) == 3 and all(
        p.updates for p in kubelet.plugins.values()), WAIT, "registration")
    mem = kubelet.plugins["xpu.dev/xpu-memory"]
    gpus = x.call("gpus")
    assert len(mem.healthy()) == sum(
        g["memory_total_bytes"] // UNIT for g in gpus)
    out = kubelet.admit("ns", "pod-a", {"main": {"xpu.dev/xpu-memory": 2,
                                                  "xpu.dev/xpu-shares": 20}})
    resp = next(r for r in out["main"] if r.cdi_devices)
    [s] = x.call("list")
    assert [c.name for c in resp.cdi_devices] == [
        f"xpu.dev/slice={s['name']}"]
    ids = kubelet.pods[("ns", "pod-a")]["main"]["xpu.dev/xpu-memory"]
    assert s["name"] == resources.dp_slice(ids)
    k = kernel_slices()[s["name"]]
    assert k.memory_limit == 2 * UNIT
    assert k.compute_share == 200          # 20 %, in tenths
    assert k.host_memory_limit == 1 << 30  # the node's --host-memory
    assert s["gpu_minor"] == 0             # binpack on idle GPUs: GPU 0
    p, seen = run_container(resp)
    try:
        assert seen["heap_total"] == 2 * UNIT
        assert seen["nodes"]["nvidiactl"] == [195, 255]
        assert ask(p, f"alloc {UNIT}") == {"ok": True}
        assert kernel_slices()[s["name"]].memory_used == UNIT
        assert ask(p, f"alloc {UNIT + MIB}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        assert x.call("show", name=s["name"])["processes"] >= 1
    finally:
        assert finish(p) == 0
    # The pod is gone from kubelet: its slice goes.
    kubelet.remove("ns", "pod-a")
    wait_for(lambda: x.call("list") == [], WAIT, "the slice to go")
    assert s["name"] not in kernel_slices()


def test_podman_runs_the_cdi_device(k8s):
    """Allocate's CDI device, as kubelet hands it to the runtime, given to
    podman: the container's client is in its slice (xpud's CDI spec puts
    the slice's nodes at the standard names)."""
    if not (shutil.which("podman") and shutil.which("crun")):
        pytest.skip("podman and crun are not installed (tests/setup)")
    x, kubelet, _, _, _ = k8s
    wait_for(lambda: len(kubelet.plugins) == 3 and all(
        p.updates for p in kubelet.plugins.values()), WAIT, "registration")
    out = kubelet.admit("ns", "pod-p", {"main": {"xpu.dev/xpu-memory": 1}})
    [cdi] = [c.name for r in out["main"] for c in r.cdi_devices]
    [s] = x.call("list")
    spec = json.loads(Path("/var/run/cdi/xpu.json").read_text())
    assert f"{spec['kind']}={s['name']}" == cdi
    # podman's storage in /tmp (the VM's root is read-only; its runroot
    # must be under 50 characters), no systemd (cgroupfs), crun.  The
    # image: the VM's own root, bind-mounted (crun cannot pivot_root to /).
    tmp = Path(tempfile.mkdtemp(prefix="pm-", dir="/tmp"))
    rootfs = tmp / "rootfs"
    rootfs.mkdir()
    subprocess.run(["mount", "--rbind", "/", str(rootfs)], check=True)
    subprocess.run(["mount", "--make-rprivate", str(rootfs)], check=True)
    p = subprocess.Popen(
        ["podman", "--root", str(tmp / "root"), "--runroot",
         str(tmp / "run"), "--storage-driver", "vfs",
         "--cgroup-manager", "cgroupfs", "--events-backend", "none",
         "--runtime", "crun", "run", "--rm", "-i", "--network", "none",
         "--device", cdi, "--rootfs", str(rootfs),  # a flag: the "image"
         sys.executable, CLIENT],
        text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd="/")
    try:
        line = p.stdout.readline()
        assert line, f"podman failed ({p.wait()}): {p.stderr.read()}"
        seen = json.loads(line)
        assert seen["heap_total"] == UNIT
        assert seen["nodes"]["nvidiactl"] == [195, 255]
        assert ask(p, f"alloc {UNIT // 2}") == {"ok": True}
        assert kernel_slices()[s["name"]].memory_used == UNIT // 2
        assert ask(p, f"alloc {UNIT}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        # The slice counts the container's process.
        assert x.call("show", name=s["name"])["processes"] >= 1
        rc = finish(p)
        assert rc == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        subprocess.run(["umount", "--recursive", "--lazy", str(rootfs)],
                       check=False)
        # Never a recursive removal through the bind mount of / (it holds
        # the writable repository): podman's storage, then empty dirs.
        for d in ("root", "run"):
            shutil.rmtree(tmp / d, ignore_errors=True)
        if not os.path.ismount(rootfs):
            rootfs.rmdir()
            tmp.rmdir()
    # The container gone, its slice stays for the pod (kubelet may start
    # the container again); the pod gone, the slice goes.
    assert x.call("show", name=s["name"])["state"] == "ready"
    kubelet.remove("ns", "pod-p")
    wait_for(lambda: x.call("list") == [], WAIT, "the slice to go")


def test_dra_prepare_twice_unprepare(k8s):
    x, _, dra, api, _ = k8s
    uid = "0a1b2c3d-0000-4000-8000-000000000001"
    api.claims[("ns", "c1")] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c1", "namespace": "ns", "uid": uid},
        "status": {"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": "xpu.dev", "pool": "node0",
            "device": "gpu-0", "shareID": "s1",
            "consumedCapacity": {"memory": "256Mi", "compute": "30"}}],
            # Tighter than the node's --host-memory 1GiB: taken.
            "config": [{"source": "FromClaim", "opaque": {
                "driver": "xpu.dev", "parameters": {
                    "apiVersion": "xpu.dev/v1alpha1", "kind": "SliceConfig",
                    "hostMemory": "512Mi"}}}]}}}}
    info = dra.find_and_register(WAIT)
    assert info.name == "xpu.dev"
    wait_for(lambda: api.slices, WAIT, "the ResourceSlice")
    [rs] = api.slices.values()
    assert rs["spec"]["devices"][0]["name"] == "gpu-0"
    first = dra.prepare(("ns", "c1", uid))
    assert first.claims[uid].error == ""
    [s] = x.call("list")
    k = kernel_slices()[s["name"]]
    assert (k.memory_limit, k.compute_share, k.host_memory_limit) == (
        256 * MIB, 300, 512 * MIB)
    assert list(first.claims[uid].devices[0].cdi_device_ids) == [
        f"xpu.dev/slice={s['name']}"]
    assert dra.prepare(("ns", "c1", uid)) == first
    assert len(kernel_slices()) == 1
    assert dra.unprepare(("ns", "c1", uid)).claims[uid].error == ""
    assert kernel_slices() == {}
    assert dra.unprepare(("ns", "c1", uid)).claims[uid].error == ""
