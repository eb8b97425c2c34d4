# SPDX-License-Identifier: Apache-2.0
"""Slices and hard memory isolation through xpu.ko, against the simulated
driver (docs/memory.md, docs/interposition.md).

Every limit is checked against the stub's own heap counter, not only against
xpu's figure: the stub is the GPU."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import nvtest
import pytest
from nvclient import abi, client, stub

xpu_ctl = pytest.importorskip("xpu.ctl")
uapi = pytest.importorskip("xpu.uapi")

MiB = 1 << 20
LIMIT = 64 * MiB


pytestmark = pytest.mark.usefixtures("require_xpu")


@pytest.fixture
def admin():
    with xpu_ctl.Ctl() as c:
        yield c


class Slice:
    """A slice on GPU 0 with its two nodes made and attached in tmpdir."""

    def __init__(self, admin, tmpdir, name="t", limit=LIMIT, gpu=0):
        self.admin = admin
        self.info = admin.slice_create(name, gpu, limit)
        self.id = self.info.id
        self.limit = limit
        self.gpu = gpu
        self.gpu_node = os.path.join(tmpdir, f"xpu{self.id}")
        self.ctl_node = os.path.join(tmpdir, f"xpu{self.id}-ctl")
        os.mknod(self.gpu_node, 0o20666, os.makedev(195, gpu))
        os.mknod(self.ctl_node, 0o20666, os.makedev(195, 255))
        os.chmod(self.gpu_node, 0o666)
        os.chmod(self.ctl_node, 0o666)
        admin.node_attach(self.id, self.gpu_node, uapi.XPU_NODE_GPU)
        admin.node_attach(self.id, self.ctl_node, uapi.XPU_NODE_CTL)

    def used(self):
        return self.admin.slice_get(self.id).memory_used

    def get(self):
        return self.admin.slice_get(self.id)

    def open(self):
        """(ctl, gpu, rm client, device) of a client inside the slice."""
        ctl = client.Ctl(self.ctl_node)
        gpu = client.GpuFile(self.gpu, self.gpu_node)
        rm = client.RmClient(ctl)
        dev = rm.device(self.gpu, gpu_file=gpu)
        return ctl, gpu, rm, dev

    def destroy(self):
        self.admin.slice_destroy(self.id, force=True)
        for p in (self.gpu_node, self.ctl_node):
            os.unlink(p)


@pytest.fixture
def nodedir():
    """A directory for slice nodes that unprivileged test processes reach."""
    d = tempfile.mkdtemp(prefix="xputest-", dir="/dev")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


@pytest.fixture
def sl(admin, nodedir):
    s = Slice(admin, nodedir)
    yield s
    s.destroy()


@pytest.fixture
def inside(sl):
    ctl, gpu, rm, dev = sl.open()
    yield sl, dev
    dev.close()
    rm.close()
    gpu.close()
    ctl.close()


def status_of(exc_info):
    return exc_info.value.status


# --- what a client in a slice sees


def test_fb_info_reports_the_limit(inside):
    sl, dev = inside
    kib = sl.limit >> 10
    idx = [abi.NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE,
           abi.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE,
           abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE,
           abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE]
    for info in (dev.fb_info(idx), dev.fb_info_v2(idx)):
        assert info[idx[0]] == kib
        assert info[idx[1]] == kib
        assert info[idx[2]] == kib
        assert info[idx[3]] == kib
    dev.alloc_vidmem(16 * MiB)
    v2 = dev.fb_info_v2(idx)
    assert v2[abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE] == kib - (16 * MiB >> 10)
    total, free = dev.heap_info()
    assert (total, free) == (sl.limit, sl.limit - 16 * MiB)


def test_a_mapping_moves_through_a_slice(inside):
    """CUDA's RM_UPDATE_DEVICE_MAPPING_INFO reaches RM through a slice's
    control file: xpu.ko passes it on, since RM lets it reach only the
    calling process's own mappings (docs/security.md, "Doors read and left
    open")."""
    _, dev = inside
    mem = dev.alloc_sysmem(4096)
    m = dev.map(mem.handle, 4096)
    new = m.linear + (1 << 30)
    dev.ctl.rm_update_mapping(dev.client.handle, dev.hdevice, mem.handle,
                              m.linear, new)
    p = dev.ctl.rm_unmap_memory(dev.client.handle, dev.hdevice, mem.handle,
                                m.linear, check=False)
    assert p.status == abi.NV_ERR_OBJECT_NOT_FOUND
    m.linear = new      # unmapped where RM now keeps it (NV_OK, or raises)
    m.close()
    dev.client.free(mem.handle)


def test_size_query_reports_the_limit(inside):
    sl, dev = inside
    dev.gpu.register_fd(dev.ctl)
    p = dev.memory_size_query(hnew=0xcafe0001)
    assert p.limit == sl.limit - 1


def test_unsliced_client_still_sees_the_whole_gpu(sl, dev0):
    total, _ = dev0.heap_info()
    assert total == stub.heap(0)["total"]
    assert total > sl.limit


def test_card_info_shows_only_the_slice_gpu(sl):
    with client.Ctl(sl.ctl_node) as ctl:
        cards = [c for c in ctl.card_info() if c.valid]
    assert [c.minor_number for c in cards] == [0]


def test_process_lists_show_only_the_slice(inside):
    """GPU_GET_PIDS and GPU_GET_PID_INFO through a slice: a process of the
    same GPU outside the slice is not listed, and has nothing to report."""
    _, dev = inside
    me = os.getpid()
    code = """
import json, os, sys
rm = client.RmClient(client.Ctl()); dev = rm.device(0)
m = dev.alloc_vidmem(2 << 20)
print(json.dumps({"pids": dev.pids(), "info": dev.pid_info([os.getpid()])}),
      flush=True)
sys.stdin.read()
"""
    p = subprocess.Popen([sys.executable, "-c", nvtest.CHILD_PRELUDE + code],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, cwd="/")
    try:
        seen = json.loads(p.stdout.readline())
        other = p.pid
        # unsliced, the outsider sees both, and its own 2 MiB
        assert {me, other} <= set(seen["pids"])
        assert seen["info"][str(other)] == [abi.NV_OK, 2 << 20]
        # through the slice: this process alone, and nothing of the other
        before = dev.pid_info([me])[me]
        mine = dev.alloc_vidmem(4 << 20)
        assert dev.pids() == [me]
        assert dev.pid_info([me, other]) == {
            me: (abi.NV_OK, before[1] + (4 << 20)), other: (abi.NV_OK, 0)}
        dev.client.free(mine.handle)
    finally:
        p.stdin.close()
        p.wait()


# --- the limit


@pytest.mark.parametrize("path", ["rm_alloc", "rm_alloc64", "vid_heap"])
def test_exact_fit_succeeds_one_byte_more_fails(inside, path):
    sl, dev = inside
    heap0 = nvtest.heap_used(0)

    def alloc(size):
        if path == "vid_heap":
            return dev.heap_alloc(size)
        return dev.alloc_vidmem(size, nvos64=path == "rm_alloc64")

    with pytest.raises(client.NvStatusError) as e:
        alloc(sl.limit + 1)
    assert status_of(e) == abi.NV_ERR_NO_MEMORY
    assert nvtest.heap_used(0) == heap0
    m = alloc(sl.limit)
    assert m.size == sl.limit
    assert sl.used() == sl.limit
    assert nvtest.heap_used(0) == heap0 + sl.limit
    with pytest.raises(client.NvStatusError) as e:
        alloc(64 * 1024)
    assert status_of(e) == abi.NV_ERR_NO_MEMORY
    assert sl.get().denied_allocs >= 2
    dev.client.free(m.handle)
    assert sl.used() == 0


def test_both_paths_share_one_limit(inside):
    sl, dev = inside
    dev.alloc_vidmem(sl.limit // 2)
    dev.heap_alloc(sl.limit // 4)
    with pytest.raises(client.NvStatusError):
        dev.heap_alloc(sl.limit // 2)
    with pytest.raises(client.NvStatusError):
        dev.alloc_vidmem(sl.limit // 2)
    assert sl.used() == sl.limit // 2 + sl.limit // 4


ALONE = """
ctl = client.Ctl(CTL); gpu = client.GpuFile(0, GPU)
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
made = [dev.alloc_vidmem(3 << 20), dev.heap_alloc(100 << 10),
        dev.alloc_vidmem(1), dev.heap_alloc((2 << 20) + 1, huge=True),
        dev.alloc_vidmem(64 << 10, nvos64=True)]
report(sizes=[m.size for m in made])
sys.stdin.readline()
for m in made[::2]:
    rm.free(m.handle)
report(freed=True)
sys.stdin.readline()
"""


def test_an_allocation_made_alone_is_charged_as_rm_rounds_it(sl):
    """A process alone in its address space allocates sizes RM rounds up
    (to 64 KiB or 2 MiB pages) through both paths.  xpu charges each at the
    size RM wrote back on xpu's page, without asking RM (xpu_mem_grown):
    the slice's figure is RM's heap, to the byte, after the allocations,
    after some frees, and at the end."""
    heap0 = nvtest.heap_used(0)
    child = nvtest.spawn_child(ALONE.replace("CTL", repr(sl.ctl_node))
                               .replace("GPU", repr(sl.gpu_node)))
    sizes = child.report()["sizes"]
    assert sizes == [4 * MiB, 128 << 10, 64 << 10, 4 * MiB, 64 << 10]
    assert sl.used() == nvtest.heap_used(0) - heap0 == sum(sizes)
    child.p.stdin.write("\n")
    child.p.stdin.flush()
    assert child.report()["freed"]
    assert sl.used() == nvtest.heap_used(0) - heap0 == sum(sizes[1::2])
    child.p.stdin.write("\n")
    child.p.stdin.flush()
    assert child.finish() == 0
    assert sl.used() == 0
    assert nvtest.heap_used(0) == heap0


def test_system_memory_is_not_counted(inside):
    sl, dev = inside
    dev.alloc_sysmem(MiB)
    assert sl.used() == 0


def test_vid_heap_location_any_is_system_memory(inside):
    """RM_VID_HEAP_CONTROL with location ANY allocates system memory
    (rmapi_deprecated_vidheapctrl.c): a full slice still gets it, and its
    figure does not move."""
    sl, dev = inside
    dev.alloc_vidmem(LIMIT)
    p = dev._heap_params(abi.NVOS32_FUNCTION_ALLOC_SIZE)
    a = p.data.AllocSize
    a.owner, a.type, a.size = 0x58505521, abi.NVOS32_TYPE_IMAGE, 2 * MiB
    a.attr = abi.nvos32_attr(abi.NVOS32_ATTR_LOCATION_ANY)
    r = dev.ctl.vid_heap_control(p, check=False)
    assert r.status == abi.NV_OK
    assert sl.used() == LIMIT
    dev.client.parents[a.hMemory] = dev.hdevice
    dev.client.free(a.hMemory)


def test_dup_then_free_of_the_original_keeps_it_counted(inside):
    sl, dev = inside
    m = dev.alloc_vidmem(8 * MiB)
    h2 = dev.client.dup(dev.hdevice, m.handle)
    dev.client.free(m.handle)
    assert sl.used() == 8 * MiB
    dev.client.free(h2)
    assert sl.used() == 0


def test_freeing_the_device_or_client_releases_everything(sl):
    ctl, gpu, rm, dev = sl.open()
    dev.alloc_vidmem(8 * MiB)
    dev.heap_alloc(8 * MiB)
    dev.close()
    assert sl.used() == 0
    dev = rm.device(0, gpu_file=gpu)
    dev.alloc_vidmem(8 * MiB)
    rm.close()
    assert sl.used() == 0
    gpu.close()
    ctl.close()


def test_closing_the_control_file_releases_everything(sl):
    heap0 = nvtest.heap_used(0)
    ctl, gpu, _rm, dev = sl.open()
    dev.alloc_vidmem(sl.limit)
    assert nvtest.heap_used(0) == heap0 + sl.limit
    ctl.close()
    gpu.close()
    assert sl.used() == 0
    assert nvtest.heap_used(0) == heap0


def test_kill_9_mid_allocation_returns_usage_to_zero(sl):
    heap0 = nvtest.heap_used(0)
    code = f"""
import os, sys
ctl = client.Ctl({sl.ctl_node!r}); gpu = client.GpuFile(0, {sl.gpu_node!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
print("ready", flush=True)
while True:
    try:
        m = dev.alloc_vidmem(4 << 20)
        rm.free(m.handle)
    except client.NvStatusError:
        pass
"""
    p = subprocess.Popen([sys.executable, "-c", nvtest.CHILD_PRELUDE + code],
                         stdout=subprocess.PIPE, text=True, cwd="/")
    assert p.stdout.readline().strip() == "ready"
    # Let it run in its loop, then kill it wherever it is.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        assert nvtest.heap_used(0) - heap0 <= sl.limit
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert sl.used() == 0
    assert nvtest.heap_used(0) == heap0


def test_concurrent_allocators_never_exceed_the_limit(sl):
    """4 processes x 8 threads allocate and free at the limit; the stub's
    own heap never holds more than the limit for the slice."""
    heap0 = nvtest.heap_used(0)
    code = f"""
import threading, time
ctl = client.Ctl({sl.ctl_node!r}); gpu = client.GpuFile(0, {sl.gpu_node!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
stop = time.monotonic() + 8
ok = [0]; denied = [0]
def work(i):
    while time.monotonic() < stop:
        try:
            m = dev.heap_alloc(12 << 20) if i % 2 else dev.alloc_vidmem(12 << 20)
            ok[0] += 1
            rm.free(m.handle)
        except client.NvStatusError as e:
            assert e.status == abi.NV_ERR_NO_MEMORY, e
            denied[0] += 1
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
report(ok=ok[0], denied=denied[0])
"""
    procs = [subprocess.Popen([sys.executable, "-c",
                               nvtest.CHILD_PRELUDE + code],
                              stdout=subprocess.PIPE, text=True, cwd="/")
             for _ in range(4)]
    peak = 0
    while any(p.poll() is None for p in procs):
        peak = max(peak, nvtest.heap_used(0) - heap0)
    outs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert peak <= sl.limit
    assert sl.get().memory_peak <= sl.limit
    assert sl.used() == 0
    assert nvtest.heap_used(0) == heap0


# --- the double read (docs/memory.md)


@pytest.mark.parametrize("field", ["size", "location"])
def test_params_rewritten_during_the_double_read_reach_no_one(
        tmp_path, reload_stub, field):
    """The stub reads NV_MEMORY_ALLOCATION_PARAMS after a 30 ms window; a
    second thread grows the size inside it, or turns a system-memory
    location (which xpu.ko does not charge) into video memory.  RM reads
    xpu's copy of the params, on xpu's page (docs/security.md), so it makes
    what xpu.ko read and admitted: six allocations of 1 MiB of video memory
    for the size, none for the location.  Before Nov 26 RM read the
    rewritten params: 1 GiB each time, which xpu.ko had to undo after the
    fact (denied), or it killed the caller."""
    reload_stub(alloc_reread_delay_us=30000)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin:
        race_under(admin, tmp_path, field)


def race_under(admin, tmp_path, field="size"):
    sl = Slice(admin, str(tmp_path), name="race")
    heap0 = nvtest.heap_used(0)
    if field == "size":
        start, rewrite = "1 << 20", "p.size = 1 << 30"
    else:
        start = "1 << 30"
        rewrite = "p.attr = abi.nvos32_attr(abi.NVOS32_ATTR_LOCATION_VIDMEM)"
    child = nvtest.spawn_child(f"""
import ctypes, threading, time
ctl = client.Ctl({sl.ctl_node!r}); gpu = client.GpuFile(0, {sl.gpu_node!r})
rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)
outcomes = []
for i in range(6):
    p = dev.memory_params({start})
    if {field!r} == "location":
        p.attr = abi.nvos32_attr(abi.NVOS32_ATTR_LOCATION_PCI)
    go = threading.Event()
    def grow():
        go.wait()
        time.sleep(0.01)
        {rewrite}
    t = threading.Thread(target=grow); t.start()
    go.set()
    r = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_LOCAL_USER, p)
    t.join()
    outcomes.append(r.status)
report(outcomes=outcomes)
sys.stdin.readline()
""")
    try:
        outcomes = child.report()["outcomes"]
        info = sl.get()
        made = nvtest.heap_used(0) - heap0
        assert (info.killed, info.denied_allocs) == (0, 0), info
        if field == "size":
            assert outcomes == [abi.NV_OK] * 6, outcomes
            assert made == info.memory_used == 6 << 20, (made, info)
        else:
            assert made == info.memory_used == 0, (made, info)
    finally:
        assert child.finish() == 0
    sl.destroy()
    assert nvtest.heap_used(0) == heap0


# --- identity


def test_bind_mounted_node_in_a_new_mount_namespace_is_the_slice(sl, tmp_path):
    """As a container runtime does: the slice's nodes bind-mounted over the
    standard names in a private mount namespace."""
    script = tmp_path / "client.py"
    script.write_text(
        f"import sys; sys.path.insert(0, {nvtest.TESTS!r})\n"
        "from nvclient import client\n"
        "ctl = client.Ctl(); gpu = client.GpuFile(0)\n"
        "rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu)\n"
        "print(dev.heap_info()[0])\n")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh",
                        "-c", (f"mount --bind {sl.ctl_node} /dev/nvidiactl && "
                               f"mount --bind {sl.gpu_node} /dev/nvidia0 && "
                               f"{sys.executable} {script}")],
                       check=False, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) == sl.limit


def test_cgroup_binding_puts_opens_in_the_slice(admin, sl):
    base = "/sys/fs/cgroup/xpu-test"
    os.makedirs(base, exist_ok=True)
    try:
        admin.cgroup_bind(sl.id, base)
        code = (f"import os, sys; open({base + '/cgroup.procs'!r}, 'w')"
                ".write(str(os.getpid()));"
                f"sys.path.insert(0, {nvtest.TESTS!r});"
                "from nvclient import client;"
                "ctl = client.Ctl(); gpu = client.GpuFile(0);"
                "rm = client.RmClient(ctl); dev = rm.device(0, gpu_file=gpu);"
                "print(dev.heap_info()[0])")
        r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        assert int(r.stdout.split()[-1]) == sl.limit
        admin.cgroup_unbind(sl.id, base)
    finally:
        os.rmdir(base)


def test_exclusive_gpu_refuses_unsliced_unprivileged_opens(admin, sl, nodedir):
    node = os.path.join(nodedir, "nv0")
    os.mknod(node, 0o20666, os.makedev(195, 0))
    os.chmod(node, 0o666)
    admin.gpu_set(0, mode=uapi.XPU_MODE_EXCLUSIVE)
    try:
        def try_open(path):
            pid = os.fork()
            if pid == 0:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                try:
                    os.close(os.open(path, os.O_RDWR))
                    os._exit(0)
                except OSError as e:
                    os._exit(e.errno)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        assert try_open(str(node)) == errno.EPERM
        assert try_open("/dev/nvidia0") == errno.EPERM
        assert try_open(sl.gpu_node) == 0        # the slice's own node
        assert try_open("/dev/nvidia1") == 0     # a GPU without slices
        os.close(os.open(str(node), os.O_RDWR))  # root may
    finally:
        admin.gpu_set(0, mode=uapi.XPU_MODE_SHARED)


def test_a_process_is_in_one_slice_of_a_gpu(admin, sl, tmp_path):
    other = Slice(admin, str(tmp_path), name="other", limit=LIMIT)
    try:
        with client.Ctl(sl.ctl_node), pytest.raises(PermissionError):
            client.Ctl(other.ctl_node)
    finally:
        other.destroy()


# --- load and unload


def test_unload_and_reload_with_files_open():
    ko = os.environ.get("XPU_KO")
    if not ko:
        pytest.skip("XPU_KO is not set")
    held = []
    for _ in range(20):
        ctl = client.Ctl()
        rm = client.RmClient(ctl)
        dev = rm.device(0)
        dev.alloc_vidmem(MiB)
        held.append((ctl, rm, dev))
        subprocess.run(["rmmod", "xpu"], check=True)
        subprocess.run(["insmod", ko], check=True)
    for ctl, rm, dev in held:
        dev.close()
        rm.close()
        ctl.close()


# --- what else a sliced client sees, and hostile input


def test_gpu_id_lists_show_only_the_slice_gpu(sl):
    import ctypes
    ids_t = ctypes.c_uint32 * 32

    def attached(ctl_path):
        with client.Ctl(ctl_path) as ctl:
            rm = client.RmClient(ctl)
            ids = ids_t()
            rm.control(rm.handle, 0x201, ids)   # NV0000 GET_ATTACHED_IDS
            rm.close()
        return [i for i in ids if i != 0xFFFFFFFF]

    with client.Ctl() as ctl:
        cards = {c.minor_number: c.gpu_id for c in ctl.card_info() if c.valid}
    assert sorted(attached("/dev/nvidiactl")) == sorted(cards.values())
    assert attached(sl.ctl_node) == [cards[0]]


def test_random_ioctls_on_slice_files_leave_the_slice_clean(sl):
    """Random escape numbers, sizes and bytes on a slice's files, from a
    process that then exits: no kernel complaint (the rig checks dmesg), and
    the slice and the stub are back where they were."""
    heap0 = nvtest.heap_used(0)
    code = f"""
import fcntl, os, random
rng = random.Random({nvtest.fuzz_seed(1234)})
fds = [os.open({sl.ctl_node!r}, os.O_RDWR), os.open({sl.gpu_node!r}, os.O_RDWR)]
errors = 0
for i in range(3000):
    nr = rng.choice([rng.randrange(256), 0x27, 0x29, 0x2A, 0x2B, 0x34, 0x4A,
                     0x4E, 200, 201, 210, 211, 212])
    size = rng.choice([0, 4, 8, 16, 32, 48, 56, 72, 184, rng.randrange(4096)])
    buf = bytearray(rng.getrandbits(8) for _ in range(max(size, 1)))
    cmd = (3 << 30) | (size << 16) | (ord("F") << 8) | nr
    try:
        fcntl.ioctl(rng.choice(fds), cmd, buf, True)
    except OSError:
        errors += 1
report(errors=errors)
"""
    out = nvtest.run_child(code, timeout=600)
    assert out["errors"] > 0        # most random calls are refused
    assert sl.used() == 0
    assert nvtest.heap_used(0) == heap0


def test_xpu_refuses_to_load_without_the_driver(reload_stub):
    """With no NVIDIA driver loaded, insmod fails and the kernel log says
    why in one xpu line (the module loader's: xpu.ko links against the
    driver's nvidia_get_rm_ops); nothing is left behind."""
    reload_stub()           # xpu.ko is now out; the teardown restores both
    subprocess.run(["rmmod", "nvstub"], check=True)
    # the log is the rig's to clear (tests/vm/guest): this test reads only
    # what follows a line of its own
    mark = f"xpu-test: insmod without the driver {time.monotonic_ns()}"
    with open("/dev/kmsg", "w") as kmsg:
        kmsg.write(mark + "\n")
    r = subprocess.run(["insmod", os.environ["XPU_KO"]], check=False, capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert not os.path.exists("/sys/module/xpu")
    log = subprocess.run(["dmesg"], check=True, capture_output=True, text=True).stdout
    assert mark in log, log
    log = log[log.index(mark) + len(mark):]
    lines = [ln for ln in log.splitlines() if "xpu: " in ln]
    assert len(lines) == 1, log
    assert "Unknown symbol nvidia_get_rm_ops" in lines[0], lines
    subprocess.run(["insmod", os.environ["XPU_NVSTUB_KO"],
                    *os.environ.get("XPU_NVSTUB_PARAMS", "").split()],
                   check=True)


@pytest.mark.parametrize("mode", [1, 2], ids=["apm", "cc"])
def test_protected_memory_is_charged_once(reload_stub, nodedir, mode):
    """On a GPU with confidential computing or APM on, RM reports protected
    video memory in GET_PID_INFO's protected figures *and* in the others
    (_gpuCollectMemInfo): a slice fills to its limit exactly, not to half
    of it."""
    reload_stub(memory_protection=mode)
    nvtest._run("insmod", os.environ["XPU_KO"],
                *os.environ.get("XPU_KO_PARAMS", "").split())
    with xpu_ctl.Ctl() as admin:
        sl = Slice(admin, nodedir)
        ctl, gpu, rm, dev = sl.open()
        try:
            heap0 = nvtest.heap_used(0)
            a = dev.alloc_vidmem(LIMIT // 2)
            b = dev.alloc_vidmem(LIMIT // 2)
            assert dev.pid_vidmem(os.getpid())["protectedMemPrivate"] == LIMIT
            assert sl.used() == LIMIT
            assert nvtest.heap_used(0) == heap0 + LIMIT
            with pytest.raises(client.NvStatusError) as e:
                dev.alloc_vidmem(64 * 1024)
            assert status_of(e) == abi.NV_ERR_NO_MEMORY
            rm.free(a.handle)
            rm.free(b.handle)
            assert sl.used() == 0
        finally:
            # closed before the slice goes: a forced destroy kills members
            dev.close()
            rm.close()
            gpu.close()
            ctl.close()
            sl.destroy()
