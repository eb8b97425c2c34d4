# SPDX-License-Identifier: Apache-2.0
"""Slice nodes on a filesystem that goes away (issue 17, class 8: a kernel
crash an admin can trigger; docs/security.md).

A node binding used to hold only the node's inode: unmounting the tmpfs the
node lived on freed its superblock under that inode ("VFS: Busy inodes after
unmount", then "kernel BUG at fs/super.c" and a NULL dereference when xpu.ko
dropped the inode at unload).  A binding now pins the mount and the dentry
it was attached through:
- a plain umount of the filesystem fails with EBUSY while the node is bound,
  and succeeds once it is detached;
- a lazy umount detaches the mount but keeps its superblock alive until the
  binding goes, here at rmmod.
The rig fails the run on any BUG or WARNING line in the kernel log: that the
tests pass in the rig is the assertion that the kernel stayed quiet.
"""

import ctypes
import errno
import os
import shutil
import subprocess
import tempfile

import nvtest
import pytest
from nvclient import client

xpu_ctl = pytest.importorskip("xpu.ctl")
uapi = pytest.importorskip("xpu.uapi")

pytestmark = pytest.mark.usefixtures("require_xpu")

MiB = 1 << 20
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def umount2(path, flags=0):
    """0, or the errno of umount2(2)."""
    if _libc.umount2(os.fsencode(path), flags) == 0:
        return 0
    return ctypes.get_errno()


@pytest.fixture
def admin():
    with xpu_ctl.Ctl() as c:
        yield c


@pytest.fixture
def tmpfs():
    """A fresh tmpfs mounted on a directory under /dev; unmounted (lazily,
    should a test have left it busy) and removed afterwards."""
    d = tempfile.mkdtemp(prefix="xputest-tmpfs-", dir="/dev")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755",
                    "xputest", d], check=True)
    yield d
    if os.path.ismount(d):
        umount2(d, MNT_DETACH)
    shutil.rmtree(d, ignore_errors=True)


def nodes_on(admin, where, name):
    """A slice on GPU 0 with both its nodes made in where and attached."""
    info = admin.slice_create(name, 0, 64 * MiB)
    gpu = os.path.join(where, f"xpu{info.id}")
    ctl = os.path.join(where, f"xpu{info.id}-ctl")
    os.mknod(gpu, 0o20666, os.makedev(195, 0))
    os.mknod(ctl, 0o20666, os.makedev(195, 255))
    admin.node_attach(info.id, gpu, uapi.XPU_NODE_GPU)
    admin.node_attach(info.id, ctl, uapi.XPU_NODE_CTL)
    return info.id, gpu, ctl


def test_umount_of_a_filesystem_with_a_bound_node_is_ebusy(admin, tmpfs):
    sid, gpu, ctl = nodes_on(admin, tmpfs, "on-tmpfs")
    try:
        # The nodes are the slice's: a client through them sees its size.
        with client.Ctl(ctl) as c, client.GpuFile(0, gpu) as g:
            rm = client.RmClient(c)
            assert rm.device(0, gpu_file=g).heap_info()[0] == 64 * MiB
            rm.close()
        assert umount2(tmpfs) == errno.EBUSY
        admin.node_detach(sid, gpu, uapi.XPU_NODE_GPU)
        assert umount2(tmpfs) == errno.EBUSY    # the control node still is
        admin.node_detach(sid, ctl, uapi.XPU_NODE_CTL)
        assert umount2(tmpfs) == 0
    finally:
        admin.slice_destroy(sid, force=True)


def test_a_destroyed_slices_node_lets_its_filesystem_go_once_reaped(
        admin, tmpfs):
    """A destroyed slice's node stays a tombstone (it refuses opens) while
    anything but xpu.ko holds it; unlinked and closed, it goes at the next
    node call, and with it the hold on the filesystem."""
    sid, gpu, ctl = nodes_on(admin, tmpfs, "tomb")
    fd = os.open(gpu, os.O_PATH)
    try:
        admin.slice_destroy(sid)
        with pytest.raises(OSError) as e:
            os.close(os.open(gpu, os.O_RDWR))
        assert e.value.errno == errno.ENXIO
        os.unlink(gpu)
        os.unlink(ctl)
        # Still held here through fd: still a tombstone.
        with pytest.raises(OSError) as e:
            os.close(os.open(f"/proc/self/fd/{fd}", os.O_RDWR))
        assert e.value.errno == errno.ENXIO
    finally:
        os.close(fd)
    assert umount2(tmpfs) == errno.EBUSY
    # Any node call reaps tombstones; this one is refused (no such slice).
    with pytest.raises(xpu_ctl.NotFound):
        admin.node_detach(sid, "/dev/nvidia0", uapi.XPU_NODE_GPU)
    assert umount2(tmpfs) == 0


def test_lazy_umount_then_unload_leaves_the_kernel_clean(tmpfs):
    """umount -l of a tmpfs holding bound nodes, then rmmod xpu: the
    superblock outlives the mount until the unload drops the bindings, and
    nothing in the kernel log complains (the rig checks)."""
    ko = os.environ.get("XPU_KO")
    if not ko:
        pytest.skip("XPU_KO is not set: run under tests/vm/run")
    heap0 = nvtest.heap_used(0)
    with xpu_ctl.Ctl() as admin:
        sid, gpu, ctl = nodes_on(admin, tmpfs, "lazy")
        # A client opened through the nodes, closed before the unmount.
        with client.Ctl(ctl) as c, client.GpuFile(0, gpu) as g:
            rm = client.RmClient(c)
            dev = rm.device(0, gpu_file=g)
            dev.alloc_vidmem(MiB)
            assert admin.slice_get(sid).memory_used == MiB
            dev.close()
            rm.close()
    assert umount2(tmpfs, MNT_DETACH) == 0
    assert not os.path.ismount(tmpfs)
    r = subprocess.run(["rmmod", "xpu"], check=False, capture_output=True,
                       text=True)
    try:
        assert r.returncode == 0, r.stderr
        assert not os.path.exists("/sys/module/xpu")
    finally:
        if not os.path.exists("/sys/module/xpu"):
            subprocess.run(["insmod", ko,
                            *os.environ.get("XPU_KO_PARAMS", "").split()],
                           check=True)
    assert nvtest.heap_used(0) == heap0
    # The module is back, with no slice and working.
    with xpu_ctl.Ctl() as admin:
        assert admin.slice_list() == []
        assert admin.gpu_list()


# --- a destroy racing an open (session 56, found by a review of slice.c)

# Opens a slice's GPU node (the stub waits 300 ms in the driver's open) and
# reports how it went; holds the file until told to go on.
OPENING = """
try:
    f = client.GpuFile(0, GPU_NODE)
    rc = 0
except OSError as e:
    rc = -e.errno
report(rc=rc)
sys.stdin.readline()
"""


def in_the_driver_s_open(pid):
    """Whether PID sleeps in the stub's open (its open_delay_us)."""
    return nvtest.sleeps_in(pid, "nvidia_open", "msleep")


def test_a_destroy_does_not_miss_a_file_being_opened(reload_stub, tmpfs):
    """A slice's file was counted (`open_files`) and put on xpu's table of
    files only after the driver's open returned, so a destroy during that
    open missed it: one without --force succeeded and left the file on a
    destroyed slice (its doorbells outside every schedule), one with
    --force signalled every opener but this one.  Now an opening file
    counts from xpu's look at the slice, under the lock a destroy takes,
    and one that finds its slice destroyed once on the table fails with
    ENXIO.  The stub waits 300 ms in the open (open_delay_us); before, the
    destroy without --force returned at once and the open succeeded."""
    reload_stub(open_delay_us=300000)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin:
        sid, gpu, _ctl = nodes_on(admin, tmpfs, "opening")
        for force in (False, True):
            child = nvtest.spawn_child(OPENING.replace("GPU_NODE", repr(gpu)))
            try:
                pid = child.p.pid
                nvtest.wait_for(lambda pid=pid: in_the_driver_s_open(pid),
                                60, "the open in the driver")
                if force:
                    admin.slice_destroy(sid, force=True)
                    assert child.report()["rc"] == -errno.ENXIO
                else:
                    with pytest.raises(xpu_ctl.Busy):
                        admin.slice_destroy(sid)
                    assert child.report()["rc"] == 0
                    assert admin.slice_get(sid).open_files == 1
            finally:
                child.p.stdin.write("\n")
                child.p.stdin.flush()
                assert child.finish() == 0
        assert sid not in admin.slice_list()
