# SPDX-License-Identifier: Apache-2.0
"""Small clients for the NVIDIA user-space tests, the recorder and the demo
(docs/nvidia-userspace.md). Run with LD_LIBRARY_PATH naming the directory of
libnvidia-ml.so.1 and libcuda.so.1.

    nvuser.py hold CTL GPU BYTES   hold video memory and a compute object
                                   (tests/nvclient) until stdin closes
    nvuser.py nvml                 NVML's view as JSON (nvidia-ml-py)
    nvuser.py cuda [BYTES...]      libcuda through ctypes, step by step, as
                                   JSON; stops at the first failing call
"""

import ctypes
import json
import os
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hold(ctl_path, gpu_path, size):
    sys.path.insert(0, TESTS)
    from nvclient import client

    with client.Ctl(ctl_path) as ctl, client.GpuFile(0, gpu_path) as gpu:
        rm = client.RmClient(ctl)
        dev = rm.device(0, gpu_file=gpu)
        mem = dev.alloc_vidmem(size)
        # a channel with a compute object (Channel makes one), as a CUDA
        # context has: what nvidia-smi and NVML list as a compute process
        with client.Channel(dev):
            print("held", flush=True)
            sys.stdin.read()
        rm.free(mem.handle)
        dev.close()
        rm.close()


def nvml():
    import pynvml as n

    n.nvmlInit()
    out = {"driver": n.nvmlSystemGetDriverVersion(), "gpus": []}
    for i in range(n.nvmlDeviceGetCount()):
        h = n.nvmlDeviceGetHandleByIndex(i)
        m = n.nvmlDeviceGetMemoryInfo(h)
        out["gpus"].append({
            "name": n.nvmlDeviceGetName(h), "uuid": n.nvmlDeviceGetUUID(h),
            "total": m.total, "used": m.used, "free": m.free,
            "procs": {str(p.pid): p.usedGpuMemory
                      for p in n.nvmlDeviceGetComputeRunningProcesses(h)}})
    n.nvmlShutdown()
    print(json.dumps(out))


def cuda(sizes):
    """Each step as {"call": name, "result": CUresult, ...}; the list ends at
    the first call that does not return CUDA_SUCCESS."""
    cu = ctypes.CDLL("libcuda.so.1")
    steps = []

    def call(name, *args, **info):
        r = getattr(cu, name)(*args)
        steps.append(dict(call=name, result=r, **info))
        return r == 0

    count, dev = ctypes.c_int(), ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    ctx, free, total = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    ok = (call("cuInit", 0) and
          call("cuDeviceGetCount", ctypes.byref(count)) and
          call("cuDeviceGet", ctypes.byref(dev), 0) and
          call("cuDeviceGetName", name, len(name), dev) and
          call("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev) and
          call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total)))
    out = {"steps": steps, "count": count.value, "name": name.value.decode(),
           "free": free.value, "total": total.value, "alloc": {}}
    if ok:
        for size in sizes:
            ptr = ctypes.c_uint64()
            r = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))
            out["alloc"][str(size)] = r
            if r == 0:
                cu.cuMemFree_v2(ptr)
    print(json.dumps(out))


def main(argv):
    if argv[:1] == ["hold"] and len(argv) == 4:
        hold(argv[1], argv[2], int(argv[3]))
    elif argv == ["nvml"]:
        nvml()
    elif argv[:1] == ["cuda"]:
        cuda([int(a) for a in argv[1:]])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
