# SPDX-License-Identifier: Apache-2.0
"""Containers in slices (issue 20, docs/containers.md): Debian 12's podman
4.3.1 and crun on xpu.ko and the simulated driver.

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests/test_containers.py

- a CDI device `xpu.dev/slice=NAME` puts a container's GPU client in the
  slice: it sees the slice's size as the GPU's, is refused past it with the
  driver's NV_ERR_NO_MEMORY, is counted in the slice's processes, and its
  own pid namespace does not weaken the limit (stub at 580 and at 535);
- the device cgroup lets it open the slice's nodes and nothing else of
  major 195;
- `--runtime xpu-container-runtime -e XPU_MEMORY=512MiB` gets a fresh
  slice that is gone when the container ends (also after `podman kill`);
  a bad value, or no xpud, fails the start in one line, leaving nothing;
- the spec validates against the CDI schema, loads in podman 4.3.1, and is
  rewritten on create, resize, destroy and xpud's restart;
- NVIDIA's nvidia-smi 535, its libraries lent by NVIDIA's own CDI spec,
  reports a 1 GiB slice as 1024 MiB inside a container.

The image is made here, with no registry: a rootfs of a few directories
and links (/bin -> usr/bin, ...) imported with `podman import`; the
containers bind the host's /usr (Python, the shell) and the repository
read-only.  Podman's storage is a tmpfs of this module's own.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import nvtest
import pytest
import xpudtest
from nvclient import abi
from xpudtest import MIB, WAIT, Xpud, ask, finish, kernel_slices

sys.path.insert(0, str(xpudtest.TOP / "tests" / "tools"))
import cdischema

TOP = xpudtest.TOP
IMAGE = "localhost/xpu-test"
SPEC = Path("/var/run/cdi/xpu.json")
NVIDIA_SPEC = Path("/var/run/cdi/nvidia.json")
CLIENT = str(TOP / "tests" / "vmtests" / "slice_client.py")
HOOK = str(Path(sys.executable).parent / "xpu-cdi-hook")
RUNTIME = str(Path(sys.executable).parent / "xpu-container-runtime")
LIMIT = 64 * MIB
NV_MAJOR = 195
EPERM = "EPERM"

# NVIDIA's 535 user space, unpacked by tests/setup (test_nvidia_userspace.py)
NV535 = "535.309.01"
NV_ROOT = TOP / ".vm-cache" / "nvidia-535" / "root"
NV_LIBDIR = NV_ROOT / "usr/lib/x86_64-linux-gnu/nvidia/current"
NV_SMI = NV_ROOT / "usr/lib/nvidia/current/nvidia-smi"

for tool in ("podman", "crun"):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (tests/setup installs it)",
                    allow_module_level=True)


def missing_kernel_features() -> list[str]:
    """What podman and crun need of the kernel that this one lacks (the
    debug tier's kernel starts from virtme-ng's minimal configuration)."""
    missing = []
    subprocess.run(["modprobe", "-q", "overlay"], check=False)
    with open("/proc/filesystems") as f:
        if "overlay" not in f.read().split():
            missing.append("overlayfs")
    for ns in ("user", "pid", "net", "ipc", "uts", "cgroup", "mnt"):
        if not os.path.exists(f"/proc/self/ns/{ns}"):
            missing.append(f"{ns} namespaces")
    with open("/proc/kallsyms") as f:   # crun's device cgroup on cgroup v2
        if not any(line.rstrip().endswith(" __cgroup_bpf_check_dev_permission")
                   for line in f):
            missing.append("BPF device cgroups (CONFIG_CGROUP_BPF)")
    return missing


@pytest.fixture(scope="module", autouse=True)
def _require_xpu():
    xpudtest.require_slice_interface()
    missing = missing_kernel_features()
    if missing:
        pytest.skip("this kernel lacks what podman and crun need: "
                    + ", ".join(missing))


# -- podman, its storage and the image ---------------------------------------------

class Podman:
    """podman with storage of its own under ROOT, cgroupfs (the guest has
    no systemd) and no network."""

    def __init__(self, root: Path):
        self.base = ["podman", "--root", str(root / "storage"),
                     "--runroot", str(root / "run"), "--tmpdir",
                     str(root / "libpod"), "--cgroup-manager", "cgroupfs",
                     "--events-backend", "file"]

    def __call__(self, *args, timeout=WAIT, input=None):
        return subprocess.run(self.base + list(args), capture_output=True,
                              text=True, timeout=timeout, check=False,
                              input=input)

    def popen(self, *args):
        return subprocess.Popen(self.base + list(args), text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def run_args(self, *options, usr="ro"):
        """`run` of IMAGE with the host's /usr and the repository."""
        return ["run", "--rm", "--network", "none", "-v", f"/usr:/usr:{usr}",
                "-v", f"{TOP}:{TOP}:ro", *options, IMAGE]


def rootfs_tar() -> bytes:
    """A root filesystem of directories and usrmerge links, as a tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, kind=tarfile.DIRTYPE, target="", data=b""):
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, target, len(data)
            info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
            tar.addfile(info, io.BytesIO(data) if data else None)
        for d in ("usr", "etc", "tmp", "proc", "sys", "dev", "run", "root",
                  "var", "var/tmp"):
            add(d)
        for link in ("bin", "lib", "lib64", "sbin"):
            add(link, tarfile.SYMTYPE, f"usr/{link}")
        add("etc/passwd", tarfile.REGTYPE,
            data=b"root:x:0:0:root:/root:/bin/sh\n")
        add("etc/group", tarfile.REGTYPE, data=b"root:x:0:\n")
    return buf.getvalue()


@pytest.fixture(scope="module")
def podman():
    root = Path(tempfile.mkdtemp(prefix="xpu-podman-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs",
                    str(root)], check=True)
    p = Podman(root)
    try:
        tar = root / "rootfs.tar"
        tar.write_bytes(rootfs_tar())
        r = p("import", "-q", str(tar), IMAGE)
        assert r.returncode == 0, r.stderr
        yield p
    finally:
        p("rm", "-af")
        subprocess.run(["umount", "-R", "-l", str(root)], check=False)
        os.rmdir(root)


@pytest.fixture
def cleanup_containers(podman):
    """Removes every container (also on failure); callable earlier."""
    def rm():
        podman("rm", "-af")
    yield rm
    rm()


# -- xpud, the runtime --------------------------------------------------------------

@pytest.fixture(scope="module")
def shared_xpud(tmp_path_factory, podman):
    """One xpud for the module (a start costs seconds in this guest), with
    its own node directory, configuration, state and socket."""
    nodes = Path(tempfile.mkdtemp(prefix="xpud-nodes-", dir="/dev"))
    os.chmod(nodes, 0o755)
    xpudtest.destroy_all()
    x = Xpud(tmp_path_factory.mktemp("xpud"), nodes)
    x.config.write_text(
        f'[cdi]\nhook = "{HOOK}"\n'
        f'[container_runtime]\nsocket = "{x.socket}"\n')
    x.start()
    yield x
    if x.proc.poll() is None:
        assert x.stop() == 0
    x.cleanup()
    xpudtest.destroy_all()
    shutil.rmtree(nodes, ignore_errors=True)


@pytest.fixture
def xpud(shared_xpud, cleanup_containers):
    """The module's xpud, running; afterwards no container, no slice, no
    spec (xpud removes it with the last ready slice)."""
    x = shared_xpud
    if x.proc.poll() is not None:
        x.start()
    start = x.log.stat().st_size
    yield x
    cleanup_containers()
    if x.proc.poll() is not None:
        x.start()
    for s in x.call("list"):
        if s["origin"] != "kernel":
            x.call("destroy", name=s["name"], force=True)
    with x.log.open() as f:
        f.seek(start)
        print(f"--- xpud's log ---\n{f.read()}")
    assert not SPEC.exists(), "no slice, and still a spec"


@pytest.fixture
def runtime(tmp_path, xpud):
    """xpu-container-runtime, pointed at this xpud's configuration."""
    w = tmp_path / "xpu-container-runtime"
    w.write_text(f"#!/bin/sh\nXPU_CONFIG={xpud.config} exec {RUNTIME} "
                 '"$@"\n')
    w.chmod(0o755)
    return str(w)


def create(x, name, memory, gpu=0):
    """A slice, through the API (xpuctl costs a Python start, seconds in
    this guest)."""
    return x.call("create", name=name, gpu=gpu, memory_limit_bytes=memory)


def wait_until(what, cond):
    deadline = time.monotonic() + WAIT
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)


def slice_names(x):
    return {s["name"] for s in x.call("list")}


# -- a CDI device --------------------------------------------------------------------

def client_in_a_container(podman, x, name, limit):
    """A GPU client in a container given slice NAME by CDI: what it sees,
    and the limit held exactly despite its pid namespace."""
    p = podman.popen(*podman.run_args("-i", "--device",
                                      f"xpu.dev/slice={name}"),
                     "python3", CLIENT)
    try:
        line = p.stdout.readline()
        assert line, f"the container failed ({p.wait()}): {p.stderr.read()}"
        seen = json.loads(line)
        assert seen["pid"] == 1              # its own pid namespace
        assert seen["heap_total"] == limit
        assert seen["fb_total_kib"] == limit >> 10
        assert ask(p, f"alloc {limit // 2}") == {"ok": True}
        s = x.call("show", name=name)
        assert s["processes"] >= 1
        assert s["memory_used_bytes"] == limit // 2
        assert ask(p, f"alloc {limit // 2 + MIB}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        assert ask(p, f"alloc {limit // 2}") == {"ok": True}
        assert ask(p, f"alloc {MIB}")["ok"] is False
        k = kernel_slices()[name]
        assert k.memory_used == limit
        assert x.call("show", name=name)["denied_allocs"] >= 2
    finally:
        assert finish(p, 3) == 3
    k = kernel_slices()[name]
    assert (k.memory_used, k.memory_peak) == (0, limit)
    return seen


def test_a_cdi_device_puts_the_container_in_the_slice(podman, xpud):
    s = create(xpud, "t-cdi", LIMIT)
    seen = client_in_a_container(podman, xpud, "t-cdi", LIMIT)
    # The slice's nodes at the standard names, no other GPU.
    assert seen["nodes"] == {"nvidia0": [NV_MAJOR, 0],
                             "nvidiactl": [NV_MAJOR, 255]}
    # The hook's binding went with the container.
    wait_until("the transient binding dropped", lambda: xpud.call(
        "show", name="t-cdi")["transient_cgroups"] == [])
    assert s["owner"] is None and "t-cdi" in kernel_slices()


# A UVM client in a container: UVM_INITIALIZE through /dev/nvidia-uvm, the
# node's numbers, then it waits for a line on stdin.
UVM_PROBE = f"""
import json, os, sys
sys.path.insert(0, {str(TOP / "tests")!r})
from nvclient.uvm import Uvm
st = os.stat("/dev/nvidia-uvm")
u = Uvm("580.126.20")
print(json.dumps({{"rdev": [os.major(st.st_rdev), os.minor(st.st_rdev)]}}),
      flush=True)
sys.stdin.readline()
u.close()
"""


def test_a_container_s_uvm_files_are_held_for_its_slice(uvm_nodes, podman,
                                                        xpud):
    """The container's /dev/nvidia-uvm is xpu.ko's UVM node (CDI), found in
    the slice by the container's cgroup: a working UVM file, held by xpu.ko
    for the slice while the container holds it and let go after, so that
    what UVM retains of the slice's channels stays charged to it (class
    39)."""
    create(xpud, "t-uvm", LIMIT)
    with open("/sys/class/misc/xpu-uvm/dev") as f:
        want = [int(n) for n in f.read().split(":")]
    p = podman.popen(*podman.run_args("-i", "--device", "xpu.dev/slice=t-uvm"),
                     "python3", "-c", UVM_PROBE)
    try:
        line = p.stdout.readline()
        assert line, f"the container failed ({p.wait()}): {p.stderr.read()}"
        assert json.loads(line) == {"rdev": want}
        assert kernel_slices()["t-uvm"].uvm_files == 1
    finally:
        p.stdin.write("\n")
        p.stdin.close()
        assert p.wait(timeout=WAIT) == 0, p.stderr.read()
    wait_until("xpu.ko to let go of the container's UVM file",
               lambda: kernel_slices()["t-uvm"].uvm_files == 0)


PROBE = """
import errno, json, os
out = {}
for minor in (0, 1, 254, 255):
    path = f"/tmp/n{minor}"
    os.mknod(path, 0o20600, os.makedev(195, minor))
    for name, p in ((f"195:{minor}", path),):
        try:
            os.close(os.open(p, os.O_RDWR))
            out[name] = "ok"
        except OSError as e:
            out[name] = errno.errorcode[e.errno]
for p in ("/dev/nvidiactl", "/dev/nvidia0"):
    try:
        os.close(os.open(p, os.O_RDWR))
        out[p] = "ok"
    except OSError as e:
        out[p] = errno.errorcode[e.errno]
print(json.dumps(out))
"""


def test_the_device_cgroup_admits_the_slices_nodes_only(podman, xpud):
    """With CAP_MKNOD the container can make any node of major 195; the
    device cgroup lets it open its slice's (GPU 0, the control node)
    only."""
    create(xpud, "t-dev", LIMIT)
    r = podman(*podman.run_args("--cap-add", "MKNOD", "--device",
                                "xpu.dev/slice=t-dev"),
               "python3", "-c", PROBE)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "195:0": "ok", "195:255": "ok", "195:1": EPERM, "195:254": EPERM,
        "/dev/nvidiactl": "ok", "/dev/nvidia0": "ok"}


# -- the spec ---------------------------------------------------------------------------

def test_the_spec_validates_and_follows_every_change(xpud):
    assert not SPEC.exists()              # no ready slice: no spec
    create(xpud, "t-a", LIMIT)
    doc = json.loads(SPEC.read_text())
    v = cdischema.validator()
    if v is not None:
        assert cdischema.errors(v, doc) == []
    assert doc["cdiVersion"] == "0.5.0"
    assert [d["name"] for d in doc["devices"]] == ["t-a"]
    assert doc == xpud.call("cdi_spec")
    create(xpud, "t-b", LIMIT, gpu=1)
    assert [d["name"] for d in json.loads(SPEC.read_text())["devices"]] == \
        ["t-a", "t-b"]
    # A resize changes no field, and the file is written again.
    ino = SPEC.stat().st_ino
    xpud.call("set", name="t-a", memory_limit_bytes=2 * LIMIT)
    assert SPEC.stat().st_ino != ino
    xpud.call("destroy", name="t-b")
    assert [d["name"] for d in json.loads(SPEC.read_text())["devices"]] == \
        ["t-a"]
    # A clean stop removes it, a start writes it again.
    before = SPEC.read_text()
    assert xpud.stop() == 0
    assert not SPEC.exists()
    xpud.start()
    # xpud serves first, then writes the spec, then says it is ready
    assert nvtest.wait_for(SPEC.exists, WAIT, "the spec after a start")
    assert SPEC.read_text() == before
    r = xpud.xpuctl("cdi", "spec", "-o", "yaml")
    assert r.returncode == 0, r.stderr
    assert "kind: xpu.dev/slice\n" in r.stdout and "- name: t-a\n" in r.stdout
    xpud.call("destroy", name="t-a")
    assert not SPEC.exists()
    if v is None:
        pytest.skip("the spec follows; not validated: "
                    + cdischema.missing_reason())


# -- the runtime -------------------------------------------------------------------------

def test_the_runtime_gives_a_fresh_slice_that_goes_with_the_container(
        podman, xpud, runtime):
    limit = 512 * MIB
    before = slice_names(xpud)
    p = podman.popen(*podman.run_args("-i", "--runtime", runtime, "-e",
                                      "XPU_MEMORY=512MiB", "-e",
                                      "XPU_HOST_MEMORY=1GiB"),
                     "python3", CLIENT)
    try:
        line = p.stdout.readline()
        assert line, f"the container failed ({p.wait()}): {p.stderr.read()}"
        seen = json.loads(line)
        [s] = [s for s in xpud.call("list") if s["name"] not in before]
        assert s["name"].startswith("ctr-") and s["owner"]
        assert s["memory_limit_bytes"] == limit
        assert s["host_memory_limit_bytes"] == 1 << 30
        assert kernel_slices()[s["name"]].host_memory_limit == 1 << 30
        assert seen["heap_total"] == limit
        assert ask(p, f"alloc {limit}") == {"ok": True}
        assert ask(p, f"alloc {MIB}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        s = xpud.call("show", name=s["name"])
        assert s["processes"] >= 1 and s["memory_used_bytes"] == limit
    finally:
        assert finish(p) == 0
    wait_until("the slice gone", lambda: slice_names(xpud) == before)
    assert s["name"] not in kernel_slices()


def test_podman_kill_leaves_no_slice(podman, xpud, runtime):
    r = podman("run", "-d", "--network", "none", "-v", "/usr:/usr:ro",
               "--runtime", runtime, "-e", "XPU_MEMORY=256MiB", IMAGE,
               "sleep", "600")
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    name = f"ctr-{cid[:12]}"
    assert name in kernel_slices()
    assert xpud.call("show", name=name)["transient_cgroups"]
    r = podman("kill", cid)
    assert r.returncode == 0, r.stderr
    wait_until("the killed container's slice gone",
               lambda: name not in slice_names(xpud))
    assert name not in kernel_slices()


def test_a_bad_value_or_no_xpud_fails_the_start_and_leaves_nothing(
        podman, xpud, runtime, tmp_path):
    create(xpud, "t-keep", LIMIT)
    spec = SPEC.read_text()
    r = podman(*podman.run_args("--runtime", runtime, "-e",
                                "XPU_MEMORY=512MB"), "true")
    assert r.returncode != 0
    [line] = [ln for ln in r.stderr.splitlines() if "XPU_MEMORY" in ln]
    assert ("xpu-container-runtime: error: XPU_MEMORY=512MB: '512MB' is "
            "ambiguous (MB may mean powers of 1000 or of 1024): write "
            "512MiB") in line
    assert set(kernel_slices()) == {"t-keep"}
    assert slice_names(xpud) == {"t-keep"}
    assert SPEC.read_text() == spec
    assert podman("ps", "-aq").stdout.strip() == ""
    # Without xpud (killed: its spec stays), neither way starts the
    # container's program.
    xpud.kill()
    out = tmp_path / "ran"
    out.mkdir()
    r = podman(*podman.run_args("-v", f"{out}:/out", "--runtime", runtime,
                                "-e", "XPU_MEMORY=512MiB"),
               "touch", "/out/runtime")
    assert r.returncode != 0
    assert "cannot reach xpud" in r.stderr, r.stderr
    r = podman(*podman.run_args("-v", f"{out}:/out", "--device",
                                "xpu.dev/slice=t-keep"),
               "touch", "/out/cdi")
    assert r.returncode != 0
    assert "hook" in r.stderr, r.stderr
    assert os.listdir(out) == []
    assert set(kernel_slices()) == {"t-keep"}


# -- at 535, with NVIDIA's user space -----------------------------------------------------

@pytest.fixture(scope="module")
def stub_535(shared_xpud):
    """The stub reloaded as 535.309.01 (NVIDIA's user space's version),
    xpu.ko on top; the rig's modules back afterwards.  xpud is stopped
    across each reload (xpu.ko goes away under it)."""
    if not os.environ.get("XPU_NVSTUB_KO"):
        pytest.skip("XPU_NVSTUB_KO is not set: run under tests/vm/run")

    def stopped(change):
        if shared_xpud.proc.poll() is None:
            assert shared_xpud.stop() == 0
        change()
        shared_xpud.start()

    loader = nvtest.Loader()

    def reload():
        loader.reload(version=NV535)
        if loader.xpu_was_loaded and loader.xpu_ko:
            nvtest._run("insmod", loader.xpu_ko, *loader.xpu_params)

    stopped(reload)
    yield nvtest.StubConfig.current()
    stopped(loader.restore)


def test_a_cdi_device_at_535(stub_535, podman, xpud):
    assert stub_535.version == NV535
    create(xpud, "t-535", LIMIT)
    client_in_a_container(podman, xpud, "t-535", LIMIT)


@pytest.fixture
def nvidia_spec(tmp_path):
    """NVIDIA's own CDI spec as nvidia-ctk would write it for the 535 user
    space (here unpacked in .vm-cache, not installed): its libraries and
    nvidia-smi as mounts, a hook (that records its run), device nodes."""
    if not NV_SMI.exists():
        pytest.skip(f"NVIDIA's user space {NV535} is not unpacked in "
                    ".vm-cache/nvidia-535 (run tests/setup)")
    marker = tmp_path / "nvidia-hook.out"
    ro = ["ro", "nosuid", "nodev", "bind"]
    lib = "/usr/lib/x86_64-linux-gnu"
    doc = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": "0", "containerEdits": {
            "deviceNodes": [{"path": "/dev/nvidia0"}]}}],
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [{"path": "/dev/nvidiactl"}],
            "mounts": [
                {"hostPath": str(NV_LIBDIR / f"libnvidia-ml.so.{NV535}"),
                 "containerPath": f"{lib}/libnvidia-ml.so.1",
                 "options": ro},
                {"hostPath": str(NV_SMI),
                 "containerPath": "/usr/bin/nvidia-smi", "options": ro}],
            "hooks": [{"hookName": "createRuntime", "path": "/bin/sh",
                       "args": ["sh", "-c", f"cat > {marker}"]}]},
    }
    NVIDIA_SPEC.write_text(json.dumps(doc))
    yield doc, marker
    NVIDIA_SPEC.unlink()


def test_nvidia_smi_535_reports_the_slice(stub_535, nvidia_spec, podman,
                                         xpud):
    nv, marker = nvidia_spec
    create(xpud, "t-smi", 1 << 30)
    edits = json.loads(SPEC.read_text())["containerEdits"]
    # NVIDIA's mounts and hooks, not its nodes nor its environment.
    assert edits["mounts"] == nv["containerEdits"]["mounts"]
    assert edits["hooks"] == nv["containerEdits"]["hooks"]
    assert "env" not in edits and all(
        n["path"].startswith("/dev/nvidia-uvm")
        for n in edits.get("deviceNodes", []))
    r = podman(*podman.run_args("--device", "xpu.dev/slice=t-smi", usr="O"),
               "sh", "-c", "nvidia-smi && echo --- && nvidia-smi "
               "--query-gpu=index,memory.total,memory.used "
               "--format=csv,noheader,nounits")
    assert r.returncode == 0, r.stdout + r.stderr
    table, csv = r.stdout.split("---\n")
    assert f"Driver Version: {NV535}" in table
    assert re.findall(r"(\d+)MiB / +(\d+)MiB", table) == [("0", "1024")]
    assert csv.strip() == "0, 1024, 0"
    # NVIDIA's hook ran, for this container.
    state = json.loads(marker.read_text())
    assert state["pid"] > 0 and state["status"] == "created"
