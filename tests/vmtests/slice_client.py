# SPDX-License-Identifier: Apache-2.0
"""A GPU client for the xpud VM tests, run as `xpuctl run NAME -- python
slice_client.py`: it opens the standard NVIDIA names (/dev/nvidiactl,
/dev/nvidia0) as any CUDA program would, and knows nothing of xpu.

It prints one JSON line of what it sees (the memory size, the device nodes),
then obeys commands, one per line on stdin, answering each with one JSON
line:

    alloc N   allocate N bytes of video memory: {"ok": true} or
              {"ok": false, "status": NV status}
    free      free everything it allocated: {"ok": true}
    exit N    exit with status N (end of input: exit 0)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nvclient import abi, client


def say(**kw):
    print(json.dumps(kw), flush=True)


def rdev(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [os.major(st.st_rdev), os.minor(st.st_rdev)]


def main():
    ctl = client.Ctl()
    gpu = client.GpuFile(0)
    rm = client.RmClient(ctl)
    dev = rm.device(0, gpu_file=gpu)
    total, free = dev.heap_info()
    fb = dev.fb_info([abi.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE])
    say(pid=os.getpid(), heap_total=total, heap_free=free,
        fb_total_kib=fb[abi.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE],
        nodes={n: rdev("/dev/" + n) for n in sorted(os.listdir("/dev"))
               if n.startswith("nvidia")})
    held = []
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "alloc":
            try:
                held.append(dev.alloc_vidmem(int(arg)).handle)
                say(ok=True)
            except client.NvStatusError as e:
                say(ok=False, status=e.status)
        elif cmd == "free":
            for h in held:
                rm.free(h)
            held.clear()
            say(ok=True)
        elif cmd == "exit":
            sys.exit(int(arg))
        else:
            say(ok=False, error=f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
