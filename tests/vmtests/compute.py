# SPDX-License-Identifier: Apache-2.0
"""Workloads for compute isolation, measured by the simulated engine.

A worker is a separate process (a process is in one slice per GPU) that opens
a slice's nodes, makes a TSG with one channel and its usermode mapping, says
"ready", and on "go" runs its workload until its stdin closes.  The shares
are the engine's own per-channel busy counters (debugfs), never xpu's.

Workloads (each work item is {duration_us}, docs/nvstub.md):
- saturate: keeps DEPTH (8) items queued, ringing the doorbell for each;
- sync: one item, wait until it is done, repeat;
- batch: BATCH items with one doorbell, wait until all are done, repeat;
- remap: saturate, but unmaps and maps the usermode region again every 8
  submissions (a fresh file, RM_MAP_MEMORY, mmap);
- mremap: saturate, but moves the usermode mapping to a new address with
  mremap every 8 submissions and rings through it there;
- fork: saturate from a forked child as well, through the inherited mapping;
- spam: saturate, writing the doorbell 16 times per submission;
- manymaps: saturate, ringing through the last of MANY (70) further mappings
  of the usermode object (each a fresh file, RM_MAP_MEMORY, mmap, as CUDA
  maps it);
- kwrite: saturate, but before each doorbell write has the kernel read the
  doorbell page (a write into a pipe from it), and counts the writes that
  failed with EFAULT ("efault" in its result);
- procmem: saturate, ringing through /proc/self/mem (the driver's access()
  of the doorbell VMA), and through the mapping when that fails with EIO,
  counted as "efault" in its result;
- rostruct: saturate, ringing through a further mapping of the usermode
  object whose RM_MAP_MEMORY struct lay on a read-only page (RM made the
  mapping's context; the driver's copy-back failed with EFAULT);
- silent: whenever its ring is empty, queues SILENT (60) items with one
  doorbell write, and otherwise writes nothing (a long kernel, then a
  wait for it);
- cuda: saturate, from a channel made as CUDA and tinygrad make theirs
  (nvclient/cudalike.py: an externally owned VA space UVM registers, a
  context share, the ring and USERD in video memory); /dev/nvidia-uvm must
  exist.
"""

import json
import os
import subprocess
import sys
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r"""
import json, os, sys, time
sys.path.insert(0, TESTS)
from nvclient import abi, client

ctl_node, gpu_node, mode, item_us = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
DEPTH, BATCH, SILENT = 8, 8, 60
ctl = client.Ctl(ctl_node)
gpu = client.GpuFile(0, gpu_node)
rm = client.RmClient(ctl)
dev = rm.device(0, gpu_file=gpu)
ctx = uvm = None
if mode == "cuda":
    from nvclient.cudalike import CudaChannel, CudaContext
    from nvclient.uvm import Uvm
    uvm = Uvm(ctl.abi.version)
    ctx = CudaContext(dev, uvm)
    ch = CudaChannel(ctx, entries=64)
    mode = "saturate"
else:
    ch = client.Channel(dev, entries=64)
print(json.dumps({"pid": os.getpid(), "token": ch.token}), flush=True)
sys.stdin.readline()                      # go

def pending():
    return (ch.put - ch.gp_get) % ch.entries

def remap():
    ch.usermode.close()
    ch._maps.remove(ch.usermode)
    ch.usermode = dev.map(ch.husermode, abi.NVC361_NV_USERMODE__SIZE,
                          hparent=dev.hsubdevice, node=dev.gpu.path)
    ch._maps.append(ch.usermode)

if mode == "mremap":
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                            ctypes.c_int, ctypes.c_void_p]
    UM_SIZE = abi.NVC361_NV_USERMODE__SIZE
    at = ctypes.c_char.from_buffer(ch.usermode.mm)
    bell = ctypes.addressof(at)
    del at

    def move_bell():
        # onto a fresh reservation (PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS):
        # the old place is left empty
        spot = libc.mmap(None, UM_SIZE, 0, 0x22, -1, 0)
        new = libc.mremap(bell, UM_SIZE, UM_SIZE, 3, spot)  # MAYMOVE|FIXED
        if new != spot:
            raise OSError(ctypes.get_errno(), "mremap of the usermode mapping")
        return new

if mode == "manymaps":
    MANY = 70
    for _ in range(MANY):
        ch._maps.append(dev.map(ch.husermode, abi.NVC361_NV_USERMODE__SIZE,
                                hparent=dev.hsubdevice, node=dev.gpu.path))
    ch.usermode = ch._maps[-1]

if mode == "rostruct":
    # RM_MAP_MEMORY of the usermode object from a read-only page: RM makes
    # the mapping's context on the new file, then the driver's copy-back
    # fails (EFAULT); the file is mapped all the same, and rung through
    import ctypes, errno, mmap, struct
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    SIZE = abi.NVC361_NV_USERMODE__SIZE
    fd = os.open(dev.gpu.path, os.O_RDWR | os.O_CLOEXEC)
    arg = abi.nv_ioctl_nvos33_parameters_with_fd()
    arg.params.hClient, arg.params.hDevice = rm.handle, dev.hsubdevice
    arg.params.hMemory, arg.params.length = ch.husermode, SIZE
    arg.fd = fd
    page = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    ctypes.memmove(page, bytes(arg), ctypes.sizeof(arg))
    assert libc.mprotect(page, mmap.PAGESIZE, mmap.PROT_READ) == 0
    rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_MAP_MEMORY,
                                         ctypes.sizeof(arg)), page)
    assert rc == -1 and ctypes.get_errno() == errno.EFAULT, rc

    class RoMapping:
        def __init__(self):
            self.fd = fd
            self.mm = mmap.mmap(fd, SIZE, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE, offset=0)

        def write32(self, offset, value):
            struct.pack_into("<I", self.mm, offset, value)

        def close(self, unmap=True):    # RM's record goes with the object
            self.mm.close()
            os.close(self.fd)

    ch.usermode = RoMapping()
    ch._maps.append(ch.usermode)

efault = 0
if mode == "kwrite":
    import errno
    pipe_r, pipe_w = os.pipe()
    BELL = abi.NVC361_NOTIFY_CHANNEL_PENDING
    bell_view = memoryview(ch.usermode.mm)[BELL:BELL + 4]

    def kernel_reads_bell():
        global efault
        try:
            os.write(pipe_w, bell_view)
        except OSError as e:
            if e.errno != errno.EFAULT:
                raise
            efault += 1
            return
        os.read(pipe_r, 4)

if mode == "procmem":
    import ctypes, errno, struct
    proc_mem = os.open("/proc/self/mem", os.O_RDWR)
    c = ctypes.c_char.from_buffer(ch.usermode.mm)
    bell_addr = ctypes.addressof(c) + abi.NVC361_NOTIFY_CHANNEL_PENDING
    del c
    bell_token = struct.pack("<I", ch.token)

    def proc_mem_ring():
        global efault
        try:
            os.pwrite(proc_mem, bell_token, bell_addr)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            efault += 1
            ch.ring()

import select
def stopped():
    return select.select([sys.stdin], [], [], 0)[0]

child = 0
if mode == "fork":
    child = os.fork()
n = lat_n = 0
lat = []
while not stopped():
    if mode in ("saturate", "remap", "fork", "spam", "manymaps", "kwrite",
                "rostruct", "procmem"):
        if pending() < DEPTH:
            if mode == "kwrite":
                ch.submit(item_us, ring=False)
                kernel_reads_bell()
                ch.ring()
            elif mode == "procmem":
                ch.submit(item_us, ring=False)
                proc_mem_ring()
            else:
                ch.submit(item_us)
            n += 1
            if mode == "spam":
                for _ in range(16):
                    ch.ring()
            if mode == "remap" and n % 8 == 0:
                remap()
        else:
            time.sleep(0.001)
    elif mode == "mremap":
        if pending() < DEPTH:
            ch.submit(item_us, ring=False)
            ctypes.c_uint32.from_address(
                bell + abi.NVC361_NOTIFY_CHANNEL_PENDING).value = ch.token
            n += 1
            if n % 8 == 0:
                bell = move_bell()
        else:
            time.sleep(0.001)
    elif mode == "silent":
        if pending() == 0:
            for i in range(SILENT):
                ch.submit(item_us, ring=(i == SILENT - 1))
            n += SILENT
        time.sleep(0.01)
    elif mode == "sync":
        t0 = time.monotonic_ns()
        ch.submit(item_us)
        while not ch.idle():
            pass
        lat.append((time.monotonic_ns() - t0) / 1000 - item_us)
        n += 1
    elif mode == "batch":
        for i in range(BATCH):
            ch.submit(item_us, ring=(i == BATCH - 1))
        while not ch.idle():
            time.sleep(0.0002)
        n += BATCH
if child == 0 and mode == "fork":
    os._exit(0)
if child:
    os.kill(child, 9)
    os.waitpid(child, 0)
lat.sort()
print(json.dumps({"items": n, "lat_us": lat, "efault": efault}), flush=True)
if mode == "kwrite":
    bell_view.release()
if mode == "mremap":
    os._exit(0)     # the mapping moved from under Python's mmap: exit frees all
ch.close()
if ctx:
    ctx.close()
    uvm.close()
dev.close(); rm.close(); gpu.close(); ctl.close()
""".replace("TESTS", repr(TESTS))


class Worker:
    def __init__(self, ctl_node, gpu_node, mode="saturate", item_us=2000):
        self.mode = mode
        self.p = subprocess.Popen(
            [sys.executable, "-c", WORKER, ctl_node, gpu_node, mode,
             str(item_us)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            close_fds=True, cwd="/")
        line = self.p.stdout.readline()
        if not line:
            self.p.wait(30)
            raise RuntimeError(f"worker failed to start ({self.p.returncode})")
        ready = json.loads(line)
        self.pid, self.token = ready["pid"], ready["token"]
        self.result = None

    def go(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def finish(self):
        """Tell the worker to stop (it ends its loop at its next turn)."""
        if not self.p.stdin.closed:
            self.p.stdin.close()

    def stop(self, timeout=60):
        if self.result is None:
            self.finish()
            out = self.p.stdout.read()
            self.p.wait(timeout)
            lines = out.strip().splitlines()
            self.result = json.loads(lines[-1]) if lines else {}
        return self.result

    def kill(self):
        self.p.kill()
        self.p.wait(30)
        self.result = {}


def busy_ns(gpu, tokens):
    """The engine's busy time per channel token, and the engine's total."""
    from nvclient import stub
    recs = {r["token"]: r["busy_ns"] for r in stub.channels(gpu)}
    return {t: recs.get(t, 0) for t in tokens}, stub.engine(gpu)["busy_ns"]


def measure(workers, seconds, gpu=0, warmup=1.0, during=None):
    """Start WORKERS, let them run WARMUP seconds, then measure SECONDS of
    engine time.  Returns each worker's fraction of the engine's wall time,
    and the engine's busy fraction.  DURING(t) is called mid-window."""
    for w in workers:
        w.go()
    time.sleep(warmup)      # the measured window starts after a warm-up
    tokens = [w.token for w in workers]
    b0, e0 = busy_ns(gpu, tokens)
    t0 = time.monotonic_ns()
    if during:
        during()
    time.sleep(seconds)     # the measured window itself
    b1, e1 = busy_ns(gpu, tokens)
    wall = time.monotonic_ns() - t0
    shares = [(b1[t] - b0[t]) / wall for t in tokens]
    return shares, (e1 - e0) / wall


def stop_all(workers):
    # All are told first: a worker asleep in its doorbell fault (a lower class
    # under priority) ends only once the others stop wanting the GPU.
    for w in workers:
        w.finish()
    return [w.stop() for w in workers]
