# SPDX-License-Identifier: Apache-2.0
"""xpu-container-runtime and xpu-cdi-hook on the host: the XPU_* variables,
the rewrite of config.json, the command line of runc and crun, and both
programs against a real xpud socket served by a service on the in-memory
kernel (xpud_fakes.py).  What podman and crun make of it runs in the VM
(tests/vmtests/test_containers.py)."""

from __future__ import annotations

import copy
import io
import json
import os
import socket as socketlib
import stat
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from xpu import config
from xpu.auth import Authorizer
from xpu.cdi import hook, oci, runtime, spec
from xpu.cdi.refresh import Refresher
from xpu.client import Client
from xpu.daemon import Ops
from xpu.errors import XpuError
from xpu.k8s import resources
from xpu.k8s._proto import podresources_v1_pb2_grpc as pr_grpc
from xpu.server import Dispatcher, Server
from xpu.sizes import GIB, MIB
from xpud_fakes import UUID0, UUID1

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from testkubelet import Kubelet

# -- the variables ---------------------------------------------------------------


def test_no_xpu_variable_is_no_request():
    assert oci.request([]) is None
    assert oci.request(["PATH=/bin", "XPUX=1", "HOME=/"]) is None


def test_a_new_slice_and_its_limits():
    r = oci.request(["XPU_MEMORY=512MiB", "XPU_COMPUTE=12.5%",
                     "XPU_GPU=GPU-AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee",
                     "XPU_PRIORITY=high", "PATH=/bin"])
    assert r == oci.Request(memory_limit_bytes=512 * MIB, compute_share=12.5,
                            gpu=UUID1, priority="high")
    assert oci.request(["XPU_MEMORY=1GiB", "XPU_GPU=1"]).gpu == 1
    assert oci.request(["XPU_SLICE=train"]) == oci.Request(slice="train")
    # What xpu's device plugin describes the slice with passes beside it.
    assert oci.request(["XPU_SLICE=train", "XPU_MEMORY_LIMIT_BYTES=1024",
                        "XPU_GPU_UUID=GPU-x", "XPU_COMPUTE_SHARE=25"]) == \
        oci.Request(slice="train")
    # The last of a name wins, as for execve's callers.
    assert oci.request(["XPU_MEMORY=1GiB", "XPU_MEMORY=2GiB"]) \
        .memory_limit_bytes == 2 * GIB


def test_a_host_memory_bound():
    assert oci.request(["XPU_MEMORY=1GiB"]).host_memory_limit_bytes is None
    r = oci.request(["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=16GiB"])
    assert r == oci.Request(memory_limit_bytes=GIB,
                            host_memory_limit_bytes=16 * GIB)
    assert oci.request(["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=0"]) \
        .host_memory_limit_bytes == 0
    assert oci.request(["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=1.5Gi"]) \
        .host_memory_limit_bytes == 3 * GIB // 2


@pytest.mark.parametrize("env, ceiling, bound", [
    (["XPU_MEMORY=1GiB"], 0, 0),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=8GiB"], 0, 8 * GIB),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=0"], 0, 0),
    (["XPU_MEMORY=1GiB"], 16 * GIB, 16 * GIB),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=8GiB"], 16 * GIB, 8 * GIB),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=16GiB"], 16 * GIB, 16 * GIB),
])
def test_the_host_bound_of_a_new_slice(env, ceiling, bound):
    assert runtime.host_bound(oci.request(env), ceiling) == bound


@pytest.mark.parametrize("value, what", [("32GiB", "32GiB"),
                                         ("0", "0 (no bound)")])
def test_a_looser_host_bound_than_the_hosts_is_refused(value, what):
    req = oci.request(["XPU_MEMORY=1GiB", f"XPU_HOST_MEMORY={value}"])
    with pytest.raises(XpuError) as e:
        runtime.host_bound(req, 16 * GIB)
    assert str(e.value) == (
        f"XPU_HOST_MEMORY={what} is looser than this host's bound for "
        "containers, 16GiB ([container_runtime] host_memory): ask at most "
        "that, or leave XPU_HOST_MEMORY out (the container is not started)")


@pytest.mark.parametrize("env, message", [
    (["XPU_MEMORY=512MB"], ("XPU_MEMORY=512MB: '512MB' is ambiguous (MB may "
     "mean powers of 1000 or of 1024): write 512MiB for binary units, or "
     "the number of bytes")),
    (["XPU_MEMORY=512"], ("XPU_MEMORY=512: 512B is below the smallest limit, "
     "1MiB (sizes without a unit are bytes: did you mean MiB?)")),
    (["XPU_MEMORY=lots"], "XPU_MEMORY=lots: 'lots' is not a size"),
    (["XPU_MEMORY="], "XPU_MEMORY is empty: give it a value or leave it out"),
    (["XPU_MEMORY=1GiB", "XPU_COMPUTE=120"],
     "XPU_COMPUTE=120: 120% is not between 0 and 100%"),
    (["XPU_MEMORY=1GiB", "XPU_COMPUTE=0.05"],
     "XPU_COMPUTE=0.05: '0.05' is finer than the 0.1 % steps"),
    (["XPU_MEMORY=1GiB", "XPU_GPU=first"], ("XPU_GPU=first: 'first' is not a "
     "GPU: write its UUID (GPU-xxxxxxxx-...) or its index")),
    (["XPU_MEMORY=1GiB", "XPU_PRIORITY=urgent"], ("XPU_PRIORITY=urgent: "
     "'urgent' is not one of low, normal, high")),
    (["XPU_SLICE=../x"], "XPU_SLICE=../x: '../x' is not a valid slice name"),
    (["XPU_SLICE=a", "XPU_MEMORY=1GiB"], ("XPU_SLICE=a joins an existing "
     "slice, whose limits are its own: leave out XPU_MEMORY, or XPU_SLICE "
     "for a new slice")),
    (["XPU_COMPUTE=50"], ("XPU_COMPUTE without XPU_MEMORY: a new slice needs "
     "its memory limit (XPU_MEMORY=8GiB), or name an existing slice with "
     "XPU_SLICE")),
    (["XPU_MEMROY=1GiB"], ("unknown variable XPU_MEMROY: xpu reads "
     "XPU_MEMORY, XPU_COMPUTE, XPU_GPU, XPU_PRIORITY, XPU_HOST_MEMORY, "
     "XPU_SLICE")),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=16GB"], ("XPU_HOST_MEMORY=16GB: "
     "'16GB' is ambiguous (GB may mean powers of 1000 or of 1024)")),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=-1GiB"], ("XPU_HOST_MEMORY=-1GiB: "
     "'-1GiB' is not a size")),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=4096"], ("XPU_HOST_MEMORY=4096: "
     "4KiB is below the smallest bound, 1MiB (0 is no bound; sizes without "
     "a unit are bytes: did you mean MiB?)")),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=16777216TiB"],
     ("XPU_HOST_MEMORY=16777216TiB: 18446744073709551616 bytes is out of "
      "range (0 to 2^64-1)")),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY= "],
     "XPU_HOST_MEMORY is empty: give it a value or leave it out"),
    (["XPU_HOST_MEMORY=8GiB"], ("XPU_HOST_MEMORY without XPU_MEMORY: a new "
     "slice needs its memory limit")),
    (["XPU_SLICE=a", "XPU_HOST_MEMORY=8GiB"], ("XPU_SLICE=a joins an "
     "existing slice, whose limits are its own: leave out XPU_HOST_MEMORY")),
    (["XPU_MEMORY_LIMIT_BYTES=1073741824"], ("XPU_MEMORY_LIMIT_BYTES "
     "describes the slice xpu's device plugin gave a pod, beside XPU_SLICE, "
     "and asks for nothing: ask for a new slice with XPU_MEMORY=SIZE, or "
     "name one with XPU_SLICE")),
    (["XPU_MEMORY=1GiB", "XPU_GPU_UUID=GPU-x"], ("XPU_GPU_UUID describes the "
     "slice")),
    (["XPU_SLICE=a", "XPU_GPU_UUID=GPU-x", "XPU_COMPUTE=5"], ("XPU_SLICE=a "
     "joins an existing slice, whose limits are its own: leave out "
     "XPU_COMPUTE")),
])
def test_bad_values_are_refused_in_one_line(env, message):
    with pytest.raises(oci.RequestError) as e:
        oci.request(env)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


# -- applying edits --------------------------------------------------------------

CONFIG = {
    "ociVersion": "1.0.2-dev",
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"],
                "env": ["PATH=/bin", "XPU_MEMORY=1GiB", "XPU_SLICE=old"]},
    "root": {"path": "rootfs"},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    "hooks": {"prestart": [{"path": "/bin/true"}]},
    "linux": {"devices": [{"path": "/dev/nvidiactl", "type": "c",
                           "major": 1, "minor": 3}],
              "resources": {"devices": [{"allow": False, "access": "rwm"}]},
              "namespaces": [{"type": "pid"}]},
    "annotations": {"a": "b"},
}
EDITS = [
    {"deviceNodes": [{"path": "/dev/nvidia-uvm"}],
     "mounts": [{"hostPath": "/h/libcuda.so.1",
                 "containerPath": "/usr/lib/libcuda.so.1",
                 "options": ["ro", "bind"]}]},
    {"env": ["XPU_SLICE=train"],
     "deviceNodes": [
         {"path": "/dev/nvidiactl", "hostPath": "/dev/xpu3-ctl", "type": "c",
          "major": 195, "minor": 255, "permissions": "rw"},
         {"path": "/dev/nvidia1", "hostPath": "/dev/xpu3", "type": "c",
          "major": 195, "minor": 1, "permissions": "rw"}],
     "hooks": [{"hookName": "createRuntime", "path": "/bin/xpu-cdi-hook",
                "args": ["xpu-cdi-hook", "bind", "train"]}]},
]


def uvm_stat(path):
    assert path == "/dev/nvidia-uvm"

    class St:
        st_mode = stat.S_IFCHR | 0o666
        st_rdev = os.makedev(511, 0)
    return St()


def test_edits_as_cdi_applies_them():
    before = copy.deepcopy(CONFIG)
    out = oci.apply_edits(CONFIG, EDITS, lstat=uvm_stat)
    assert CONFIG == before                   # the input is not changed
    assert out["process"]["env"] == ["PATH=/bin", "XPU_MEMORY=1GiB",
                                     "XPU_SLICE=train"]
    assert out["linux"]["devices"] == [
        {"path": "/dev/nvidia-uvm", "type": "c", "major": 511, "minor": 0},
        {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255},
        {"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1}]
    assert out["linux"]["resources"]["devices"] == [
        {"allow": False, "access": "rwm"},
        {"allow": True, "type": "c", "major": 511, "minor": 0,
         "access": "rwm"},
        {"allow": True, "type": "c", "major": 195, "minor": 255,
         "access": "rw"},
        {"allow": True, "type": "c", "major": 195, "minor": 1,
         "access": "rw"}]
    assert out["mounts"][1:] == [{"destination": "/usr/lib/libcuda.so.1",
                                  "source": "/h/libcuda.so.1",
                                  "options": ["ro", "bind"]}]
    assert out["hooks"] == {
        "prestart": [{"path": "/bin/true"}],
        "createRuntime": [{"path": "/bin/xpu-cdi-hook",
                           "args": ["xpu-cdi-hook", "bind", "train"]}]}
    # Everything else passes untouched.
    for key in ("ociVersion", "root", "annotations"):
        assert out[key] == CONFIG[key]
    assert out["mounts"][0] == CONFIG["mounts"][0]
    assert out["process"]["args"] == ["sh"]
    assert out["linux"]["namespaces"] == [{"type": "pid"}]
    # Applied again (a CDI device and XPU_SLICE for the same slice): the
    # same container.
    again = oci.apply_edits(out, EDITS, lstat=uvm_stat)
    assert again["linux"]["devices"] == out["linux"]["devices"]
    assert again["hooks"] == out["hooks"]


def test_a_container_user_owns_its_nodes():
    cfg = dict(CONFIG, process=dict(CONFIG["process"],
                                    user={"uid": 1000, "gid": 100}))
    out = oci.apply_edits(cfg, EDITS[1:])
    assert {(d["uid"], d["gid"]) for d in out["linux"]["devices"]
            if d["major"] == 195} == {(1000, 100)}


# -- the command line of runc and crun -----------------------------------------------

def test_command_lines_as_engines_write_them():
    podman = ["--root", "/run/crun", "--log", "/x/oci-log", "--systemd-cgroup",
              "create", "--bundle", "/b", "--pid-file", "/p",
              "--console-socket=/s", "abc123"]
    c = runtime.parse(podman)
    assert (c.command, c.index) == ("create", 5)
    assert c.global_value("--log") == "/x/oci-log"
    assert runtime.positionals(c.args(), runtime._CREATE_VALUE) == ["abc123"]
    assert runtime._option(c.args(), "--bundle", runtime._CREATE_VALUE,
                           "-b") == "/b"
    docker = ["--root=/var/run/docker/runtime-runc/moby", "--log",
              "/l/log.json", "--log-format", "json", "create", "-b", "/b2",
              "--preserve-fds", "3", "id2"]
    c = runtime.parse(docker)
    assert c.command == "create"
    assert c.global_value("--log-format") == "json"
    assert runtime._option(c.args(), "--bundle", runtime._CREATE_VALUE,
                           "-b") == "/b2"
    assert runtime.positionals(c.args(), runtime._CREATE_VALUE) == ["id2"]
    assert runtime._option(["-b/b3", "x"], "--bundle", set(), "-b") == "/b3"
    assert runtime.parse(["--version"]).command is None
    assert runtime.parse(["--debug", "delete", "-f", "x"]).command == "delete"


def test_slice_names_from_container_ids():
    assert runtime.slice_name("a63855e68907ad8bc7fc89617bccbccb4a514c7b1f06"
                              "b9181d7a8b1c9410ff4d") == "ctr-a63855e68907"
    other = runtime.slice_name("my container")
    assert other.startswith("ctr-") and len(other) == 16
    assert other == runtime.slice_name("my container")


def test_the_real_runtime(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    me = bindir / "xpu-container-runtime"
    for name in ("runc", "crun", me.name):
        (bindir / name).write_text("#!/bin/sh\n")
        (bindir / name).chmod(0o755)
    env = {"PATH": str(bindir)}

    def find(setting):
        return runtime.find_runtime(setting, str(me), env, search_dirs=())

    assert find("") == str(bindir / "crun")
    (bindir / "crun").unlink()
    assert find("") == str(bindir / "runc")
    assert find(str(bindir / "runc")) == str(bindir / "runc")
    with pytest.raises(XpuError) as e:
        find(me.name)
    assert "is xpu-container-runtime itself" in str(e.value)
    (bindir / "runc").unlink()
    with pytest.raises(XpuError) as e:
        find("")
    assert str(e.value) == ("neither crun nor runc is installed: install "
                            "one, or set oci_runtime in [container_runtime]")
    with pytest.raises(XpuError) as e:
        find("/nonexistent/runc")
    assert str(e.value) == ("the OCI runtime '/nonexistent/runc' of "
                            "[container_runtime] is not found or not "
                            "executable")


def test_the_gpu_with_most_memory_left():
    gpus = [{"index": 0, "gpu_uuid": UUID0, "memory_total_bytes": 80 * GIB,
             "memory_assigned_bytes": 70 * GIB},
            {"index": 1, "gpu_uuid": UUID1, "memory_total_bytes": 80 * GIB,
             "memory_assigned_bytes": 8 * GIB}]
    assert runtime.pick_gpu(gpus, GIB) == UUID1
    gpus[1]["memory_assigned_bytes"] = 79 * GIB
    assert runtime.pick_gpu(gpus, GIB) == UUID0
    for g in gpus:
        g["memory_total_bytes"] = None
    assert runtime.pick_gpu(gpus, GIB) == UUID0


# -- against a served xpud ------------------------------------------------------------

@pytest.fixture
def xpud(make_service, sockdir, tmp_path):
    """A service on the in-memory kernel served on a socket with the CDI
    ops, as daemon.build() wires them: (socket path, service, backend)."""
    svc = make_service()
    hook_path = tmp_path / "xpu-cdi-hook"
    hook_path.write_text("#!/bin/sh\n")
    path = str(sockdir / "xpud.sock")
    cdi = Refresher(config.CdiConfig(spec_dir="", hook=str(hook_path),
                                     nvidia_spec="none"), path, svc.op_list)
    srv = Server(path, Dispatcher(Ops(svc, cdi), Authorizer()))
    srv.start()
    yield path, svc
    srv.stop()


def bundle(tmp_path, env):
    b = tmp_path / "bundle"
    b.mkdir(exist_ok=True)
    cfg = copy.deepcopy(CONFIG)
    cfg["process"]["env"] = ["PATH=/bin", *env]
    (b / "config.json").write_text(json.dumps(cfg, indent=4))
    return b


def run_create(socket, b, cid="0123456789abcdef" * 4, command="create",
               host_memory=0):
    argv = ["--root", "/run/crun", command, "--bundle", str(b), "--pid-file",
            str(b / "pid"), cid]
    rt = runtime.Runtime(runtime.parse(argv),
                         config.RuntimeConfig(
                             socket=socket,
                             host_memory_limit_bytes=host_memory), "/x/me")
    rt.create()
    return rt


def test_create_makes_an_ephemeral_slice_and_rewrites_config(xpud, tmp_path,
                                                             backend):
    socket, svc = xpud
    b = bundle(tmp_path, ["XPU_MEMORY=512MiB", "XPU_COMPUTE=25"])
    before = json.loads((b / "config.json").read_text())
    run_create(socket, b)
    [s] = svc.op_list()
    assert (s["name"], s["owner"], s["memory_limit_bytes"],
            s["compute_share"]) == ("ctr-0123456789ab", "0123456789abcdef" * 4,
                                    512 * MIB, 25)
    assert s["gpu_uuid"] == UUID0      # both free: the first
    cfg = json.loads((b / "config.json").read_text())
    assert "XPU_SLICE=ctr-0123456789ab" in cfg["process"]["env"]
    assert [d["path"] for d in cfg["linux"]["devices"]] == [
        "/dev/nvidiactl", "/dev/nvidia0"]
    [h] = cfg["hooks"]["createRuntime"]
    assert h["args"][-2:] == ["bind", "ctr-0123456789ab"]
    assert h["args"][1:3] == ["--socket", socket]
    for key in ("ociVersion", "root", "annotations", "mounts"):
        assert cfg[key] == before[key]
    assert stat.S_IMODE(os.stat(b / "config.json").st_mode) == 0o644
    assert sorted(os.listdir(b)) == ["config.json"]
    # The runtime's pid is the slice's owner process.
    assert svc._desired["ctr-0123456789ab"].owner.pid == os.getpid()
    # delete releases it.
    argv = ["--root", "/run/crun", "delete", "0123456789abcdef" * 4]
    runtime.Runtime(runtime.parse(argv), config.RuntimeConfig(socket=socket),
                    "/x/me").delete()
    assert svc.op_list() == [] and backend.slices == {}


@pytest.mark.parametrize("env, host_memory, bound", [
    ([], 0, 0),
    (["XPU_HOST_MEMORY=8GiB"], 0, 8 * GIB),
    ([], 16 * GIB, 16 * GIB),
    (["XPU_HOST_MEMORY=2GiB"], 16 * GIB, 2 * GIB),
])
def test_create_gives_the_slice_its_host_bound(xpud, tmp_path, backend, env,
                                               host_memory, bound):
    socket, svc = xpud
    b = bundle(tmp_path, ["XPU_MEMORY=512MiB", *env])
    run_create(socket, b, host_memory=host_memory)
    [s] = svc.op_list()
    assert s["host_memory_limit_bytes"] == bound
    [k] = backend.slices.values()
    assert k.spec.host_memory_limit_bytes == bound


def test_create_joins_an_existing_slice(xpud, tmp_path, backend):
    socket, svc = xpud
    svc.op_create(name="train", gpu=1, memory_limit_bytes=GIB)
    b = bundle(tmp_path, ["XPU_SLICE=train"])
    run_create(socket, b)
    cfg = json.loads((b / "config.json").read_text())
    assert [d["path"] for d in cfg["linux"]["devices"]] == [
        "/dev/nvidiactl", "/dev/nvidia1"]
    assert [s["name"] for s in svc.op_list()] == ["train"]
    # delete leaves a slice it did not make alone.
    runtime.Runtime(runtime.parse(["delete", "0123456789abcdef" * 4]),
                    config.RuntimeConfig(socket=socket), "/x/me").delete()
    assert "train" in backend.slices


@pytest.mark.parametrize("env, message", [
    (["XPU_MEMORY=512MB"], "XPU_MEMORY=512MB: '512MB' is ambiguous"),
    (["XPU_MEMORY=1TiB"], "xpud refused: GPU 0 ("),
    (["XPU_SLICE=nope"], "xpud refused: no slice 'nope'"),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=1MB"],
     "XPU_HOST_MEMORY=1MB: '1MB' is ambiguous"),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=0"],
     "XPU_HOST_MEMORY=0 (no bound) is looser than this host's bound"),
    (["XPU_MEMORY=1GiB", "XPU_HOST_MEMORY=64GiB"],
     "XPU_HOST_MEMORY=64GiB is looser than this host's bound"),
])
def test_a_refused_create_leaves_nothing(xpud, tmp_path, backend, env,
                                         message):
    socket, svc = xpud
    b = bundle(tmp_path, env)
    text = (b / "config.json").read_text()
    with pytest.raises(XpuError) as e:
        run_create(socket, b, host_memory=16 * GIB)
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)
    assert (b / "config.json").read_text() == text
    assert svc.op_list() == [] and backend.slices == {}
    assert sorted(os.listdir(b)) == ["config.json"]


def test_a_refusal_after_the_slice_was_made_undoes_it(xpud, tmp_path,
                                                      backend, monkeypatch):
    socket, svc = xpud
    b = bundle(tmp_path, ["XPU_MEMORY=1GiB"])

    def broken(path, doc):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runtime, "write_json", broken)
    with pytest.raises(XpuError) as e:
        run_create(socket, b)
    assert str(e.value) == (f"cannot rewrite {b}/config.json: Permission "
                            "denied")
    assert svc.op_list() == [] and backend.slices == {}


def test_without_xpud_a_container_that_asks_does_not_start(tmp_path,
                                                           sockdir):
    b = bundle(tmp_path, ["XPU_MEMORY=1GiB"])
    text = (b / "config.json").read_text()
    with pytest.raises(XpuError) as e:
        run_create(str(sockdir / "none.sock"), b)
    assert str(e.value) == (
        f"cannot reach xpud at {sockdir}/none.sock: no such socket; is xpud "
        "running? (systemctl status xpud) (the container asks for a slice "
        "and is not started)")
    assert (b / "config.json").read_text() == text


# -- Kubernetes pods: a slice only from what the pod cannot forge ----------------

# What containerd's CRI puts on a pod's container, and CRI-O (its own keys,
# and kubelet's labels of the container), for container main of pod
# team-a/train-0.
CRI = {"io.kubernetes.cri.container-type": "container",
       "io.kubernetes.cri.sandbox-id": "5ab0" * 16,
       "io.kubernetes.cri.sandbox-namespace": "team-a",
       "io.kubernetes.cri.sandbox-name": "train-0",
       "io.kubernetes.cri.container-name": "main"}
CRIO = {"io.kubernetes.cri-o.ContainerType": "container",
        "io.kubernetes.cri-o.SandboxID": "77aa" * 16,
        "io.kubernetes.pod.namespace": "team-a",
        "io.kubernetes.pod.name": "train-0",
        "io.kubernetes.container.name": "main"}
NO_KUBELET = "/nonexistent/pod-resources/kubelet.sock"


def node_stat(svc):
    """os.stat of the slices' nodes as xpu.ko makes them: the driver's
    numbers (the GPU's minor, the control node's 255), whichever slice."""
    def lstat(path):
        for s in svc.op_list():
            numbers = {s["gpu_node"]: s["gpu_minor"], s["ctl_node"]: 255}
            if path in numbers:
                class St:
                    st_mode = stat.S_IFCHR | 0o600
                    st_rdev = os.makedev(195, numbers[path])
                return St()
        raise FileNotFoundError(2, "No such file or directory", path)
    return lstat


def plugin_env(svc, name):
    """The env xpu's device plugin's Allocate gives slice NAME's container
    (deviceplugin.py, slice_response)."""
    s = svc.op_show(name=name)
    return [f"XPU_SLICE={name}",
            f"XPU_MEMORY_LIMIT_BYTES={s['memory_limit_bytes']}",
            f"XPU_GPU_UUID={s['gpu_uuid']}"]


def plugin_devices(svc, name):
    """linux.devices as containerd makes them of the device specs the
    device plugin gives slice NAME: the host nodes' numbers at NVIDIA's
    names."""
    s = svc.op_show(name=name)
    return [{"path": f"/dev/nvidia{s['gpu_minor']}", "type": "c",
             "major": 195, "minor": s["gpu_minor"]},
            {"path": "/dev/nvidiactl", "type": "c", "major": 195,
             "minor": 255}]


def pod_bundle(tmp_path, env, devices=(), annotations=CRI, cdi=None,
               socket=""):
    """A pod's container's bundle: ENV after what kubelet put, DEVICES in
    linux.devices, and, with CDI naming a slice, the edits of that CDI
    device of xpud's spec applied as containerd applies them."""
    b = bundle(tmp_path, env)
    cfg = json.loads((b / "config.json").read_text())
    cfg["annotations"] = dict(annotations)
    cfg["linux"]["devices"] = [dict(d) for d in devices]
    if cdi is not None:
        with Client(socket) as c:
            doc = c.call("cdi_spec", slice=cdi)
        cfg = oci.apply_edits(cfg, [doc.get("containerEdits") or {},
                                    spec.device(doc, cdi)["containerEdits"]])
        # the pod's own env comes after, as kubelet writes it
        cfg["process"]["env"] += env
    (b / "config.json").write_text(json.dumps(cfg, indent=4))
    return b


def run_pod(socket, svc, b, kubernetes=False, pod_resources=NO_KUBELET):
    argv = ["--root", "/run/crun", "create", "--bundle", str(b),
            "0123456789abcdef" * 4]
    rt = runtime.Runtime(runtime.parse(argv),
                         config.RuntimeConfig(socket=socket,
                                              kubernetes=kubernetes,
                                              pod_resources=pod_resources),
                         "/x/me", lstat=node_stat(svc))
    rt.create()


def refused(socket, svc, backend, b, message, pod_resources=NO_KUBELET):
    """A pod's start that must be refused with MESSAGE (one line), leaving
    config.json, xpud and the bundle as they were."""
    text = (b / "config.json").read_text()
    before = svc.op_list()
    changes = len(backend.changes())
    with pytest.raises(XpuError) as e:
        run_pod(socket, svc, b, pod_resources=pod_resources)
    assert str(e.value) == message
    assert "\n" not in str(e.value)
    assert (b / "config.json").read_text() == text
    assert svc.op_list() == before
    assert len(backend.changes()) == changes
    assert sorted(os.listdir(b)) == ["config.json"]


def test_the_kubernetes_annotations_and_hooks_are_read():
    assert oci.kubernetes({"annotations": CRI})
    assert oci.kubernetes({"annotations": CRIO})
    assert not oci.kubernetes(CONFIG)
    assert not oci.kubernetes({"annotations": None})
    assert oci.bound_slices(oci.apply_edits(CONFIG, EDITS, lstat=uvm_stat)) \
        == ["train"]
    assert oci.bound_slices(CONFIG) == []
    assert oci.devices({"linux": {"devices": [
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0},
        {"path": "/dev/x", "type": "c", "major": "195", "minor": 0},
        "junk"]}}) == [("/dev/nvidia0", "c", 195, 0)]


@pytest.mark.parametrize("annotations, kubernetes", [
    (CRI, False), (CRIO, False), ({}, True)])
@pytest.mark.parametrize("env", [
    ["XPU_MEMORY=8GiB"],
    ["XPU_MEMORY=1GiB", "XPU_COMPUTE=50", "XPU_GPU=1", "XPU_PRIORITY=high",
     "XPU_HOST_MEMORY=1GiB"]])
def test_a_pod_asking_a_new_slice_by_its_env_is_refused(
        xpud, tmp_path, backend, env, annotations, kubernetes):
    socket, svc = xpud
    b = pod_bundle(tmp_path, env, annotations=annotations)
    text = (b / "config.json").read_text()
    with pytest.raises(XpuError) as e:
        run_pod(socket, svc, b, kubernetes=kubernetes)
    assert str(e.value) == (
        "XPU_MEMORY asks for a new slice, which a Kubernetes pod gets by "
        "asking for xpu.dev/xpu-memory (and xpu.dev/xpu-shares) in its "
        "resources, not by its environment (the container is not started)")
    # no create reached xpud, and nothing was left
    assert not [c for c in backend.calls if c[0] == "create_slice"]
    assert svc.op_list() == [] and backend.slices == {}
    assert (b / "config.json").read_text() == text
    assert sorted(os.listdir(b)) == ["config.json"]


def test_a_pod_naming_another_pods_slice_by_its_env_is_refused(
        xpud, tmp_path, backend):
    """Device specs only (a kubelet without CDI): the pod holds its own
    slice's nodes, on GPU 0, and names a slice on GPU 1."""
    socket, svc = xpud
    svc.op_create(name="k8s-mine", gpu=0, memory_limit_bytes=GIB)
    svc.op_create(name="k8s-theirs", gpu=1, memory_limit_bytes=8 * GIB)
    env = plugin_env(svc, "k8s-mine") + ["XPU_SLICE=k8s-theirs"]
    b = pod_bundle(tmp_path, env, plugin_devices(svc, "k8s-mine"))
    refused(socket, svc, backend, b, (
        "XPU_SLICE=k8s-theirs names a slice whose devices this Kubernetes "
        "container was not given (/dev/xpu1 is 195:1; its GPU devices: "
        "/dev/nvidia0 (195:0), /dev/nvidiactl (195:255)): a pod's slice "
        "comes from its resources (xpu.dev/xpu-memory, xpu.dev/slice) or its "
        "resource claims, not from its environment (the container is not "
        "started)"))
    assert [c for c in backend.changes()
            if c[0] not in ("create_slice", "make_nodes", "set_gpu")] == []
    # A pod with no xpu device at all is refused the same way.
    b = pod_bundle(tmp_path, ["XPU_SLICE=k8s-theirs"])
    with pytest.raises(XpuError) as e:
        run_pod(socket, svc, b)
    assert "(/dev/xpu1 is 195:1; its GPU devices: none)" in str(e.value)


def test_a_pod_naming_another_slice_than_its_cdi_device_is_refused(
        xpud, tmp_path, backend):
    """With CDI: the two slices on one GPU have nodes of the same numbers,
    and the hook of the pod's CDI device names its own."""
    socket, svc = xpud
    svc.op_create(name="k8s-mine", gpu=0, memory_limit_bytes=GIB)
    svc.op_create(name="k8s-theirs", gpu=0, memory_limit_bytes=8 * GIB)
    b = pod_bundle(tmp_path, ["XPU_SLICE=k8s-theirs"],
                   plugin_devices(svc, "k8s-mine"), cdi="k8s-mine",
                   socket=socket)
    refused(socket, svc, backend, b, (
        "XPU_SLICE=k8s-theirs names another slice than the one Kubernetes "
        "gave this container, k8s-mine (its CDI device): a pod's slice comes "
        "from its resources (xpu.dev/xpu-memory, xpu.dev/slice) or its "
        "resource claims, not from its environment (the container is not "
        "started)"))


def test_a_pod_joins_the_slice_its_cdi_device_binds(xpud, tmp_path,
                                                    backend):
    """The CDI device's hook decides: kubelet's pod resources API is not
    asked (there is none here).  Without CDI, kubelet says: below."""
    socket, svc = xpud
    svc.op_create(name="k8s-mine", gpu=1, memory_limit_bytes=GIB)
    svc.op_create(name="k8s-other", gpu=1, memory_limit_bytes=GIB)
    b = pod_bundle(tmp_path, plugin_env(svc, "k8s-mine"),
                   plugin_devices(svc, "k8s-mine"), cdi="k8s-mine",
                   socket=socket)
    run_pod(socket, svc, b)
    cfg = json.loads((b / "config.json").read_text())
    assert "XPU_SLICE=k8s-mine" in cfg["process"]["env"]
    assert sorted((d["path"], d["major"], d["minor"])
                  for d in cfg["linux"]["devices"]) == [
        ("/dev/nvidia1", 195, 1), ("/dev/nvidiactl", 195, 255)]
    [h] = cfg["hooks"]["createRuntime"]
    assert h["args"][-2:] == ["bind", "k8s-mine"]
    assert [s["name"] for s in svc.op_list()] == ["k8s-mine", "k8s-other"]


def test_a_pod_with_devices_and_no_xpu_variable_passes_untouched(
        xpud, tmp_path, backend):
    socket, svc = xpud
    svc.op_create(name="k8s-mine", gpu=0, memory_limit_bytes=GIB)
    b = pod_bundle(tmp_path, [], plugin_devices(svc, "k8s-mine"))
    text = (b / "config.json").read_text()
    run_pod(socket, svc, b)
    assert (b / "config.json").read_text() == text


# -- without CDI: the slice kubelet's pod resources API says the container holds

MEMORY, SLICE = "xpu.dev/xpu-memory", "xpu.dev/slice"


def memory_ids(gpu, mib, first=0):
    """xpu.dev/xpu-memory device IDs of GPU (deviceplugin.py: m<GPU>-<n>),
    MIB of them from FIRST."""
    return [f"m{gpu}-{k}" for k in range(first, first + mib)]


@pytest.fixture
def pod_kubelet(sockdir):
    """The test kubelet (tests/testkubelet) serving pod resources List on a
    real socket: (its path, the kubelet)."""
    (sockdir / "device-plugins").mkdir()
    path = str(sockdir / "pod-resources.sock")
    k = Kubelet(str(sockdir / "device-plugins"), path)
    yield path, k
    k.close()


@pytest.fixture(params=["memory", "slice"])
def two_pods_one_gpu(request, xpud, pod_kubelet):
    """Two slices on GPU 0, whose nodes have the same numbers: pod
    team-a/train-0's container main holds the first, team-b/infer-0's the
    other, as kubelet's pod resources say: the device plugin's slices of
    their xpu.dev/xpu-memory devices, or whole slices (xpu.dev/slice).
    (mine, theirs)."""
    _, svc = xpud
    _, k = pod_kubelet
    if request.param == "memory":
        ids = memory_ids(0, 1024), memory_ids(0, 1024, 1024)
        mine, theirs = (resources.dp_slice(i) for i in ids)
        held = [{MEMORY: i, "xpu.dev/xpu-shares": ["c0-0"]} for i in ids]
    else:
        mine, theirs = "train", "infer"
        held = [{SLICE: [mine]}, {SLICE: [theirs]}]
    svc.op_create(name=mine, gpu=0, memory_limit_bytes=GIB)
    svc.op_create(name=theirs, gpu=0, memory_limit_bytes=GIB)
    k.record("team-a", "train-0", {"main": held[0], "sidecar": {}})
    k.record("team-b", "infer-0", {"main": held[1]})
    # the premise: the devices cannot tell the two apart
    assert plugin_devices(svc, mine) == plugin_devices(svc, theirs)
    return mine, theirs


@pytest.mark.parametrize("annotations", [CRI, CRIO], ids=["containerd",
                                                          "cri-o"])
def test_a_pod_naming_another_slice_of_its_gpu_without_cdi_is_refused(
        xpud, tmp_path, backend, pod_kubelet, two_pods_one_gpu, annotations):
    """Device specs only: the pod holds its own slice's nodes, which are
    numbered as the other slice's on the same GPU; kubelet says which is
    its."""
    socket, svc = xpud
    mine, theirs = two_pods_one_gpu
    env = plugin_env(svc, mine) + [f"XPU_SLICE={theirs}"]
    b = pod_bundle(tmp_path, env, plugin_devices(svc, mine),
                   annotations=annotations)
    refused(socket, svc, backend, b, pod_resources=pod_kubelet[0], message=(
        f"XPU_SLICE={theirs} names another slice than the one Kubernetes "
        f"gave team-a/train-0 container main, {mine} (kubelet's pod "
        "resources): a pod's slice comes from its resources "
        "(xpu.dev/xpu-memory, xpu.dev/slice) or its resource claims, not "
        "from its environment (the container is not started)"))


@pytest.mark.parametrize("annotations", [CRI, CRIO], ids=["containerd",
                                                          "cri-o"])
def test_a_pod_joins_its_own_slice_as_kubelet_says(
        xpud, tmp_path, backend, pod_kubelet, two_pods_one_gpu, annotations):
    socket, svc = xpud
    mine, theirs = two_pods_one_gpu
    b = pod_bundle(tmp_path, plugin_env(svc, mine),
                   plugin_devices(svc, mine), annotations=annotations)
    run_pod(socket, svc, b, pod_resources=pod_kubelet[0])
    cfg = json.loads((b / "config.json").read_text())
    assert f"XPU_SLICE={mine}" in cfg["process"]["env"]
    assert sorted((d["path"], d["major"], d["minor"])
                  for d in cfg["linux"]["devices"]) == [
        ("/dev/nvidia0", 195, 0), ("/dev/nvidiactl", 195, 255)]
    [h] = cfg["hooks"]["createRuntime"]
    assert h["args"][-2:] == ["bind", mine]
    assert sorted(s["name"] for s in svc.op_list()) == sorted([mine, theirs])


class Silent(pr_grpc.PodResourcesListerServicer):
    """A kubelet that takes List and does not answer until released."""

    def __init__(self):
        self.release = threading.Event()

    def List(self, request, context):
        self.release.wait()
        context.abort(grpc.StatusCode.UNAVAILABLE, "released")


class Failing(pr_grpc.PodResourcesListerServicer):
    def List(self, request, context):
        context.abort(grpc.StatusCode.UNAVAILABLE,
                      "kubelet is shutting down\nnow")


@pytest.fixture
def broken_kubelet(sockdir, monkeypatch):
    """make(kind) -> the path of a pod resources socket that cannot answer:
    none, a plain file, a socket nobody listens on, a kubelet that fails
    List, or one that never answers (the runtime's wait cut to 0.5 s)."""
    path = str(sockdir / "broken.sock")
    servers = []

    def make(kind):
        if kind == "file":
            Path(path).write_text("")
        elif kind == "dead":
            s = socketlib.socket(socketlib.AF_UNIX)
            s.bind(path)
            s.close()
        elif kind in ("failing", "silent"):
            servicer = Failing() if kind == "failing" else Silent()
            srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            pr_grpc.add_PodResourcesListerServicer_to_server(servicer, srv)
            srv.add_insecure_port(f"unix://{path}")
            srv.start()
            servers.append((srv, servicer))
            monkeypatch.setattr(runtime, "POD_RESOURCES_TIMEOUT_S", 0.5)
        return path

    yield make
    for srv, servicer in servers:
        if isinstance(servicer, Silent):
            servicer.release.set()
        srv.stop(0).wait()


@pytest.mark.parametrize("kind, why", [
    ("none", ("{path}: No such file or directory ([container_runtime] "
              "pod_resources)")),
    ("file", "{path} is not a socket ([container_runtime] pod_resources)"),
    ("dead", "kubelet's pod resources API ({path}): failed to connect"),
    ("failing", ("kubelet's pod resources API ({path}): kubelet is "
                 "shutting down now")),
    ("silent", "kubelet's pod resources API ({path}): Deadline Exceeded"),
])
def test_a_pod_is_refused_when_kubelet_cannot_be_asked(
        xpud, tmp_path, backend, two_pods_one_gpu, broken_kubelet, kind,
        why):
    socket, svc = xpud
    mine, _ = two_pods_one_gpu
    path = broken_kubelet(kind)
    b = pod_bundle(tmp_path, plugin_env(svc, mine),
                   plugin_devices(svc, mine))
    text = (b / "config.json").read_text()
    with pytest.raises(XpuError) as e:
        run_pod(socket, svc, b, pod_resources=path)
    head = (f"XPU_SLICE={mine}: cannot ask kubelet which slice "
            f"team-a/train-0 container main holds: ")
    assert str(e.value).startswith(head + why.format(path=path)), \
        str(e.value)
    assert str(e.value).endswith(" (the container is not started)")
    assert "\n" not in str(e.value)
    assert (b / "config.json").read_text() == text
    assert sorted(os.listdir(b)) == ["config.json"]


@pytest.mark.parametrize("who", [
    {"io.kubernetes.cri.container-name": "init"},
    {"io.kubernetes.cri.sandbox-name": "train-1"},
    {"io.kubernetes.cri.sandbox-namespace": "team-c"},
])
def test_a_pod_container_kubelet_does_not_list_is_refused(
        xpud, tmp_path, backend, pod_kubelet, two_pods_one_gpu, who):
    socket, svc = xpud
    mine, _ = two_pods_one_gpu
    b = pod_bundle(tmp_path, plugin_env(svc, mine),
                   plugin_devices(svc, mine), annotations={**CRI, **who})
    ns, pod, ctr = (who.get(f"io.kubernetes.cri.{k}", CRI[
        f"io.kubernetes.cri.{k}"]) for k in ("sandbox-namespace",
                                             "sandbox-name",
                                             "container-name"))
    refused(socket, svc, backend, b, pod_resources=pod_kubelet[0], message=(
        f"XPU_SLICE={mine}: kubelet's pod resources API lists no "
        f"{ns}/{pod} container {ctr}, so no slice is known to be its: a "
        "pod's slice comes from its resources (xpu.dev/xpu-memory, "
        "xpu.dev/slice) or its resource claims, not from its environment "
        "(the container is not started)"))


def test_a_pod_cannot_name_another_pods_container_by_its_annotations(
        xpud, tmp_path, backend, pod_kubelet, two_pods_one_gpu):
    """CRI-O copies a pod's own annotations into config.json, before
    kubelet's labels: a pod can write containerd's keys naming another
    pod's container, never CRI-O's over kubelet's."""
    socket, svc = xpud
    mine, theirs = two_pods_one_gpu
    forged = {"io.kubernetes.cri.sandbox-namespace": "team-b",
              "io.kubernetes.cri.sandbox-name": "infer-0",
              "io.kubernetes.cri.container-name": "main"}
    b = pod_bundle(tmp_path, [f"XPU_SLICE={theirs}"],
                   plugin_devices(svc, mine), annotations={**CRIO, **forged})
    refused(socket, svc, backend, b, pod_resources=pod_kubelet[0], message=(
        f"XPU_SLICE={theirs}: this Kubernetes container's annotations name "
        "two containers, team-b/infer-0 container main and team-a/train-0 "
        "container main: a pod's slice comes from its resources "
        "(xpu.dev/xpu-memory, xpu.dev/slice) or its resource claims, not "
        "from its environment (the container is not started)"))
    # Without the names of its pod and container, kubelet cannot be asked.
    bare = {k: v for k, v in CRI.items()
            if k.endswith(("container-type", "sandbox-id"))}
    b = pod_bundle(tmp_path, [f"XPU_SLICE={mine}"],
                   plugin_devices(svc, mine), annotations=bare)
    refused(socket, svc, backend, b, pod_resources=pod_kubelet[0], message=(
        f"XPU_SLICE={mine}: this Kubernetes container's CRI did not "
        "annotate its pod's namespace and name and its own name "
        "(containerd's io.kubernetes.cri.sandbox-namespace, sandbox-name "
        "and container-name; CRI-O's io.kubernetes.pod.namespace, "
        "io.kubernetes.pod.name and io.kubernetes.container.name), by which "
        "kubelet says which slice it holds (the container is not started)"))


@pytest.mark.parametrize("env", [["XPU_MEMORY=512MiB"], ["XPU_SLICE=train"]])
def test_a_container_of_no_pod_asks_by_its_env_as_before(xpud, tmp_path,
                                                         backend, env):
    """podman's, Docker's: no CRI annotations, no device, kubernetes
    false."""
    socket, svc = xpud
    svc.op_create(name="train", gpu=1, memory_limit_bytes=GIB)
    b = pod_bundle(tmp_path, env, annotations={"a": "b"})
    run_pod(socket, svc, b)
    cfg = json.loads((b / "config.json").read_text())
    [h] = cfg["hooks"]["createRuntime"]
    assert h["args"][-1] == env[0].replace("XPU_MEMORY=512MiB",
                                           "ctr-0123456789ab") \
        .replace("XPU_SLICE=", "")


def fake_runtime(tmp_path):
    """A "crun" that records its command line and config.json."""
    real = tmp_path / "crun"
    out = tmp_path / "crun.out"
    real.write_text("#!/bin/sh\n"
                    f"echo \"$@\" > {out}\n"
                    "for a; do b=$a; done\n"
                    f"cat config.json >> {out} 2>/dev/null\n"
                    "exit 7\n")
    real.chmod(0o755)
    return real, out


def run_program(tmp_path, argv, socket, cwd, stdin=None):
    real, out = fake_runtime(tmp_path)
    cfg = tmp_path / "xpud.toml"
    cfg.write_text(f'[container_runtime]\noci_runtime = "{real}"\n'
                   f'socket = "{socket}"\n')
    env = dict(os.environ, XPU_CONFIG=str(cfg))
    r = subprocess.run([sys.executable, "-m", "xpu.cdi.runtime", *argv],
                       cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=60, check=False, input=stdin)
    return r, out


def test_the_program_passes_everything_else_through(xpud, tmp_path):
    socket, svc = xpud
    b = bundle(tmp_path, [])
    text = (b / "config.json").read_bytes()
    r, out = run_program(tmp_path, ["--log", str(tmp_path / "log"), "create",
                                    "--bundle", ".", "c1"], socket, b)
    # exec'd: the real runtime's status and arguments, config.json as it was
    assert (r.returncode, r.stderr) == (7, "")
    assert out.read_text().splitlines()[0] == \
        f"--log {tmp_path / 'log'} create --bundle . c1"
    assert (b / "config.json").read_bytes() == text
    for argv in (["--version"], ["state", "c1"], ["kill", "c1", "9"]):
        r, out = run_program(tmp_path, argv, socket, b)
        assert r.returncode == 7
        assert out.read_text().splitlines()[0] == " ".join(argv)
    assert svc.op_list() == []


def test_the_program_refuses_a_bad_value_in_one_line(xpud, tmp_path):
    socket, svc = xpud
    b = bundle(tmp_path, ["XPU_MEMORY=512MB"])
    log = tmp_path / "log.json"
    r, out = run_program(tmp_path, ["--log", str(log), "--log-format", "json",
                                    "create", "--bundle", str(b), "c2"],
                         socket, tmp_path)
    assert r.returncode == 1
    assert r.stderr == (
        "xpu-container-runtime: error: XPU_MEMORY=512MB: '512MB' is "
        "ambiguous (MB may mean powers of 1000 or of 1024): write 512MiB "
        "for binary units, or the number of bytes (the container is not "
        "started)\n")
    assert not out.exists()       # the real runtime never ran
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["level"] == "error"
    assert entry["msg"] == r.stderr.split(": error: ", 1)[1].strip()
    assert svc.op_list() == []


def test_the_program_refuses_a_pod_in_one_line(xpud, tmp_path):
    socket, svc = xpud
    b = pod_bundle(tmp_path, ["XPU_MEMORY=8GiB"])
    log = tmp_path / "log"
    r, out = run_program(tmp_path, ["--log", str(log), "create", "--bundle",
                                    str(b), "c3"], socket, tmp_path)
    assert r.returncode == 1
    assert r.stderr == ("xpu-container-runtime: error: XPU_MEMORY asks for a "
                        "new slice, which a Kubernetes pod gets by asking "
                        "for xpu.dev/xpu-memory (and xpu.dev/xpu-shares) in "
                        "its resources, not by its environment (the "
                        "container is not started)\n")
    assert log.read_text() == r.stderr
    assert not out.exists()       # the real runtime never ran
    assert svc.op_list() == []


@pytest.mark.parametrize("key, value, what", [
    ("kubernetes", '"yes"', "'yes' is not true or false"),
    ("kubernetes", "1", "1 is not true or false"),
    ("pod_resources", '"kubelet.sock"', "'kubelet.sock' is not an absolute path"),
    ("pod_resources", "1", "1 is not a string: write it in quotes")])
def test_the_program_refuses_a_bad_runtime_setting(tmp_path, key, value,
                                                   what):
    real, out = fake_runtime(tmp_path)
    cfg = tmp_path / "xpud.toml"
    cfg.write_text(f'[container_runtime]\noci_runtime = "{real}"\n'
                   f"{key} = {value}\n")
    r = subprocess.run([sys.executable, "-m", "xpu.cdi.runtime", "create",
                        "c4"], cwd=tmp_path,
                       env=dict(os.environ, XPU_CONFIG=str(cfg)),
                       capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 1
    assert r.stderr == (f"xpu-container-runtime: error: {cfg}:3: "
                        f"container_runtime.{key}: {what}\n")
    assert not out.exists()


def test_the_program_says_what_it_is():
    r = subprocess.run([sys.executable, "-m", "xpu.cdi.runtime", "--help"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0
    assert r.stdout.startswith("usage: xpu-container-runtime ")


# -- the hook ------------------------------------------------------------------------

def test_the_hook_reads_the_pid_and_its_cgroup(tmp_path):
    assert hook.container_pid('{"ociVersion": "1.0", "pid": 42}') == 42
    for text, what in (("{", "is not JSON"), ('{"pid": 0}', "has no pid (0)"),
                       ("[]", "has no pid (None)"),
                       ('{"pid": true}', "has no pid (True)")):
        with pytest.raises(XpuError) as e:
            hook.container_pid(text)
        assert what in str(e.value)
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text(
        "0::/libpod_parent/libpod-abc\n")
    assert hook.cgroup_of(42, str(proc)) == "/libpod_parent/libpod-abc"
    (proc / "42" / "cgroup").write_text("12:memory:/docker/abc\n")
    with pytest.raises(XpuError) as e:
        hook.cgroup_of(42, str(proc))
    assert "no cgroup v2 path" in str(e.value)
    (proc / "42" / "cgroup").write_text("0::/\n")
    with pytest.raises(XpuError) as e:
        hook.cgroup_of(42, str(proc))
    assert "root cgroup" in str(e.value)
    with pytest.raises(XpuError) as e:
        hook.cgroup_of(43, str(proc))
    assert "cannot read the cgroup of the container's process 43" in \
        str(e.value)


def test_the_hook_binds_transiently(xpud, monkeypatch, cgroup_root):
    socket, svc = xpud
    svc.op_create(name="train", gpu=0, memory_limit_bytes=GIB)
    monkeypatch.setattr(hook, "cgroup_of", lambda pid: "/jobs/a")
    assert hook.bind(socket, "train", '{"pid": 1234}') == "/jobs/a"
    s = svc.op_show(name="train")
    assert (s["cgroups"], s["transient_cgroups"]) == ([], ["/jobs/a"])


def test_the_hook_program_fails_in_one_line(sockdir):
    r = subprocess.run(
        [sys.executable, "-m", "xpu.cdi.hook", "--socket",
         str(sockdir / "none.sock"), "bind", "train"],
        input='{"pid": 0}', capture_output=True, text=True, check=False)
    assert r.returncode == 1
    assert r.stderr == ("xpu-cdi-hook: error: the container's state has no "
                        "pid (0): run xpu-cdi-hook as a createRuntime hook, "
                        "which gets the container's host pid\n")



def test_the_hook_without_xpud(sockdir, monkeypatch, capsys):
    monkeypatch.setattr(hook, "cgroup_of", lambda pid: "/jobs/a")
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"pid": 99}'))
    assert hook.main(["--socket", str(sockdir / "none.sock"), "bind",
                      "train"]) == 3
    err = capsys.readouterr().err
    assert err == (f"xpu-cdi-hook: error: cannot reach xpud at {sockdir}/"
                   "none.sock: no such socket; is xpud running? (systemctl "
                   "status xpud)\n")


# -- xpuctl's commands for containers --------------------------------------------------

def xpuctl(socket, capsys, *argv):
    from xpu import cli
    status = cli.main(["--socket", socket, *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_xpuctl_show_cdi_and_release(xpud, capsys, cgroup_root):
    from xpu.cdi import simpleyaml
    socket, svc = xpud
    svc.op_create(name="ctr-1", gpu=0, memory_limit_bytes=GIB, owner="abc")
    (cgroup_root / "jobs" / "a" / "cgroup.events").write_text("populated 1\n")
    svc.op_bind(name="ctr-1", cgroup="/jobs/a", transient=True)
    status, out, err = xpuctl(socket, capsys, "show", "ctr-1")
    assert (status, err) == (0, "")
    assert "containers:  /jobs/a" in out.splitlines()
    assert "owner:       abc" in out.splitlines()
    status, out, _ = xpuctl(socket, capsys, "cdi", "spec")
    doc = json.loads(out)
    assert [d["name"] for d in doc["devices"]] == ["ctr-1"]
    status, out, _ = xpuctl(socket, capsys, "cdi", "spec", "-o", "yaml")
    assert status == 0 and simpleyaml.load(out) == doc
    status, out, _ = xpuctl(socket, capsys, "cdi", "refresh")
    assert (status, out) == (0, ("no spec written (1 device: xpud writes none "
                                "while no slice is ready, or when [cdi] "
                                "spec_dir is empty)\n"))
    assert xpuctl(socket, capsys, "release", "abc")[:2] == (
        0, "destroyed slice 'ctr-1'\n")
    assert xpuctl(socket, capsys, "release", "abc")[:2] == (
        0, "no ephemeral slice of 'abc'\n")
