# SPDX-License-Identifier: Apache-2.0
"""Hostile tenants against compute gating (issue 17, docs/compute.md).

Four ways around the doorbell gate, each under fixed and weighted, a 10 %
hostile slice beside a 90 % honest one that saturates the engine:

- manymaps: the hostile process maps the usermode region 71 times (each a
  fresh GPU file, RM_MAP_MEMORY, mmap) and rings through the last mapping.
  Every doorbell file of a slice must be zapped, not only the first 64.
- kwrite: before each doorbell write the hostile process has the kernel read
  the doorbell page (a write(2) into a pipe from it).  A kernel-mode fault
  must not re-install the page of a slice that waits: the write fails with
  EFAULT, counts as demand, and the user-mode doorbell write still faults.

- procmem: the hostile process rings through /proc/self/mem (ptrace's
  way: the driver's access() writes the page through a kernel mapping of
  its own, no PTE, no fault), and through its mapping only when that
  fails (EIO): a write there must count as demand and fail while the slice
  waits.  Before, no such write failed or counted; the share held all the
  same (a waiting slice's channels are disabled, and under weighted a slice
  that seems silent earns drain time at its share), so the test's premise
  (gate_faults, the failed writes) is what failed.

- rostruct: the hostile process maps the usermode region once more with
  the RM_MAP_MEMORY struct on a read-only page (RM makes the mapping's
  context, then the driver's copy-back fails with EFAULT) and rings through
  that mapping.  What RM did counts, not what the ioctl returned: the file
  is a doorbell file all the same.

Under fixed the channels' lever alone holds the slice; under weighted an
escaped doorbell makes the slice look idle, so it would run beside the other.

- silent (class 11): the hostile slice queues seconds of work with one
  doorbell write and then writes none, so it looks idle; its channels may
  run beside the turn holder only for the time it would earn if it wanted
  the GPU.  Its queued work still runs (a long kernel must not hang), and
  with nobody else wanting the GPU it has all of it.
Shares are the simulated engine's busy counters, as in test_xpu_compute.py,
with its tolerances."""


import nvtest
import pytest
from test_xpu_compute import LOSS, TOL, admin, nodedir, policy, run, slices  # noqa: F401
from test_xpu_mem import Slice

uapi = pytest.importorskip("xpu.uapi")
xpu_ctl = pytest.importorskip("xpu.ctl")

pytestmark = pytest.mark.usefixtures("require_xpu")


@pytest.mark.parametrize("pol", [uapi.XPU_POLICY_FIXED,
                                 uapi.XPU_POLICY_WEIGHTED],
                         ids=["fixed", "weighted"])
@pytest.mark.parametrize("mode", ["manymaps", "kwrite", "rostruct",
                                  "procmem"])
def test_a_hostile_slice_is_held_to_its_share(admin, slices, mode,  # noqa: F811
                                              pol):
    policy(admin, pol)
    slices.make(100, mode=mode)
    slices.make(900)
    shares, _, results = run(slices)
    assert shares[0] <= 0.10 + TOL, shares
    assert shares[1] >= 0.90 - LOSS, shares
    # The premise: the hostile worker lived through its setup (the 70
    # mappings, the read-only struct's EFAULT) and its work ran through the
    # mapping it escaped with -- a worker dead at setup has a share of 0 --
    # and its doorbell writes had to wait.
    assert results[0].get("items"), results[0]
    assert shares[0] >= 0.02, shares
    assert admin.slice_get(slices.ids[0]).gate_faults > 0
    if mode in ("kwrite", "procmem"):
        # the kernel's read of a waiting slice's doorbell page failed, or
        # the write through /proc/self/mem
        assert results[0]["efault"] > 0, results[0]


SILENT_ITEM_US = 50000      # 60 items a doorbell write: 3 s of work


@pytest.mark.parametrize("pol", [uapi.XPU_POLICY_WEIGHTED,
                                 uapi.XPU_POLICY_PRIORITY],
                         ids=["weighted", "priority"])
def test_a_slice_that_queues_work_silently_is_held_to_its_share(
        admin, slices, pol):  # noqa: F811
    policy(admin, pol)
    slices.make(100, mode="silent", item_us=SILENT_ITEM_US)
    slices.make(900)
    shares, _, _ = run(slices)
    assert shares[0] <= 0.10 + TOL, shares
    assert shares[0] >= 0.02, shares        # its queued work still runs
    assert shares[1] >= 0.90 - LOSS, shares


def test_a_silent_slice_alone_has_the_whole_engine(admin, slices):  # noqa: F811
    policy(admin, uapi.XPU_POLICY_WEIGHTED)
    slices.make(100, mode="silent", item_us=SILENT_ITEM_US)
    idle = admin.slice_create("idle", 0, 64 << 20, compute_share=900)
    try:
        shares, _, _ = run(slices)
    finally:
        admin.slice_destroy(idle.id, force=True)
    assert shares[0] >= 1.0 - LOSS, shares


# --- a file put under the number RM_MAP_MEMORY names, behind xpu's back

SWAP_DELAY = 0.3            # the stub's map_delay_us, in seconds

# Reads of the doorbell page mapped through the GPU file F by the kernel
# (kwrite's way), until one fails with EFAULT (the page is gated) or 10 s
# pass: (efault, reads).
KERNEL_READS = """
def kernel_reads(f):
    bell = mmap.mmap(f, abi.NVC361_NV_USERMODE__SIZE, mmap.MAP_SHARED,
                     mmap.PROT_READ | mmap.PROT_WRITE)
    view = memoryview(bell)[0:4]
    pr, pw = os.pipe()
    efault = reads = 0
    deadline = time.monotonic() + 10
    while not efault and time.monotonic() < deadline:
        try:
            os.write(pw, view)
        except OSError as e:
            if e.errno != errno.EFAULT:
                raise
            efault += 1
            continue
        os.read(pr, 4)
        reads += 1
    return efault, reads
"""

FD_SWAP = nvtest.RAW_PRELUDE + KERNEL_READS + """
import errno, threading, time
ch = client.Channel(dev, entries=64)
SIZE = abi.NVC361_NV_USERMODE__SIZE
f = os.open(GPU, os.O_RDWR | os.O_CLOEXEC)  # what xpu.ko finds under f
keep = os.dup(f)
b = os.open(GPU, os.O_RDWR | os.O_CLOEXEC)  # what the driver finds there
arg = abi.nv_ioctl_nvos33_parameters_with_fd()
arg.params.hClient, arg.params.hDevice = rm.handle, dev.hsubdevice
arg.params.hMemory, arg.params.length = ch.husermode, SIZE
arg.fd = f
def swap():
    time.sleep(DELAY / 2)   # xpu.ko looked; the driver sleeps DELAY first
    os.dup2(b, f)
    time.sleep(DELAY)       # the driver looked, and sleeps DELAY after
    os.dup2(keep, f)        # for xpu.ko's second look
t = threading.Thread(target=swap); t.start()
rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_MAP_MEMORY,
                                     ctypes.sizeof(arg)),
                ctypes.addressof(arg))
t.join()
efault, reads = kernel_reads(b)
report(rc=rc, status=arg.params.status, efault=efault, reads=reads)
"""


def in_a_fixed_tenth(reload_stub, nodedir, name, code,  # noqa: F811
                     **stub_params):
    """CODE's report, run in a slice NAME of 10 % under `fixed` (it waits 90 %
    of every 20 ms period), with the stub reloaded with STUB_PARAMS."""
    reload_stub(**stub_params)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as a:
        a.gpu_set(0, policy=uapi.XPU_POLICY_FIXED, period_us=20000)
        sl = Slice(a, nodedir, name=name)
        try:
            a.slice_set(sl.id, compute_share=100)
            r = nvtest.run_child(code.replace("CTL", repr(sl.ctl_node))
                                 .replace("GPU", repr(sl.gpu_node)))
            r["gate_faults"] = a.slice_get(sl.id).gate_faults
            return r
        finally:
            sl.destroy()


def test_a_file_put_under_the_number_behind_xpu_s_back_is_gated(
        reload_stub, nodedir):  # noqa: F811
    """RM_MAP_MEMORY names the file for a usermode mapping by number, and
    the driver looks it up itself.  A thread puts another GPU file of the
    slice under that number after xpu.ko's first look and the first one
    back before its second: the driver gives the doorbell's context to a
    file xpu.ko never saw.  Before, that file's mapping was never gated: a
    kernel read of the doorbell page through it always succeeded, in a
    fixed 10 % slice that waits 90 % of every period.  Now every GPU file of
    the slice mapped while such a call runs, or after it, is gated: the
    read fails with EFAULT while the slice waits."""
    r = in_a_fixed_tenth(reload_stub, nodedir, "fdswap",
                         FD_SWAP.replace("DELAY", repr(SWAP_DELAY)),
                         map_delay_us=int(SWAP_DELAY * 1e6))
    assert r["rc"] == 0 and r["status"] == 0, r
    assert r["efault"] > 0, r


USERMODE_RACE = nvtest.RAW_PRELUDE + KERNEL_READS + """
import errno, struct, threading, time
ch = client.Channel(dev, entries=64)
SIZE = abi.NVC361_NV_USERMODE__SIZE
H = 0x5c0ce001
def call_page():            # xpu.ko's page for the calls it makes here
    with open("/proc/self/maps") as m:
        for line in m:
            if "xpu-call" in line:
                return int(line.split("-")[0], 16)
page = call_page()          # kept from the calls above
f = os.open(GPU, os.O_RDWR | os.O_CLOEXEC)
t = threading.Thread(target=rm.alloc, args=(dev.hsubdevice,
                                            abi.HOPPER_USERMODE_A),
                     kwargs=dict(hnew=H))
t.start()
while struct.pack("<I", H) not in ctypes.string_at(page, 64):
    pass                    # xpu.ko wrote the call: the driver sleeps
t0 = time.monotonic()
arg = ctl.rm_map_memory(rm.handle, dev.hsubdevice, H, SIZE, f, check=False)
waited = time.monotonic() - t0
t.join()
efault, reads = kernel_reads(f)
report(status=arg.params.status, waited=waited, efault=efault, reads=reads)
"""


def test_a_usermode_object_made_while_its_mapping_waits_is_gated(
        reload_stub, nodedir):  # noqa: F811
    """RM_MAP_MEMORY of a handle that is not yet a usermode object, made
    while another thread's RM_ALLOC makes one under that handle (the
    driver waits 300 ms before reading the allocation, with the slice's
    lock held): the mapping waits for the lock and then maps the doorbell.
    Before, xpu.ko asked its records whether the handle was a usermode
    object before taking the lock, found none, and never marked the file:
    a kernel read of the doorbell page through it always succeeded in a
    fixed 10 % slice.  Now the records are asked under the lock every call
    that makes or frees a handle of the slice holds: the read fails with
    EFAULT while the slice waits."""
    r = in_a_fixed_tenth(reload_stub, nodedir, "umrace", USERMODE_RACE,
                         copyin_delay_us=300000)
    # premise: the mapping waited for the allocation, and mapped it
    assert r["status"] == 0 and r["waited"] > 0.1, r
    assert r["efault"] > 0, r


# --- the doorbell written through /proc/self/mem (ptrace's way)

PROC_MEM = nvtest.RAW_PRELUDE + """
import errno, struct, time
ch = client.Channel(dev, entries=64)
c = ctypes.c_char.from_buffer(ch.usermode.mm)
bell = ctypes.addressof(c) + abi.NVC361_NOTIFY_CHANNEL_PENDING
del c
mem = os.open("/proc/self/mem", os.O_RDWR)
token = struct.pack("<I", ch.token)
eio = writes = read = 0
deadline = time.monotonic() + 10
while not (eio and writes) and time.monotonic() < deadline:
    try:
        os.pwrite(mem, token, bell)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        eio += 1
        read = len(os.pread(mem, 4, bell))  # a read rings nothing: it passes
        continue
    writes += 1
report(eio=eio, writes=writes, read=read)
"""


def test_a_doorbell_written_through_proc_mem_is_gated(
        reload_stub, nodedir):  # noqa: F811
    """/proc/PID/mem and ptrace write a page get_user_pages() cannot pin (a
    PFN map: the doorbell) through the VMA's access(), in which the driver
    writes the page through a kernel mapping of its own (nvidia_vma_access):
    no PTE, no fault.  Before, a 10 % slice under `fixed`, which waits 90 %
    of every period, wrote its doorbell that way for 10 s and no write
    failed or counted as demand.  Now a write there is a doorbell write: it
    counts as demand (`gate_faults`) and fails with EIO while the slice
    waits, as a kernel fault does; a read passes."""
    r = in_a_fixed_tenth(reload_stub, nodedir, "procmem", PROC_MEM)
    assert r["eio"] > 0 and r["gate_faults"] >= r["eio"], r
    assert r["read"] == 4, r
    # premise: the path reaches the page at all (writes while it may run)
    assert r["writes"] > 0, r


# --- a waiting slice's controls: one pass disabling its channels at a time

# Eight threads make controls RM refuses (no one's command) while the slice
# waits; how many of them were found asleep in xpu_sched_reassert at once.
REASSERTS = nvtest.RAW_PRELUDE + """
import threading
chans = [client.Channel(dev, entries=64) for _ in range(2)]
stop = threading.Event()
tids = []
def loop():
    tids.append(threading.get_native_id())
    while not stop.is_set():
        p = abi.NVOS54_PARAMETERS(hClient=rm.handle, hObject=rm.handle,
                                  cmd=0x5c5c)
        client.ioctl_raw(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_CONTROL,
                                              ctypes.sizeof(p)), p)
ts = [threading.Thread(target=loop) for _ in range(8)]
for t in ts:
    t.start()
while len(tids) < 8:
    pass

def wchan(tid):
    # where it sleeps, read in one go by the kernel (its state and stack
    # under one lock): a mutex's sleep reads as the mutex's caller; "0"
    # for a task running, or on kernels that disabled wchan (5.10)
    try:
        with open(f"/proc/self/task/{tid}/wchan") as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        # the thread gone, its file with it or under the open file
        return "0"

def in_pass(tid):
    # xpu_sched_reassert on its kernel stack: in a pass, wherever it sleeps
    try:
        with open(f"/proc/self/task/{tid}/stack") as f:
            return "xpu_sched_reassert" in f.read()
    except FileNotFoundError:
        return False

most = seen = asleep = 0
for _ in range(SAMPLES):
    where = [wchan(t) for t in tids]
    asleep += sum(w != "0" for w in where)
    # asleep for the scheduler's mutex in a pass: at most one of them
    most = max(most, where.count("xpu_sched_reassert"))
    seen += any(in_pass(t) for t, w in zip(tids, where) if w != "0")
stop.set()
for t in ts:
    t.join()
report(most=most, seen=seen, asleep=asleep)
"""


def test_a_waiting_slice_s_controls_make_one_pass_at_a_time(
        reload_stub, nodedir):  # noqa: F811
    """While a slice waits, each of its controls is followed by a pass that
    disables its channels again (a control could have enabled them), made
    under the GPU scheduler's lock, which its turns and every slice's
    channel records take.  Before (found by a review in session 58) each
    control made a pass of its own: a tenant's eight threads looping on
    controls RM refuses queued on that lock, several found asleep there at
    once (by /proc's wchan, which the kernel reads under the task's lock:
    a stack read apart from the state can be stale).  Now one pass is in flight per slice, and a control that ends
    while one runs leaves it to that one: never two of its threads there."""
    r = in_a_fixed_tenth(reload_stub, nodedir, "reassert",
                         REASSERTS.replace("SAMPLES", "200"))
    if not r["asleep"]:
        pytest.skip("this kernel's wchan reads 0 (5.10's stable kernels)")
    assert r["seen"] > 0, r         # the premise: it waited, passes ran
    assert r["most"] <= 1, r
