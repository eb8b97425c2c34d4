import subprocess, sys, os, time
sys.path.insert(0, "/work/main/tests/vmtests"); sys.path.insert(0, "/work/main/xpud"); sys.path.insert(0, "/work/main/tests")
import nvtest
from xpu import ctl as xpu_ctl
from test_xpu_mem import Slice
import test_hostile_hostmem as H
def free():
    mf = H._mem_free()
    z = 0; pcp = 0
    with open("/proc/zoneinfo") as f:
        for line in f:
            w = line.split()
            if w[:2] == ["pages", "free"]: z += int(w[2])
            elif w and w[0] == "count:": pcp += int(w[1])
    return mf >> 20, (z * 4096) >> 20, (pcp * 4096) >> 20
with xpu_ctl.Ctl() as a:
    d = "/tmp/expnodes"; os.makedirs(d, exist_ok=True)
    sl = Slice(a, d, name="exp", limit=64 << 20)
    print("before", free())
    H.child(sl, """
for _ in range(48):
    st, h = sysmem(4 * MiB)
    assert st == abi.NV_OK, hex(st)
""")
    print("after exit", free())
    time.sleep(1)
    print("after 1s", free())
    print("host used", a.slice_get(sl.id).host_memory_used >> 20)
    print("after read", free())
    sl.destroy()
    print("after destroy", free())
