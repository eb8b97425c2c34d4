# SPDX-License-Identifier: Apache-2.0
"""Compute: a TSG and a Hopper GPFIFO channel whose ring is a GPU virtual
address (test_gpu_va.py has the VA spaces), the work-submit token, the usermode doorbell, and the
simulated engine that runs each work item for its stated duration and
counts busy time per channel (docs/nvstub.md, "The simulated engine")."""

import ctypes
import os
import time

import nvtest
from nvclient import abi
from nvclient.client import Channel

MS = 1000       # in microseconds


def busy_bounds(work_us, elapsed_s):
    """The engine must count at least the work it ran (sleeps never end
    early) and at most the wall-clock time it had to run it."""
    return work_us * 0.95, elapsed_s * 1e6 * 1.05 + 5 * MS


def test_channel_setup(dev0):
    with Channel(dev0) as ch:
        assert ch.gp_get == 0 and ch.gp_put == 0
        rec = nvtest.channel_record(0, ch.token)
        assert rec is not None
        # a second channel gets its own token
        with Channel(dev0) as other:
            assert other.token != ch.token


def test_work_runs_for_its_duration_and_is_counted(dev0):
    work = 60 * MS
    with Channel(dev0) as ch:
        busy0 = nvtest.engine_busy_us(0)
        chan0 = nvtest.channel_busy_us(0, ch.token)
        proc0 = nvtest.process_busy_us(0, os.getpid())
        t0 = time.monotonic()
        ch.submit(work)
        ch.wait(timeout=60)
        elapsed = time.monotonic() - t0
        assert ch.gp_get == 1
        assert elapsed >= work / 1e6 * 0.95
        lo, hi = busy_bounds(work, elapsed)
        # the engine, the channel and its process are charged alike
        busy = nvtest.engine_busy_us(0) - busy0
        assert lo <= busy <= hi
        chan = nvtest.channel_busy_us(0, ch.token) - chan0
        assert lo <= chan <= hi
        proc = nvtest.process_busy_us(0, os.getpid()) - proc0
        assert lo <= proc <= hi


def test_several_items_and_ring_wraparound(dev0):
    """Items complete one by one; GPGet/GPPut wrap at gpFifoEntries."""
    with Channel(dev0, entries=4) as ch:
        t0 = time.monotonic()
        for _ in range(10):
            ch.submit(2 * MS)
        ch.wait(timeout=60)
        assert time.monotonic() - t0 >= 20 * MS / 1e6 * 0.95
        assert ch.gp_get == 10 % 4 == ch.gp_put


def test_two_channels_round_robin(dev0):
    items, work = 5, 20 * MS
    with Channel(dev0) as a, Channel(dev0) as b:
        a0 = nvtest.channel_busy_us(0, a.token)
        b0 = nvtest.channel_busy_us(0, b.token)
        for _ in range(items):
            a.submit(work, ring=False)
            b.submit(work, ring=False)
        t0 = time.monotonic()
        a.ring()
        a._wait_for(lambda: a.gp_get >= 1, 60, "the first item of a")
        b.ring()
        # Under round-robin both progress: when one is done, so is most of
        # the other; in FIFO order the second would not have started.
        first, other = None, None
        deadline = time.monotonic() + 60
        while first is None:
            ga, gb = a.gp_get, b.gp_get
            if ga == items:
                first, other = a, gb
            elif gb == items:
                first, other = b, ga
            assert time.monotonic() < deadline, (ga, gb)
            time.sleep(0.001)
        assert other >= 2, f"the other channel ran {other} of {items}"
        a.wait(60)
        b.wait(60)
        elapsed = time.monotonic() - t0
        lo, hi = busy_bounds(items * work, elapsed)
        assert lo <= nvtest.channel_busy_us(0, a.token) - a0 <= hi
        assert lo <= nvtest.channel_busy_us(0, b.token) - b0 <= hi
        # one engine: together they cannot have been busy longer than wall
        assert elapsed >= 2 * items * work / 1e6 * 0.95


def test_back_to_back_doorbells_are_both_honoured(dev0):
    """A doorbell write is an event on real hardware; two channels rung one
    right after the other must both run."""
    with Channel(dev0) as a, Channel(dev0) as b:
        a.submit(5 * MS, ring=False)
        b.submit(5 * MS, ring=False)
        a.ring()
        b.ring()
        a.wait(60)
        b.wait(60)


def _run_clock(ch, work):
    """Run ``work`` on channel ``ch`` to completion: a span of engine time
    in which another runnable channel would have progressed."""
    ch.submit(work)
    ch.wait(60)


def test_work_waits_for_the_doorbell(dev0):
    with Channel(dev0) as a, Channel(dev0) as clock:
        a.submit(MS, ring=False)
        # a token of no channel rings nothing
        a.usermode.write32(abi.NVC361_NOTIFY_CHANNEL_PENDING, 0xFFFFF)
        _run_clock(clock, 30 * MS)
        assert a.gp_get == 0
        a.ring()
        a.wait(60)
        assert a.gp_get == 1


def test_work_waits_for_scheduling(dev0):
    with Channel(dev0, schedule=False) as a, Channel(dev0) as clock:
        a.submit(MS)
        _run_clock(clock, 30 * MS)
        assert a.gp_get == 0
        a.schedule(True)
        a.ring()
        a.wait(60)
        # unscheduled again, it stops taking work
        a.schedule(False)
        a.submit(MS)
        _run_clock(clock, 30 * MS)
        assert a.gp_get == 1


def test_timeslice_set_and_get(dev0):
    with Channel(dev0) as ch:
        assert ch.timeslice(5000) == 5000
        assert ch.timeslice(1000) == 1000


def test_token_control_refusals(dev0):
    with Channel(dev0) as ch:
        tok = abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()
        # the token is the channel's; the TSG does not own the control
        p = ch.client.control_raw(ch.htsg,
                                  abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                                  tok)
        assert p.status == abi.NV_ERR_NOT_SUPPORTED
        for size in (3, 5):
            p = ch.client.control_raw(
                ch.hchannel, abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                tok, params_size=size)
            assert p.status == abi.NV_ERR_INVALID_ARGUMENT


def test_token_needs_a_runlist(dev0):
    """GET_WORK_SUBMIT_TOKEN is NV_ERR_INVALID_STATE until the channel is on
    a runlist, which its first engine object (compute) puts it on; a second
    channel of that TSG is on it from its allocation (kernel_channel.c,
    kernel_fifo_ga100.c; no SR-IOV, CC or MIG here)."""
    rm = dev0.client
    tsg = rm.alloc(dev0.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                   abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                       engineType=abi.NV2080_ENGINE_TYPE_GR0))
    mem = dev0.alloc_sysmem(4 * 4096)

    def channel(i):
        p = dev0.abi.NV_CHANNEL_ALLOC_PARAMS()
        p.hObjectBuffer = mem.handle
        p.gpFifoOffset = i * 8192
        p.gpFifoEntries = 64
        p.hUserdMemory[0] = mem.handle
        p.userdOffset[0] = i * 8192 + 4096
        p.engineType = abi.NV2080_ENGINE_TYPE_GR0
        return rm.alloc(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, p)

    def token(h):
        tok = abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()
        p = rm.control_raw(h, abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                           tok)
        return p.status, tok.workSubmitToken

    try:
        first = channel(0)
        assert token(first)[0] == abi.NV_ERR_INVALID_STATE
        rm.alloc(first, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
        st, t1 = token(first)
        assert st == abi.NV_OK and t1 >> 16 == 1
        second = channel(1)                 # the TSG has a runlist now
        st, t2 = token(second)
        assert st == abi.NV_OK and t2 != t1
    finally:
        rm.free(tsg)
        rm.free(mem.handle)


def test_channel_freed_with_its_tsg(dev0):
    objs = nvtest.objects_total()
    ch = Channel(dev0)
    token = ch.token
    ch.close()
    assert nvtest.objects_total() == objs
    assert all(rec.get("token") != token for rec in nvtest.stub.channels(0))


def test_engine_survives_a_process_exiting_mid_work(dev0):
    """A process that exits with work queued: its channel goes, the engine
    keeps serving others."""
    code = """
    from nvclient.client import Channel
    ctl = client.Ctl()
    dev = client.RmClient(ctl).device(0)
    ch = Channel(dev)
    for _ in range(20):
        ch.submit(50000)
    report(token=ch.token)
    os._exit(0)
    """
    r = nvtest.run_child(code)
    with Channel(dev0) as ch:
        _run_clock(ch, 5 * MS)
    assert all(rec.get("token") != r["token"]
               for rec in nvtest.stub.channels(0))



def test_token_is_runlist_and_channel_id(dev0):
    """runlist << 16 | chid, the stub's runlist being 1: never 0."""
    with Channel(dev0) as a, Channel(dev0) as b:
        for ch in (a, b):
            assert ch.token >> 16 == 1
        assert a.token & 0xFFFF != b.token & 0xFFFF


def test_a_dry_channel_needs_a_new_doorbell(dev0):
    with Channel(dev0) as a, Channel(dev0) as clock:
        a.submit(MS)
        a.wait(60)
        a.submit(MS, ring=False)
        _run_clock(clock, 30 * MS)
        assert a.gp_get == 1
        a.ring()
        a.wait(60)
        assert a.gp_get == 2


def test_engine_counts_channels(dev0):
    n0 = nvtest.stub.engine(0)["channels"]
    with Channel(dev0), Channel(dev0):
        assert nvtest.stub.engine(0)["channels"] == n0 + 2
    assert nvtest.stub.engine(0)["channels"] == n0




def test_rm_says_how_many_channel_ids_it_has_and_uses(rm, dev0):
    """NV2080_CTRL_CMD_FIFO_GET_PHYSICAL_CHANNEL_COUNT, a user client's
    control on a subdevice (RMCTRL_FLAGS_NON_PRIVILEGED, 535 to 595):
    the GPU's channel ids (the stub's `channel_ids`, 2048 in the rig) and
    those in use, which a channel takes and gives back."""
    p = (ctypes.c_uint32 * 2)()

    def count():
        rm.control(dev0.hsubdevice, 0x20801108, p)
        return p[0], p[1]

    total, used = count()
    assert total == 2048
    with Channel(dev0), Channel(dev0):
        assert count() == (total, used + 2)
    assert count() == (total, used)
