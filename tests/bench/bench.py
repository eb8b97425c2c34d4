# SPDX-License-Identifier: Apache-2.0
"""make bench: figures measured side by side in one VM boot, printed as JSON.

Run by `tests/vm/run -- .venv/bin/python tests/bench/bench.py`.  Every
figure is a ratio of two measurements taken in alternating rounds in the same
boot, so that the machine's noise hits both sides alike.  In a round each
side's figure is its fastest of WINDOWS back-to-back windows (CALLS controls
or ALLOCS alloc+free pairs each): software emulation stalls a window now and
then, by as much as the whole difference measured, and a stall is no cost of
either side's; the ratios are of the medians over ROUNDS rounds.

- ioctl_overhead_ratio: a cheap RM_CONTROL round trip (NV0000
  GET_ID_INFO_V2, which xpu passes through) by a client in a slice, over the
  same call with xpu.ko not loaded.
- alloc_overhead_ratio: an RM_ALLOC of 2 MiB of video memory and its RM_FREE,
  likewise.
- alloc_overhead_ratio_64_members: the same with 64 other processes in the
  slice (each holds its control node open), over the same without xpu: what
  a slice's size costs each allocation (issue 17 asks <= 1.10).

- ioctl_overhead_ratio_threaded, alloc_overhead_ratio_threaded: the same
  two with a second thread alive in the calling process, on both sides, as
  in every CUDA program (the CUDA runtime starts threads).  A process with
  one thread makes its calls on xpu's page without the page being
  write-protected after each (kmod/callpage.c); one with another thread
  pays that (a PTE zapped and put back read-only, the copy-back's fault).

`bench.py --memory` prints only these figures (about two minutes, not five).
"""

import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.join(TOP, "xpud"))

import compute_bench
import xpud_bench
from nvclient import client
from xpu import ctl as xpu_ctl
from xpu import uapi

ROUNDS = 5
WINDOWS = 5
NV0000_GET_ID_INFO_V2 = 0x205
CALLS = 1000
ALLOCS = 200


def control_loop(ctl_path, gpu_path, threaded=False):
    """Seconds per control and per alloc+free; THREADED: with a second
    thread alive (waiting) in this process throughout."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait) if threaded else None
    if other:
        other.start()
    try:
        return _control_loop(ctl_path, gpu_path)
    finally:
        stop.set()
        if other:
            other.join()


def _control_loop(ctl_path, gpu_path):
    with client.Ctl(ctl_path) as ctl, client.GpuFile(0, gpu_path) as gpu:
        rm = client.RmClient(ctl)
        dev = rm.device(0, gpu_file=gpu)
        gpu_id = next(c.gpu_id for c in ctl.card_info() if c.valid)
        info = (ctypes.c_uint32 * 8)(gpu_id)   # NV0000 GET_ID_INFO_V2
        t_ctrl = t_alloc = float("inf")
        for _ in range(WINDOWS):
            t0 = time.perf_counter()
            for _ in range(CALLS):
                rm.control(rm.handle, NV0000_GET_ID_INFO_V2, info)
                info[0] = gpu_id
            t_ctrl = min(t_ctrl, (time.perf_counter() - t0) / CALLS)
        for _ in range(WINDOWS):
            t0 = time.perf_counter()
            for _ in range(ALLOCS):
                m = dev.alloc_vidmem(2 << 20)
                rm.free(m.handle)
            t_alloc = min(t_alloc, (time.perf_counter() - t0) / ALLOCS)
        dev.close()
        rm.close()
    return t_ctrl, t_alloc


MEMBERS = 64


def start_members(ctl_path, count=MEMBERS):
    """COUNT processes in the slice, each holding its control node open
    until the returned pipe closes; returns (pipe, pids) once all opened."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            os.close(hold_w)
            fd = os.open(ctl_path, os.O_RDWR)
            os.write(ready_w, b"x")
            os.read(hold_r, 1)          # until the pipe closes
            os.close(fd)
            os._exit(0)
        pids.append(pid)
    os.close(ready_w)
    os.close(hold_r)
    got = 0
    while got < count:
        got += len(os.read(ready_r, count - got))
    os.close(ready_r)
    return hold_w, pids


def stop_members(hold_w, pids):
    os.close(hold_w)
    for pid in pids:
        os.waitpid(pid, 0)


def load_xpu():
    subprocess.run(["insmod", os.environ["XPU_KO"]], check=True)


def unload_xpu():
    subprocess.run(["rmmod", "xpu"], check=True)


def main():
    nodedir = tempfile.mkdtemp(prefix="xpubench-", dir="/dev")
    base_ctrl, base_alloc, sl_ctrl, sl_alloc = [], [], [], []
    many_alloc = []
    th = {k: [] for k in ("base_ctrl", "base_alloc", "sl_ctrl", "sl_alloc")}
    for _ in range(ROUNDS):
        unload_xpu()
        c, a = control_loop("/dev/nvidiactl", "/dev/nvidia0")
        base_ctrl.append(c)
        base_alloc.append(a)
        c, a = control_loop("/dev/nvidiactl", "/dev/nvidia0", threaded=True)
        th["base_ctrl"].append(c)
        th["base_alloc"].append(a)
        load_xpu()
        with xpu_ctl.Ctl() as admin:
            s = admin.slice_create("bench", 0, 16 << 30)
            g = os.path.join(nodedir, "g")
            n = os.path.join(nodedir, "c")
            os.mknod(g, 0o20600, os.makedev(195, 0))
            os.mknod(n, 0o20600, os.makedev(195, 255))
            admin.node_attach(s.id, g, uapi.XPU_NODE_GPU)
            admin.node_attach(s.id, n, uapi.XPU_NODE_CTL)
            c, a = control_loop(n, g)
            sl_ctrl.append(c)
            sl_alloc.append(a)
            c, a = control_loop(n, g, threaded=True)
            th["sl_ctrl"].append(c)
            th["sl_alloc"].append(a)
            hold, pids = start_members(n)
            try:
                many_alloc.append(control_loop(n, g)[1])
            finally:
                stop_members(hold, pids)
            admin.slice_destroy(s.id, force=False)
            os.unlink(g)
            os.unlink(n)
    os.rmdir(nodedir)
    med = statistics.median
    memory_only = "--memory" in sys.argv[1:]
    figures = {} if memory_only else compute_bench.run()
    print(json.dumps({
        "ioctl_overhead_ratio": round(med(sl_ctrl) / med(base_ctrl), 3),
        "alloc_overhead_ratio": round(med(sl_alloc) / med(base_alloc), 3),
        "alloc_overhead_ratio_64_members":
            round(med(many_alloc) / med(base_alloc), 3),
        "ioctl_overhead_ratio_threaded":
            round(med(th["sl_ctrl"]) / med(th["base_ctrl"]), 3),
        "alloc_overhead_ratio_threaded":
            round(med(th["sl_alloc"]) / med(th["base_alloc"]), 3),
        "rounds": ROUNDS,
        "windows": WINDOWS,
        "control_us": {"without_xpu": round(med(base_ctrl) * 1e6, 1),
                       "in_slice": round(med(sl_ctrl) * 1e6, 1),
                       "threaded_without_xpu":
                           round(med(th["base_ctrl"]) * 1e6, 1),
                       "threaded_in_slice":
                           round(med(th["sl_ctrl"]) * 1e6, 1)},
        "alloc_free_us": {"without_xpu": round(med(base_alloc) * 1e6, 1),
                          "in_slice": round(med(sl_alloc) * 1e6, 1),
                          "in_slice_64_members":
                              round(med(many_alloc) * 1e6, 1),
                          "threaded_without_xpu":
                              round(med(th["base_alloc"]) * 1e6, 1),
                          "threaded_in_slice":
                              round(med(th["sl_alloc"]) * 1e6, 1)},
        "note": "software emulation; ratios of medians over alternating "
                "rounds of each side's fastest window",
        **figures,
        **({} if memory_only else xpud_bench.measure()),
    }, indent=2))


if __name__ == "__main__":
    main()
