# SPDX-License-Identifier: Apache-2.0
"""RM objects: clients, devices, subdevices, handles, ownership, the
device-allocation file check, RM_ALLOC's two argument forms, RM_FREE's
cascade, RM_DUP_OBJECT and what closing the control file frees."""

import ctypes
import errno

import nvtest
import pytest
from nvclient import abi, client

CLIENT_HANDLE_BASE = 0xC1D00000
OBJECT_HANDLE_BASE = 0xCAF00000


def test_client_handles_chosen_by_rm(ctl):
    for nvos64 in (False, True):
        p = ctl.rm_alloc(0, 0, abi.NV01_ROOT_CLIENT, nvos64=nvos64)
        assert p.hObjectNew & 0xFFFF0000 == CLIENT_HANDLE_BASE
        ctl.rm_free(p.hObjectNew, p.hObjectNew, p.hObjectNew)


def test_client_class_0_becomes_0x41(ctl):
    """escape.c forces user-space client allocations to NV01_ROOT_CLIENT and
    the struct goes back with it."""
    p = ctl.rm_alloc(0, 0, abi.NV01_ROOT)
    assert p.hClass == abi.NV01_ROOT_CLIENT
    ctl.rm_free(p.hObjectNew, p.hObjectNew, p.hObjectNew)


def test_client_handle_chosen_by_caller(ctl):
    """serverAllocClient(): the client handle asked for is hRoot."""
    h = 0x7A000001
    p = ctl.rm_alloc(h, 0, abi.NV01_ROOT_CLIENT)
    assert p.hObjectNew == h
    dup = ctl.rm_alloc(h, 0, abi.NV01_ROOT_CLIENT, check=False)
    assert dup.status == abi.NV_ERR_INSERT_DUPLICATE_NAME
    ctl.rm_free(h, h, h)
    # once freed, the handle is free again
    rm = client.RmClient(ctl, handle=h)
    assert rm.handle == h
    rm.close()


def test_device_and_subdevice(rm, gpu0):
    dev = rm.device(0, gpu_file=gpu0)
    assert dev.hdevice & 0xFFFF0000 == OBJECT_HANDLE_BASE
    assert dev.hsubdevice & 0xFFFF0000 == OBJECT_HANDLE_BASE
    assert dev.hdevice != dev.hsubdevice
    dev.close()


def test_object_handle_chosen_by_caller(rm, gpu0):
    params = abi.NV0080_ALLOC_PARAMETERS(deviceId=0)
    h = rm.alloc(rm.handle, abi.NV01_DEVICE_0, params, hnew=0x5000)
    assert h == 0x5000
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0, params, hnew=0x5000)
    assert p.status == abi.NV_ERR_INSERT_DUPLICATE_NAME
    # a subdevice may not take its device's handle either
    p = rm.alloc_raw(h, abi.NV20_SUBDEVICE_0, abi.NV2080_ALLOC_PARAMETERS(),
                     hnew=0x5000)
    assert p.status == abi.NV_ERR_INSERT_DUPLICATE_NAME
    rm.free(h)


def test_device_id_beyond_the_gpus(rm, gpu0, config):
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=config.gpus))
    assert p.status == abi.NV_ERR_INVALID_CLASS


def test_every_gpu_gets_a_device(rm, config):
    for i in range(config.gpus):
        dev = rm.device(i)
        dev.close()


def test_nvos21_and_nvos64_both_allocate(ctl, gpu0):
    for nvos64 in (False, True):
        rm = client.RmClient(ctl, nvos64=nvos64)
        dev = rm.device(0, gpu_file=gpu0)
        mem = dev.alloc_vidmem(1 << 20)
        assert mem.size == 1 << 20
        rm.close()


def test_alloc_params_size_is_the_classs_own(rm, gpu0):
    """RM reads a class's own alloc-params size from pAllocParms, whatever
    the caller put in paramsSize (rmapiParamsCopyInit)."""
    params = abi.NV0080_ALLOC_PARAMETERS(deviceId=0)
    for size in (1, 55, 57, 4096):
        h = rm.alloc(rm.handle, abi.NV01_DEVICE_0, params, params_size=size)
        rm.free(h)


def test_alloc_params_required_but_null(rm, gpu0):
    """A class whose params are required refuses a NULL pAllocParms."""
    dev = rm.device(0, gpu_file=gpu0)
    p = rm.alloc_raw(dev.hdevice, abi.NV01_MEMORY_LOCAL_USER, None,
                     params_size=0)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT
    dev.close()


def test_alloc_object_is_an_alloc_with_no_params(ctl, rm, gpu0, config):
    """RM_ALLOC_OBJECT (escape.c: Nv01AllocObjectWithSecInfo) allocates with
    pAllocParms NULL: a class that takes none is made, one that needs them
    refuses, a device takes instance 0 before 550 and is refused from 550
    (the resource factory's NULL check); GPU files may not use it."""
    dev = rm.device(0, gpu_file=gpu0)

    def alloc_object(f, hparent, hclass, hnew):
        p = abi.NVOS05_PARAMETERS(rm.handle, hparent, hnew, hclass, 0xFFFFFFFF)
        client.escape(f.fd, abi.NV_ESC_RM_ALLOC_OBJECT, p)
        return p

    p = alloc_object(ctl, dev.hsubdevice, abi.HOPPER_USERMODE_A, 0x5A000001)
    assert (p.status, p.hObjectNew) == (abi.NV_OK, 0x5A000001)
    rm.parents[p.hObjectNew] = dev.hsubdevice
    rm.free(p.hObjectNew)                 # it exists: RM frees it
    p = alloc_object(ctl, dev.hdevice, abi.NV01_MEMORY_LOCAL_USER, 0x5A000002)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT
    with client.RmClient(ctl) as bare:         # a client with no device
        p = abi.NVOS05_PARAMETERS(bare.handle, bare.handle, 0x5A000003, abi.NV01_DEVICE_0,
                   0xFFFFFFFF)
        client.escape(ctl.fd, abi.NV_ESC_RM_ALLOC_OBJECT, p)
        since_550 = int(config.version.split(".")[0]) >= 550
        assert p.status == (abi.NV_ERR_INVALID_ARGUMENT if since_550
                            else abi.NV_OK)
    with pytest.raises(OSError):
        alloc_object(gpu0, dev.hdevice, abi.HOPPER_USERMODE_A, 0x5A000004)
    dev.close()


def test_one_device_per_gpu_in_a_client(ctl, rm, gpu0):
    """deviceInit(): a client's second device of one instance is refused
    (NV_ERR_INSUFFICIENT_RESOURCES, "keeping existing code from
    CliAllocElement"); another client may have its own."""
    dev = rm.device(0, gpu_file=gpu0)
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=0))
    assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES
    with client.RmClient(ctl) as other:
        other.device(0, gpu_file=gpu0).close()
    dev.close()
    rm.device(0, gpu_file=gpu0).close()     # once freed, again


def test_unknown_class(rm):
    p = rm.alloc_raw(rm.handle, 0xBEEF, None)
    assert p.status == abi.NV_ERR_INVALID_CLASS


# --- ownership of clients


def test_client_of_another_ctl_file_is_invalid(ctl, rm, gpu0):
    params = abi.NV0080_ALLOC_PARAMETERS(deviceId=0)
    with client.Ctl() as other:
        p = other.rm_alloc(rm.handle, rm.handle, abi.NV01_DEVICE_0, params,
                           check=False)
        assert p.status == abi.NV_ERR_INVALID_CLIENT
        p = other.rm_free(rm.handle, rm.handle, rm.handle, check=False)
        assert p.status == abi.NV_ERR_INVALID_CLIENT
        # a ctl file registered to the owner acts for it
        other.register_fd(ctl)
        p = other.rm_alloc(rm.handle, rm.handle, abi.NV01_DEVICE_0, params)
        other.rm_free(rm.handle, rm.handle, p.hObjectNew)


def test_freed_client_is_invalid(ctl, gpu0):
    rm = client.RmClient(ctl)
    h = rm.handle
    rm.close()
    p = ctl.rm_alloc(h, h, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=0), check=False)
    assert p.status == abi.NV_ERR_INVALID_CLIENT


# --- the device allocation's file check (osIsGpuAccessible): the caller's
# fd table must hold a file of that GPU


DEVICE_PROBE = """
ctl = client.Ctl()
gpus = [client.GpuFile(m, path) for m, path in OPEN]
rm = client.RmClient(ctl)
out = {}
for dev_id in DEVS:
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=dev_id))
    out[str(dev_id)] = p.status
report(uid=os.geteuid(), status=out)
"""


def probe_devices(open_files, devices):
    code = f"OPEN = {open_files!r}\nDEVS = {devices!r}\n" + DEVICE_PROBE
    return nvtest.run_child(code)


def test_device_needs_a_gpu_file_even_for_root():
    r = probe_devices([], [0, 1])
    assert r["uid"] == 0
    assert r["status"] == {"0": abi.NV_ERR_INSUFFICIENT_PERMISSIONS,
                           "1": abi.NV_ERR_INSUFFICIENT_PERMISSIONS}


def test_device_needs_a_file_of_that_gpu(config):
    if config.gpus < 2:
        pytest.skip("needs two GPUs")
    r = probe_devices([(1, "/dev/nvidia1")], [0, 1])
    assert r["status"] == {"0": abi.NV_ERR_INSUFFICIENT_PERMISSIONS,
                           "1": abi.NV_OK}


def test_device_accepts_a_gpu_file_opened_through_another_node():
    """The driver recognises its files by device number, not by path: a node
    made elsewhere with 195:0 serves (as xpu's slice nodes will)."""
    with nvtest.extra_node(0) as node:
        r = probe_devices([(0, node)], [0])
    assert r["status"] == {"0": abi.NV_OK}


# --- RM_FREE cascades


def test_free_device_frees_its_memory(ctl, rm, gpu0):
    observer = client.RmClient(ctl).device(0, gpu_file=gpu0)
    total, free0 = observer.heap_info()
    dev = rm.device(0, gpu_file=gpu0)
    objs = nvtest.objects_total()
    sub_mem = dev.alloc_vidmem(2 << 20)
    heap_mem = dev.heap_alloc(1 << 20)
    assert observer.heap_info() == (total, free0 - (3 << 20))
    assert nvtest.objects_total() == objs + 2
    rm.free(dev.hdevice)
    assert observer.heap_info() == (total, free0)
    # the device, its subdevice and both memory objects went
    assert nvtest.objects_total() == objs - 2
    # they are gone: freeing them again finds nothing, which resserv
    # answers with NV_OK (serverFreeResourceTree) and changes nothing
    for h in (sub_mem.handle, heap_mem.handle, dev.hsubdevice, dev.hdevice):
        p = ctl.rm_free(rm.handle, dev.hdevice, h, check=False)
        assert p.status == abi.NV_OK, hex(h)
    assert nvtest.objects_total() == objs - 2
    assert observer.heap_info() == (total, free0)
    # ... and a device allocated under one of those handles is new
    h = rm.alloc(rm.handle, abi.NV01_DEVICE_0,
                 abi.NV0080_ALLOC_PARAMETERS(deviceId=0), hnew=dev.hdevice)
    rm.free(h)
    observer.client.close()


def test_free_in_an_unknown_client(ctl):
    p = ctl.rm_free(0x7A00BEEF, 0x7A00BEEF, 0x7A00BEEF, check=False)
    assert p.status == abi.NV_ERR_INVALID_CLIENT


def test_free_client_frees_everything(ctl, gpu0):
    before = nvtest.heap_used(0)
    objs = nvtest.objects_total()
    rm = client.RmClient(ctl)
    dev = rm.device(0, gpu_file=gpu0)
    dev.alloc_vidmem(4 << 20)
    dev.heap_alloc(4 << 20)
    assert nvtest.heap_used(0) == before + (8 << 20)
    assert nvtest.objects_total() > objs
    ctl.rm_free(rm.handle, rm.handle, rm.handle)
    rm.handle = 0
    assert nvtest.heap_used(0) == before
    assert nvtest.objects_total() == objs


def test_closing_ctl_frees_every_client(gpu0):
    before = nvtest.heap_used(0)
    objs = nvtest.objects_total()
    with client.Ctl() as ctl:
        for _ in range(3):
            rm = client.RmClient(ctl)
            dev = rm.device(0, gpu_file=gpu0)
            dev.alloc_vidmem(4 << 20, nvos64=True)
            dev.heap_alloc(1 << 20)
        assert nvtest.heap_used(0) == before + 3 * (5 << 20)
        assert nvtest.objects_total() == objs + 3 * 5
        ctl.close()
        assert nvtest.heap_used(0) == before
        assert nvtest.objects_total() == objs


# --- RM_DUP_OBJECT


def test_dup_keeps_memory_until_the_last_handle(rm, gpu0):
    dev = rm.device(0, gpu_file=gpu0)
    _, free0 = dev.heap_info()
    mem = dev.alloc_vidmem(8 << 20)
    dup = rm.dup(dev.hdevice, mem.handle)
    assert dup != mem.handle
    assert dup & 0xFFFF0000 == OBJECT_HANDLE_BASE
    rm.free(mem.handle)
    assert dev.heap_info()[1] == free0 - (8 << 20)
    rm.free(dup)
    assert dev.heap_info()[1] == free0
    dev.close()


def test_dup_into_another_client_outlives_the_first(ctl, gpu0):
    a = client.RmClient(ctl)
    b = client.RmClient(ctl)
    da = a.device(0, gpu_file=gpu0)
    db = b.device(0, gpu_file=gpu0)
    _, free0 = da.heap_info()
    mem = da.heap_alloc(16 << 20)
    dup = b.dup(db.hdevice, mem.handle, client_src=a, hnew=0x7777)
    assert dup == 0x7777
    a.close()                                   # the original's client goes
    assert db.heap_info()[1] == free0 - (16 << 20)
    b.free(dup)
    assert db.heap_info()[1] == free0
    b.close()


SHARE_DUPS = """
ctl = client.Ctl("/dev/nvidiactl"); gpu = client.GpuFile(0, "/dev/nvidia0")
rm = client.RmClient(ctl, handle=HANDLE); dev = rm.device(0, gpu_file=gpu)
report(**{name: ctl.rm_dup(rm.handle, dev.hdevice, SRC, h, check=False).status
          for name, h in OBJECTS.items()})
"""


def test_share_policies_decide_who_may_duplicate(ctl, gpu0):
    """Another client may duplicate an object only as its share policy says
    (clientCopyResource: rsAccessCheckRights for DUP_OBJECT); its own
    client always may.  The policy is the object's own list once RM_SHARE
    edited it, else its nearest ancestor's (the client's, edited by
    SET_INHERITED_SHARE_POLICY), else RM's default: the clients of the
    process that made its client (RS_SHARE_TYPE_PID).  A policy without
    COMPOSE replaces the list, with it adds to the active one; REVOKE takes
    rights out.  The stub keeps no state for the other types, nor REQUIRE
    policies: NV_ERR_NOT_SUPPORTED."""
    child = 0x7c1e0001              # outside RM's own 0xc1d0xxxx
    a = client.RmClient(ctl)
    da = a.device(0, gpu_file=gpu0)
    objs = {n: da.alloc_vidmem(64 << 10).handle
            for n in ("plain", "all", "named", "other", "revoked", "both")}
    a.share(objs["all"], abi.RS_SHARE_TYPE_ALL)
    a.share(objs["named"], abi.RS_SHARE_TYPE_CLIENT, target=child)
    a.share(objs["other"], abi.RS_SHARE_TYPE_CLIENT, target=child + 1)
    a.share(objs["revoked"], abi.RS_SHARE_TYPE_ALL)
    a.share(objs["revoked"], abi.RS_SHARE_TYPE_ALL,
            action=abi.RS_SHARE_ACTION_FLAG_REVOKE |
            abi.RS_SHARE_ACTION_FLAG_COMPOSE)
    a.share(objs["both"], abi.RS_SHARE_TYPE_CLIENT, target=child + 1)
    a.share(objs["both"], abi.RS_SHARE_TYPE_CLIENT, target=child,
            action=abi.RS_SHARE_ACTION_FLAG_COMPOSE)
    for bad, st in (({"share_type": abi.RS_SHARE_TYPE_OS_SECURITY_TOKEN},
                     abi.NV_ERR_NOT_SUPPORTED),
                    ({"share_type": abi.RS_SHARE_TYPE_ALL,
                      "action": abi.RS_SHARE_ACTION_FLAG_REQUIRE},
                     abi.NV_ERR_NOT_SUPPORTED),
                    ({"share_type": 8}, abi.NV_ERR_INVALID_ARGUMENT)):
        p = ctl.rm_share(a.handle, objs["plain"], check=False, **bad)
        assert p.status == st, (bad, hex(p.status))
    code = (SHARE_DUPS.replace("HANDLE", hex(child))
            .replace("SRC", hex(a.handle)).replace("OBJECTS", repr(objs)))
    ok, no = abi.NV_OK, abi.NV_ERR_INSUFFICIENT_PERMISSIONS
    assert nvtest.run_child(code) == {
        "plain": no, "all": ok, "named": ok, "other": no, "revoked": no,
        "both": ok}
    # the client's policy is its objects' that have none of their own
    a.control(a.handle, abi.NV0000_CTRL_CMD_CLIENT_SET_INHERITED_SHARE_POLICY,
              abi.RS_SHARE_POLICY(accessMask=1 << abi.RS_ACCESS_DUP_OBJECT,
                                  type=abi.RS_SHARE_TYPE_ALL))
    assert nvtest.run_child(code) == {
        "plain": ok, "all": ok, "named": ok, "other": no, "revoked": no,
        "both": ok}
    # the owner's own client may, whatever the policy
    dup = a.dup(da.hdevice, objs["other"])
    a.free(dup)
    a.close()


def test_dup_of_unknown_object(rm, gpu0):
    dev = rm.device(0, gpu_file=gpu0)
    p = rm.ctl.rm_dup(rm.handle, dev.hdevice, rm.handle, 0x12345678,
                      check=False)
    assert p.status != abi.NV_OK
    dev.close()


# --- the order of RM_ALLOC's checks (rmapiAllocWithSecInfo, serverAllocResource)


def test_client_handle_written_into_its_params(ctl):
    """rmclientConstruct(): with pAllocParms set, RM writes the NvHandle."""
    out = ctypes.c_uint32(0)
    p = ctl.rm_alloc(0, 0, abi.NV01_ROOT_CLIENT, out)
    assert out.value == p.hObjectNew != 0
    ctl.rm_free(p.hObjectNew, p.hObjectNew, p.hObjectNew)


def test_client_alloc_only_on_ctl(gpu0):
    for hclass in (abi.NV01_ROOT, abi.NV01_ROOT_CLIENT, abi.NV01_ROOT_NON_PRIV):
        p = abi.NVOS21_PARAMETERS(hClass=hclass)
        assert gpu0.escape_raw(abi.NV_ESC_RM_ALLOC, p) == -errno.EINVAL


def test_object_handle_equal_to_the_client(rm, gpu0):
    p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=0), hnew=rm.handle)
    assert p.status == abi.NV_ERR_INVALID_OBJECT_PARENT


def test_parent_checks(rm, gpu0):
    dev = rm.device(0, gpu_file=gpu0)
    sub = abi.NV2080_ALLOC_PARAMETERS()
    # a parent that does not exist
    p = rm.alloc_raw(0x0BADF00D, abi.NV20_SUBDEVICE_0, sub)
    assert p.status == abi.NV_ERR_OBJECT_NOT_FOUND
    # a parent of the wrong class: a subdevice under the client
    p = rm.alloc_raw(rm.handle, abi.NV20_SUBDEVICE_0, sub)
    assert p.status == abi.NV_ERR_INVALID_OBJECT_PARENT
    # a device under a device
    p = rm.alloc_raw(dev.hdevice, abi.NV01_DEVICE_0,
                     abi.NV0080_ALLOC_PARAMETERS(deviceId=0))
    assert p.status == abi.NV_ERR_INVALID_OBJECT_PARENT
    dev.close()


def test_subdevice_instances(rm, gpu0):
    """One GPU per device: only subdevice 0, and only once."""
    dev = rm.device(0, gpu_file=gpu0)
    p = rm.alloc_raw(dev.hdevice, abi.NV20_SUBDEVICE_0,
                     abi.NV2080_ALLOC_PARAMETERS(subDeviceId=1))
    assert p.status == abi.NV_ERR_INVALID_CLASS
    p = rm.alloc_raw(dev.hdevice, abi.NV20_SUBDEVICE_0,
                     abi.NV2080_ALLOC_PARAMETERS(subDeviceId=0))
    assert p.status == abi.NV_ERR_INSUFFICIENT_RESOURCES
    # with the first one gone, a new one may come
    rm.free(dev.hsubdevice)
    h = rm.alloc(dev.hdevice, abi.NV20_SUBDEVICE_0, None)
    rm.free(h)
    dev.close()


def test_failed_allocations_leave_nothing(rm, gpu0):
    objs = nvtest.objects_total()
    for hparent, hclass, params in [
            (rm.handle, abi.NV01_DEVICE_0,
             abi.NV0080_ALLOC_PARAMETERS(deviceId=99)),
            (0x0BADF00D, abi.NV20_SUBDEVICE_0, None),
            (rm.handle, 0xBEEF, None)]:
        p = rm.alloc_raw(hparent, hclass, params)
        assert p.status != abi.NV_OK
    assert nvtest.objects_total() == objs


# --- RM_DUP_OBJECT's rules (serverCopyResource, the default share policy)


def test_dup_only_memory_and_usermode(rm, gpu0):
    dev = rm.device(0, gpu_file=gpu0)
    p = rm.ctl.rm_dup(rm.handle, rm.handle, rm.handle, dev.hdevice,
                      check=False)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT
    um = rm.alloc(dev.hsubdevice, abi.HOPPER_USERMODE_A)
    dup = rm.dup(dev.hsubdevice, um)
    assert dup != um
    rm.free(dup)
    rm.free(um)
    dev.close()


def test_dup_parent_rules(rm, config):
    """The parent must suit the class, be on the source's GPU, and be a
    subdevice exactly when the source's parent is."""
    d0 = rm.device(0)
    mem = d0.alloc_vidmem(1 << 20)
    p = rm.ctl.rm_dup(rm.handle, d0.hsubdevice, rm.handle, mem.handle,
                      check=False)
    assert p.status == abi.NV_ERR_INVALID_OBJECT_PARENT
    p = rm.ctl.rm_dup(rm.handle, rm.handle, rm.handle, mem.handle,
                      check=False)
    assert p.status == abi.NV_ERR_INVALID_OBJECT_PARENT
    if config.gpus > 1:
        d1 = rm.device(1)
        p = rm.ctl.rm_dup(rm.handle, d1.hdevice, rm.handle, mem.handle,
                          check=False)
        assert p.status == abi.NV_ERR_INVALID_OBJECT_PARENT
        d1.close()
    p = rm.ctl.rm_dup(0x7A00DEAD, d0.hdevice, rm.handle, mem.handle,
                      check=False)
    assert p.status == abi.NV_ERR_INVALID_CLIENT
    p = rm.ctl.rm_dup(rm.handle, d0.hdevice, 0x7A00DEAD, mem.handle,
                      check=False)
    assert p.status == abi.NV_ERR_INVALID_CLIENT
    rm.free(mem.handle)
    d0.close()


def test_dup_across_processes_is_refused(ctl, rm, gpu0):
    """A client of another process cannot take this process's memory."""
    dev = rm.device(0, gpu_file=gpu0)
    mem = dev.alloc_vidmem(1 << 20)
    r = nvtest.run_child(f"""
    ctl = client.Ctl()
    rm = client.RmClient(ctl)
    dev = rm.device(0)
    p = ctl.rm_dup(rm.handle, dev.hdevice, {rm.handle}, {mem.handle},
                   check=False)
    report(status=p.status)
    """)
    assert r["status"] == abi.NV_ERR_INSUFFICIENT_PERMISSIONS
    rm.free(mem.handle)
    dev.close()



def test_an_event_hangs_on_any_client_s_notifier(ctl, rm, gpu0):
    """event_api.c (535 to 595): an event object (any parent of the
    allocating client) hangs on hSrcResource of client hParentClient, 0
    meaning its own, and RM looks that client up without asking whose it is
    (RS_FLAGS_DUAL_CLIENT_LOCK); the resource must be a notifier -- the
    client itself, a subdevice, a channel, not a device.  Kernel callbacks
    are for kernel callers; an OS event object binds to the OS event of (its
    client, data).  Before session 34 the stub had no event classes, which
    hid that a tenant could name another's client (docs/security.md,
    class 30)."""
    dev = rm.device(0, gpu_file=gpu0)

    def event(hpc, hsrc, hclass=abi.NV01_EVENT, data=0):
        p = rm.alloc_raw(rm.handle, hclass,
                         abi.NV0005_ALLOC_PARAMETERS(hpc, hsrc, hclass, 0, data))
        return p.status

    with client.RmClient(ctl) as other:
        odev = other.device(0, gpu_file=gpu0)
        assert event(0, dev.hsubdevice) == abi.NV_OK
        assert event(rm.handle, rm.handle) == abi.NV_OK
        # another client's subdevice, or the client itself: RM's rule
        assert event(other.handle, odev.hsubdevice) == abi.NV_OK
        assert event(other.handle, other.handle) == abi.NV_OK
        assert event(other.handle, odev.hdevice) == abi.NV_ERR_INVALID_OBJECT
        assert event(other.handle, 0x7e570001) == abi.NV_ERR_INVALID_OBJECT
        assert event(0x7e570001, 0x7e570001) == \
            abi.NV_ERR_INVALID_OBJECT_HANDLE
        assert event(0, dev.hsubdevice, abi.NV01_EVENT_KERNEL_CALLBACK) == \
            abi.NV_ERR_ILLEGAL_ACTION
        # an OS event object needs the OS event of (its client, data)
        assert event(0, dev.hsubdevice, abi.NV01_EVENT_OS_EVENT, 9) == \
            abi.NV_ERR_OBJECT_NOT_FOUND
        os_ev = abi.nv_ioctl_alloc_os_event_t(hClient=rm.handle, fd=9)
        assert ctl.escape_raw(abi.NV_ESC_ALLOC_OS_EVENT, os_ev) == 0
        assert os_ev.Status == abi.NV_OK
        assert event(0, dev.hsubdevice, abi.NV01_EVENT_OS_EVENT, 9) == abi.NV_OK
        # no params: RS_REQUIRED
        assert rm.alloc_raw(rm.handle, abi.NV01_EVENT).status == \
            abi.NV_ERR_INVALID_ARGUMENT
        # through a GPU file too (escape.c lets events through any file)
        p = abi.NVOS21_PARAMETERS(hRoot=rm.handle, hObjectParent=rm.handle,
                                  hClass=abi.NV01_EVENT)
        params = abi.NV0005_ALLOC_PARAMETERS(other.handle, odev.hsubdevice,
                                         abi.NV01_EVENT, 0, 0)
        p.pAllocParms = ctypes.addressof(params)
        p.paramsSize = ctypes.sizeof(params)
        with client.GpuFile(0) as g:
            g.register_fd(ctl)          # acting for ctl's clients
            assert g.escape_raw(abi.NV_ESC_RM_ALLOC, p) == 0
        assert p.status == abi.NV_OK
        odev.close()
    dev.close()


def test_idle_channels_take_the_caller_s_own_channels(ctl, rm, gpu0):
    """RmIdleChannels (kernel_idle_channels.c, 535 to 595), by its three
    doors -- NV_ESC_RM_IDLE_CHANNELS, NV0000_CTRL_CMD_IDLE_CHANNELS on the
    client, NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS on a device, all
    non-privileged: every client listed must be the caller's, each device a
    device or subdevice of it; then RM holds the GPU lock while the firmware
    idles them with the caller's timeout.  The stub checks the channels are
    the device's GPU's and answers at once (docs/nvstub.md).  Before
    session 35 it refused the escape and knew neither control, which hid
    that a tenant could make them (docs/security.md, class 32)."""
    dev = rm.device(0, gpu_file=gpu0)
    with client.Channel(dev, schedule=False) as ch:
        single = ctl.rm_idle_channels(rm.handle, dev.hdevice, ch.hchannel,
                                      timeout=1000)
        assert single.status == abi.NV_OK, hex(single.status)
        # by its subdevice too; a list; an empty list looks nothing up
        one = [(rm.handle, dev.hsubdevice, ch.hchannel)]
        assert ctl.rm_idle_channels(rm.handle, lists=one).status == abi.NV_OK
        assert ctl.rm_idle_channels(0x7e570001, lists=[]).status == abi.NV_OK
        with client.RmClient(ctl) as other:
            theirs = [(other.handle, dev.hdevice, ch.hchannel)]
            assert ctl.rm_idle_channels(rm.handle, lists=theirs).status == \
                abi.NV_ERR_INSUFFICIENT_PERMISSIONS
        assert ctl.rm_idle_channels(rm.handle, dev.hdevice,
                                    ch.htsg).status == abi.NV_ERR_INVALID_CHANNEL
        assert ctl.rm_idle_channels(rm.handle, ch.hchannel,
                                    ch.hchannel).status == \
            abi.NV_ERR_INVALID_OBJECT_HANDLE
        assert ctl.rm_idle_channels(rm.handle, 0x7e570001,
                                    ch.hchannel).status == \
            abi.NV_ERR_OBJECT_NOT_FOUND
        bad = ctl.rm_idle_channels(rm.handle, dev.hdevice, ch.hchannel,
                                   flags=2 << 4)
        assert bad.status == abi.NV_ERR_INVALID_FLAGS
        # the client's control: the same rules, lists in the caller's memory
        assert rm.idle_channels([(rm.handle, dev.hdevice, ch.hchannel)]
                                ).status == abi.NV_OK
        assert rm.idle_channels([(0x7e570001, dev.hdevice, ch.hchannel)]
                                ).status == abi.NV_ERR_INSUFFICIENT_PERMISSIONS
        # the device's: at most 4096 of its client's channels
        assert rm.fifo_idle_channels(dev.hdevice, [ch.hchannel]).status == \
            abi.NV_OK
        assert rm.fifo_idle_channels(dev.hdevice, [ch.htsg]).status == \
            abi.NV_ERR_INVALID_CHANNEL
        assert rm.fifo_idle_channels(
            dev.hdevice, [ch.hchannel],
            count=abi.NV0080_CTRL_CMD_FIFO_IDLE_CHANNELS_MAX_CHANNELS + 1
        ).status == abi.NV_ERR_INVALID_ARGUMENT
    dev.close()


def test_the_registry_takes_any_caller_s_keys(ctl, rm, gpu0):
    """RmAccessRegistry (osapi.c, registry.c, 535 to 595): any client that
    exists, the caller's or not; its own handle names the global registry,
    which anyone may write, a device or subdevice its GPU's; a GPU's read
    falls back to the global keys, by name without case; a new key for
    every new name, kept until the driver unloads.  Before session 35 the
    stub refused the escape, which hid that a tenant could write the
    host's registry (docs/security.md, class 32)."""
    dev = rm.device(0, gpu_file=gpu0)
    R, W = abi.NVOS38_ACCESS_TYPE_READ_DWORD, abi.NVOS38_ACCESS_TYPE_WRITE_DWORD
    key = "XpuStubRuleKey"

    def read(hc, ho, name=key):
        p, _ = ctl.rm_access_registry(hc, ho, R, name)
        return p.status, p.Data

    assert read(rm.handle, rm.handle) == (abi.NV_ERR_GENERIC, 0)
    with client.RmClient(ctl) as other:
        # another client's handle does as well as one's own
        p, _ = ctl.rm_access_registry(other.handle, other.handle, W, key,
                                      data=0x1234)
        assert p.status == abi.NV_OK
    assert read(rm.handle, rm.handle) == (abi.NV_OK, 0x1234)
    # a GPU's read finds the global key, without case; a GPU's own key
    # comes first for that GPU, and the global one keeps its value
    assert read(rm.handle, dev.hsubdevice, key.upper()) == (abi.NV_OK, 0x1234)
    p, _ = ctl.rm_access_registry(rm.handle, dev.hdevice, W, key, data=7)
    assert p.status == abi.NV_OK
    assert read(rm.handle, dev.hsubdevice) == (abi.NV_OK, 7)
    assert read(rm.handle, rm.handle) == (abi.NV_OK, 0x1234)
    # binary keys: written, read back whole; a DWORD read takes the first word
    B = abi.NVOS38_ACCESS_TYPE_READ_BINARY
    p, _ = ctl.rm_access_registry(rm.handle, rm.handle,
                                  abi.NVOS38_ACCESS_TYPE_WRITE_BINARY,
                                  "XpuStubBin", binary=b"\x05\0\0\0xyz")
    assert (p.status, p.BinaryDataLength) == (abi.NV_OK, 0)
    p, got = ctl.rm_access_registry(rm.handle, rm.handle, B, "XpuStubBin",
                                    length=16)
    assert (p.status, got) == (abi.NV_OK, b"\x05\0\0\0xyz")
    assert read(rm.handle, rm.handle, "XpuStubBin") == (abi.NV_OK, 5)
    p, _ = ctl.rm_access_registry(rm.handle, rm.handle, B, "XpuStubBin",
                                  length=4)
    assert (p.status, p.BinaryDataLength) == (abi.NV_ERR_GENERIC, 0)
    # the rules of the call
    assert read(0x7e570001, 0x7e570001)[0] == abi.NV_ERR_INVALID_CLIENT
    assert read(rm.handle, 0x7e570001)[0] == abi.NV_ERR_OBJECT_NOT_FOUND
    with client.Channel(dev, schedule=False) as ch:
        assert read(rm.handle, ch.hchannel)[0] == \
            abi.NV_ERR_INVALID_OBJECT_HANDLE
    long = "K" * abi.NVOS38_MAX_REGISTRY_STRING_LENGTH
    assert read(rm.handle, rm.handle, long)[0] == \
        abi.NV_ERR_INVALID_STRING_LENGTH
    p, _ = ctl.rm_access_registry(rm.handle, rm.handle, R, key,
                                  name_length=len(key) - 1)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT     # no NUL where said
    p, _ = ctl.rm_access_registry(rm.handle, rm.handle, R)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT     # no name
    p, _ = ctl.rm_access_registry(rm.handle, rm.handle, B, key, length=0)
    assert p.status == abi.NV_ERR_INVALID_STRING_LENGTH
    p, _ = ctl.rm_access_registry(rm.handle, rm.handle, 3, key)
    assert p.status == abi.NV_ERR_INVALID_ACCESS_TYPE
    dev.close()
