# SPDX-License-Identifier: Apache-2.0
"""RM_CONTROL (NVOS54) as src/nvidia/src/kernel/rmapi/control.c checks it:
paramsSize must equal the control's size exactly, params and paramsSize
agree on NULL, the object's class must own the control, unknown controls are
NV_ERR_NOT_SUPPORTED; and the controls the stub serves."""

import ctypes
import json
import os
import subprocess
import sys

import nvtest
import pytest
from nvclient import abi, client
from nvclient.client import Channel


def sized_controls(dev, hsched_owner=None):
    """(name, object, cmd, params) of every fixed-size control on ``dev``."""
    a = dev.abi
    fb_entries = (abi.NV2080_CTRL_FB_INFO * 1)(
        abi.NV2080_CTRL_FB_INFO(abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE))
    fb = abi.NV2080_CTRL_FB_GET_INFO_PARAMS(
        fbInfoListSize=1, fbInfoList=ctypes.addressof(fb_entries))
    fb._keep = fb_entries
    v2 = dev.fb_info_v2_params([abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE])
    pids = abi.NV2080_CTRL_GPU_GET_PIDS_PARAMS(
        idType=abi.NV2080_CTRL_GPU_GET_PIDS_ID_TYPE_CLASS,
        id=abi.NV20_SUBDEVICE_0)
    pid_info = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=1)
    pid_info.pidInfoList[0].pid = os.getpid()
    out = [
        ("FB_GET_INFO_V2", dev.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
         v2),
        ("GPU_GET_PIDS", dev.hsubdevice, abi.NV2080_CTRL_CMD_GPU_GET_PIDS,
         pids),
        ("GPU_GET_PID_INFO", dev.hsubdevice,
         abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, pid_info),
    ]
    if not a.fb_get_info_v1_deprecated:
        # before 550 an ordinary control; from 550 paramsSize is not checked
        out.append(("FB_GET_INFO", dev.hsubdevice,
                    abi.NV2080_CTRL_CMD_FB_GET_INFO, fb))
    if hsched_owner is not None:
        out += [
            ("GPFIFO_SCHEDULE", hsched_owner,
             abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
             a.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=0)),
            ("GET_TIMESLICE", hsched_owner, abi.NVA06C_CTRL_CMD_GET_TIMESLICE,
             abi.NVA06C_CTRL_TIMESLICE_PARAMS()),
        ]
    return out


@pytest.fixture
def tsg(dev0):
    h = dev0.client.alloc(dev0.hdevice, abi.KEPLER_CHANNEL_GROUP_A,
                          abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                              engineType=abi.NV2080_ENGINE_TYPE_GR0))
    yield h
    dev0.client.free(h)


def test_exact_params_size_accepted(dev0, tsg):
    for name, h, cmd, params in sized_controls(dev0, tsg):
        p = dev0.client.control_raw(h, cmd, params)
        assert p.status == abi.NV_OK, name


@pytest.mark.parametrize("delta", [-1, 1])
def test_params_size_off_by_one_is_invalid_argument(dev0, tsg, delta):
    for name, h, cmd, params in sized_controls(dev0, tsg):
        size = ctypes.sizeof(params) + delta
        buf = (ctypes.c_uint8 * (size + 8))()
        ctypes.memmove(buf, ctypes.addressof(params), ctypes.sizeof(params))
        p = dev0.client.control_raw(h, cmd, buf, params_size=size)
        assert p.status == abi.NV_ERR_INVALID_ARGUMENT, name


def test_params_pointer_and_size_must_agree(ctl, dev0):
    h = dev0.client.handle
    v2 = dev0.fb_info_v2_params([])
    p = ctl.rm_control(h, dev0.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
                       None, params_size=ctypes.sizeof(v2), check=False)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT
    p = ctl.rm_control(h, dev0.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
                       v2, params_size=0, check=False)
    assert p.status == abi.NV_ERR_INVALID_ARGUMENT


def test_unknown_control_is_not_supported(dev0):
    for cmd in (0x2080FFFF, 0x20801399, 0x2080FF01):
        p = dev0.client.control_raw(dev0.hsubdevice, cmd)
        assert p.status == abi.NV_ERR_NOT_SUPPORTED, hex(cmd)


def test_the_objects_class_must_own_the_control(dev0, tsg):
    fb = dev0.fb_info_v2_params([])
    for h in (dev0.hdevice, dev0.client.handle, tsg):
        p = dev0.client.control_raw(h, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, fb)
        assert p.status == abi.NV_ERR_NOT_SUPPORTED, hex(h)
    sched = dev0.abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS()
    p = dev0.client.control_raw(dev0.hsubdevice,
                                abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, sched)
    assert p.status == abi.NV_ERR_NOT_SUPPORTED


def test_control_through_another_ctl_is_invalid_client(dev0):
    fb = dev0.fb_info_v2_params([])
    with client.Ctl() as other:
        p = other.rm_control(dev0.client.handle, dev0.hsubdevice,
                             abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, fb,
                             check=False)
        assert p.status == abi.NV_ERR_INVALID_CLIENT


def test_control_on_unknown_object(dev0):
    fb = dev0.fb_info_v2_params([])
    p = dev0.client.control_raw(0x0BADF00D,
                                abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, fb)
    assert p.status not in (abi.NV_OK, abi.NV_ERR_NOT_SUPPORTED)


def _fb_v1(dev, indices, params_size=None):
    entries = (abi.NV2080_CTRL_FB_INFO * max(len(indices), 1))()
    for e, i in zip(entries, indices):
        e.index = i
    p = abi.NV2080_CTRL_FB_GET_INFO_PARAMS(
        fbInfoListSize=len(indices), fbInfoList=ctypes.addressof(entries))
    st = dev.client.control_raw(dev.hsubdevice,
                                abi.NV2080_CTRL_CMD_FB_GET_INFO, p,
                                params_size=params_size)
    return st.status, [e.data for e in entries[:len(indices)]]


def test_fb_info_v1_deprecated_from_550(dev0):
    """From 550 FB_GET_INFO (V1) goes through rmapi_deprecated_control.c to
    V2: paramsSize is not checked, the list is capped at V2's length
    (NV_ERR_OUT_OF_RANGE), and an empty one is left to V2; before, it is
    an ordinary exact-size control whose list is copied first, by
    rmapiParamsAcquire's rules."""
    idx = [abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE]
    total = dev0.heap_info()[0] // 1024
    assert _fb_v1(dev0, idx) == (abi.NV_OK, [total])
    too_long = [abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE] * \
        (dev0.abi.fb_info_max_list + 1)
    # an empty list with a pointer, on the device, where no FB_GET_INFO is
    entry = abi.NV2080_CTRL_FB_INFO()
    empty = abi.NV2080_CTRL_FB_GET_INFO_PARAMS(
        fbInfoListSize=0, fbInfoList=ctypes.addressof(entry))
    on_device = dev0.client.control_raw(
        dev0.hdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO, empty).status
    if dev0.abi.fb_get_info_v1_deprecated:
        assert _fb_v1(dev0, idx, params_size=8) == (abi.NV_OK, [total])
        assert _fb_v1(dev0, idx, params_size=1 << 12) == (abi.NV_OK, [total])
        assert _fb_v1(dev0, too_long)[0] == abi.NV_ERR_OUT_OF_RANGE
        # ctrlparamAcquire leaves an empty list to V2, which RM finds no
        # handler of on a device for
        assert on_device == abi.NV_ERR_NOT_SUPPORTED, hex(on_device)
    else:
        assert _fb_v1(dev0, idx, params_size=8)[0] == \
            abi.NV_ERR_INVALID_ARGUMENT
        # the embedded copy refuses a pointer without a count before RM
        # looks the object up (rmapiParamsAcquire, serverControlApiCopyIn)
        assert on_device == abi.NV_ERR_INVALID_ARGUMENT, hex(on_device)
    # the longest list V2 holds is fine either way
    full = too_long[:-1]
    assert _fb_v1(dev0, full) == (abi.NV_OK, [total] * len(full))


def test_fb_info_v1_and_v2_agree_in_the_callers_order(dev0):
    indices = [abi.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE,
               abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE,
               abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE,
               abi.NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE]
    assert dev0.fb_info(indices) == dev0.fb_info_v2(indices)
    rev = list(reversed(indices))
    p = dev0.fb_info_v2_params(rev)
    dev0.client.control(dev0.hsubdevice, abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, p)
    assert [e.index for e in p.fbInfoList[:4]] == rev


def test_null_command_is_ok_at_once(dev0):
    """Category and index 0: NV_OK before any other check."""
    for h in (dev0.hsubdevice, 0x0BADF00D):
        p = dev0.client.control_raw(h, 0x20800000)
        assert p.status == abi.NV_OK


def test_irql_and_lock_bypass_flags_are_refused(ctl, dev0):
    v2 = dev0.fb_info_v2_params([abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE])
    for flags in (abi.NVOS54_FLAGS_IRQL_RAISED, abi.NVOS54_FLAGS_LOCK_BYPASS):
        p = abi.NVOS54_PARAMETERS(hClient=dev0.client.handle,
                                  hObject=dev0.hsubdevice,
                                  cmd=abi.NV2080_CTRL_CMD_FB_GET_INFO_V2,
                                  flags=flags, params=ctypes.addressof(v2),
                                  paramsSize=ctypes.sizeof(v2))
        ctl.escape(abi.NV_ESC_RM_CONTROL, p)
        assert p.status == abi.NV_ERR_INVALID_ARGUMENT


def test_fb_info_v2_list_rules(dev0):
    """fbInfoListSize 1..the version's list size; indices up to INDEX_MAX;
    nothing is copied back on error."""
    a = dev0.abi
    for n in (0, a.fb_info_max_list + 1):
        p = dev0.fb_info_v2_params([])
        p.fbInfoListSize = n
        st = dev0.client.control_raw(dev0.hsubdevice,
                                     abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, p)
        assert st.status == abi.NV_ERR_INVALID_ARGUMENT, n
    ok = dev0.fb_info_v2([a.fb_info_index_max])
    assert list(ok) == [a.fb_info_index_max]
    p = dev0.fb_info_v2_params([abi.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE,
                                a.fb_info_index_max + 1])
    p.fbInfoList[0].data = 0xA5A5A5A5
    st = dev0.client.control_raw(dev0.hsubdevice,
                                 abi.NV2080_CTRL_CMD_FB_GET_INFO_V2, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    assert p.fbInfoList[0].data == 0xA5A5A5A5


def test_get_pids_id_types(dev0):
    p = abi.NV2080_CTRL_GPU_GET_PIDS_PARAMS(idType=1, pidTblCount=7)
    dev0.client.control(dev0.hsubdevice, abi.NV2080_CTRL_CMD_GPU_GET_PIDS, p)
    assert p.pidTblCount == 0               # VGPU_GUEST: none here
    p = abi.NV2080_CTRL_GPU_GET_PIDS_PARAMS(idType=2)
    st = dev0.client.control_raw(dev0.hsubdevice,
                                 abi.NV2080_CTRL_CMD_GPU_GET_PIDS, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT


def test_get_pids_by_compute_class(dev0):
    """Any id but NV20_SUBDEVICE_0: the processes with a channel descendant
    of that class (nvidia-smi's compute process list)."""
    def pids(cls):
        p = abi.NV2080_CTRL_GPU_GET_PIDS_PARAMS(id=cls)
        dev0.client.control(dev0.hsubdevice,
                            abi.NV2080_CTRL_CMD_GPU_GET_PIDS, p)
        return list(p.pidTbl[:p.pidTblCount])

    me = os.getpid()
    assert me in pids(abi.NV20_SUBDEVICE_0)
    assert me not in pids(abi.HOPPER_COMPUTE_A)
    with Channel(dev0) as ch:       # with its compute object
        assert me in pids(abi.HOPPER_COMPUTE_A)
        assert me not in pids(abi.MPS_COMPUTE)
        dev0.client.free(ch.hcompute)
        assert me not in pids(abi.HOPPER_COMPUTE_A)


def test_pid_info_rules(dev0):
    for n in (0, abi.NV2080_CTRL_GPU_GET_PID_INFO_MAX_COUNT + 1):
        p = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=n)
        st = dev0.client.control_raw(dev0.hsubdevice,
                                     abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, p)
        assert st.status == abi.NV_ERR_INVALID_ARGUMENT, n
    p = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=2)
    p.pidInfoList[0].pid = 0
    p.pidInfoList[1].pid = os.getpid()
    p.pidInfoList[1].index = 7
    dev0.client.control(dev0.hsubdevice,
                        abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, p)
    assert [e.result for e in p.pidInfoList[:2]] == \
        [abi.NV_ERR_INVALID_ARGUMENT] * 2


PIDNS_VIEW = """
import json, os, sys
sys.path.insert(0, TESTS)
from nvclient import client
with open("/proc/self/status") as f:     # the host's /proc: NSpid global ... 1
    nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
rm = client.RmClient(client.Ctl()); dev = rm.device(0, gpu_file=client.GpuFile(0))
dev.alloc_vidmem(2 << 20)
own, glob = int(nspid[-1]), int(nspid[0])
info = dev.pid_info([own, glob])
print(json.dumps({"own": own, "pids": dev.pids(),
                  "by_own": info[own][1], "by_global": info[glob][1],
                  "global": glob}))
"""


@pytest.mark.parametrize("version", ["535.288.01", "560.35.03", "565.57.01",
                                     "580.126.20"])
def test_pid_lists_speak_the_callers_namespace_from_565(version, reload_stub):
    """A process in its own pid namespace (pid 1 there) asks GET_PIDS and
    GET_PID_INFO about itself: up to 560 RM knows it by its global pid
    (ProcID), from 565 as its own namespace sees it (_gpuConvertPid)."""
    reload_stub(version=version)
    code = PIDNS_VIEW.replace("TESTS", repr(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    r = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c",
                        code], check=False, capture_output=True, text=True,
                       cwd="/")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["own"] == 1
    if int(version.split(".")[0]) >= 565:
        assert (out["pids"], out["by_own"], out["by_global"]) == \
            ([1], 2 << 20, 0), out
    else:
        assert (out["pids"], out["by_own"], out["by_global"]) == \
            ([out["global"]], 0, 2 << 20), out


def test_kernel_clients_are_not_in_the_pid_lists(dev0):
    """xpu.ko's own RM client (a kernel client, with devices on every GPU,
    made by the insmod that loaded it) is never listed: RM skips kernel
    clients in GET_PIDS and GET_PID_INFO."""
    if not os.path.exists("/sys/module/xpu"):
        pytest.skip("needs xpu.ko's kernel client")
    for pid in dev0.pids():
        assert os.path.exists(f"/proc/{pid}"), (pid, dev0.pids())


def test_pid_info_shared_and_duped(dev0):
    """memPrivate for memory one handle has; memSharedOwned for the
    allocating handle of shared memory, memSharedDuped for a dup."""
    me = os.getpid()
    mem = dev0.alloc_vidmem(2 << 20)
    dup = dev0.client.dup(dev0.hdevice, mem.handle)
    p = abi.NV2080_CTRL_GPU_GET_PID_INFO_PARAMS(pidInfoListCount=1)
    p.pidInfoList[0].pid = me
    dev0.client.control(dev0.hsubdevice,
                        abi.NV2080_CTRL_CMD_GPU_GET_PID_INFO, p)
    use = p.pidInfoList[0].data.vidMemUsage
    assert (use.memPrivate, use.memSharedOwned, use.memSharedDuped) == \
        (0, 2 << 20, 2 << 20)
    dev0.client.free(mem.handle)
    assert dev0.pid_info([me])[me] == (abi.NV_OK, 2 << 20)
    dev0.client.free(dup)


def test_gpfifo_schedule_skip_flags(dev0, tsg):
    """All of bEnable, bSkipSubmit and bSkipEnable is invalid (575+)."""
    sched = dev0.abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS
    if not hasattr(sched, "bSkipEnable"):
        pytest.skip("bSkipEnable is new in 575")
    p = sched(bEnable=1, bSkipSubmit=1, bSkipEnable=1)
    st = dev0.client.control_raw(tsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, p)
    assert st.status == abi.NV_ERR_INVALID_ARGUMENT
    p = sched(bEnable=1, bSkipSubmit=1)
    dev0.client.control(tsg, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, p)


# --- NV0000_CTRL_CMD_CLIENT_GET_HANDLE_INFO (clientresource.c)


PARENT, CLASSID = nvtest.HANDLE_PARENT, nvtest.HANDLE_CLASSID


def test_client_get_handle_info_answers_class_and_parent(rm, dev0):
    """What xpu.ko asks RM about a handle: its class and its parent, from
    the client that holds it; an unknown handle is NV_ERR_OBJECT_NOT_FOUND
    and an unknown index NV_ERR_INVALID_ARGUMENT."""
    mem = dev0.alloc_vidmem(1 << 20)

    def ask(h, index):
        return nvtest.handle_info(rm, h, index)

    assert ask(mem.handle, CLASSID) == (abi.NV_OK, abi.NV01_MEMORY_LOCAL_USER)
    assert ask(mem.handle, PARENT) == (abi.NV_OK, dev0.hdevice)
    assert ask(dev0.hsubdevice, CLASSID) == (abi.NV_OK, abi.NV20_SUBDEVICE_0)
    assert ask(dev0.hdevice, PARENT) == (abi.NV_OK, rm.handle)
    assert ask(0x5c0cdead, CLASSID)[0] == abi.NV_ERR_OBJECT_NOT_FOUND
    assert ask(mem.handle, 0)[0] == abi.NV_ERR_INVALID_ARGUMENT
    # a command no class exports: the object is looked up first, the
    # command only for a live one (serverControl, resControlLookup)
    unexported = nvtest.CTRL_CMD_UNEXPORTED
    assert rm.control_raw(mem.handle, unexported).status == \
        abi.NV_ERR_NOT_SUPPORTED
    assert rm.control_raw(0x5c0cdead, unexported).status == \
        abi.NV_ERR_OBJECT_NOT_FOUND
    rm.free(mem.handle)


class DuplicatesParams(ctypes.Structure):
    """NV0000_CTRL_CLIENT_OBJECTS_ARE_DUPLICATES_PARAMS (ctrl0000client.h)."""
    _fields_ = [("hObject1", ctypes.c_uint32), ("hObject2", ctypes.c_uint32),
                ("bDuplicates", ctypes.c_uint8)]


assert ctypes.sizeof(DuplicatesParams) == 12
OBJECTS_ARE_DUPLICATES = 0xD07


def test_objects_are_duplicates_compares_two_handles_of_a_client(rm, dev0):
    """cliresCtrlCmdObjectsAreDuplicates(): whether two memory handles of the
    called client name the same memory (xpu.ko's ledger asks it of its own
    client); memory objects only."""
    a = dev0.alloc_vidmem(1 << 20)
    b = dev0.alloc_vidmem(1 << 20)
    a2 = rm.dup(dev0.hdevice, a.handle)

    def same(h1, h2):
        p = DuplicatesParams(hObject1=h1, hObject2=h2, bDuplicates=7)
        r = rm.control_raw(rm.handle, OBJECTS_ARE_DUPLICATES, p)
        return r.status, p.bDuplicates

    assert same(a.handle, a2) == (abi.NV_OK, 1)
    assert same(a2, a.handle) == (abi.NV_OK, 1)
    assert same(a.handle, b.handle) == (abi.NV_OK, 0)
    assert same(a.handle, dev0.hdevice) == (abi.NV_OK, 0)
    assert same(dev0.hdevice, a.handle)[0] == abi.NV_ERR_NOT_SUPPORTED
    assert same(a.handle, 0x5c0cdead)[0] == abi.NV_ERR_OBJECT_NOT_FOUND
    for h in (a2, a.handle, b.handle):
        rm.free(h)
