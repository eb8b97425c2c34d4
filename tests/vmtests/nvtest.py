# SPDX-License-Identifier: Apache-2.0
"""Helpers of the nvstub conformance suite: the stub's configuration and
reloading, its debugfs counters, child processes, guarded user buffers."""

import ctypes
import json
import mmap
import os
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from nvclient import abi, client, stub

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# docs/nvstub.md: module parameters and their defaults
DEFAULTS = {"gpus": "2", "memory_mib": "81920", "version": "580.126.20",
            "alloc_reread_delay_us": "0", "timeslice_us": "2000",
            "doorbell_poll_us": "50"}

PCI_BUS_BASE = 0x18
PCI_VENDOR_NVIDIA = 0x10DE
PCI_DEVICE_H200 = 0x2335
MODEL = "NVIDIA H200"


def parse_params(text):
    out = {}
    for kv in (text or "").split():
        key, _, value = kv.partition("=")
        out[key] = value
    return out


@dataclass(frozen=True)
class StubConfig:
    gpus: int
    memory_mib: int
    version: str
    alloc_reread_delay_us: int
    timeslice_us: int
    doorbell_poll_us: int

    @property
    def memory_bytes(self):
        return self.memory_mib << 20

    @classmethod
    def from_params(cls, params):
        p = dict(DEFAULTS)
        p.update(params)
        return cls(int(p["gpus"]), int(p["memory_mib"]), p["version"],
                   int(p["alloc_reread_delay_us"]), int(p["timeslice_us"]),
                   int(p["doorbell_poll_us"]))

    @classmethod
    def current(cls):
        """What the loaded stub runs with: its sysfs parameters where it
        exposes them, else the parameters it was loaded with."""
        params = parse_params(Loader.loaded_params)
        for name in DEFAULTS:
            try:
                params[name] = stub.param(name)
            except OSError:
                pass
        return cls.from_params(params)


def _run(*cmd):
    r = subprocess.run(list(cmd), check=False, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): "
                           f"{r.stdout.strip()}")


def module_loaded(name):
    return os.path.isdir(f"/sys/module/{name}")


class Loader:
    """Reloads nvstub.ko with other parameters and puts the rig's back."""

    # What the stub was loaded with now (the rig's parameters at first).
    loaded_params = os.environ.get("XPU_NVSTUB_PARAMS", "")

    def __init__(self):
        self.stub_ko = os.environ["XPU_NVSTUB_KO"]
        self.xpu_ko = os.environ.get("XPU_KO", "")
        self.xpu_params = os.environ.get("XPU_KO_PARAMS", "").split()
        self.original = Loader.loaded_params
        self.xpu_was_loaded = module_loaded("xpu")
        self.made_nodes = []
        self.changed = False

    def _unload(self):
        if module_loaded("xpu"):
            _run("rmmod", "xpu")
        if module_loaded("nvstub"):
            _run("rmmod", "nvstub")

    def _load(self, params):
        _run("insmod", self.stub_ko, *params.split())
        Loader.loaded_params = params
        gpus = int(parse_params(params).get("gpus", DEFAULTS["gpus"]))
        for minor in range(gpus):
            path = abi.nv_gpu_path(minor)
            if not os.path.exists(path):
                os.mknod(path, 0o20666,
                         os.makedev(abi.NV_MAJOR_DEVICE_NUMBER, minor))
                os.chmod(path, 0o666)
                self.made_nodes.append(path)

    def reload(self, **params):
        """Reload the stub with ``params`` (on top of the rig's)."""
        merged = parse_params(self.original)
        merged.update({k: str(v) for k, v in params.items()})
        text = " ".join(f"{k}={v}" for k, v in merged.items())
        self.changed = True
        self._unload()
        self._load(text)
        # insmod ignores a parameter the module does not know and loads all
        # the same: a renamed delay would silently be none, and a test of a
        # race it widens would pass without racing
        for k, v in params.items():
            got = stub.param(k)
            if got != str(v):
                raise AssertionError(
                    f"nvstub.ko took {k}={got!r}, not the {v!r} asked for")
        return StubConfig.current()

    def restore(self):
        if not self.changed:
            return
        self._unload()
        for path in self.made_nodes:
            os.unlink(path)
        self.made_nodes.clear()
        self._load(self.original)
        if self.xpu_was_loaded and self.xpu_ko:
            _run("insmod", self.xpu_ko, *self.xpu_params)


@contextmanager
def extra_node(minor, major=abi.NV_MAJOR_DEVICE_NUMBER):
    """A character node major:minor made under /dev (devtmpfs takes nodes
    where a shared or 9p /tmp may not), removed afterwards."""
    path = f"/dev/nvclient-test-{os.getpid()}-{minor}"
    os.mknod(path, 0o20600, os.makedev(major, minor))
    try:
        yield path
    finally:
        os.unlink(path)


# --- debugfs


def snapshot():
    """The stub's counters that must return to where they were after a test:
    live objects and each GPU's heap."""
    if not stub.available():
        return None
    state = {"objects": stub.objects()}
    gpu = 0
    while os.path.exists(os.path.join(stub.DEBUGFS, f"gpu{gpu}")):
        heap = stub.heap(gpu)
        heap.pop("users", None)     # open files: not the stub's objects
        state[f"gpu{gpu}.heap"] = heap
        gpu += 1
    return state


PAGE_TABLE = 4096    # a page table or directory, as the stub takes them


def page_tables(va, size):
    """The tables a mapping of [va, va + size) alone needs on Hopper: one
    per 2^56, 2^47, 2^38 and 2^29 bytes of VA it reaches (the directories)
    and per 2 MiB (the PTs), in bytes."""
    return sum(((va + size - 1) >> s) - (va >> s) + 1
               for s in (56, 47, 38, 29, 21)) * PAGE_TABLE


def heap_used(gpu=0):
    return stub.heap(gpu)["used"]


def heap_free(gpu=0):
    return stub.heap(gpu)["free"]


def objects_total():
    """Live RM objects of every client (each client's own object included)."""
    return stub.objects()["objects"]


class HandleInfoParams(ctypes.Structure):
    """NV0000_CTRL_CLIENT_GET_HANDLE_INFO_PARAMS: hObject, index, then a
    union of a handle and an 8-aligned NvU64."""
    _fields_ = [("hObject", ctypes.c_uint32), ("index", ctypes.c_uint32),
                ("iResult", ctypes.c_uint64)]


assert ctypes.sizeof(HandleInfoParams) == 16
GET_HANDLE_INFO, HANDLE_PARENT, HANDLE_CLASSID = 0xD02, 1, 2
# NV0000's reserved category, index 1: a command no class exports (what
# xpu.ko asks to tell an invalidated handle, kmod/nvabi.h)
CTRL_CMD_UNEXPORTED = 0x00000001


def handle_info(rm, h, index):
    """(status, result) of CLIENT_GET_HANDLE_INFO about H, asked of RM."""
    p = HandleInfoParams(hObject=h, index=index)
    r = rm.control_raw(rm.handle, GET_HANDLE_INFO, p)
    return r.status, p.iResult


def assert_invalidated(rm, h, hclass, hparent):
    """H is what resserv leaves of a dependant freed with what it depended
    on, not with an ancestor (serverFreeResourceTree's bInvalidateOnly):
    destructed, its handle kept.  A control on it or a dup from it is
    NV_ERR_RESOURCE_LOST, a new object with its handle
    NV_ERR_INSERT_DUPLICATE_NAME, and CLIENT_GET_HANDLE_INFO still answers
    its class and parent."""
    st = rm.control_raw(h, CTRL_CMD_UNEXPORTED).status
    assert st == abi.NV_ERR_RESOURCE_LOST, hex(st)
    assert handle_info(rm, h, HANDLE_CLASSID) == (abi.NV_OK, hclass)
    assert handle_info(rm, h, HANDLE_PARENT) == (abi.NV_OK, hparent)
    st = rm.ctl.rm_dup(rm.handle, hparent, rm.handle, h, check=False).status
    assert st == abi.NV_ERR_RESOURCE_LOST, hex(st)
    objs = objects_total()
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0, hnew=h)
    assert p.status == abi.NV_ERR_INSERT_DUPLICATE_NAME, hex(p.status)
    assert objects_total() == objs


def engine_busy_us(gpu=0):
    return stub.engine(gpu)["busy_ns"] / 1000


def channel_busy_us(gpu, token):
    return channel_record(gpu, token)["busy_ns"] / 1000


def process_busy_us(gpu, pid):
    """Busy time the engine charged to process ``pid`` (0 if none yet)."""
    for rec in stub.processes(gpu):
        if rec.get("pid") == pid:
            return rec["busy_ns"] / 1000
    return 0


def channel_record(gpu, token):
    for rec in stub.channels(gpu):
        if rec.get("token") == token:
            return rec
    raise AssertionError(f"no channel with token {token:#x} in "
                         f"{stub.DEBUGFS}/gpu{gpu}/channels: "
                         f"{stub.channels(gpu)}")


def sleeps_in(pid, *where):
    """Whether PID sleeps in one of the kernel functions WHERE, by its
    wchan or, where that reads 0 (5.10's stable kernels), its stack."""
    text = ""
    for field in ("wchan", "stack"):
        with open(f"/proc/{pid}/{field}") as f:
            text += f.read()
    return any(w in text for w in where)


def wait_for(cond, timeout, what):
    """Poll COND until it is true (returned) or TIMEOUT seconds pass
    (AssertionError naming WHAT): the GPU's own progress has no event."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


# --- child processes


CHILD_PRELUDE = f"""
import json, os, sys
sys.path.insert(0, {TESTS!r})
from nvclient import abi, client
def report(**kw):
    print(json.dumps(kw), flush=True)
"""


# For children that make escapes by hand on memory they lay out themselves
# (fcntl.ioctl copies arguments under 1 KiB into a buffer of its own), on the
# files of a slice's nodes CTL and GPU (replaced by the caller).
RAW_PRELUDE = """
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
"""


def insmod_xpu(*extra):
    """Load xpu.ko as the rig did (XPU_KO with XPU_KO_PARAMS), with EXTRA
    parameters ("k=v") after them; skips the test outside tests/vm/run."""
    ko = os.environ.get("XPU_KO")
    if not ko:
        import pytest
        pytest.skip("XPU_KO is not set: run under tests/vm/run")
    subprocess.run(["insmod", ko, *os.environ.get("XPU_KO_PARAMS", "").split(),
                    *extra], check=True)


def xpu_param(name):
    """xpu.ko's module parameter NAME, an integer."""
    with open(f"/sys/module/xpu/parameters/{name}") as f:
        return int(f.read())


def fuzz_seed(default):
    """The first seed XPU_FUZZ_SEED names (it may list several, comma-
    separated: docs/testing.md), or DEFAULT."""
    seeds = os.environ.get("XPU_FUZZ_SEED", "")
    return int(seeds.split(",")[0]) if seeds else default


def run_child(code, timeout=120):
    """Run ``code`` in a fresh Python with no inherited files but stdio;
    returns the dict it passed to report()."""
    src = CHILD_PRELUDE + textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", src], check=False,
                       capture_output=True, text=True,
                       timeout=timeout, close_fds=True, cwd="/")
    assert r.returncode == 0, f"child failed ({r.returncode}):\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def make_uvm_nodes():
    """/dev/nvidia-uvm{,-tools} from the stub's dynamic major (made anew:
    a reloaded stub may have another), as nvidia-modprobe -u makes them.
    Returns their paths."""
    with open("/proc/devices") as f:
        major = [int(line.split()[0]) for line in f
                 if line.split()[1:] == ["nvidia-uvm"]]
    assert major, "the stub registers no nvidia-uvm major"
    made = []
    for minor, path in enumerate(("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")):
        if os.path.exists(path):
            os.unlink(path)
        os.mknod(path, 0o20666, os.makedev(major[0], minor))
        os.chmod(path, 0o666)
        made.append(path)
    return made


class Child:
    """A child Python that lives until finish(): report() returns the dict
    its next report() passed; finish() closes its stdin and waits.  A child
    still there TIMEOUT seconds after its start is killed (a hung premise
    fails the test, not the boot): report() and rest() then fail."""

    def __init__(self, code, timeout=300):
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(code)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, close_fds=True, cwd="/")
        self.timeout = timeout
        self.expired = threading.Event()
        self.watchdog = threading.Timer(timeout, self._expire)
        self.watchdog.daemon = True
        self.watchdog.start()

    def _expire(self):
        if self.p.poll() is None:
            self.expired.set()
            self.p.kill()

    def _check(self):
        if self.expired.is_set():
            raise AssertionError(f"child killed after {self.timeout} s: "
                                 f"{self.p.stderr.read()}")

    def report(self):
        line = self.p.stdout.readline()
        self._check()
        if not line:
            raise AssertionError(f"child died ({self.p.wait()}): "
                                 f"{self.p.stderr.read()}")
        return json.loads(line)

    def rest(self):
        """What the child writes to stdout until it exits."""
        out = self.p.stdout.read()
        self._check()
        return out

    def finish(self, timeout=60):
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise
        finally:
            self.watchdog.cancel()
        self._check()
        self.p.stdout.close()
        self.p.stderr.close()
        return rc


def spawn_child(code):
    return Child(code)


# --- user memory


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


@contextmanager
def guarded(cls):
    """An instance of ctypes ``cls`` that ends exactly at an inaccessible
    page: a read or write past it by the driver faults."""
    nbytes = ctypes.sizeof(cls)
    page = mmap.PAGESIZE
    span = client.round_up(ctypes.sizeof(cls), page) + page
    base = _libc.mmap(None, span, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if base in (None, MAP_FAILED):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        guard = base + span - page
        if _libc.mprotect(guard, page, 0) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")
        yield cls.from_address(guard - nbytes)
    finally:
        _libc.munmap(base, span)


def memory_block_size():
    """The kernel's memory-block size (what CUDA's user space sends in
    NV_ESC_SYS_PARAMS), 0 on a kernel without memory blocks."""
    path = "/sys/devices/system/memory/block_size_bytes"
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return int(f.read(), 16)
