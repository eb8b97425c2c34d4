# SPDX-License-Identifier: Apache-2.0
"""NVIDIA's own closed user space (535.309.01: nvidia-smi, NVML, libcuda)
against the simulated driver loaded as 535.309.01, and through a slice of
xpu.ko (docs/nvidia-userspace.md).

tests/setup unpacks the packages into .vm-cache/nvidia-535/root; nothing of
them is installed. Every figure asserted is read from the stub itself (its
heap counters in debugfs, its /proc files), not written into the test."""

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from contextlib import contextmanager

import nvtest
import pytest
from nvclient import client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSION = "535.309.01"
ROOT = os.path.join(REPO, ".vm-cache", "nvidia-535", "root")
LIBDIR = os.path.join(ROOT, "usr/lib/x86_64-linux-gnu/nvidia/current")
SMI = os.path.join(ROOT, "usr/lib/nvidia/current/nvidia-smi")
NVTRACE = os.path.join(REPO, ".vm-cache", "nvtrace.so")
NVUSER = os.path.join(REPO, "tests", "tools", "nvuser.py")
MiB = 1 << 20
GiB = 1 << 30

if not os.path.exists(SMI):
    pytest.skip(f"NVIDIA's user space {VERSION} is not unpacked in "
                ".vm-cache/nvidia-535 (run tests/setup)", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def stub_535():
    """The stub reloaded as 535.309.01 (xpu.ko back on top if it was there)."""
    if not os.environ.get("XPU_NVSTUB_KO"):
        pytest.skip("XPU_NVSTUB_KO is not set: run under tests/vm/run")
    loader = nvtest.Loader()
    loader.reload(version=VERSION)
    if loader.xpu_was_loaded and loader.xpu_ko:
        nvtest._run("insmod", loader.xpu_ko, *loader.xpu_params)
    yield nvtest.StubConfig.current()
    loader.restore()


def env(trace=None):
    e = dict(os.environ, LD_LIBRARY_PATH=LIBDIR)
    if trace:
        e.update(LD_PRELOAD=NVTRACE, NVTRACE_OUT=trace)
    return e


def run(argv, ns=None, timeout=120):
    """Run argv (in slice namespace ns when given); returns stdout.
    $XPU_NVTRACE_DIR makes each run record what it sends there."""
    trace = None
    rec = os.environ.get("XPU_NVTRACE_DIR")
    if rec and os.path.exists(NVTRACE):
        os.makedirs(rec, exist_ok=True)
        trace = os.path.join(rec, f"run{len(os.listdir(rec)):02d}.trace")
    cmd = ns.wrap(argv) if ns else list(argv)
    r = subprocess.run(cmd, env=env(trace), capture_output=True, text=True,
                       timeout=timeout, check=False)
    assert r.returncode == 0, f"{argv} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


def gpu_info(minor):
    """The stub's /proc view of GPU minor: model, UUID, bus."""
    base = "/proc/driver/nvidia/gpus"
    for bus in sorted(os.listdir(base)):
        with open(os.path.join(base, bus, "information")) as f:
            text = f.read()
        fields = dict(re.findall(r"^([^:\n]+):\s*(.*)$", text, re.MULTILINE))
        if int(fields["Device Minor"]) == minor:
            return {"model": fields["Model"], "uuid": fields["GPU UUID"],
                    "bus": fields["Bus Location"]}
    raise AssertionError(f"no /proc entry for minor {minor}")


# --- a client holding video memory and a compute object


@contextmanager
def holder(size, ctl="/dev/nvidiactl", gpu="/dev/nvidia0", ns=None):
    """A process with `size` bytes of video memory and a HOPPER_COMPUTE_A
    object on a channel, as a CUDA context has; yields its pid."""
    argv = [sys.executable, NVUSER, "hold", ctl, gpu, str(size)]
    p = subprocess.Popen(ns.wrap(argv) if ns else argv, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "held", f"holder failed: {line!r}"
        yield p.pid
    finally:
        p.stdin.close()
        assert p.wait(timeout=60) == 0


# --- the stub, unsliced


def smi_memory(out):
    """[(used MiB, total MiB)] per GPU row of nvidia-smi's table."""
    return [(int(u), int(t)) for u, t in re.findall(r"(\d+)MiB / +(\d+)MiB", out)]


def smi_processes(out):
    """{pid: MiB} from the process table."""
    rows = re.findall(r"^\|\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+C\s+.*?(\d+)MiB \|$",
                      out, re.MULTILINE)
    return {int(pid): int(mib) for _gpu, pid, mib in rows}


def test_smi_table(stub_535):
    total = stub_535.memory_mib
    with holder(GiB) as pid:
        heap = nvtest.stub.heap(0)
        used = heap["used"] // MiB
        out = run([SMI])
    assert f"NVIDIA-SMI {VERSION}" in out and f"Driver Version: {VERSION}" in out
    for minor in range(stub_535.gpus):
        info = gpu_info(minor)
        bus = info["bus"].upper().replace("0000:", "00000000:", 1)
        assert re.search(rf"\|\s+{minor}\s+{re.escape(info['model'])}\s.*{bus}",
                         out), out
    assert smi_memory(out) == [(used, total)] + [(0, total)] * (stub_535.gpus - 1)
    # the GPU's figure has RM's own memory for the holder's TSG and channel
    # (rule 5); the process is charged its memory objects only
    assert heap["internal"] > 0
    assert used == (GiB + heap["internal"]) // MiB
    assert smi_processes(out) == {pid: 1024}


QUERY = ["--query-gpu=index,name,uuid,memory.total,memory.used,memory.free",
         "--format=csv,noheader,nounits"]


def smi_csv(out):
    return [tuple(x.strip() for x in line.split(","))
            for line in out.strip().splitlines()]


def test_smi_query_gpu(stub_535):
    with holder(512 * MiB):
        heap = [(nvtest.heap_used(g), nvtest.heap_free(g))
                for g in range(stub_535.gpus)]
        internal = nvtest.stub.heap(0)["internal"]
        out = run([SMI] + QUERY)
    want = []
    for g in range(stub_535.gpus):
        info = gpu_info(g)
        used, free = heap[g]
        want.append((str(g), info["model"], info["uuid"],
                     str(stub_535.memory_mib), str(used // MiB), str(free // MiB)))
    assert smi_csv(out) == want
    assert heap[0][0] == 512 * MiB + internal


def nvml(ns=None):
    return json.loads(run([sys.executable, NVUSER, "nvml"], ns=ns))


def test_nvml(stub_535):
    with holder(GiB) as pid:
        heap = [(nvtest.heap_used(g), nvtest.heap_free(g))
                for g in range(stub_535.gpus)]
        got = nvml()
    assert got["driver"] == VERSION
    assert len(got["gpus"]) == stub_535.gpus
    for g, gpu in enumerate(got["gpus"]):
        info = gpu_info(g)
        assert (gpu["name"], gpu["uuid"]) == (info["model"], info["uuid"])
        assert gpu["total"] == stub_535.memory_mib * MiB
        assert (gpu["used"], gpu["free"]) == heap[g]
    assert got["gpus"][0]["procs"] == {str(pid): GiB}
    assert got["gpus"][1]["procs"] == {}


# --- through a slice of xpu.ko


class SliceNs:
    """A 1 GiB slice on GPU 0 seen as xpuctl run shows it: a mount namespace
    where /dev/nvidiactl and /dev/nvidia0 are the slice's nodes (bind mounts
    keep the inode, which is the slice's identity) and the other GPUs' nodes
    are hidden behind an empty file."""

    def __init__(self, admin, uapi, limit, gpus):
        self.admin = admin
        self.dir = tempfile.mkdtemp(prefix="xpu-nvu-", dir="/dev")
        os.chmod(self.dir, 0o755)
        self.info = admin.slice_create("nvu", 0, limit)
        self.gpu_node = os.path.join(self.dir, "gpu")
        self.ctl_node = os.path.join(self.dir, "ctl")
        self.hidden = os.path.join(self.dir, "hidden")
        os.mknod(self.gpu_node, 0o20666, os.makedev(195, 0))
        os.mknod(self.ctl_node, 0o20666, os.makedev(195, 255))
        os.chmod(self.gpu_node, 0o666)
        os.chmod(self.ctl_node, 0o666)
        open(self.hidden, "w").close()
        admin.node_attach(self.info.id, self.gpu_node, uapi.XPU_NODE_GPU)
        admin.node_attach(self.info.id, self.ctl_node, uapi.XPU_NODE_CTL)
        self.gpus = gpus

    def wrap(self, argv):
        script = textwrap.dedent(f"""
            mount --make-rprivate / &&
            mount --bind {self.gpu_node} /dev/nvidia0 &&
            mount --bind {self.ctl_node} /dev/nvidiactl &&
            for i in $(seq 1 {self.gpus - 1}); do
                mount --bind {self.hidden} /dev/nvidia$i || exit 1
            done &&
            exec "$@"
        """)
        return ["unshare", "-m", "sh", "-c", script, "sh"] + list(argv)

    def used(self):
        return self.admin.slice_get(self.info.id).memory_used

    def destroy(self):
        self.admin.slice_destroy(self.info.id, force=True)
        shutil.rmtree(self.dir)


@pytest.fixture
def slice_ns(stub_535):
    xpu_ctl = pytest.importorskip("xpu.ctl")
    uapi = pytest.importorskip("xpu.uapi")
    if not os.path.exists("/dev/xpuctl"):
        pytest.skip("xpu.ko is not loaded")
    with xpu_ctl.Ctl() as admin:
        s = SliceNs(admin, uapi, GiB, stub_535.gpus)
        yield s
        s.destroy()


# What xpu charges for the pinning range nvclient's Channel maps its ring and
# USERD into (8 KiB: RM's worst case for its page tables, a 4 KiB table per
# level and one more for a straddle, and two big-page tables of 256 bytes;
# kmod/mem.c xpu_pinned_bytes).
RING_RANGE_CHARGE = 10 * 4096 + 2 * 256


def context_charge():
    """What xpu charges a slice for one TSG with a channel in it (its GR
    context's estimate and the channel's instance block: docs/memory.md),
    and for the pinning range its ring is mapped into."""
    with open("/sys/module/xpu/parameters/gr_context_kib") as f:
        return int(f.read()) * 1024 + 4096 + RING_RANGE_CHARGE


def test_slice_smi(slice_ns):
    with holder(256 * MiB, ns=slice_ns) as pid:
        used = slice_ns.used()
        table = run([SMI], ns=slice_ns)
        csv = run([SMI] + QUERY, ns=slice_ns)
    assert used == 256 * MiB + context_charge()
    info = gpu_info(0)
    # one GPU, the slice's, 1 GiB in all, what the slice holds used (its
    # memory and its context's charge); the process: its memory
    u, f = str(used // MiB), str((GiB - used) // MiB)
    assert smi_memory(table) == [(used // MiB, 1024)]
    assert smi_processes(table) == {pid: 256}
    assert smi_csv(csv) == [("0", info["model"], info["uuid"], "1024", u, f)]


def test_slice_nvml(slice_ns):
    with holder(256 * MiB, ns=slice_ns) as pid:
        got = nvml(ns=slice_ns)
    # RM gives the framebuffer's figures in KiB: a charge that is not a
    # whole KiB (the big-page tables') shows rounded up as used
    used = -(-(256 * MiB + context_charge()) // 1024) * 1024
    assert [g["uuid"] for g in got["gpus"]] == [gpu_info(0)["uuid"]]
    g = got["gpus"][0]
    assert (g["total"], g["used"], g["free"]) == (GiB, used, GiB - used)
    assert g["procs"] == {str(pid): 256 * MiB}


class ProbedIds535(ctypes.Structure):
    """NV0000_CTRL_GPU_GET_PROBED_IDS_PARAMS before 580: 256 bytes."""
    _fields_ = [("gpuIds", ctypes.c_uint32 * 32),
                ("excludedGpuIds", ctypes.c_uint32 * 32)]


def test_slice_probed_ids_535(slice_ns, stub_535):
    """xpu.ko filters 535's two-array GET_PROBED_IDS (NVML's GPU list) to the
    slice's GPU, as it does 580's three-array form."""
    def probed(ctl_path):
        with client.Ctl(ctl_path) as ctl:
            rm = client.RmClient(ctl)
            p = rm.control(rm.handle, 0x214, ProbedIds535())
            rm.close()
            return [i for i in p.gpuIds if i != 0xFFFFFFFF]

    everyone = probed("/dev/nvidiactl")
    assert len(everyone) == stub_535.gpus
    assert probed(slice_ns.ctl_node) == everyone[:1]


# --- libcuda, as far as the stub takes it


CUDA_ERROR_NO_DEVICE = 100
NV2080_CTRL_CMD_GR_GET_INFO = 0x20801201


def test_libcuda_cuinit(uvm_nodes, stub_535, tmp_path):
    """cuInit gets through RM's inventory and the UVM device's
    initialization; it then reads NV2080_CTRL_CMD_GR_GET_INFO, which the stub
    does not simulate (no graphics engine model), and reports no device. When
    the stub grows further, this test says how far libcuda goes."""
    trace = str(tmp_path / "cuda.trace")
    r = subprocess.run([sys.executable, NVUSER, "cuda"], env=env(trace),
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    steps = got["steps"]
    with open(trace) as f:
        lines = f.read().splitlines()
    # UVM_INITIALIZE went through: the stub's UVM device answered
    assert any(l.startswith("uvm ") and "cmd=0x30000001 -> rc=0" in l
               for l in lines), lines
    if steps[0]["result"] == 0:
        assert got["count"] == stub_535.gpus
        assert got["name"] == gpu_info(0)["model"]
    else:
        assert steps == [{"call": "cuInit", "result": CUDA_ERROR_NO_DEVICE}]
        refused = [l for l in lines if "RM_CONTROL" in l and "status=0x0" not in l]
        assert f"cmd={NV2080_CTRL_CMD_GR_GET_INFO:#010x}" in refused[-1], refused
