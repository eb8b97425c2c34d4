# SPDX-License-Identifier: Apache-2.0
"""Where a slice's alloc+free goes: ftrace's function_graph over xpu.ko's
RM_ALLOC and RM_FREE hooks, summed by function and depth, as JSON.

    tests/vm/run -- .venv/bin/python tests/bench/profile_alloc.py [--depth N]

A client in a 16 GiB slice makes ALLOCS allocations of 2 MiB of video
memory and frees each (as `make bench`'s alloc_overhead_ratio does) while
the graph tracer follows xpu_mem_rm_alloc and xpu_mem_rm_free down to
--depth levels, through xpu.ko's and the stub's functions only (the
kernel's own, vm_mmap or the TLB flush, count in their caller's time,
unless --also names them).
Each row is a function at a depth below those two: how
many calls, and their total and mean duration in microseconds as the
tracer saw them.  Tracing slows every call it follows, so the figures are
shares of the whole, not costs to compare with `make bench`.  Not a test:
it asserts nothing, and make check does not run it.
"""

import argparse
import collections
import json
import os
import re
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.join(TOP, "xpud"))

from nvclient import client
from xpu import ctl as xpu_ctl
from xpu import uapi

ALLOCS = 200
ROOTS = ("xpu_mem_rm_alloc", "xpu_mem_rm_free")


def tracefs():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.exists(os.path.join(d, "current_tracer")):
            return d
    os.makedirs("/sys/kernel/tracing", exist_ok=True)
    os.system("mount -t tracefs nodev /sys/kernel/tracing")
    return "/sys/kernel/tracing"


def put(d, name, value):
    with open(os.path.join(d, name), "w") as f:
        f.write(value)


# " 0)               |  xpu_mem_rm_alloc [xpu]() {"
# " 0)   3.021 us    |    xpu_rm_object_class [xpu]();"
# " 0) + 12.345 us   |  } /* xpu_mem_rm_alloc [xpu] */"
LINE = re.compile(r"^\s*\d+\)\s+(?:[+!#*@$]\s*)?(?:(?P<us>[\d.]+) us)?\s*\|(?P<ind>\s*)"
                  r"(?P<rest>.*)$")
NAME = re.compile(r"([A-Za-z_][\w.]*)")


def parse(text):
    """{(depth, function): [calls, total_us]} from a function_graph trace."""
    rows = collections.defaultdict(lambda: [0, 0.0])
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or m.group("us") is None:
            continue
        rest = m.group("rest").strip()
        depth = (len(m.group("ind")) - 2) // 2
        if rest.startswith("}"):
            n = NAME.search(rest[1:].replace("/*", ""))
        else:
            n = NAME.match(rest)
        if not n:
            continue
        row = rows[(depth, n.group(1))]
        row[0] += 1
        row[1] += float(m.group("us"))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--allocs", type=int, default=ALLOCS)
    ap.add_argument("--also", default="",
                    help="kernel functions to follow too, comma-separated "
                         "(vm_mmap,handle_mm_fault,...)")
    args = ap.parse_args()
    d = tracefs()
    nodedir = tempfile.mkdtemp(prefix="xpuprof-", dir="/dev")
    g, n = os.path.join(nodedir, "g"), os.path.join(nodedir, "c")
    with xpu_ctl.Ctl() as admin:
        s = admin.slice_create("prof", 0, 16 << 30)
        os.mknod(g, 0o20600, os.makedev(195, 0))
        os.mknod(n, 0o20600, os.makedev(195, 255))
        admin.node_attach(s.id, g, uapi.XPU_NODE_GPU)
        admin.node_attach(s.id, n, uapi.XPU_NODE_CTL)
        try:
            with client.Ctl(n) as ctl, client.GpuFile(0, g) as gpu:
                rm = client.RmClient(ctl)
                dev = rm.device(0, gpu_file=gpu)
                for _ in range(10):             # warm: pages, records
                    rm.free(dev.alloc_vidmem(2 << 20).handle)
                put(d, "tracing_on", "0")
                put(d, "current_tracer", "nop")
                put(d, "trace", "")
                put(d, "buffer_size_kb", "65536")
                # Patch only xpu.ko's and the stub's functions: enabling
                # the graph tracer on every function of the kernel takes
                # minutes under software emulation (it looked like a hang).
                put(d, "set_ftrace_filter", ":mod:xpu")
                with open(os.path.join(d, "set_ftrace_filter"), "a") as f:
                    f.write(":mod:nvstub")
                for fn in filter(None, args.also.split(",")):
                    with open(os.path.join(d, "set_ftrace_filter"), "a") as f:
                        f.write(fn)
                put(d, "set_graph_function", " ".join(ROOTS))
                put(d, "max_graph_depth", str(args.depth + 1))
                put(d, "current_tracer", "function_graph")
                for opt in ("funcgraph-tail", "funcgraph-abstime"):
                    try:
                        put(d, f"options/{opt}",
                            "1" if opt == "funcgraph-tail" else "0")
                    except OSError:
                        pass
                put(d, "tracing_on", "1")
                for _ in range(args.allocs):
                    rm.free(dev.alloc_vidmem(2 << 20).handle)
                put(d, "tracing_on", "0")
                with open(os.path.join(d, "trace")) as f:
                    text = f.read()
                put(d, "current_tracer", "nop")
                put(d, "set_graph_function", "")
                put(d, "set_ftrace_filter", "")
                dev.close()
                rm.close()
        finally:
            admin.slice_destroy(s.id, force=True)
            os.unlink(g)
            os.unlink(n)
            os.rmdir(nodedir)
    rows = parse(text)
    out = [{"depth": k[0], "function": k[1], "calls": v[0],
            "total_us": round(v[1], 1), "mean_us": round(v[1] / v[0], 2)}
           for k, v in rows.items()]
    out.sort(key=lambda r: (r["depth"], -r["total_us"]))
    print(json.dumps({"allocs": args.allocs, "depth": args.depth,
                      "rows": out}, indent=1))


if __name__ == "__main__":
    main()
