# SPDX-License-Identifier: Apache-2.0
"""Compute isolation through xpu.ko (docs/compute.md): doorbell gating, the
channels disabled through RM, and the per-GPU scheduler's policies.

Every share is the simulated engine's own busy counter per channel over a
measured window of wall time; the tolerances fail with gating switched off
(the engine alone splits its time evenly between busy channels)."""

import ctypes
import os
import shutil
import signal
import tempfile
import time

import pytest
from compute import Worker, measure, stop_all
from nvclient import abi, client

xpu_ctl = pytest.importorskip("xpu.ctl")
uapi = pytest.importorskip("xpu.uapi")

MiB = 1 << 20
NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS = 0x2080110B


class DisableChannelsParams(ctypes.Structure):
    """NV2080_CTRL_FIFO_DISABLE_CHANNELS_PARAMS (ctrl2080fifo.h), 536 B."""
    _fields_ = [("bDisable", ctypes.c_uint8), ("numChannels", ctypes.c_uint32),
                ("bOnlyDisableScheduling", ctypes.c_uint8),
                ("bRewindGpPut", ctypes.c_uint8),
                ("pRunlistPreemptEvent", ctypes.c_uint64),
                ("hClientList", ctypes.c_uint32 * 64),
                ("hChannelList", ctypes.c_uint32 * 64)]


assert ctypes.sizeof(DisableChannelsParams) == 536
WINDOW = 2.0
TOL = 0.05          # percentage points, as a fraction
# What a busy slice may get below its share.  Each turn costs a switch (the
# scheduler's RM calls, the worker's doorbell fault), and on a debug kernel
# (KASAN and lockdep; only it has /proc/lockdep) a switch costs several times
# as much, while a hostile neighbour's faults take the guest's two CPUs from
# the simulated engine.  No slice may get more than its share + TOL on any
# kernel: the caps are the isolation, the floors a figure of overhead.
DEBUG_KERNEL = os.path.exists("/proc/lockdep")
LOSS = 0.12 if DEBUG_KERNEL else TOL


def near(share, target):
    """SHARE is TARGET, less at most LOSS, more at most TOL."""
    return target - LOSS <= share <= target + TOL


pytestmark = pytest.mark.usefixtures("require_xpu")


@pytest.fixture
def admin():
    with xpu_ctl.Ctl() as c:
        yield c
        c.gpu_set(0, policy=uapi.XPU_POLICY_WEIGHTED, period_us=20000)


@pytest.fixture
def nodedir():
    d = tempfile.mkdtemp(prefix="xpucomp-", dir="/dev")
    yield d
    shutil.rmtree(d)


class Slices:
    """Slices on GPU 0 with their nodes; destroyed (forced) at the end."""

    def __init__(self, admin, nodedir):
        self.admin, self.dir, self.ids, self.workers = admin, nodedir, [], []

    def make(self, share, weight=100, priority=uapi.XPU_PRIO_NORMAL,
             mode="saturate", item_us=2000):
        name = f"c{len(self.ids)}"
        info = self.admin.slice_create(name, 0, 64 * MiB,
                                       compute_share=share, weight=weight,
                                       priority=priority)
        gpu = os.path.join(self.dir, f"xpu{info.id}")
        ctl = os.path.join(self.dir, f"xpu{info.id}-ctl")
        os.mknod(gpu, 0o20600, os.makedev(195, 0))
        os.mknod(ctl, 0o20600, os.makedev(195, 255))
        self.admin.node_attach(info.id, gpu, uapi.XPU_NODE_GPU)
        self.admin.node_attach(info.id, ctl, uapi.XPU_NODE_CTL)
        self.ids.append(info.id)
        w = Worker(ctl, gpu, mode, item_us)
        self.workers.append(w)
        return w

    def close(self):
        for w in self.workers:
            if w.result is None:
                w.kill()
        for i in self.ids:
            self.admin.slice_destroy(i, force=True)


@pytest.fixture
def slices(admin, nodedir):
    s = Slices(admin, nodedir)
    yield s
    s.close()


def run(slices, seconds=WINDOW, **kw):
    shares, engine = measure(slices.workers, seconds, **kw)
    results = stop_all(slices.workers)
    return shares, engine, results


def policy(admin, p, period_us=20000):
    admin.gpu_set(0, policy=p, period_us=period_us)


# --- the policies


def test_fixed_holds_each_slice_to_its_share(admin, slices):
    policy(admin, uapi.XPU_POLICY_FIXED)
    slices.make(300)
    slices.make(700)
    shares, _, _ = run(slices)
    assert near(shares[0], 0.30), shares
    assert near(shares[1], 0.70), shares


def test_a_cuda_like_client_is_held_to_its_share(admin, slices, uvm_nodes):
    """A channel made to NVIDIA's ABI as CUDA makes it (an externally owned
    VA space with UVM, a context share, the ring at a GPU VA, USERD in video
    memory; issue 18): gated like any other, and never killed."""
    policy(admin, uapi.XPU_POLICY_FIXED)
    slices.make(250, mode="cuda")
    shares, _, results = run(slices)
    assert near(shares[0], 0.25), shares
    assert results[0]["items"] > 0


def test_fixed_caps_a_slice_on_an_idle_gpu(admin, slices):
    policy(admin, uapi.XPU_POLICY_FIXED)
    slices.make(250)
    shares, _, _ = run(slices)
    assert shares[0] <= 0.27 + 0.01, shares
    assert shares[0] >= 0.25 - LOSS, shares


def test_weighted_gives_idle_time_to_the_busy_slice(admin, slices):
    policy(admin, uapi.XPU_POLICY_WEIGHTED)
    slices.make(250)
    slices.ids.append(admin.slice_create("idle", 0, 64 * MiB,
                                         compute_share=750).id)
    shares, _, _ = run(slices)
    assert shares[0] >= 0.90, shares


def test_weighted_guarantees_the_shares_of_busy_slices(admin, slices):
    policy(admin, uapi.XPU_POLICY_WEIGHTED)
    slices.make(300)
    slices.make(700)
    shares, engine, _ = run(slices)
    assert near(shares[0], 0.30), shares
    assert near(shares[1], 0.70), shares
    assert engine >= 0.9


def test_native_does_not_gate(admin, slices):
    policy(admin, uapi.XPU_POLICY_NATIVE)
    slices.make(300)
    slices.make(700)
    shares, _, _ = run(slices)
    # the engine alone: two busy channels share it about evenly
    assert abs(shares[0] - shares[1]) < 0.15, shares


def test_priority_gates_the_lower_class(admin, slices):
    policy(admin, uapi.XPU_POLICY_PRIORITY)
    slices.make(500, priority=uapi.XPU_PRIO_LOW)
    slices.make(500, priority=uapi.XPU_PRIO_HIGH)
    shares, _, _ = run(slices)
    assert shares[1] >= 0.90, shares
    assert shares[0] <= 0.08, shares


# --- workloads and hostile processes


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_synchronising_and_batched_work_is_held_to_its_share(admin, slices,
                                                            mode):
    policy(admin, uapi.XPU_POLICY_FIXED)
    slices.make(300, mode=mode)
    slices.make(700)
    shares, _, _ = run(slices)
    assert shares[0] <= 0.30 + TOL, shares
    # not starved.  A synchronising slice gets under its share, as its
    # client's own loop leaves its turns idle: 21-23 % of 30 % on a quiet
    # host, 10 % on a loaded one (docs/compute.md, Known limits)
    assert shares[0] >= 0.05, shares


# Under fixed the channels' lever alone would hold a slice whose doorbell
# escaped; under weighted such a slice would look idle and run beside the
# other, so weighted also checks the doorbell is still seen.
@pytest.mark.parametrize("pol", [uapi.XPU_POLICY_FIXED,
                                 uapi.XPU_POLICY_WEIGHTED],
                         ids=["fixed", "weighted"])
@pytest.mark.parametrize("mode", ["remap", "mremap", "fork", "spam"])
def test_a_hostile_process_cannot_exceed_its_share(admin, slices, mode, pol):
    policy(admin, pol)
    slices.make(300, mode=mode)
    slices.make(700)
    shares, _, _ = run(slices)
    assert shares[0] <= 0.30 + TOL, shares
    assert shares[1] >= 0.70 - LOSS, shares


def test_kill_of_a_gated_process_frees_everything(admin, slices):
    policy(admin, uapi.XPU_POLICY_FIXED)
    victim = slices.make(100)
    other = slices.make(900)
    victim.go()
    other.go()
    # the victim is gated most of the time: wait until it has been
    deadline = time.monotonic() + 20
    while admin.slice_get(slices.ids[0]).gate_faults == 0:
        assert time.monotonic() < deadline, "the victim was never gated"
        time.sleep(0.01)
    os.kill(victim.pid, signal.SIGKILL)
    victim.p.wait(20)
    victim.result = {}
    res = other.stop()
    assert res["items"] > 0
    # the leak check of every test verifies the stub's objects are all gone


def test_a_share_changed_mid_run_moves_the_measured_share(admin, slices):
    policy(admin, uapi.XPU_POLICY_FIXED)
    a = slices.make(200)
    b = slices.make(600)
    shares, _ = measure([a, b], WINDOW)
    assert near(shares[0], 0.20), shares
    admin.slice_set(slices.ids[1], compute_share=200)
    admin.slice_set(slices.ids[0], compute_share=600)
    time.sleep(0.2)         # more than one period
    from compute import busy_ns
    b0, _ = busy_ns(0, [a.token, b.token])
    t0 = time.monotonic_ns()
    time.sleep(WINDOW)
    b1, _ = busy_ns(0, [a.token, b.token])
    wall = time.monotonic_ns() - t0
    stop_all([a, b])
    moved = [(b1[w.token] - b0[w.token]) / wall for w in (a, b)]
    assert near(moved[0], 0.60), moved
    assert near(moved[1], 0.20), moved


def test_counters(admin, slices):
    policy(admin, uapi.XPU_POLICY_FIXED)
    slices.make(300)
    slices.make(700)
    run(slices)
    info = admin.slice_get(slices.ids[0])
    assert info.channels == 0       # its client is gone with the worker
    assert info.gate_faults > 0
    assert info.gated_ns > 0
    assert info.runnable_ns >= info.gated_ns
    assert info.run_ns > 0
    assert 200 <= info.share_obtained <= 400


# --- the channel lever: refused to sliced clients


def test_disable_channels_is_refused_inside_a_slice(admin, slices):
    slices.make(500)
    d = slices.dir
    sid = slices.ids[0]
    ctl = client.Ctl(os.path.join(d, f"xpu{sid}-ctl"))
    gpu = client.GpuFile(0, os.path.join(d, f"xpu{sid}"))
    rm = client.RmClient(ctl)
    dev = rm.device(0, gpu_file=gpu)
    try:
        p = DisableChannelsParams(bDisable=0, numChannels=0)
        with pytest.raises(client.NvStatusError) as e:
            rm.control(dev.hsubdevice, NV2080_CTRL_CMD_FIFO_DISABLE_CHANNELS, p)
        assert e.value.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS
    finally:
        dev.close()
        rm.close()
        gpu.close()
        ctl.close()
