# SPDX-License-Identifier: Apache-2.0
"""Random ioctls from hostile tenants and admins (issue 17, docs/security.md,
docs/testing.md), made by tests/vmtests/fuzz.py: bounded, seeded,
reproducible.

    tests/vm/run -- env XPU_FUZZ_SEED=S XPU_FUZZ_CALLS=N \\
        .venv/bin/python -m pytest -q -s tests/vmtests/test_hostile_fuzz.py

XPU_FUZZ_CALLS is the number of calls of each fuzzing process (four per
seed); the default keeps the file near 30 s a seed in the VM.
XPU_FUZZ_SEED may name several seeds, comma-separated: each fuzzing test
runs once for each (`make check`'s 6.1 boot runs two).  A failure prints the
seed and the last calls made.

Each test asserts: every call returned (a call that outlives the fuzzer's
alarm or the test's timeout is a hang, reported with the call); the slice is
clean once the fuzzing process has exited (no memory, no channels, no open
files) and the stub's heap and objects are back where they were (the
leak_check fixture); the unprivileged caller changed nothing on
/dev/xpuctl; and the kernel log stays clean (the rig fails the run on any
BUG, WARNING, KASAN or lockdep line).
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

import nvtest
import pytest
import test_xpu_mem
from nvclient import client
from test_xpu_mem import LIMIT, Slice

xpu_ctl = pytest.importorskip("xpu.ctl")
uapi = pytest.importorskip("xpu.uapi")

pytestmark = pytest.mark.usefixtures("require_xpu")

admin = test_xpu_mem.admin
nodedir = test_xpu_mem.nodedir

SEEDS = [int(x) for x in os.environ.get("XPU_FUZZ_SEED", "17").split(",")]
CALLS = int(os.environ.get("XPU_FUZZ_CALLS", "1200"))
FUZZ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz.py")
# Generous: a call takes about 2 ms under software emulation.
TIMEOUT_S = 60 + CALLS // 10


@pytest.fixture(params=SEEDS, ids=lambda s: f"seed{s}")
def seed(request):
    return request.param


def fuzz(tmp_path, seed, *args):
    """Run fuzz.py with SEED; its report, or a failure naming the seed
    and the last calls."""
    trace = tmp_path / f"trace-{len(list(tmp_path.iterdir()))}"
    cmd = [sys.executable, FUZZ, *args, "--seed", str(seed),
           "--calls", str(CALLS), "--trace", str(trace)]
    where = f"XPU_FUZZ_SEED={seed} XPU_FUZZ_CALLS={CALLS} {' '.join(args)}"

    def last_calls():
        try:
            return "\n".join(trace.read_text().splitlines()[-5:])
        except OSError:
            return "(no trace)"

    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd="/",
                           timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: no answer in {TIMEOUT_S} s; the last calls:\n"
                    f"{last_calls()}")
    assert r.returncode == 0, \
        f"{where}: fuzz.py exited {r.returncode}\n{r.stdout[-2000:]}\n" \
        f"{r.stderr[-4000:]}\nthe last calls:\n{last_calls()}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(where, json.dumps(out["results"], sort_keys=True))
    return out


def totals(results):
    """{"ok": n, "EINVAL": n, ...} over every command."""
    out = collections.Counter()
    for key, n in results.items():
        out[key.split()[-1]] += n
    return out


# --- NVIDIA escapes on a slice's nodes


@pytest.mark.parametrize("who", ["nobody", "root"])
def test_random_escapes_on_a_slices_nodes_leave_it_clean(
        admin, nodedir, tmp_path, who, seed):
    """A tenant makes a real client in its slice (device, subdevice, video
    and system memory, a TSG with a channel, usermode), then throws
    random escapes at its control and GPU nodes with those handles, classes
    xpu.ko accounts, and pointers to NULL, unmapped, read-only and valid
    pages.  Once it exits the slice holds nothing and the stub's heap is
    back."""
    sl = Slice(admin, nodedir, name="fuzz", limit=LIMIT)
    try:
        heap0 = nvtest.heap_used(0)
        args = ["nv", "--ctl", sl.ctl_node, "--gpu", sl.gpu_node,
                "--limit", str(LIMIT)]
        out = fuzz(tmp_path, seed, *args, *(["--nobody"] if who == "nobody"
                                      else []))
        t = totals(out["results"])
        assert t["ok"] > 0 and sum(t.values()) == CALLS
        info = sl.get()
        assert (info.memory_used, info.channels, info.open_files) == \
            (0, 0, 0), info
        assert nvtest.heap_used(0) == heap0
        # The slice still works, and still holds to its limit.
        ctl, gpu, rm, dev = sl.open()
        try:
            assert dev.heap_info()[0] == LIMIT
            with pytest.raises(client.NvStatusError):
                dev.alloc_vidmem(LIMIT + 1)
        finally:
            dev.close()
            rm.close()
            gpu.close()
            ctl.close()
        assert sl.used() == 0
    finally:
        sl.destroy()


# --- /dev/xpuctl


ADMIN_ONLY = {"0xe6/0x2", "0xe6/0x10", "0xe6/0x12", "0xe6/0x13", "0xe6/0x20",
              "0xe6/0x21", "0xe6/0x22", "0xe6/0x23"}
CGROUP = "/sys/fs/cgroup/xpu-fuzz"


@pytest.fixture
def ctl_world(admin, nodedir):
    """Two slices with their nodes, spare nodes (the slices' GPUs, another
    GPU, the control minor, /dev/null's numbers), a regular file and a
    cgroup, for the fuzzer to throw the fds of.  Afterwards every slice
    is gone and the GPUs' settings are back."""
    gpus = admin.gpu_list()
    assert admin.slice_list() == []
    a = Slice(admin, nodedir, name="fz-a", limit=LIMIT)
    b = Slice(admin, nodedir, name="fz-b", limit=LIMIT)
    spare = tempfile.mkdtemp(prefix="xpufuzz-", dir="/dev")
    for name, rdev in (("nv0", (195, 0)), ("nv1", (195, 1)),
                       ("nvctl", (195, 255)), ("null", (1, 3))):
        os.mknod(os.path.join(spare, name), 0o20600, os.makedev(*rdev))
    with open(os.path.join(spare, "file"), "w"):
        pass
    for s in (a, b):
        for node in (s.gpu_node, s.ctl_node):
            os.link(node, os.path.join(spare, os.path.basename(node)))
    os.makedirs(CGROUP, exist_ok=True)
    try:
        yield a, b, spare
    finally:
        for sid in admin.slice_list():
            admin.slice_destroy(sid, force=True)
        for g in gpus:
            admin.gpu_set(g.minor, g.mode, g.policy, g.period_us)
        shutil.rmtree(spare)
        for s in (a, b):
            for p in (s.gpu_node, s.ctl_node):
                os.unlink(p)
        os.rmdir(CGROUP)


def snapshot(admin):
    slices = {}
    for s in admin.slices():
        d = dict(vars(s))
        for usage in ("memory_used", "memory_peak", "open_files",
                      "processes"):
            d.pop(usage, None)
        slices[s.id] = d
    return admin.gpu_list(), slices


def test_random_xpuctl_calls_as_nobody_change_nothing(admin, ctl_world,
                                                      tmp_path, seed):
    """/dev/xpuctl opened as root and handed to nobody (as a leaked fd
    would be): the read-only calls answer, every other is refused, and
    nothing changes."""
    a, b, spare = ctl_world
    before = snapshot(admin)
    out = fuzz(tmp_path, seed, "xpuctl", "--nobody", "--dir", spare,
               "--cgroup", CGROUP, "--slice", str(a.id), "--slice", str(b.id))
    ok = {k.split()[0] for k, n in out["results"].items()
          if k.endswith(" ok")}
    assert ok and not ok & ADMIN_ONLY, out["results"]
    assert snapshot(admin) == before
    # The nodes are still the slices'.
    for s in (a, b):
        with pytest.raises(xpu_ctl.Conflict):
            admin.node_attach(b.id if s is a else a.id, s.gpu_node)


def test_random_xpuctl_calls_as_root_leave_a_working_module(admin, ctl_world,
                                                             tmp_path, seed):
    """The same calls as root do what they say (slices come and go, nodes
    and cgroups are bound); once everything is destroyed the GPUs are
    whole again and unsliced opens see the whole GPU."""
    a, b, spare = ctl_world
    total = nvtest.StubConfig.current().memory_bytes
    out = fuzz(tmp_path, seed, "xpuctl", "--dir", spare, "--cgroup", CGROUP,
               "--slice", str(a.id), "--slice", str(b.id))
    ok = {k.split()[0] for k, n in out["results"].items()
          if k.endswith(" ok")}
    assert ok & ADMIN_ONLY, out["results"]
    for sid in admin.slice_list():
        admin.slice_destroy(sid, force=True)
    assert all(g.nr_slices == 0 and g.memory_sliced == 0
               for g in admin.gpu_list())
    with client.Ctl() as ctl:
        rm = client.RmClient(ctl)
        assert rm.device(0).heap_info()[0] == total
        rm.close()


def test_the_fuzzer_is_reproducible():
    """The same seed makes the same calls, another seed others (here
    against one arena: the calls hold its addresses)."""
    code = f"""
import random
sys.path.insert(0, {os.path.dirname(FUZZ)!r})
import fuzz
from xpu import uapi
arena = fuzz.Arena(random.Random(0))
def calls(seed):
    f = fuzz.CtlFuzzer(random.Random(seed), arena, uapi, [3, 4], [0, 1])
    return [f.one(i)[1:] for i in range(150)]
report(same=calls(5) == calls(5), differs=calls(5) != calls(6))
"""
    out = nvtest.run_child(code)
    assert out == {"same": True, "differs": True}
