# SPDX-License-Identifier: Apache-2.0
"""Hostile tenants against xpu.ko's records of channels and usermode objects
(issue 17, docs/security.md), each failing on an xpu.ko without its fix:
- class 6: an honest process that frees a TSG (RM frees its channel) and
  makes a channel again under the same handle was killed as a cheat;
- class 7: records outlived their RM objects (a TSG's channels stayed
  counted after the TSG went) and had no bound;
- class 10: an object made by RM whose copy-back to the caller failed (the
  struct on a read-only page) was never recorded, so never gated;
- issue 18, rule 5: channels and TSGs take video memory RM charges to no
  process, so a tenant filled the GPU with them past its slice's limit.
"""

import ctypes
import errno
import inspect
import json
import mmap
import os
import re
import signal
import subprocess
import sys

import nvtest
import pytest
import test_hostile_mem
import test_xpu_mem
from nvclient import abi, client
from nvclient.uvm import Uvm, gpu_uuid
from test_xpu_mem import Slice
from xpu import uapi

pytestmark = pytest.mark.usefixtures("require_xpu")

admin = test_xpu_mem.admin
nodedir = test_xpu_mem.nodedir

# Makes a TSG and what a channel needs on it, as nvclient.Channel does.
PRELUDE = nvtest.RAW_PRELUDE + """
mem = dev.alloc_sysmem(2 * 4096)

def tsg():
    return rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                    abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                        engineType=abi.NV2080_ENGINE_TYPE_GR0))

def chan_params():
    p = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
    p.hObjectBuffer = mem.handle
    p.gpFifoOffset = 0
    p.gpFifoEntries = 64
    p.hUserdMemory[0] = mem.handle
    p.userdOffset[0] = 4096
    p.engineType = abi.NV2080_ENGINE_TYPE_GR0
    return p

# xpu.ko's bounds, module parameters (1024 unless the boot set them lower:
# CI's debug boot does, docs/testing.md).
RECS = int(open("/sys/module/xpu/parameters/max_records").read())
DBFILES = int(open("/sys/module/xpu/parameters/max_doorbell_files").read())

# A doorbell file: a mapping of the usermode object H through a GPU file
# of its own; the one past the slice's DBFILES is refused, whatever the
# object.
def bell(h):
    return dev.map(h, abi.NVC361_NV_USERMODE__SIZE, hparent=dev.hsubdevice,
                   node=GPU)

def slice_info():
    # what xpu.ko says of the slice (the admin's view; the tenant is root)
    from xpu import ctl as xpu_ctl
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE)

def refused(h):
    import errno
    try:
        bell(h)
        raise AssertionError("a doorbell file past the bound was mapped")
    except OSError as e:
        # mmap's refusal (xpu's), not open's (the fd limit): open names it
        assert e.errno == errno.EMFILE and e.filename is None, e

def readonly_alloc(hparent, hclass, hnew, params=None):
    # NVOS21 alone on a page made read-only: RM acts, its copy-back fails.
    page = mmap.mmap(-1, mmap.PAGESIZE)
    p = abi.NVOS21_PARAMETERS.from_buffer(page)
    p.hRoot, p.hObjectParent, p.hObjectNew, p.hClass = (
        rm.handle, hparent, hnew, hclass)
    if params is not None:
        p.pAllocParms = ctypes.addressof(params)
        p.paramsSize = ctypes.sizeof(params)
    addr = ctypes.addressof(p)
    assert libc.mprotect(addr, mmap.PAGESIZE, mmap.PROT_READ) == 0
    rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_ALLOC, ctypes.sizeof(p)),
                    addr)
    return rc, ctypes.get_errno()

def xfer_alloc(hparent, hclass, params):
    # RM_ALLOC wrapped in IOCTL_XFER_CMD, the door for big arguments
    p = abi.NVOS21_PARAMETERS(hRoot=rm.handle, hObjectParent=hparent,
                              hClass=hclass,
                              pAllocParms=ctypes.addressof(params),
                              paramsSize=ctypes.sizeof(params))
    x = abi.nv_ioctl_xfer_t(cmd=abi.NV_ESC_RM_ALLOC, size=ctypes.sizeof(p),
                            ptr=ctypes.addressof(p))
    assert libc.ioctl(ctl.fd, abi.IOCTL_XFER_CMD, ctypes.addressof(x)) == 0
    return p
"""


def tenant_source(sl, code):
    """CODE after the prelude, with the slice's nodes for CTL and GPU and
    its id for SLICE where SL has one (whole words only: IOCTL_XFER_CMD
    keeps its name)."""
    src = PRELUDE + code
    if hasattr(sl, "id"):
        src = re.sub(r"\bSLICE\b", lambda _: str(sl.id), src)
    return re.sub(r"\bCTL\b", lambda _: repr(sl.ctl_node),
                  re.sub(r"\bGPU\b", lambda _: repr(sl.gpu_node), src))


def run_in(sl, code, check=True, pass_fds=()):
    src = nvtest.CHILD_PRELUDE + tenant_source(sl, code)
    r = subprocess.run([sys.executable, "-c", src], check=False,
                       capture_output=True, pass_fds=pass_fds,
                       text=True, cwd="/", timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


MiB = 1 << 20


@pytest.fixture
def sl(admin, nodedir):
    heap0 = nvtest.heap_used(0)
    # room for 40 TSGs' charges (2 MiB each): these tests are about records
    s = Slice(admin, nodedir, name="objects", limit=256 * MiB)
    yield s
    got = s.get()
    # every file of the slice is closed: RM freed every client, and xpu's
    # records of their handles went with them
    assert (got.channels, got.rm_handles) == (0, 0), got
    s.destroy()
    assert nvtest.heap_used(0) == heap0


def test_a_channel_handle_made_again_after_its_tsg_went_is_honest(sl):
    """Class 6: free the TSG (RM frees its channel with it), make a channel
    again under the same client-chosen handle, three times: the process
    lives, and the slice counts one channel.  Since class 7 the sweep after
    the TSG's free already drops the channel's record, and since session 30
    a device's free takes the channels of its TSGs too (asserted), so the
    last part makes a usermode object under a subdevice and frees the
    device, two levels up, which the sweep does not match: the record RM no
    longer has is still there when the handle is made again, and only the
    forgetting before the call keeps the honest process alive.  No figure
    shows usermode records; that premise was checked by taking the
    forgetting out (the process was killed)."""
    run_in(sl, """
from xpu import ctl as xpu_ctl

def channels():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).channels

for i in range(3):
    t = tsg()
    rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, chan_params(), hnew=0x5c0c0001)
    rm.free(t)
t = tsg()
rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, chan_params(), hnew=0x5c0c0001)
assert channels() == 1
rm.free(t)

rm2 = client.RmClient(ctl)
for i in range(3):
    d2 = rm2.device(0, gpu_file=gpu)
    t = rm2.alloc(d2.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                  abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                      engineType=abi.NV2080_ENGINE_TYPE_GR0))
    u = d2.alloc_sysmem(2 * 4096)
    p = chan_params()
    p.hObjectBuffer = p.hUserdMemory[0] = u.handle
    rm2.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, p, hnew=0x5c0c0001)
    assert channels() == 1
    d2.close()
    assert channels() == 0, i   # found with the TSG, at the device's free
for i in range(3):
    d2 = rm2.device(0, gpu_file=gpu)
    rm2.alloc(d2.hsubdevice, abi.HOPPER_USERMODE_A, hnew=0x5c0c0002)
    d2.close()
""")


def test_a_tsg_takes_its_channels_records_with_it(sl):
    """Class 7: 40 TSGs with a channel each, freed: the slice counts no
    channel while the client still lives."""
    run_in(sl, """
from xpu import ctl as xpu_ctl
ts = [tsg() for _ in range(40)]
for t in ts:
    rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, chan_params())
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 40
    for t in ts:
        rm.free(t)
    assert a.slice_get(SLICE).channels == 0, a.slice_get(SLICE)
""")


def test_a_context_share_or_va_space_takes_its_channels_records(sl):
    """RM frees a channel with its context share (a dependant, not a
    child: resserv refAddDependant): the slice counts none of those
    channels once their shares went (it counted 20 before xpu.ko matched
    what a channel depends on).  A VA space takes its context shares and
    their channels the same way; like a device's, that free is two levels
    up and leaves the records to the sweep on the allocation path
    (test_channels_freed_with_their_device_give_their_charge_back)."""
    run_in(sl, """
from xpu import ctl as xpu_ctl
def share(t, hvas):
    return rm.alloc(t, abi.FERMI_CONTEXT_SHARE_A,
                    abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas))
hvas, _ = dev.vaspace()
ts = [tsg() for _ in range(20)]
shares = [share(t, hvas) for t in ts]
for t, cs in zip(ts, shares):
    p = chan_params()
    p.hContextShare = cs
    rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, p)
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 20
    for cs in shares[:10]:
        rm.free(cs)
    assert a.slice_get(SLICE).channels == 10, a.slice_get(SLICE)
""")


def test_a_channel_on_a_duplicate_context_share_stays_recorded_while_it_lives(
        sl):
    """RM duplicates context shares (kctxshareapiCopyConstruct), and a
    channel made on a duplicate depends on the duplicate, not on its
    source: xpu.ko records what the channel depends on as RM reports it
    (the handle in xpu's copy of its params) and asks RM before it forgets
    a record, so the source's free leaves the channel counted -- it still
    runs, and a record forgotten would be a channel rung ungated -- and the
    duplicate's free takes it.  Untested while the stub refused the
    duplicate (docs/security.md, "Context shares' duplicates")."""
    run_in(sl, """
def channels():
    return slice_info().channels
hvas, _ = dev.vaspace()
t = tsg()
cs = rm.alloc(t, abi.FERMI_CONTEXT_SHARE_A,
              abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=hvas))
t2 = rm.dup(dev.hdevice, t)
d = rm.dup(t2, cs)
p = chan_params()
p.hContextShare = d
ch = rm.alloc(t2, abi.HOPPER_CHANNEL_GPFIFO_A, p)
assert channels() == 1
rm.free(cs)
assert channels() == 1      # the source went; the channel runs on
# in a second client too, through a duplicate of the TSG there
rm2 = client.RmClient(ctl)
dev2 = rm2.device(0, gpu_file=gpu)
mem2 = dev2.alloc_sysmem(2 * 4096)
t3 = rm2.dup(dev2.hdevice, t, client_src=rm)
d2 = rm2.dup(t3, d, client_src=rm)
p.hContextShare = d2
p.hObjectBuffer = p.hUserdMemory[0] = mem2.handle
ch2 = rm2.alloc(t3, abi.HOPPER_CHANNEL_GPFIFO_A, p)
assert channels() == 2
rm.free(d)
assert channels() == 1      # RM took the channel with its share
rm.free(t2)
rm.free(t)
assert channels() == 1      # the other client's duplicates hold theirs
rm2.free(d2)
assert channels() == 0
rm2.close()
rm.free(hvas)
""")


def test_records_are_bounded_with_a_clear_refusal(sl):
    """Class 7: a slice keeps at most max_records (1024) usermode objects;
    the next is
    refused with NV_ERR_INSUFFICIENT_RESOURCES, nothing made; freeing
    one makes room again."""
    run_in(sl, """
from nvclient import stub
hs = [rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A) for _ in range(RECS)]
n = stub.objects()["objects"]
p = rm.alloc_raw(dev.hsubdevice, abi.HOPPER_USERMODE_A)
assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES, hex(p.status)
assert stub.objects()["objects"] == n   # xpu's refusal: RM made nothing
# a duplicate is a record too (class 20): refused, and undone as the caller
p = ctl.rm_dup(rm.handle, dev.hsubdevice, rm.handle, hs[0], check=False)
assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES, hex(p.status)
assert stub.objects()["objects"] == n
rm.free(hs.pop())
hs.append(rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A))
""")


def test_devices_are_bounded_with_a_clear_refusal(sl):
    """A device's default VA space comes with RM's page directories (a
    root, four more on GSP), made when first used and charged to no
    process, and a client may hold one device per GPU, so a tenant making
    clients made directories without bound.  A slice keeps at most
    max_records (1024) devices: the next is refused with
    NV_ERR_INSUFFICIENT_RESOURCES, nothing made; freeing one makes room
    again.  Before, the 1025th was made as every other."""
    run_in(sl, """
from nvclient import stub
cs = []
for _ in range(RECS - 1):       # the prelude's client holds one already
    c = client.RmClient(ctl)
    c.device(0, gpu_file=gpu)
    cs.append(c)
c = client.RmClient(ctl)
n = stub.objects()["objects"]
p = c.alloc_raw(c.handle, abi.NV01_DEVICE_0,
                abi.NV0080_ALLOC_PARAMETERS(deviceId=0))
assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES, hex(p.status)
assert stub.objects()["objects"] == n   # xpu's refusal: RM made nothing
cs.pop().close()
c.device(0, gpu_file=gpu)
""")


def test_doorbell_files_are_bounded_with_a_clear_refusal(sl):
    """Every doorbell file of a waiting slice is zapped, so a slice may map
    its usermode page through at most max_doorbell_files (1024) files: the
    next mmap fails
    with EMFILE and maps nothing; closing one makes room again."""
    run_in(sl, """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
h = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
maps = [bell(h) for _ in range(DBFILES)]
refused(h)
maps.pop().close()
maps.append(bell(h))
for m in maps:
    m.close()
""")


def test_a_closed_doorbell_file_frees_its_place_at_once(sl, admin):
    """The scheduler's thread zaps the doorbell PTEs of every file of an
    idle slice each period.  Before, it took a reference on each file while
    it zapped: a tenant's close meanwhile left that reference the last, and
    the kernel put the file's release off to a work item, so the file was
    still open, counted against the slice's 1024, after its close returned,
    and the next mapping could be refused (seen once in CI, on 5.10).  Now
    the zap holds no reference and a release waits for the zap of its own
    file.  With every doorbell file the slice may have (1024 by default)
    and a zap pass every millisecond, each
    close is seen at once by the slice's count of open files, and the
    mapping made next succeeds, 200 times.  (Without the fix the count
    was wrong at the second close; the mapping after it was refused 2 to
    5 times in 3000.  The count is what fails first, so 200 rounds catch
    it; 500 took 90 s on the debug kernel, 1024 mappings made included.)"""
    g = next(g for g in admin.gpu_list() if g.minor == 0)
    admin.gpu_set(0, period_us=uapi.XPU_PERIOD_MIN_US)
    try:
        run_in(sl, """
import resource
from xpu import ctl as xpu_ctl
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
h = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
maps = [bell(h) for _ in range(DBFILES)]
refused(h)
with xpu_ctl.Ctl() as a:
    n = a.slice_get(SLICE).open_files
    for i in range(200):
        maps.pop(0).close()
        assert a.slice_get(SLICE).open_files == n - 1, i
        maps.append(bell(h))
refused(h)
for m in maps:
    m.close()
""")
    finally:
        admin.gpu_set(0, period_us=g.period_us)


def test_a_duplicated_usermode_object_is_a_doorbell(sl):
    """Class 20: RM duplicates a usermode object (usrmodeCanCopy), and the
    duplicate maps the same doorbell page and keeps it after its source
    goes.  xpu.ko records what a duplicate through a slice's control file
    makes, so a mapping of the duplicate is a doorbell file like any other:
    it counts towards the slice's 1024, and the bound holds for both
    handles, before and after the source is freed.  Before, xpu recorded
    only the original: the 1025th mapping, refused for it, was made for
    its duplicate, and that file was never gated."""
    run_in(sl, """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
h = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
d = rm.dup(dev.hsubdevice, h)
maps = [bell(h) for _ in range(DBFILES - 1)]
maps.append(bell(d))        # premise: the duplicate maps as its source does
refused(h)
refused(d)
rm.free(h)                  # the duplicate keeps the doorbell, and its record
maps.pop().close()
maps.append(bell(d))
refused(d)
for m in maps:
    m.close(unmap=m.hmemory == d)  # RM took h's mappings with it
""")


def test_a_duplicate_tsg_or_va_space_is_charged_while_it_keeps_them(sl):
    """Class 20: a TSG's duplicate shares its channel group and graphics
    context, a VA space's its directories, and each keeps them after the
    source goes (docs/nvstub.md).  xpu.ko records the duplicate, charged
    what its source's record is: twice while both live, and after the
    source's free what the duplicate keeps, until it goes too.  Before,
    the source's free gave the whole charge back while the duplicate held
    the context or the directories."""
    run_in(sl, """
from xpu import ctl as xpu_ctl
def used():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).memory_used
u0 = used()
for make in (tsg, lambda: dev.vaspace()[0]):
    h = make()
    one = used() - u0
    assert one > 0
    d = rm.dup(dev.hdevice, h)
    assert used() - u0 == 2 * one, (one, used() - u0)
    rm.free(h)
    assert used() - u0 == one, (one, used() - u0)
    if make is tsg:         # premise: the duplicate is a working group
        rm.alloc(d, abi.HOPPER_CHANNEL_GPFIFO_A, chan_params())
        with xpu_ctl.Ctl() as a:
            assert a.slice_get(SLICE).channels == 1
    rm.free(d)
    assert used() == u0, (u0, used())
""")


def test_an_object_xpu_records_is_not_exported_from_a_slice(sl):
    """An export to an fd (NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT(S)_TO_FD)
    is a duplicate in RM's own client that lives as long as the fd's file,
    whoever frees the source (docs/nvstub.md): RM_DUP_OBJECT by another
    door.  Through a slice's control file, an export of a usermode object,
    a TSG or a VA space is refused (NV_ERR_NOT_SUPPORTED, RM not called):
    its doorbell, context or directories would outlive the record that
    gates or charges them, charged to no one and imported anywhere.
    Memory is exported as before (CUDA's IPC by fd).  Before, each export
    was made."""
    run_in(sl, """
fd = client.Ctl(CTL)
m = dev.alloc_vidmem(1 << 20).handle
objs = {"usermode": rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A),
        "tsg": tsg(), "vaspace": dev.vaspace()[0]}
for name, h in objs.items():
    st = rm.export_object(h, fd.fd, check=False).status
    assert st == abi.NV_ERR_NOT_SUPPORTED, (name, hex(st))
    st = rm.export_objects(fd.fd, dev.hdevice, [m, h], check=False).status
    assert st == abi.NV_ERR_NOT_SUPPORTED, (name, hex(st))
rm.export_objects(fd.fd, dev.hdevice, [m])     # premise: an export is made
for h in objs.values():
    rm.free(h)
""")


IMPORTER = """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
from xpu import ctl as xpu_ctl
def used():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).memory_used
u0 = used()
h = rm.import_object(UFD, dev.hsubdevice)
maps = [bell(h) for _ in range(DBFILES)]
refused(h)
for mp in maps:
    mp.close()
t = rm.import_object(TSGFD, dev.hdevice)
assert used() > u0, (u0, used())        # a TSG's most, no source known
rm.free(t)
assert used() == u0, (u0, used())
mine = dev.alloc_vidmem(1 << 20).handle
p, r = rm.import_objects(MANYFD, dev.hsubdevice, [mine, 0x7e000004],
                         check=False)
assert r.status == abi.NV_ERR_INSERT_DUPLICATE_NAME, hex(r.status)
d = ctl.rm_dup(rm.handle, dev.hdevice, rm.handle, mine, check=False)
assert d.status == abi.NV_OK, hex(d.status)     # mine is still there
ctl.rm_free(rm.handle, dev.hdevice, d.hObject)
"""


def test_what_a_slice_imports_is_recorded(sl, ctl, gpu0):
    """What a tenant imports through its slice's control file is a
    duplicate of whatever was exported, by anyone: here by an unsliced
    process.  xpu.ko asks RM what each import made and records it as a
    duplicate of no known source: a usermode object's mappings are doorbell
    files (the slice's 1024 hold for it), a TSG is charged the most one
    holds until it goes.  Before, an imported usermode object was no
    doorbell (the 1025th mapping was made, and no mapping was gated), and
    an imported TSG was charged nothing.  A plural import that fails frees
    every handle it names before the failing one, imported or not (os.c),
    so naming a handle the client already has is refused before RM is
    called: before, RM freed the tenant's own video memory there, past
    the ledger (which would have let memory UVM keeps go uncharged)."""
    rm = client.RmClient(ctl)
    dev = rm.device(0, gpu_file=gpu0)
    ufd, tfd, mfd = client.Ctl(), client.Ctl(), client.Ctl()
    try:
        u = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
        t = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                     abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                         engineType=abi.NV2080_ENGINE_TYPE_GR0))
        rm.export_object(u, ufd.fd)
        rm.export_object(t, tfd.fd)
        rm.export_objects(mfd.fd, dev.hdevice, [0, u])
        run_in(sl, IMPORTER
               .replace("TSGFD", str(tfd.fd)).replace("UFD", str(ufd.fd))
               .replace("MANYFD", str(mfd.fd)),
               pass_fds=(ufd.fd, tfd.fd, mfd.fd))
    finally:
        for f in (ufd, tfd, mfd):
            f.close()
        rm.close()


def test_a_channel_made_with_a_read_only_struct_is_recorded(sl):
    """Class 10: the channel's NVOS21 is on a read-only page, so the driver
    returns EFAULT after RM made the channel.  xpu.ko records it all the
    same (RM says what the handle is), and the caller, whose handle came
    back as it went in, is not taken for a cheat."""
    run_in(sl, """
import errno
from xpu import ctl as xpu_ctl
t = tsg()
rc, err = readonly_alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, 0x5c0c0002,
                         chan_params())
assert rc == -1 and err == errno.EFAULT, (rc, err)
rm.parents[0x5c0c0002] = t
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 1, a.slice_get(SLICE)
rm.free(t)
""")


def test_an_object_whose_handle_rm_chose_and_never_came_back_is_recorded(sl):
    """Class 10: a channel and a usermode object made with a read-only
    struct and a handle left to RM: the driver returns EFAULT after RM made
    them, and only RM knows the handles.  Before Nov 25 (session 17) xpu.ko
    could not gate what it could not name, so the caller was killed.  Now
    the call is made on xpu's copy, with a handle xpu names as RM would:
    both are recorded -- the slice counts the channel, and the usermode
    object counts towards the slice's 1024 -- and the caller lives."""
    run_in(sl, """
import errno
from xpu import ctl as xpu_ctl
t = tsg()
rc, err = readonly_alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, 0, chan_params())
assert rc == -1 and err == errno.EFAULT, (rc, err)
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 1, a.slice_get(SLICE)
rm.free(t)                  # and the channel with it
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 0, a.slice_get(SLICE)
rc, err = readonly_alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A, 0)
assert rc == -1 and err == errno.EFAULT, (rc, err)
hs = [rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
      for _ in range(RECS - 1)]
p = rm.alloc_raw(dev.hsubdevice, abi.HOPPER_USERMODE_A)
assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES, hex(p.status)
""")



def test_objects_whose_params_cannot_be_copied_back_are_counted(sl):
    """The params of a TSG and of system memory on a page made read-only:
    xpu copies them onto the page of the call, RM makes the object and
    writes its results there, and xpu's copy back to the caller's params
    fails, which fails the call with NV_ERR_INVALID_ADDRESS, the object
    made all the same (serverAllocApiCopyOut).  xpu wrote that status
    into its own copy of the struct, where it then read it as RM's word
    that nothing was made (found by a review of mem.c in session 57): the
    slice counted neither the TSG (2 MiB of GR context) nor the pinned
    system memory, each time.  Now the caller alone gets that status: both
    are counted, and go with their free."""
    run_in(sl, """
from xpu import ctl as xpu_ctl
def readonly(params):
    page = mmap.mmap(-1, mmap.PAGESIZE)
    ro = type(params).from_buffer(page)
    ctypes.memmove(ctypes.addressof(ro), ctypes.addressof(params),
                   ctypes.sizeof(params))
    assert libc.mprotect(ctypes.addressof(ro), mmap.PAGESIZE,
                         mmap.PROT_READ) == 0
    return ro, page
info0 = slice_info()
gp, _p1 = readonly(abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
    engineType=abi.NV2080_ENGINE_TYPE_GR0))
t = rm.alloc_raw(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A, gp, hnew=0x5c0c0100)
assert t.status == abi.NV_ERR_INVALID_ADDRESS, hex(t.status)
size = 2 << 20
mp, _p2 = readonly(dev.memory_params(size,
                                     location=abi.NVOS32_ATTR_LOCATION_PCI))
m = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_SYSTEM, mp, hnew=0x5c0c0101)
assert m.status == abi.NV_ERR_INVALID_ADDRESS, hex(m.status)
info = slice_info()
assert info.tsgs == info0.tsgs + 1, (info0, info)
assert info.memory_used > info0.memory_used, (info0, info)
assert info.host_memory_used >= info0.host_memory_used + size, (info0, info)
# they are RM's: freed by their handles, and the counts go with them
ctl.rm_free(rm.handle, dev.hdevice, 0x5c0c0100)
ctl.rm_free(rm.handle, dev.hdevice, 0x5c0c0101)
info = slice_info()
assert (info.tsgs, info.memory_used, info.host_memory_used) == \
    (info0.tsgs, info0.memory_used, info0.host_memory_used), (info0, info)
""")

# The channel's context share, rewritten by a thread once xpu.ko has read
# it and before RM reads it (the stub waits 300 ms before reading params).
RACE_SHARE = """
import threading, time
from nvclient import stub
from xpu import ctl as xpu_ctl

def channels():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).channels

hvas, _ = dev.vaspace()
t = tsg()
shares = [rm.alloc(t, abi.FERMI_CONTEXT_SHARE_A,
                   abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                       hVASpace=hvas,
                       flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
          for _ in range(2)]
p = chan_params()
p.hContextShare = shares[0]
at = []
def race():
    time.sleep(0.15)
    p.hContextShare = shares[1]
    at.append(time.monotonic() - t0)
t0 = time.monotonic()
th = threading.Thread(target=race)
th.start()
ch = rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, p)
elapsed = time.monotonic() - t0
th.join()
# the premise: the share was rewritten before RM read the params
assert at[0] < 0.3 <= elapsed, (at, elapsed)
assert channels() == len(stub.channels()) == 1
rm.free(shares[1])          # RM frees a channel made on this share with it
# the slice counts the channels RM has
assert channels() == len(stub.channels()), (channels(), stub.channels())
rm.free(shares[0])
assert channels() == len(stub.channels()) == 0, stub.channels()
rm.free(t)
"""


def test_a_channel_s_context_share_rewritten_before_rm_reads_it_is_followed(
        reload_stub, nodedir):
    """A channel's params say which context share it runs in, and RM frees
    the channel with that share (a dependant).  xpu.ko read the share from
    the caller's params and RM read them again after it, so a thread that
    rewrote the share in between had RM make the channel on another share
    than the one xpu recorded: freeing that share took the channel, and the
    slice still counted it, charged (and gated) a channel RM no longer had.
    Now RM reads xpu's copy of the params, so the channel is made on the
    share xpu read, and goes with it."""
    with test_hostile_mem.racer_slice(reload_stub, nodedir,
                                      alloc_reread_delay_us=300000) as (sl, _):
        run_in(sl, RACE_SHARE)


def test_a_tsg_s_record_goes_with_the_va_space_it_names(sl):
    """RM frees a TSG with the VA space its params name (refAddDependant),
    not only with its parent: the TSG's record, and its charge for RM's
    graphics context, go with that VA space too, and so does a duplicate's
    (which depends on a VA space object of its own client that xpu cannot
    name: any free in its client has it asked of RM).  Before, the records
    named no VA space, so the slice stayed charged for 8 TSGs RM no longer
    had, and for a duplicate, until a refusal swept them."""
    run_in(sl, """
from xpu import ctl as xpu_ctl
def used():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).memory_used
base = used()
hvas, _ = dev.vaspace()
ts = [rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
               abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                   hVASpace=hvas, engineType=abi.NV2080_ENGINE_TYPE_GR0))
      for _ in range(8)]
for t in ts:
    rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, chan_params())
held = used()
assert held - base >= 8 * 2 * 1024 * 1024, (base, held)   # the premise
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 8
rm.free(hvas)               # RM invalidates the TSGs and their channels
after = used()
assert after - base < 1024 * 1024, (base, held, after)
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 0
for t in ts:
    rm.free(t)
assert used() == after
# a duplicate TSG depends on the VA space object of its client, under its
# parent, that has the group's VA space (kchangrpapiCopyConstruct)
hvas, _ = dev.vaspace()
t = rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
             abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                 hVASpace=hvas, engineType=abi.NV2080_ENGINE_TYPE_GR0))
d = rm.dup(dev.hdevice, t)
assert used() - after >= 2 * 2 * 1024 * 1024, (after, used())  # premise
rm.free(hvas)               # RM invalidates the TSG and its duplicate
assert used() - after < 1024 * 1024, (after, used())
rm.free(d)
rm.free(t)
""")


# A TSG with a channel and a compute object (its GR context), N times, in a
# client of its own; report how many were made and the refusal.
FILL = """
from xpu import ctl as xpu_ctl
def fill(r, d, n):
    userd = d.alloc_sysmem(2 * 4096)
    made = []
    for _ in range(n):
        t = r.alloc_raw(d.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                        abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                            engineType=abi.NV2080_ENGINE_TYPE_GR0))
        if t.status != abi.NV_OK:
            return made, t.status
        p = chan_params()
        p.hObjectBuffer = p.hUserdMemory[0] = userd.handle
        ch = r.alloc(t.hObjectNew, abi.HOPPER_CHANNEL_GPFIFO_A, p)
        r.alloc(ch, abi.HOPPER_COMPUTE_A, abi.NV_GR_ALLOCATION_PARAMETERS())
        made.append(t.hObjectNew)
    return made, abi.NV_OK
"""


def test_channels_and_tsgs_are_charged_to_their_slice(admin, nodedir):
    """Issue 18, rule 5: a channel's instance block and its TSG's GR context
    buffers are video memory RM charges to no process (GPU_GET_PID_INFO never
    sees them), so a tenant of a 64 MiB slice made TSGs until the GPU was
    full.  xpu charges each TSG and channel (docs/memory.md): the tenant is
    refused NV_ERR_NO_MEMORY before 64 MiB of them, what the stub took for
    them stays under the limit, and freeing them gives the slice its whole
    limit back for memory."""
    heap0 = nvtest.stub.heap(0)
    # what xpu charges a TSG (an xpu.ko that charges none has no parameter:
    # then the stub's figure, which the GPU loses per TSG)
    param = "/sys/module/xpu/parameters/gr_context_kib"
    if os.path.exists(param):
        with open(param) as f:
            ctx = int(f.read()) * 1024
    else:
        ctx = int(nvtest.stub.param("gr_context_kib")) * 1024
    sl = Slice(admin, nodedir, name="rule5", limit=64 * MiB)
    try:
        r = run_in(sl, FILL + """
made, st = fill(rm, dev, 48)            # 48 x 2 MiB: 1.5 times the slice
report(made=len(made), status=st)
for t in made:
    rm.free(t)
# the charges are given back: the whole limit is memory again
h = dev.heap_alloc(64 << 20)
dev.heap_free(h.handle)
""")
        out = json.loads(r.stdout.strip().splitlines()[0])
        assert out["status"] == nvtest.abi.NV_ERR_NO_MEMORY, out
        per_tsg = ctx + 4096
        assert out["made"] == (64 * MiB) // per_tsg, out
        assert sl.get().memory_peak <= 64 * MiB
        assert sl.get().denied_allocs >= 1
        assert sl.used() == 0
    finally:
        sl.destroy()
    after = nvtest.stub.heap(0)
    assert (after["used"], after["internal"]) == \
        (heap0["used"], heap0["internal"])


def test_channels_freed_with_their_device_give_their_charge_back(sl):
    """A device takes its TSGs and their channels with it.  xpu finds the
    TSGs gone at the device's free (their parent) and, since session 30,
    the channels under them with them: after 20 TSGs in a second client's
    device are freed with the device, the slice counts no channel, and its
    whole limit can be allocated again.  Before, the channels (two levels
    down) stayed counted until a refusal swept them."""
    run_in(sl, FILL + """
rm2 = client.RmClient(ctl)
dev2 = rm2.device(0, gpu_file=gpu)
made, st = fill(rm2, dev2, 20)
assert st == abi.NV_OK and len(made) == 20, hex(st)
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 20, a.slice_get(SLICE)
rm2.free(dev2.hdevice)
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).channels == 0, a.slice_get(SLICE)
h = dev.heap_alloc(LIMIT)
dev.heap_free(h.handle)
""".replace("LIMIT", str(sl.limit)))


def test_channels_freed_three_levels_up_are_found_when_their_charge_is_needed(
        sl):
    """A VA space takes the context shares on it and the channels on those
    (dependants of dependants, none a child): xpu records no context share,
    so it learns of the channels only by asking RM, which it does when
    their charge stands between the slice and an allocation.  16 channels'
    instance blocks (64 KiB) are all that keeps an allocation of the
    slice's limit less one TSG's charge out; after the sweep it fits."""
    run_in(sl, """
from xpu import ctl as xpu_ctl
def channels():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).channels
hvas, _ = dev.vaspace()
t = tsg()
for _ in range(16):
    cs = rm.alloc(t, abi.FERMI_CONTEXT_SHARE_A,
                  abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                      hVASpace=hvas,
                      flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
    p = chan_params()
    p.hContextShare = cs
    rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, p)
rm.free(hvas)
assert channels() == 16     # the premise: RM took them, xpu has not asked
h = dev.heap_alloc(LIMIT - 2 * 1024 * 1024)
assert channels() == 0
dev.heap_free(h.handle)
rm.free(t)
""".replace("LIMIT", str(sl.limit)))


# --- what xpu keeps per file is the opener's memory cgroup's to pay for

MEMCG = "/sys/fs/cgroup/xpu-kmem"
OPENS = 4000


def test_xpu_s_record_of_each_file_is_charged_to_the_opener_s_memory_cgroup(sl):
    """A tenant may open its slice's nodes by the thousand, and xpu keeps a
    record of about 1 KiB for each open file. It is charged to the opener's
    memory cgroup, as the kernel's own struct file is, so a container's
    memory limit bounds it; uncharged, a tenant in a small container could
    fill the host's memory with them. The same number of opens of /dev/null
    in the same cgroup measures the kernel's part; both stay open, so no
    free lands inside a measurement. The rig boots without kernel-memory
    accounting (tests/vm/run says why), so this runs in a boot of its own
    (`make check-vm`, tests/vm/run --kmem)."""
    _kmem_boot()
    try:
        r = run_in(sl, f"""
import resource
N = OPENS
resource.setrlimit(resource.RLIMIT_NOFILE, (3 * N + 64, 3 * N + 64))
with open({MEMCG!r} + "/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))
os.close(os.dup2(0, 3 * N))      # the fd table at its full size first
def current():
    with open({MEMCG!r} + "/memory.current") as f:
        return int(f.read())
def grow(path):
    fds = [0] * N
    before = current()
    for i in range(N):
        fds[i] = os.open(path, os.O_RDWR)
    return current() - before, fds
null, keep1 = grow("/dev/null")
gpu, keep2 = grow(GPU)
print(json.dumps({{"null": null, "gpu": gpu}}))
""".replace("OPENS", str(OPENS)))
        got = json.loads(r.stdout.splitlines()[-1])
    finally:
        os.rmdir(MEMCG)
    # about 1 KiB a file beyond the kernel's own; uncharged it was ~0
    assert got["gpu"] - got["null"] >= OPENS * 512, got


def _kmem_boot():
    """Skip where kernel memory is not accounted (tests/vm/run --kmem)."""
    with open("/proc/cmdline") as f:
        if "cgroup.memory=nokmem" in f.read().split():
            pytest.skip("kernel memory is not accounted in this boot: "
                        "make check-vm runs this with tests/vm/run --kmem")
    with open("/sys/fs/cgroup/cgroup.controllers") as f:
        assert "memory" in f.read().split()
    with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
        f.write("+memory")
    os.makedirs(MEMCG, exist_ok=True)


HELD = 2000


def test_the_ledger_s_record_of_memory_held_is_charged_to_the_freer(
        admin, nodedir):
    """A free of video memory something else still holds (here the
    tenant's own duplicate of it) leaves a record in the ledger for as long
    as it is held (class 21), one for each 64 KiB a slice may hold: 262144
    in a slice of 16 GiB.  It is charged to the freer's memory cgroup, as
    xpu's records of files and handles are; uncharged (before session 60)
    they grew the host's memory past every container's limit.  The same
    number of frees that leave nothing held, of the same objects made the
    same way, measures what a free gives back (xpu's records of the object
    go); the difference in the cgroup's slab is the ledger's records.  In
    the --kmem boot with the other KMEM_TESTS."""
    _kmem_boot()
    sl = Slice(admin, nodedir, name="held", limit=1 << 30)
    try:
        r = run_in(sl, f"""
N = HELD
with open({MEMCG!r} + "/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))
def slab():      # not memory.current: Python's heap moves by 2 MiB pages
    with open({MEMCG!r} + "/memory.stat") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("slab "))
plain = [dev.alloc_vidmem(65536).handle for _ in range(N)]
kept = []
for _ in range(N):
    m = dev.alloc_vidmem(65536)
    kept.append((m.handle, rm.dup(dev.hdevice, m.handle)))
before = slab()
for h in plain:
    rm.free(h)
freed = slab() - before
before = slab()
for h, d in kept:
    rm.free(h)
held = slab() - before
print(json.dumps({{"freed": freed, "held": held}}))
""".replace("HELD", str(HELD)))
        got = json.loads(r.stdout.splitlines()[-1])
    finally:
        os.rmdir(MEMCG)
        sl.destroy()
    # about 100 bytes a held duplicate beyond what a free gives back (213
    # KB here); uncharged the two phases differed by 4 KB
    assert got["held"] - got["freed"] >= HELD * 64, got


def test_a_slice_cannot_take_the_gpu_s_access_counter_buffer(sl, config,
                                                              uvm_nodes):
    """Class 23: UVM's access-counter buffer (ACCESS_COUNTER_NOTIFY_BUFFER)
    is one a GPU, any client may allocate it, and while a client holds it
    UVM cannot add the GPU: every process's registration of it fails
    (docs/nvstub.md).  A slice's control file refuses the class
    (NV_ERR_INSUFFICIENT_PERMISSIONS, RM not called), and UVM still adds
    the GPU while the tenant lives.  Before, the tenant took the buffer and
    another process's UVM_REGISTER_GPU failed with NV_ERR_INVALID_STATE."""
    child = nvtest.spawn_child(tenant_source(sl, """
p = rm.alloc_raw(dev.hsubdevice, abi.ACCESS_COUNTER_NOTIFY_BUFFER,
                 ctypes.c_uint32(0))
report(status=p.status)
sys.stdin.readline()
"""))
    try:
        got = child.report()
        # while the tenant lives, UVM adds the GPU for another process
        with Uvm(config.version) as u:
            st = u.register_gpu(gpu_uuid(0), check=False)
            assert st == abi.NV_OK, (hex(st), got)
            u.unregister_gpu(gpu_uuid(0))
        assert got == {"status": abi.NV_ERR_INSUFFICIENT_PERMISSIONS}
    finally:
        assert child.finish() == 0


def os_desc_calls(gpu, ctl, rm, dev, coherency):
    """An OS descriptor of 4 KiB of this process's memory with COHERENCY,
    by RM_ALLOC_MEMORY and by VID_HEAP_CONTROL: their statuses.  Also run
    in a slice (its source goes into the tenant's script)."""
    buf = mmap.mmap(-1, 4096)
    va = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    arg = abi.nv_ioctl_nvos02_parameters_with_fd(fd=-1)
    q = arg.params
    q.hRoot, q.hObjectParent = rm.handle, dev.hdevice
    q.hClass = abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR
    q.flags = coherency << abi.NVOS02_FLAGS_COHERENCY_SHIFT
    q.pMemory, q.limit = va, 4095
    gpu.escape(abi.NV_ESC_RM_ALLOC_MEMORY, arg)
    p = dev.abi.NVOS32_PARAMETERS(
        hRoot=rm.handle, hObjectParent=dev.hdevice,
        function=abi.NVOS32_FUNCTION_ALLOC_OS_DESCRIPTOR)
    d = p.data.AllocOsDesc
    d.attr = coherency << abi.NVOS32_ATTR_COHERENCY_SHIFT
    d.descriptor, d.limit = va, 4095
    ctl.vid_heap_control(p, check=False)
    return q.status, p.status


def test_a_slice_makes_os_descriptor_memory_of_pinned_pages_only(sl, dev0):
    """Class 35: RM makes OS-descriptor memory (host memory the GPU may
    reach) three ways.  By RM_ALLOC it takes the descriptor as the type the
    caller names says -- a kernel array of struct page pointers, a
    physical address -- from a user client as from the kernel
    (osdescConstruct, osCreateMemFromOsDescriptor); by RM_ALLOC_MEMORY and
    VID_HEAP_CONTROL it pins the caller's range itself, and takes a range
    it cannot pin (a PFN map, as xpu's call pages are) as I/O memory,
    without a reference, uncached only (RmCreateOsDescriptor).  A slice's
    files refuse the first whatever the type (also wrapped in
    IOCTL_XFER_CMD), and the others unless the
    memory is cached or write-back, all the page-array path takes
    (NV_ERR_INSUFFICIENT_PERMISSIONS, the driver not called).  Outside
    every slice each call reaches the driver, which the stub shows with
    its answer (it has not the class, NV_ERR_INVALID_CLASS, and does not
    simulate OS descriptors, NV_ERR_NOT_SUPPORTED); the slice's process
    got the same before; its cached ones still get it."""
    def params(kind):
        return abi.NV_OS_DESC_MEMORY_ALLOCATION_PARAMS(
            descriptor=0xFFFF888000000000, limit=4095, descriptorType=kind)

    kinds = (abi.NVOS32_DESCRIPTOR_TYPE_VIRTUAL_ADDRESS,
             abi.NVOS32_DESCRIPTOR_TYPE_OS_PAGE_ARRAY,
             abi.NVOS32_DESCRIPTOR_TYPE_OS_IO_MEMORY)
    for kind in kinds:     # the premise: the call reaches the driver
        p = dev0.client.alloc_raw(dev0.hdevice,
                                  abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
                                  params(kind))
        assert p.status == abi.NV_ERR_INVALID_CLASS, abi.status_name(p.status)
    assert os_desc_calls(dev0.gpu, dev0.ctl, dev0.client, dev0,
                         abi.NVOS32_ATTR_COHERENCY_UNCACHED) == \
        (abi.NV_ERR_NOT_SUPPORTED,) * 2
    run_in(sl, inspect.getsource(os_desc_calls) + """
for kind in KINDS:
    p = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
                     abi.NV_OS_DESC_MEMORY_ALLOCATION_PARAMS(
                         descriptor=0xFFFF888000000000, limit=4095,
                         descriptorType=kind))
    assert p.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, \
        abi.status_name(p.status)
    p = xfer_alloc(dev.hdevice, abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
                   abi.NV_OS_DESC_MEMORY_ALLOCATION_PARAMS(
                       descriptor=0xFFFF888000000000, limit=4095,
                       descriptorType=kind))
    assert p.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, \
        abi.status_name(p.status)
refused = (abi.NV_ERR_INSUFFICIENT_PERMISSIONS,) * 2
driver = (abi.NV_ERR_NOT_SUPPORTED,) * 2
for coherency, want in ((abi.NVOS32_ATTR_COHERENCY_UNCACHED, refused),
                        (abi.NVOS32_ATTR_COHERENCY_WRITE_COMBINE, refused),
                        (abi.NVOS32_ATTR_COHERENCY_CACHED, driver),
                        (abi.NVOS32_ATTR_COHERENCY_WRITE_BACK, driver)):
    got = os_desc_calls(gpu, ctl, rm, dev, coherency)
    assert got == want, (coherency, [abi.status_name(x) for x in got])
""".replace("KINDS", repr(kinds)))


def test_a_slice_makes_no_event_buffer(sl, dev0):
    """Class 36: an event buffer (NV_EVENT_BUFFER, any client, under the
    client) looks its params' notificationHandle up as the caller's OS
    event of that fd, keeps the caller's value when none is found (the
    lookup's status is not checked), and dereferences it as a kernel
    pointer when the buffer goes (eventbufferConstruct and
    eventbufferDestruct, osDereferenceObjectCount).  A slice's control
    file refuses the class (NV_ERR_INSUFFICIENT_PERMISSIONS, the driver not
    called), by each door of RM_ALLOC: NVOS21, NVOS64 and NVOS21 wrapped
    in IOCTL_XFER_CMD.  Outside every slice the call reaches the driver:
    the stub has not the class (NV_ERR_INVALID_CLASS), which the slice's
    process got before."""
    params = bytes(40) + (0xFFFF888000000000).to_bytes(8, "little") + bytes(24)
    p = dev0.client.alloc_raw(dev0.client.handle, abi.NV_EVENT_BUFFER,
                              (ctypes.c_uint8 * 72).from_buffer_copy(params))
    assert p.status == abi.NV_ERR_INVALID_CLASS, abi.status_name(p.status)
    run_in(sl, """
params = bytes(40) + (0xFFFF888000000000).to_bytes(8, "little") + bytes(24)
p = rm.alloc_raw(rm.handle, abi.NV_EVENT_BUFFER,
                 (ctypes.c_uint8 * 72).from_buffer_copy(params))
assert p.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, \
    abi.status_name(p.status)
# the same RM_ALLOC wrapped in IOCTL_XFER_CMD, and as NVOS64
p = xfer_alloc(rm.handle, abi.NV_EVENT_BUFFER,
               (ctypes.c_uint8 * 72).from_buffer_copy(params))
assert p.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, \
    abi.status_name(p.status)
p = rm.alloc_raw(rm.handle, abi.NV_EVENT_BUFFER,
                 (ctypes.c_uint8 * 72).from_buffer_copy(params),
                 nvos64=not rm.nvos64)
assert p.status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS, \
    abi.status_name(p.status)
""")


# Class 37's classes, and the parent each is made under
REGISTER_CLASSES = ((abi.NV01_MEMORY_LOCAL_PRIVILEGED, "hdevice"),
                    (abi.NV01_MEMORY_HW_RESOURCES, "hdevice"),
                    (abi.NVA084_KERNEL_HOST_VGPU_DEVICE, "hsubdevice"))


def test_a_slice_makes_no_register_memory_or_hardware_resources(sl, dev0):
    """Class 37 (read in NVIDIA's source, 535 to 595; no GPU to show what
    the hardware does with them).  Any client may allocate:
    NV01_MEMORY_LOCAL_PRIVILEGED, all of BAR0 as register memory, which a
    channel takes as its error notifier or USERD without asking its
    aperture (by RM_ALLOC and RM_ALLOC_MEMORY); NV01_MEMORY_HW_RESOURCES,
    memory described at RM's invalid offset with the caller's size, which
    nothing on the mapping paths refuses and a version-2 PTE truncates to
    video memory from physical 0 (by RM_ALLOC and VID_HEAP_CONTROL's
    HW_ALLOC); a host vGPU device, which registers a guest with the
    caller's gfid.  And VID_HEAP_CONTROL's HW_FREE frees any handle of the
    client (_nvos32FunctionHwFree), past xpu's records of frees.  CUDA
    sends none of them.  A slice's files refuse each
    (NV_ERR_INSUFFICIENT_PERMISSIONS, the driver not called).  Outside
    every slice each reaches the driver -- the stub has not the classes
    (NV_ERR_INVALID_CLASS), does not simulate register memory by
    RM_ALLOC_MEMORY or HW_ALLOC (NV_ERR_NOT_SUPPORTED), and frees by
    HW_FREE as RM does -- and the slice's process got the same before:
    its HW_FREE freed its TSG behind xpu's records."""
    for hclass, parent in REGISTER_CLASSES:
        p = dev0.client.alloc_raw(getattr(dev0, parent), hclass,
                                  (ctypes.c_uint8 * 256)())
        assert p.status == abi.NV_ERR_INVALID_CLASS, abi.status_name(p.status)
    arg = dev0.gpu.rm_alloc_memory(dev0.client.handle, dev0.hdevice,
                                   abi.NV01_MEMORY_LOCAL_PRIVILEGED,
                                   check=False)
    assert arg.params.status == abi.NV_ERR_NOT_SUPPORTED
    p = dev0._heap_params(abi.NVOS32_FUNCTION_HW_ALLOC)
    assert dev0.ctl.vid_heap_control(p, check=False).status == \
        abi.NV_ERR_NOT_SUPPORTED
    run_in(sl, """
refused = abi.NV_ERR_INSUFFICIENT_PERMISSIONS
for hclass, parent in CLASSES:
    p = rm.alloc_raw(getattr(dev, parent), hclass, (ctypes.c_uint8 * 256)())
    assert p.status == refused, abi.status_name(p.status)
    p = xfer_alloc(getattr(dev, parent), hclass, (ctypes.c_uint8 * 256)())
    assert p.status == refused, abi.status_name(p.status)
arg = gpu.rm_alloc_memory(rm.handle, dev.hdevice,
                          abi.NV01_MEMORY_LOCAL_PRIVILEGED, check=False)
assert arg.params.status == refused, abi.status_name(arg.params.status)
p = dev._heap_params(abi.NVOS32_FUNCTION_HW_ALLOC)
st = ctl.vid_heap_control(p, check=False).status
assert st == refused, abi.status_name(st)
t = tsg()
rm.alloc(t, abi.HOPPER_CHANNEL_GPFIFO_A, chan_params())
p = dev._heap_params(abi.NVOS32_FUNCTION_HW_FREE)
p.data.HwFree.hResourceHandle = t
st = ctl.vid_heap_control(p, check=False).status
assert st == refused, abi.status_name(st)
# the TSG is still RM's (and its channel, which the slice counts)
p = rm.alloc_raw(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                 abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                     engineType=abi.NV2080_ENGINE_TYPE_GR0), hnew=t)
assert p.status == abi.NV_ERR_INSERT_DUPLICATE_NAME, abi.status_name(p.status)
""".replace("CLASSES", repr(REGISTER_CLASSES)))


CHANNEL_MEMORY = """
u = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
hva, _ = dev.alloc_virtual(1 << 21, lazy=True)
got = {}
got["tsg_error"] = rm.alloc_raw(
    dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
    abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
        engineType=abi.NV2080_ENGINE_TYPE_GR0, hObjectError=u)).status
t = tsg()

def chan(userd=None, **kw):
    p = chan_params()
    for k, v in kw.items():
        setattr(p, k, v)
    if userd is not None:
        p.hUserdMemory[0], p.userdOffset[0] = userd, 0
    return rm.alloc_raw(t, abi.HOPPER_CHANNEL_GPFIFO_A, p).status

got["chan_error"] = chan(hObjectError=u)
got["chan_ecc_error"] = chan(hObjectEccError=u)
got["userd_usermode"] = chan(userd=u)
got["userd_virtual"] = chan(userd=hva)
got["honest"] = chan()
print(json.dumps(got))
"""


class _Bare:
    """The bare driver's nodes, for run_in: a process outside every slice."""
    ctl_node, gpu_node = "/dev/nvidiactl", "/dev/nvidia0"


def test_a_channel_s_notifier_and_userd_are_memory_rm_can_address(sl):
    """Class 37, the channels' side (session 43, from NVIDIA's source; no
    GPU to show what the hardware does).  RM takes any Memory of the
    client as a channel's USERD, at the memdesc's "physical" address
    whatever its address space (kchannelCreateUserdMemDesc_GV100), and as
    a channel's or TSG's error notifier (kchannelGetNotifierInfo).  A
    usermode object is BAR0 memory, which the GMMU's aperture encodes as
    video memory at its BAR0 offset; a virtual allocation's address is a
    GPU VA the tenant chose.  A slice's channel takes as USERD video or
    system memory only, and as error notifiers no BAR0 memory
    (NV_ERR_INSUFFICIENT_PERMISSIONS, the driver not called); an honest
    channel is made.  Outside every slice the calls reach the driver: the
    stub, like RM, takes a usermode object as error notifier (it writes no
    notifier), and refuses other USERD than system or video memory
    (NV_ERR_INVALID_OBJECT_HANDLE; RM takes any Memory, a rule the stub
    does not follow: it has no storage behind them).  Before, the slice's
    process got the driver's answers."""
    ok, refused = abi.NV_OK, abi.NV_ERR_INSUFFICIENT_PERMISSIONS
    bare = json.loads(run_in(_Bare, "import json\n" + CHANNEL_MEMORY)
                      .stdout.splitlines()[-1])
    assert bare == {"tsg_error": ok, "chan_error": ok, "chan_ecc_error": ok,
                    "userd_usermode": abi.NV_ERR_INVALID_OBJECT_HANDLE,
                    "userd_virtual": abi.NV_ERR_INVALID_OBJECT_HANDLE,
                    "honest": ok}, bare
    got = json.loads(run_in(sl, "import json\n" + CHANNEL_MEMORY)
                     .stdout.splitlines()[-1])
    assert got == {"tsg_error": refused, "chan_error": refused,
                   "chan_ecc_error": refused, "userd_usermode": refused,
                   "userd_virtual": refused, "honest": ok}, got


def test_rm_alloc_context_dma2_makes_only_context_dmas_in_a_slice(sl):
    """Class 26: RM_ALLOC_CONTEXT_DMA2 (NVOS39) is an RM_ALLOC by another
    door -- RM makes the class the caller names, whatever it is, under
    hMemory's parent (RmDeprecatedAllocContextDma; docs/nvstub.md).
    Through a slice's control file it makes context DMAs only, on xpu's
    copy: a usermode object asked for this way is refused
    (NV_ERR_NOT_SUPPORTED) and RM made nothing (its handle is free to
    allocate after), while a context DMA on the tenant's memory is made as
    on the bare driver.  Before, RM made the usermode object, which xpu
    never recorded: its doorbell mappings were never gated and counted
    towards no bound."""
    run_in(sl, """
u = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
p = rm.alloc_context_dma(u, hclass=abi.HOPPER_USERMODE_A, hnew=0xCAFE0100,
                         check=False)
assert p.status == abi.NV_ERR_NOT_SUPPORTED, abi.status_name(p.status)
# RM made nothing under the handle (else INSERT_DUPLICATE_NAME)
rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A, hnew=0xCAFE0100)
rm.free(0xCAFE0100)
# the honest call: a window of the tenant's memory, RM's checks as ever
p = rm.alloc_context_dma(mem.handle, limit=2 * 4096, check=False)
assert p.status == abi.NV_ERR_INVALID_LIMIT, abi.status_name(p.status)
p = rm.alloc_context_dma(mem.handle, offset=4096, limit=4095,
                         hnew=0xCAFE0101, hparent=dev.hdevice)
rm.free(0xCAFE0101)
rm.free(u)
""")


def module_param(name):
    """A setter of xpu.ko's parameter NAME for a test, and what puts it
    back after (a generator for a fixture to yield from)."""
    path = f"/sys/module/xpu/parameters/{name}"
    with open(path) as f:
        old = f.read().strip()

    def set_(n):
        with open(path, "w") as f:
            f.write(str(n))
    yield set_
    set_(old)


@pytest.fixture
def max_handles():
    """Sets xpu.ko's max_handles for the test, and puts it back."""
    yield from module_param("max_handles")


def test_a_slice_s_rm_handles_are_counted_and_bounded(sl, max_handles):
    """RM objects a slice holds: every RM client and object costs NVIDIA's
    driver kernel memory charged to no cgroup, and RM caps neither.  xpu.ko
    counts the handles of the slice's clients (slice info rm_handles) and
    refuses a call past max_handles with NV_ERR_INSUFFICIENT_RESOURCES, RM
    not called, through every call that makes one: RM_ALLOC (memory, a
    client, a TSG), RM_VID_HEAP_CONTROL, RM_DUP_OBJECT and
    RM_ALLOC_CONTEXT_DMA2.  The count follows RM's frees: an object's free
    gives its handle back, a device's free its subtree's, a client's free
    all of its, and a control file's close all of its clients'
    (the fixture: 0 after).  Before, a tenant made objects without
    bound (the stub stops at 2^18 of all; RM never does)."""
    max_handles(64)
    run_in(sl, """
from xpu import ctl as xpu_ctl
def handles():
    with xpu_ctl.Ctl() as a:
        return a.slice_get(SLICE).rm_handles
PCI = abi.NVOS32_ATTR_LOCATION_PCI
base = handles()
# this client, its device and subdevice, and the prelude's memory
assert base == 4, base
made = []
while True:
    p = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_SYSTEM,
                     dev.memory_params(4096, location=PCI))
    if p.status != abi.NV_OK:
        break
    made.append(p.hObjectNew)
assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES, abi.status_name(p.status)
assert base + len(made) == 64 == handles(), (base, len(made))
# every door that makes a handle is held to the bound
REFUSED = abi.NV_ERR_INSUFFICIENT_RESOURCES
assert ctl.rm_alloc(0, 0, abi.NV01_ROOT_CLIENT, check=False).status == REFUSED
assert rm.alloc_raw(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                    abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                        engineType=abi.NV2080_ENGINE_TYPE_GR0)).status == REFUSED
assert dev.heap_alloc_raw(4096, location=PCI).status == REFUSED
assert ctl.rm_dup(rm.handle, dev.hdevice, rm.handle, mem.handle,
                  check=False).status == REFUSED
assert rm.alloc_context_dma(mem.handle, limit=4095,
                            check=False).status == REFUSED
assert handles() == 64
# a free gives its handle back
rm.free(made.pop())
assert handles() == 63
h = rm.alloc(dev.hdevice, abi.NV01_MEMORY_SYSTEM,
             dev.memory_params(4096, location=PCI))
made.append(h)
# a context DMA and a duplicate count, and go with what they hang on
for h in made[:8]:
    rm.free(h)
del made[:8]
ctx = rm.alloc_context_dma(mem.handle, limit=4095, hparent=dev.hdevice)
d = rm.dup(dev.hdevice, mem.handle)
assert handles() == 64 - 8 + 2
# another client of the slice counts, and its free gives all of it back
with client.RmClient(ctl) as other:
    other.device(0, gpu_file=gpu)
    assert handles() == 64 - 8 + 2 + 3
assert handles() == 64 - 8 + 2
# a device's free takes its subtree: only this client is left
rm.free(dev.hdevice)
assert handles() == 1, handles()
""")


@pytest.fixture
def max_records():
    """Sets xpu.ko's max_records for the test, and puts it back."""
    yield from module_param("max_records")


@pytest.fixture
def max_doorbell_files():
    """Sets xpu.ko's max_doorbell_files for the test, and puts it back."""
    yield from module_param("max_doorbell_files")


def test_the_bounds_on_records_and_doorbell_files_are_module_parameters(
        sl, max_records, max_doorbell_files):
    """The bounds of class 7 (records of each kind) and class 3 (doorbell
    files) are xpu.ko's parameters max_records and max_doorbell_files,
    1024 by default, which root may set from 1 to 4096 at any time.  A
    value outside is refused with EINVAL and changes nothing.  A bound
    set holds at once, and one lowered below what a slice holds takes
    nothing away: the slice is refused more until it is under the bound
    again.  The slice info counts what the slice holds of each (since
    session 46: `usermode`, `doorbell_files`).  (Before, both were
    constants; CI's debug boot sets them lower to show the same refusals
    in less time: docs/testing.md.)"""
    max_records(4096)
    max_records(4)
    max_doorbell_files(4)
    run_in(sl, """
def set_bound(n):
    with open("/sys/module/xpu/parameters/max_records", "w") as f:
        f.write(str(n))

def usermode():
    return rm.alloc_raw(dev.hsubdevice, abi.HOPPER_USERMODE_A).status

def counts():
    # what the slice info says it holds (since session 46)
    got = slice_info()
    return got.usermode, got.doorbell_files

hs = [rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A) for _ in range(4)]
assert usermode() == abi.NV_ERR_INSUFFICIENT_RESOURCES
maps = [bell(hs[0]) for _ in range(4)]
assert counts() == (4, 4)
refused(hs[0])
maps.pop().close()
assert counts() == (4, 3)
maps.append(bell(hs[0]))
refused(hs[1])
for m in maps:
    m.close()
assert counts() == (4, 0)
set_bound(2)                # below the 4 held: nothing is taken
rm.free(hs.pop())
assert usermode() == abi.NV_ERR_INSUFFICIENT_RESOURCES     # 3 held
rm.free(hs.pop())
rm.free(hs.pop())
hs.append(rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A))  # 2 held
assert usermode() == abi.NV_ERR_INSUFFICIENT_RESOURCES
set_bound(3)
hs.append(rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A))
assert counts() == (3, 0)
""")


# xpu.ko's bounds root may set at run time, each with its range
RUNTIME_BOUNDS = {"max_records": (1, 4096), "max_doorbell_files": (1, 4096),
                  "max_handles": (1, 1 << 20), "max_os_events": (1, 16384)}


def test_every_bound_of_xpu_ko_is_taken_only_within_its_range(
        max_records, max_doorbell_files, max_handles, max_os_events):
    """Bad input loses nothing: each bound xpu.ko takes at run time
    (max_records, max_doorbell_files, max_handles, max_os_events) refuses
    a value outside its range -- 0, which would refuse a slice its first
    object, one past the top, a negative, not a number -- with EINVAL and
    keeps its value; the ends of the range are taken.  gr_context_kib,
    set only at load, fails the load past its range instead of being
    clamped.  (Before, max_handles and max_os_events took 0, and
    gr_context_kib=4294967295 loaded as 1048576.)"""
    for name, (lo, hi) in RUNTIME_BOUNDS.items():
        path = f"/sys/module/xpu/parameters/{name}"
        old = nvtest.xpu_param(name)
        # past what a u32 holds: ERANGE, as the kernel's own parameters
        for bad, err in ((str(lo - 1), errno.EINVAL),
                         (str(hi + 1), errno.EINVAL), ("-1", errno.EINVAL),
                         ("x", errno.EINVAL), ("4294967296", errno.ERANGE)):
            with pytest.raises(OSError) as e, open(path, "w") as f:
                f.write(bad)
            assert e.value.errno == err, (name, bad, e.value)
            assert nvtest.xpu_param(name) == old, (name, bad)
        for good in (hi, lo, old):
            with open(path, "w") as f:
                f.write(str(good))
            assert nvtest.xpu_param(name) == good, (name, good)
    ko = os.environ.get("XPU_KO")
    if not ko:
        pytest.skip("XPU_KO is not set: run under tests/vm/run")
    params = os.environ.get("XPU_KO_PARAMS", "").split()
    subprocess.run(["rmmod", "xpu"], check=True)
    try:
        for bad in ("1048577", "4294967295"):
            r = subprocess.run(["insmod", ko, *params,
                                f"gr_context_kib={bad}"],
                               capture_output=True, text=True, check=False)
            assert r.returncode != 0, bad
            assert not os.path.exists("/sys/module/xpu"), bad
        subprocess.run(["insmod", ko, *params, "gr_context_kib=1048576"],
                       check=True)
        assert nvtest.xpu_param("gr_context_kib") == 1 << 20
        subprocess.run(["rmmod", "xpu"], check=True)
    finally:
        if not os.path.exists("/sys/module/xpu"):
            subprocess.run(["insmod", ko, *params], check=True)


@pytest.fixture
def max_os_events():
    """Sets xpu.ko's max_os_events for the test, and puts it back."""
    yield from module_param("max_os_events")


def test_os_events_name_only_the_slice_s_clients_and_are_bounded(
        sl, admin, nodedir, max_os_events):
    """Class 27: RM ties an OS event (NV_ESC_ALLOC_OS_EVENT) to a (hClient,
    fd) pair in one list for the whole driver, checks neither (the client
    need not exist, nor be the caller's), frees one by its pair through any
    file, and bounds nothing (osapi.c, 535 to 595; the stub does as RM
    since session 33).  Before, a tenant freed another slice's event by
    naming its client, took the pairs of a client before its owner did (the
    owner's allocation then failed, and its RM event objects would bind to
    the squatter's event and post to the squatter's file), and made events
    without end.  Now a slice's file names only a client of the slice's
    (NV_ERR_INVALID_CLIENT, RM not called), through its control file or a
    GPU file, and holds at most max_os_events of them
    (NV_ERR_INSUFFICIENT_RESOURCES); the count follows FREE_OS_EVENT, the
    RM_FREE of a client, and the close of the file an event is tied to."""
    victim = Slice(admin, nodedir, name="victim", limit=64 * MiB)
    max_os_events(8)
    # another slice's tenant: a client and its event, then, once told, what
    # became of them (a process is in one slice, so this is another one)
    owner = subprocess.Popen([sys.executable, "-c", nvtest.CHILD_PRELUDE + """
A, F = abi.NV_ESC_ALLOC_OS_EVENT, abi.NV_ESC_FREE_OS_EVENT

def osev(f, nr, hc, fd):
    p = abi.nv_ioctl_alloc_os_event_t(hClient=hc, fd=fd)
    assert f.escape_raw(nr, p) == 0
    return p.Status

vctl = client.Ctl(VCTL)
vrm = client.RmClient(vctl)
assert osev(vctl, A, vrm.handle, 7) == abi.NV_OK
assert osev(vctl, A, vrm.handle, 7) == abi.NV_ERR_INSUFFICIENT_RESOURCES
print(vrm.handle, flush=True)
sys.stdin.readline()
report(again=osev(vctl, A, vrm.handle, 8),     # its pair still free
       free=osev(vctl, F, vrm.handle, 7),      # its event still there
       gone=osev(vctl, F, vrm.handle, 7))
""".replace("VCTL", repr(victim.ctl_node))], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        vhc = int(owner.stdout.readline())
        # the slice's info counts what its clients hold
        assert victim.get().os_events == 1
        run_in(sl, """
A, F = abi.NV_ESC_ALLOC_OS_EVENT, abi.NV_ESC_FREE_OS_EVENT
OK, FULL = abi.NV_OK, abi.NV_ERR_INSUFFICIENT_RESOURCES
NOT_OURS = abi.NV_ERR_INVALID_CLIENT

def osev(f, nr, hc, fd):
    p = abi.nv_ioctl_alloc_os_event_t(hClient=hc, fd=fd)
    assert f.escape_raw(nr, p) == 0
    return p.Status

# this slice cannot free another slice's event, take its client's pairs,
# or name a client to come, through its control file or a GPU file
for f in (ctl, gpu):
    assert osev(f, F, VHC, 7) == NOT_OURS
    assert osev(f, A, VHC, 8) == NOT_OURS
    assert osev(f, A, rm.handle + 1, 8) == NOT_OURS   # the next client
    assert osev(f, A, 0, 8) == NOT_OURS

# its own clients: at most 8 events, through any of its files
fds = list(range(100, 108))
for fd in fds[:4]:
    assert osev(ctl, A, rm.handle, fd) == OK
for fd in fds[4:]:
    assert osev(gpu, A, rm.handle, fd) == OK
assert osev(ctl, A, rm.handle, 200) == FULL
assert osev(gpu, A, rm.handle, 200) == FULL
# a free gives its place back, through any file
assert osev(gpu, F, rm.handle, fds[0]) == OK
assert osev(ctl, A, rm.handle, 200) == OK
assert osev(ctl, A, rm.handle, 201) == FULL
# the close of the file an event is tied to takes it (RM's rule)
g2 = client.GpuFile(0, GPU)
assert osev(ctl, F, rm.handle, 200) == OK
assert osev(g2, A, rm.handle, 300) == OK
assert osev(ctl, A, rm.handle, 301) == FULL
g2.close()
assert osev(ctl, A, rm.handle, 300) == OK        # RM freed the pair
assert osev(ctl, A, rm.handle, 301) == FULL
# an RM_FREE of a client takes its events
for fd in fds[1:]:
    assert osev(ctl, F, rm.handle, fd) == OK
other = client.RmClient(ctl)
for fd in fds[1:]:
    assert osev(ctl, A, other.handle, fd) == OK
assert osev(ctl, A, rm.handle, 400) == FULL
other.close()
for fd in fds[1:]:
    assert osev(ctl, A, rm.handle, fd) == OK
assert osev(ctl, A, rm.handle, 400) == FULL
""".replace("VHC", str(vhc)))
        # the tenant's went with the close of its files
        assert sl.get().os_events == 0
        out, _ = owner.communicate("go\n", timeout=60)
        assert owner.returncode == 0
        assert json.loads(out) == {"again": 0, "free": 0,
                                   "gone": abi.NV_ERR_INVALID_EVENT}
        assert victim.get().os_events == 0
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        victim.destroy()


def test_a_dma_buf_export_names_only_the_slice_s_clients(sl):
    """Class 28: NV_ESC_EXPORT_TO_DMABUF_FD (a GPU file's) makes a dma-buf
    of the video memory it names in client hClient, duplicated with kernel
    privilege into the driver's own client, and checks only that the client
    exists and that the handles are video memory of the GPU
    (nv-dmabuf.c, osapi.c RmDmabufVerifyMemHandle, 535 to 595): another
    tenant's memory, for the asking.  Now a slice's call must name one of
    its own clients (NV_ERR_INVALID_CLIENT, the driver not called); one
    that does goes to the driver on xpu's copy, and its own memory comes
    back as a dma-buf.  Without the check the other client's call reached
    the driver too (before session 39 the stub made no dma-bufs, and both
    got -EINVAL)."""
    with client.Ctl() as c, client.RmClient(c) as other:
        run_in(sl, """
import os
v = abi.parse_version(ctl.version)
m = dev.alloc_vidmem(1 << 20)
NOT_OURS = abi.NV_ERR_INVALID_CLIENT
for hc in (OTHER, 0, rm.handle + 1):        # the host's, none, one to come
    rc, st, fd = gpu.export_dmabuf(v, hc, [(m.handle, 0, 1 << 20)])
    assert (rc, st) == (0, NOT_OURS), (hex(hc), rc, hex(st))
rc, st, fd = gpu.export_dmabuf(v, rm.handle, [(m.handle, 0, 1 << 20)])
assert (rc, st) == (0, abi.NV_OK) and fd >= 0, (rc, hex(st), fd)
os.close(fd)
rm.free(m.handle)
""".replace("OTHER", str(other.handle)))



def test_memory_a_dma_buf_keeps_stays_charged_to_the_slice(sl):
    """Class 28 and the ledger: a dma-buf of the slice's own memory holds
    the driver's duplicates, in a kernel client that no process's
    GET_PID_INFO figure counts (`test_export.py` shows the stub doing what
    RM does), so a free of the tenant's handle lowers its figure while RM
    keeps the memory.  The ledger's duplicate, taken before the free, is
    not alone after it: the 128 MiB stays charged to the 256 MiB slice,
    which refuses 192 MiB more, until the dma-buf's last reference goes;
    then the same allocation is admitted.  Both orders of closing are
    taken: the dma-buf first, and the memory's client first."""
    run_in(sl, """
import os
from xpu import ctl as xpu_ctl
v = abi.parse_version(ctl.version)
for client_first in (False, True):
    c = client.RmClient(ctl)
    d = c.device(0, gpu_file=gpu)
    m = d.alloc_vidmem(128 << 20)
    rc, st, fd = gpu.export_dmabuf(v, c.handle, [(m.handle, 0, 128 << 20)])
    assert (rc, st) == (0, abi.NV_OK), (rc, hex(st))
    if client_first:
        c.close()                   # the handle goes with its client
    else:
        c.free(m.handle)
    with xpu_ctl.Ctl() as a:
        assert a.slice_get(SLICE).memory_used >= 128 << 20
    try:
        dev.alloc_vidmem(192 << 20)
        raise AssertionError("192 MiB admitted with 128 MiB kept")
    except client.NvStatusError as e:
        assert e.status == abi.NV_ERR_NO_MEMORY, hex(e.status)
    os.close(fd)
    big = dev.alloc_vidmem(192 << 20)
    rm.free(big.handle)
    if not client_first:
        c.close()
with xpu_ctl.Ctl() as a:
    assert a.slice_get(SLICE).memory_used < 128 << 20
""")

# --- class 29: the memory-block size the driver takes from whoever comes first

SYS_PARAMS = """
import errno, threading, time
TRUE = BLOCK

def send(p):
    # libc's ioctl on P itself: the driver reads P's own memory
    ctypes.set_errno(0)
    rc = libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_SYS_PARAMS,
                                         ctypes.sizeof(p)),
                    ctypes.addressof(p))
    return -ctypes.get_errno() if rc else 0

for bogus in (TRUE * 2, 1, 1 << 63):
    rc = send(abi.nv_ioctl_sys_params_t(bogus))
    assert rc == -errno.EINVAL, (hex(bogus), rc)
# the true size, rewritten to a bogus one while the driver waits to read it
p = abi.nv_ioctl_sys_params_t(TRUE)
at = []
def race():
    time.sleep(0.15)
    p.memblock_size = TRUE * 2
    at.append(time.monotonic() - t0)
t0 = time.monotonic()
th = threading.Thread(target=race)
th.start()
rc = send(p)
elapsed = time.monotonic() - t0
th.join()
# the premise: the size was rewritten before the driver read it
assert at[0] < 0.3 <= elapsed, (at, elapsed)
assert rc == 0, rc
"""


def test_a_slice_sends_the_driver_only_the_true_memory_block_size(
        reload_stub, nodedir):
    """Class 29: NV_ESC_SYS_PARAMS sets the memory-block size the driver
    onlines coherent GPU memory in, once, from whichever opener of the
    control node sends one first, unchecked; every later different value is
    -EBUSY (nv.c, 535 to 595; CUDA's user space sends the kernel's, from
    sysfs, on every open).  A tenant that came first set a bogus size for
    the whole host, and every honest process's call was refused.  Now a
    slice may send only the kernel's size (or 0): anything else is -EINVAL,
    the driver not called, and the call is made on xpu's copy, so a size
    rewritten after xpu's check never reaches the driver.  The stub,
    reloaded, starts with no size set, and waits before it reads the struct
    (copyin_delay_us)."""
    block = nvtest.memory_block_size()
    assert block, "the kernel has no memory blocks"
    with test_hostile_mem.racer_slice(reload_stub, nodedir,
                                      copyin_delay_us=300000) as (sl, _):
        run_in(sl, SYS_PARAMS.replace("BLOCK", str(block)))
        # the driver holds the true size: the host's honest call is taken,
        # and another size is refused
        with client.Ctl() as c:
            assert c.escape_raw(abi.NV_ESC_SYS_PARAMS,
                                abi.nv_ioctl_sys_params_t(block)) == 0
            assert c.escape_raw(abi.NV_ESC_SYS_PARAMS,
                                abi.nv_ioctl_sys_params_t(block * 2)) == \
                -errno.EBUSY


# --- class 30: an event hangs on any client's notifier

EVENTS = """
def event(f, hpc, hsrc, hclass=abi.NV01_EVENT):
    params = abi.NV0005_ALLOC_PARAMETERS(hpc, hsrc, hclass, 0, 0)
    p = abi.NVOS21_PARAMETERS(hRoot=rm.handle, hObjectParent=rm.handle,
                              hClass=hclass)
    p.pAllocParms = ctypes.addressof(params)
    p.paramsSize = ctypes.sizeof(params)
    assert f.escape_raw(abi.NV_ESC_RM_ALLOC, p) == 0
    return p.status

gpu.register_fd(ctl)        # the GPU file acts for the control file's clients
mine = client.RmClient(ctl)                 # another client of the slice's
mdev = mine.device(0, gpu_file=gpu)
NOT_OURS = abi.NV_ERR_INVALID_CLIENT
for f in (ctl, gpu):
    # the host's client: its subdevice, the client itself
    for hsrc in (OTHER_SUB, OTHER):
        st = event(f, OTHER, hsrc)
        assert st == NOT_OURS, (f, hex(hsrc), hex(st))
    # its own, named or by 0, and another client of its slice
    assert event(f, 0, dev.hsubdevice) == abi.NV_OK
    assert event(f, rm.handle, rm.handle) == abi.NV_OK
    assert event(f, mine.handle, mdev.hsubdevice) == abi.NV_OK
"""


def test_an_event_hangs_only_on_the_slice_s_own_notifiers(sl):
    """Class 30: RM hangs an event object on hSrcResource of client
    hParentClient, any client -- it looks the client up without asking
    whose it is (event_api.c eventapiInit, RS_FLAGS_DUAL_CLIENT_LOCK, 535 to
    595) -- through the control file or a GPU file.  A tenant hung events
    on another tenant's subdevice or client, to get its notifications and
    lengthen the lists RM walks to post them.  Now a slice's event must
    hang on one of its own clients (NV_ERR_INVALID_CLIENT, RM not called),
    named in xpu's copy of the params, which RM reads.  The stub takes the
    host's client here (test_objects.py), which is what the tenant got
    without the check."""
    with client.Ctl() as c, client.RmClient(c) as other:
        odev = other.device(0)
        try:
            run_in(sl, EVENTS.replace("OTHER_SUB", str(odev.hsubdevice))
                   .replace("OTHER", str(other.handle)))
        finally:
            odev.close()


# --- class 31: the control RM runs is not the one xpu read

CONTROL_SETUP = """
import threading, time
fd = client.Ctl(CTL)
h = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
x = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_PARAMS(fd=fd.fd)
x.object.type = abi.NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM
x.object.data.rmObject.hObject = h
EXPORT = abi.NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD
# a command xpu passes on (not SET_INHERITED_SHARE_POLICY, which xpu.ko
# makes on its own copy since session 55, refusing other sizes itself)
LET_BY = 0x27b     # NV0000_CTRL_CMD_GPU_GET_MEMOP_ENABLE (ctrl0000gpu.h)

def send(cmd):
    # libc's ioctl on P itself: the driver reads P's own memory
    p = abi.NVOS54_PARAMETERS(hClient=rm.handle, hObject=rm.handle, cmd=cmd)
    p.params, p.paramsSize = ctypes.addressof(x), ctypes.sizeof(x)
    return p, lambda: libc.ioctl(ctl.fd, abi.nv_ioctl(abi.NV_ESC_RM_CONTROL,
                                                     ctypes.sizeof(p)),
                                 ctypes.addressof(p))

def threads():
    with open("/proc/self/status") as f:
        return next(int(v.split()[1]) for v in f if v.startswith("Threads:"))

def pages():
    with open("/proc/self/maps") as f:
        return [int(v.split("-")[0], 16) for v in f if "xpu-call" in v]
"""

CONTROL_RACE = CONTROL_SETUP + """
# the command xpu lets by, with the export's params: RM refuses the size
p, call = send(LET_BY)
assert call() == 0
let_by = p.status
assert let_by != abi.NV_OK, hex(let_by)
# the export, as xpu reads it: refused
p, call = send(EXPORT)
assert call() == 0 and p.status == abi.NV_ERR_NOT_SUPPORTED, hex(p.status)
# the command xpu lets by, turned into the export while the driver waits
# to read the struct
p, call = send(LET_BY)
at = []
def race():
    time.sleep(0.15)
    p.cmd = EXPORT
    at.append(time.monotonic() - t0)
t0 = time.monotonic()
th = threading.Thread(target=race)
th.start()
rc = call()
elapsed = time.monotonic() - t0
th.join()
# the premise: the command was rewritten before the driver read it
assert at[0] < 0.3 <= elapsed, (at, elapsed)
assert rc == 0, rc
# the driver's copy-back: the command it ran, and its answer
assert (p.cmd, p.status) == (LET_BY, let_by), (hex(p.cmd), hex(p.status))
rm.free(h)
"""


def test_the_control_rm_runs_is_the_one_xpu_read(reload_stub, nodedir):
    """Class 31: xpu.ko read an RM_CONTROL's command from the caller's
    struct and passed the struct on, which the driver read again.  A
    thread of the tenant's rewrote the command in between and ran as a
    command xpu lets by one it refuses or must see: the export of a
    usermode object (class 22) here, FIFO_DISABLE_CHANNELS, an import xpu
    would record, the idling of channels (class 32).  Now the driver reads
    xpu's copy of NVOS54, on a page only xpu and the driver can write
    (callpage.c).  The stub, reloaded, waits before it reads the struct
    (control_delay_us); without the copy the driver ran the export
    (NV_OK, the export's command in its copy-back)."""
    with test_hostile_mem.racer_slice(reload_stub, nodedir,
                                      control_delay_us=300000) as (sl, _):
        run_in(sl, CONTROL_RACE)


# A process alone in its address space leaves xpu's page as the driver's
# copy-back left it, writable (callpage.c); a thread it makes after that
# stores into the next call's struct through it.
PAGE_LEFT_WRITABLE = CONTROL_SETUP + """
# a control made alone, told apart from the raced one below by its size
p, call = send(LET_BY)
p.paramsSize -= 4
assert call() == 0 and p.status != abi.NV_OK, hex(p.status)
report(alone=threads(), pages=len(pages()))
want = (rm.handle, rm.handle, LET_BY, ctypes.sizeof(x))
at, over = [], []
def race():
    # a plain store, once xpu's page holds the next call's struct; until
    # the call is over (then the premise failed: no page held it)
    n = ctypes.sizeof(abi.NVOS54_PARAMETERS)
    while not over:
        for a in pages():
            q = abi.NVOS54_PARAMETERS.from_buffer_copy(ctypes.string_at(a, n))
            if (q.hClient, q.hObject, q.cmd, q.paramsSize) == want:
                at.append(time.monotonic() - t0)
                ctypes.c_uint32.from_address(
                    a + abi.NVOS54_PARAMETERS.cmd.offset).value = EXPORT
                at.append(time.monotonic() - t0)
                return
p, call = send(LET_BY)
t0 = time.monotonic()
th = threading.Thread(target=race)
th.start()
rc = call()
elapsed = time.monotonic() - t0
over.append(True)
th.join()
report(at=at, elapsed=elapsed, rc=rc, cmd=p.cmd, status=p.status)
"""


def test_a_thread_made_after_a_call_cannot_rewrite_the_next(reload_stub,
                                                            nodedir):
    """A process alone in its address space (one thread) makes its calls
    on xpu's page without the page being write-protected after each: no
    other task can store through it (callpage.c).  It then makes a thread,
    which waits for the next control's struct on the page and stores the
    export's command into it while the driver waits to read it (class 31's
    race, control_delay_us).  xpu write-protects the page before it writes
    a call's struct there once the process is no longer alone, so the
    store faults: SIGBUS.  Without that, the driver ran the export."""
    with test_hostile_mem.racer_slice(reload_stub, nodedir,
                                      control_delay_us=300000) as (sl, _):
        child = nvtest.spawn_child(
            tenant_source(sl, PAGE_LEFT_WRITABLE))
        # the premise: the first call was made alone, on a page of xpu's
        first = child.report()
        assert first["alone"] == 1 and first["pages"] >= 1, first
        rest = child.rest()
        assert child.finish() == -signal.SIGBUS, rest


# Calls of one process at once: more than the slots of its pages of calls.
MANY_AT_ONCE = CONTROL_SETUP + """
N = 20
ready = threading.Barrier(N)
got = [None] * N
def one(i):
    p, call = send(LET_BY)
    ready.wait()
    got[i] = (call(), p.status)
threads_ = [threading.Thread(target=one, args=(i,)) for i in range(N)]
t0 = time.monotonic()
for t in threads_:
    t.start()
for t in threads_:
    t.join()
report(elapsed=time.monotonic() - t0, got=sorted(set(got)), pages=pages())
"""


def test_calls_past_the_slots_of_the_pages_of_calls_wait_for_one(
        reload_stub, nodedir):
    """The pages of calls lie below mmap_min_addr, in 15 slots from 0x1000
    (callpage.c), one for each call of the process in flight.  Twenty
    threads make an RM_CONTROL at once while the driver sleeps 200 ms in
    each: fifteen run together, five wait for a page and get one as the
    first return -- every call made, with RM's answer, on 15 pages, all in
    the slots; and the last could not end before two of the driver's
    sleeps."""
    delay = 0.2
    with test_hostile_mem.racer_slice(reload_stub, nodedir,
                                      control_delay_us=int(delay * 1e6)) as (
            sl, _):
        child = nvtest.spawn_child(tenant_source(sl, MANY_AT_ONCE))
        r = child.report()
        assert child.finish() == 0
    # one answer for all twenty: rc 0 and RM's status (it refuses the size)
    assert len(r["got"]) == 1 and r["got"][0][0] == 0, r
    assert r["got"][0][1] != abi.NV_OK, r
    assert sorted(r["pages"]) == [i << 12 for i in range(1, 16)], r
    assert r["elapsed"] >= 2 * delay, r


# A process with an AIO context or an io_uring is not alone, whatever its
# threads: a driver completing its asynchronous I/O may adopt its address
# space from a kernel thread that mm_users does not count (kthread_use_mm:
# FunctionFS's reads).  Its page is write-protected after a call, so its own
# store between calls faults, as any other thread's would.
PAGE_AFTER_ASYNC = CONTROL_SETUP + """
libc.syscall.restype = ctypes.c_long
if ASYNC_KIND == "aio":
    ctx = ctypes.c_ulong(0)             # io_setup(1, &ctx)
    assert libc.syscall(206, 1, ctypes.byref(ctx)) == 0, ctypes.get_errno()
elif ASYNC_KIND == "uring":
    params = (ctypes.c_char * 120)()    # io_uring_setup(1, &params)
    assert libc.syscall(425, 1, params) >= 0, ctypes.get_errno()
p, call = send(LET_BY)
p.paramsSize -= 4
assert call() == 0 and p.status != abi.NV_OK, hex(p.status)
# the page the control was made on holds its struct
n = ctypes.sizeof(abi.NVOS54_PARAMETERS)
made = [a for a in pages()
        if abi.NVOS54_PARAMETERS.from_buffer_copy(ctypes.string_at(a, n)).cmd
        == LET_BY]
report(alone=threads(), pages=len(made))
ctypes.c_uint32.from_address(made[0] + abi.NVOS54_PARAMETERS.cmd.offset).value = 0
report(stored=1)
"""


@pytest.mark.parametrize("mode", ["plain", "aio", "uring"])
def test_a_process_with_async_io_is_not_alone(sl, mode):
    """A single-threaded caller's page is left writable after a call
    (test above): no other task can store through it.  A driver's kernel
    thread completing a process's asynchronous I/O can (kthread_use_mm,
    which mm_users does not count: FunctionFS's reads, through AIO or
    io_uring), so a process that made an AIO context or an io_uring has its
    page write-protected after each call, and its own store between calls
    gets SIGBUS.  Plain: the store lands (the premise, and the cost saved);
    without the check the store landed in all three."""
    child = nvtest.spawn_child(
        tenant_source(sl, PAGE_AFTER_ASYNC).replace("ASYNC_KIND", repr(mode)))
    first = child.report()
    assert first["alone"] == 1 and first["pages"] == 1, first
    if mode == "plain":
        assert child.report()["stored"] == 1
        assert child.finish() == 0
    else:
        rest = child.rest()
        assert child.finish() == -signal.SIGBUS, rest


# --- class 32: doors that act beyond the caller

DOORS = """
ch = client.Channel(dev, schedule=False)
W = abi.NVOS38_ACCESS_TYPE_WRITE_DWORD
R = abi.NVOS38_ACCESS_TYPE_READ_DWORD
got = {
    "escape": ctl.rm_idle_channels(rm.handle, dev.hdevice, ch.hchannel,
                                   timeout=1000000).status,
    "client": rm.idle_channels([(rm.handle, dev.hdevice, ch.hchannel)],
                               timeout=1000000).status,
    "device": rm.fifo_idle_channels(dev.hdevice, [ch.hchannel],
                                    timeout=1000000).status,
    "write": ctl.rm_access_registry(rm.handle, rm.handle, W, "KEY",
                                    data=1)[0].status,
    "read": ctl.rm_access_registry(rm.handle, dev.hsubdevice, R,
                                   "KEY")[0].status,
}
ch.close()
report(**got)
"""


class _Nodes:
    """The host's own nodes, as run_in takes a slice's."""
    ctl_node = abi.NV_CTL_PATH
    gpu_node = abi.nv_gpu_path(0)


def test_a_slice_neither_idles_channels_nor_writes_the_registry(sl):
    """Class 32: two doors CUDA does not use act beyond the caller.
    RmIdleChannels -- NV_ESC_RM_IDLE_CHANNELS, NV0000_CTRL_CMD_IDLE_CHANNELS,
    NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS, all non-privileged -- holds the GPU
    lock while the firmware idles the caller's channels within the caller's
    timeout: a gated slice's channel would keep every tenant's RM calls on
    the GPU waiting.  RmAccessRegistry writes the driver's global registry
    for any user (keys every GPU's initialisation reads, the debug level,
    kernel memory for every new name).  A slice's files now refuse all
    four (NV_ERR_INSUFFICIENT_PERMISSIONS, the driver not called); the
    host's process is served as before (the stub's rules: test_objects.py),
    and it does not see the tenant's key."""
    tenant = json.loads(run_in(sl, DOORS.replace("KEY", "XpuTenantKey"))
                        .stdout.strip().splitlines()[-1])
    refused = abi.NV_ERR_INSUFFICIENT_PERMISSIONS
    assert tenant == dict.fromkeys(("escape", "client", "device", "write",
                                    "read"), refused), tenant
    # the premise: the host's process makes every call, on its own channel
    host = json.loads(run_in(_Nodes, DOORS.replace("KEY", "XpuHostKey"))
                      .stdout.strip().splitlines()[-1])
    assert host == dict.fromkeys(("escape", "client", "device", "write",
                                  "read"), abi.NV_OK), host
    with client.Ctl() as c, client.RmClient(c) as rm:
        p, _ = c.rm_access_registry(rm.handle, rm.handle,
                                    abi.NVOS38_ACCESS_TYPE_READ_DWORD,
                                    "XpuTenantKey")
        assert p.status == abi.NV_ERR_GENERIC, hex(p.status)


# --- class 33: the GPUs a slice's control file attaches

ATTACH_RACE = """
import errno, threading, time

def attach(ids):
    # libc's ioctl on IDS themselves: the driver reads their own memory
    f = client.Ctl(CTL)                 # a file attaches once
    ctypes.set_errno(0)
    rc = libc.ioctl(f.fd, abi.nv_ioctl(ATTACH_NR, ctypes.sizeof(ids)),
                    ctypes.addressof(ids))
    return (-ctypes.get_errno() if rc else 0), f

# another GPU, as xpu reads it: refused
assert attach((ctypes.c_uint32 * 2)(MINE, THEIRS))[0] == -errno.EINVAL
# the slice's GPU and a 0, the 0 turned into another GPU's id while the
# driver waits to read them
ids = (ctypes.c_uint32 * 2)(MINE, 0)
at = []
def race():
    time.sleep(0.15)
    ids[1] = THEIRS
    at.append(time.monotonic() - t0)
t0 = time.monotonic()
th = threading.Thread(target=race)
th.start()
rc, f = attach(ids)
elapsed = time.monotonic() - t0
th.join()
# the premise: the id was rewritten before the driver read it
assert at[0] < 0.3 <= elapsed, (at, elapsed)
assert rc == 0, rc
# the driver's copy-back: what it attached
assert list(ids) == [MINE, 0], [hex(i) for i in ids]

# REGISTER_FD the same way: the slice's control file turned into the
# host's while the driver waits to read the number
host = client.Ctl("/dev/nvidiactl")
g = client.GpuFile(0, GPU)
num = ctypes.c_int(ctl.fd)
at = []
def race():
    time.sleep(0.15)
    num.value = host.fd
    at.append(time.monotonic() - t0)
t0 = time.monotonic()
th = threading.Thread(target=race)
th.start()
ctypes.set_errno(0)
rc = libc.ioctl(g.fd, abi.nv_ioctl(abi.NV_ESC_REGISTER_FD, 4),
                ctypes.addressof(num))
elapsed = time.monotonic() - t0
th.join()
assert at[0] < 0.3 <= elapsed, (at, elapsed)
assert rc == 0, ctypes.get_errno()
assert num.value == ctl.fd, (num.value, ctl.fd, host.fd)
"""


def test_a_slice_attaches_only_its_gpu(reload_stub, nodedir):
    """Class 33: xpu.ko checked the ids of a slice's NV_ESC_ATTACH_GPUS_TO_FD
    in its own copy and passed the caller's on, which the driver read
    again.  A thread of the tenant's rewrote an id in between: the driver
    opened another tenant's GPU, and held it open as long as the file (nv.c
    nvidia_dev_get), keeping it from a reset or a change of mode.  Now the
    driver reads xpu's copy of the ids (callpage.c).  REGISTER_FD, whose
    number must name a control file of the slice's, the same: the host's
    named after xpu's check was the one the GPU file was registered to.
    The stub, reloaded with two GPUs, waits before it reads either
    (copyin_delay_us); without the copy it attached the other GPU and
    registered to the host's file (their numbers in the copy-back)."""
    with test_hostile_mem.racer_slice(reload_stub, nodedir, gpus=2,
                                      copyin_delay_us=300000) as (sl, _):
        with client.Ctl() as c:
            mine, theirs = [ci.gpu_id for ci in c.card_info()][:2]
        run_in(sl, ATTACH_RACE.replace("MINE", hex(mine))
               .replace("THEIRS", hex(theirs))
               .replace("ATTACH_NR", hex(abi.NV_ESC_ATTACH_GPUS_TO_FD)))


# --- channel ids (docs/security.md, "Channel ids are shared out")

# A GR TSG of DEV, and a channel on it with its USERD in MEM (RM's status).
CHANNEL_ALLOC = """
def gr_tsg(rm, dev):
    return rm.alloc(dev.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                    abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                        engineType=abi.NV2080_ENGINE_TYPE_GR0))

def channel(rm, dev, tsg, mem):
    c = dev.abi.NV_CHANNEL_ALLOC_PARAMS()
    c.gpFifoEntries = 16
    c.hUserdMemory[0] = mem.handle
    c.userdOffset[0] = 4096
    c.engineType = abi.NV2080_ENGINE_TYPE_GR0
    return rm.alloc_raw(tsg, abi.HOPPER_CHANNEL_GPFIFO_A, c).status
"""

# Channels in one TSG until refused (at most 128), through the slice's
# nodes CTL and GPU (None: the driver's own), again on each line of stdin.
CHANNEL_FILLER = CHANNEL_ALLOC + """
from nvclient import client
p = {ctl!r}
ctl = client.Ctl(p) if p else client.Ctl()
gpu = client.GpuFile(0, {gpu!r}) if p else client.GpuFile(0)
rm = client.RmClient(ctl)
dev = rm.device(0, gpu_file=gpu)
mem = dev.alloc_sysmem(2 * 4096)
while True:
    tsg = gr_tsg(rm, dev)
    made, st = 0, abi.NV_OK
    while made < 128:
        st = channel(rm, dev, tsg, mem)
        if st != abi.NV_OK:
            break
        made += 1
    report(made=made, status=st)
    if not sys.stdin.readline():
        break
"""


@pytest.mark.parametrize("told", ["by_rm", "by_parameter"])
def test_a_slice_cannot_take_the_channel_ids_another_is_owed(
        reload_stub, nodedir, told):
    """A GPU has so many channel ids (2048 a runlist from GA100 on); past
    them every process's channel allocation fails.  xpu.ko shares them
    out: half in equal floors, owed to each slice and to the processes
    outside every slice (ids / (2 (slices + 1))), the other half to
    whoever asks first.  With 64 ids and two slices (floors of 10): a
    tenant that makes channels until refused holds 44; the other slice
    then makes its 10, and a process outside both the rest of RM's; with
    the first slice gone (a floor of 16) the second makes up to 48.
    by_rm: RM has 64 and xpu.ko, given no figure, asks RM
    (FIFO_GET_PHYSICAL_CHANNEL_COUNT); without asking it shared out 2048,
    and the tenant held all 64.  by_parameter: RM has 72 and the
    parameter `channel_ids` lowers xpu.ko's share to 64; the process
    outside every slice, which xpu.ko does not limit, makes the 18 left."""
    from xpu import ctl as xpu_ctl
    rm_ids = 64 if told == "by_rm" else 72
    reload_stub(channel_ids=rm_ids)
    nvtest.insmod_xpu(*(["channel_ids=64"] if told == "by_parameter" else []))
    with open("/sys/module/xpu/parameters/channel_ids") as f:
        assert int(f.read()) == (64 if told == "by_parameter" else 0)
    refused = {"made": 0, "status": abi.NV_ERR_INSUFFICIENT_RESOURCES}
    with xpu_ctl.Ctl() as admin:
        # what the admin is told: the ids shared out (xpud's metrics too)
        assert [g.channel_ids for g in admin.gpu_list()] == [64, 64]
        a = Slice(admin, nodedir, name="ids-a", limit=512 * MiB)
        b = Slice(admin, nodedir, name="ids-b", limit=512 * MiB)
        children = []
        try:
            for sl in (a, b, None):
                children.append(nvtest.spawn_child(CHANNEL_FILLER.format(
                    ctl=sl and sl.ctl_node, gpu=sl and sl.gpu_node)))
                r = children[-1].report()
                if sl is a:
                    assert r == {"made": 44, "status":
                                 abi.NV_ERR_INSUFFICIENT_RESOURCES}, r
                    assert a.get().channels == 44
                elif sl is b:
                    assert r == {"made": 10, "status":
                                 abi.NV_ERR_INSUFFICIENT_RESOURCES}, r
                else:   # the processes outside every slice: RM's rest
                    assert r == {"made": rm_ids - 54, "status":
                                 abi.NV_ERR_INSUFFICIENT_RESOURCES}, r
            # slice a gone: one slice, a floor of 16
            assert children.pop(0).finish() == 0
            a.destroy()
            a = None
            children[0].p.stdin.write("\n")
            children[0].p.stdin.flush()
            r = children[0].report()
            assert r == {"made": 38, "status":
                         abi.NV_ERR_INSUFFICIENT_RESOURCES}, r
            assert b.get().channels == 48
            # and one more TSG of it finds none
            children[0].p.stdin.write("\n")
            children[0].p.stdin.flush()
            assert children[0].report() == refused
        finally:
            for child in children:
                child.finish()
            if a is not None:
                a.destroy()
            b.destroy()


# THREADS threads, each with its own control file, client and TSG, make
# channels at once until each is refused; the total made.
CHANNEL_RACERS = CHANNEL_ALLOC + """
import threading
from nvclient import client
gpu = client.GpuFile(0, {gpu!r})
THREADS = 8
go = threading.Barrier(THREADS)
made = [0] * THREADS
statuses = set()
keep = []

def racer(i):
    ctl = client.Ctl({ctl!r})
    rm = client.RmClient(ctl)
    dev = rm.device(0, gpu_file=gpu)
    mem = dev.alloc_sysmem(2 * 4096)
    tsg = gr_tsg(rm, dev)
    keep.append((ctl, rm, dev, mem))
    go.wait()
    while True:
        st = channel(rm, dev, tsg, mem)
        if st != abi.NV_OK:
            statuses.add(st)
            break
        made[i] += 1

threads = [threading.Thread(target=racer, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
report(made=sum(made), statuses=sorted(statuses))
sys.stdin.readline()
"""


def test_racing_threads_take_no_more_channel_ids_than_the_share(
        reload_stub, nodedir):
    """A channel allocation admitted against a slice's share of the GPU's
    channel ids holds its id from the admission until RM's answer is
    recorded (`chans_pending`), so threads admitted at once cannot each
    take the last id.  With 64 ids and one slice (a floor of 16 owed to
    the processes outside it), eight threads of the slice racing, each on
    its own control file, make 48 channels in all and are refused.  (With
    the id not held, they made more: checked in one boot.)"""
    from xpu import ctl as xpu_ctl
    reload_stub(channel_ids=64)
    nvtest.insmod_xpu()
    with xpu_ctl.Ctl() as admin:
        a = Slice(admin, nodedir, name="ids-race", limit=512 * MiB)
        try:
            child = nvtest.spawn_child(CHANNEL_RACERS.format(
                ctl=a.ctl_node, gpu=a.gpu_node))
            try:
                r = child.report()
                assert r == {"made": 48, "statuses":
                             [abi.NV_ERR_INSUFFICIENT_RESOURCES]}, r
                assert a.get().channels == 48
            finally:
                assert child.finish() == 0
            assert a.get().channels == 0
        finally:
            a.destroy()
