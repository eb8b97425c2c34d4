# SPDX-License-Identifier: Apache-2.0
"""Compute figures for `make bench`, all from the simulated engine's own
per-channel busy counters (and its item counts), in the bench's VM boot.

- share_error_pp: the worst |configured - obtained| share, in percentage
  points, of saturating slices in 2 (30/70), 4 (10/20/30/40) and 8 equal
  slices, under fixed and under weighted;
- work_conserving_ratio: one busy slice of share 25 % (the rest of the GPU
  given to an idle slice) under weighted: its fraction of the engine;
  fixed_cap_share: the same slice under fixed (target <= 0.27);
- single_slice_overhead_ratio: items per second of one saturating client in
  a slice of 100 %, over the same client with xpu.ko not loaded, in
  alternating rounds;
- priority_latency_ratio: median submit-to-start latency of a high-class
  synchronising slice next to a saturating low-class slice, over the same
  slice alone (start = completion seen by the client - the item's duration),
  medians of three alternating rounds;
- sync_share / batch_share: a synchronising and a batched slice of share 30 %
  under fixed next to a saturating 70 % slice;
- silent_queue_share_weighted: a 10 % slice that queues 60 items of 50 ms
  with one doorbell write and then writes none (compute.py's "silent"), next
  to a saturating 90 % slice, under weighted: its fraction of the engine.
  At most its share, 0.10 (docs/compute.md: beside others its channels run
  only for the drain time its share earns; 0.50 before session 22).
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests", "vmtests"))
sys.path.insert(0, os.path.join(TOP, "tests"))

from compute import Worker, measure, stop_all
from nvclient import stub
from xpu import ctl as xpu_ctl
from xpu import uapi

WINDOW = 3.0
PERIOD_US = 20000


class Bench:
    def __init__(self, nodedir):
        self.dir = nodedir
        self.admin = xpu_ctl.Ctl()
        self.ids, self.workers, self.n = [], [], 0

    def slice(self, share, priority=uapi.XPU_PRIO_NORMAL, mode="saturate",
              worker=True, item_us=2000):
        self.n += 1
        info = self.admin.slice_create(f"b{self.n}", 0, 256 << 20,
                                       compute_share=share, priority=priority)
        self.ids.append(info.id)
        if not worker:
            return None
        g = os.path.join(self.dir, f"g{info.id}")
        c = os.path.join(self.dir, f"c{info.id}")
        os.mknod(g, 0o20600, os.makedev(195, 0))
        os.mknod(c, 0o20600, os.makedev(195, 255))
        self.admin.node_attach(info.id, g, uapi.XPU_NODE_GPU)
        self.admin.node_attach(info.id, c, uapi.XPU_NODE_CTL)
        w = Worker(c, g, mode, item_us)
        self.workers.append(w)
        return w

    def done(self):
        stop_all([w for w in self.workers if w.result is None])
        for i in self.ids:
            self.admin.slice_destroy(i, force=True)
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        self.ids, self.workers = [], []

    def close(self):
        self.admin.close()


SHARE_CASES = ([300, 700], [100, 200, 300, 400], [125] * 8)


def share_errors(b, policy, period_us=PERIOD_US):
    """The worst error in percentage points, and each case's obtained shares
    (per cent) with the engine's busy fraction (per cent)."""
    worst, cases = 0.0, []
    for shares in SHARE_CASES:
        b.admin.gpu_set(0, policy=policy, period_us=period_us)
        ws = [b.slice(s) for s in shares]
        got, engine = measure(ws, WINDOW)
        b.done()
        worst = max(worst, max(abs(g - s / 1000) for g, s in zip(got, shares)))
        cases.append({"configured": [s / 10 for s in shares],
                      "obtained": [round(g * 100, 2) for g in got],
                      "engine_busy": round(engine * 100, 2)})
    return worst * 100, cases


def lone_share(b, policy):
    b.admin.gpu_set(0, policy=policy, period_us=PERIOD_US)
    w = b.slice(250)
    b.slice(750, worker=False)
    got, _ = measure([w], WINDOW)
    b.done()
    return got[0]


def items_per_s(w):
    """Items the engine completed for W's channel per second of a window."""
    w.go()
    time.sleep(0.5)     # warm-up before the measured window
    before = {r["token"]: r for r in stub.channels(0)}[w.token]["items"]
    t0 = time.monotonic()
    time.sleep(WINDOW)  # the measured window
    after = {r["token"]: r for r in stub.channels(0)}[w.token]["items"]
    dt = time.monotonic() - t0
    w.stop()
    return (after - before) / dt


def overhead(b, rounds=5):
    base, sliced = [], []
    for _ in range(rounds):
        b.admin.close()         # an open /dev/xpuctl holds the module
        subprocess.run(["rmmod", "xpu"], check=True)
        w = Worker("/dev/nvidiactl", "/dev/nvidia0")
        base.append(items_per_s(w))
        subprocess.run(["insmod", os.environ["XPU_KO"]], check=True)
        b.admin = xpu_ctl.Ctl()
        b.admin.gpu_set(0, policy=uapi.XPU_POLICY_WEIGHTED, period_us=PERIOD_US)
        w = b.slice(1000)
        sliced.append(items_per_s(w))
        b.done()
    return statistics.median(sliced) / statistics.median(base)


def latency_once(b, beside):
    """Median submit-to-start latency of a high-class synchronising slice,
    alone or BESIDE a saturating low-class slice."""
    b.admin.gpu_set(0, policy=uapi.XPU_POLICY_PRIORITY, period_us=PERIOD_US)
    ws = [b.slice(500, priority=uapi.XPU_PRIO_LOW)] if beside else []
    hi = b.slice(500, priority=uapi.XPU_PRIO_HIGH, mode="sync")
    measure(ws + [hi], WINDOW)
    lat = statistics.median(hi.stop()["lat_us"])
    b.done()
    return lat


def latency(b, rounds=3):
    """Alternating rounds (the VM's latencies drift as it warms up)."""
    alone, beside = [], []
    for _ in range(rounds):
        alone.append(latency_once(b, False))
        beside.append(latency_once(b, True))
    alone, beside = statistics.median(alone), statistics.median(beside)
    return beside / alone, alone, beside


def silent_share(b):
    b.admin.gpu_set(0, policy=uapi.XPU_POLICY_WEIGHTED, period_us=PERIOD_US)
    w = b.slice(100, mode="silent", item_us=50000)
    o = b.slice(900)
    got, _ = measure([w, o], WINDOW)
    b.done()
    return got[0]


def held(b, mode):
    b.admin.gpu_set(0, policy=uapi.XPU_POLICY_FIXED, period_us=PERIOD_US)
    w = b.slice(300, mode=mode)
    o = b.slice(700)
    got, _ = measure([w, o], WINDOW)
    b.done()
    return got[0]


def run():
    nodedir = tempfile.mkdtemp(prefix="xpucb-", dir="/dev")
    b = Bench(nodedir)
    try:
        fixed, fixed_cases = share_errors(b, uapi.XPU_POLICY_FIXED)
        weighted, weighted_cases = share_errors(b, uapi.XPU_POLICY_WEIGHTED)
        conserving = lone_share(b, uapi.XPU_POLICY_WEIGHTED)
        cap = lone_share(b, uapi.XPU_POLICY_FIXED)
        ratio = overhead(b)
        lat_ratio, lat_alone, lat_beside = latency(b)
        sync = held(b, "sync")
        batch = held(b, "batch")
        silent = silent_share(b)
        b.admin.gpu_set(0, policy=uapi.XPU_POLICY_WEIGHTED, period_us=PERIOD_US)
    finally:
        b.done()
        b.close()
        os.rmdir(nodedir)
    return {
        "share_error_pp": round(max(fixed, weighted), 2),
        "share_error_pp_fixed": round(fixed, 2),
        "share_error_pp_weighted": round(weighted, 2),
        "share_cases_pct": {"fixed": fixed_cases, "weighted": weighted_cases},
        "work_conserving_ratio": round(conserving, 3),
        "fixed_cap_share": round(cap, 3),
        "single_slice_overhead_ratio": round(ratio, 3),
        "priority_latency_ratio": round(lat_ratio, 3),
        "priority_latency_us": {"alone": round(lat_alone, 1),
                                "beside_low": round(lat_beside, 1)},
        "sync_share_at_30pct": round(sync, 3),
        "batch_share_at_30pct": round(batch, 3),
        "silent_queue_share_weighted": round(silent, 3),
        "compute_period_us": PERIOD_US,
    }


if __name__ == "__main__":
    import json
    print(json.dumps(run(), indent=2))
