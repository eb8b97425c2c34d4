# SPDX-License-Identifier: Apache-2.0
"""xpud's /metrics on xpu.ko and the simulated driver (issue 22).

    tests/vm/run -- .venv/bin/python -m pytest -q -s tests/vmtests/test_xpud_metrics.py

xpud with its default [metrics] (127.0.0.1:9400) and the fixed policy; two
slices: a client in one allocates, then asks past the limit; a worker in
the other saturates the simulated engine.  The scraped figures are checked
against xpu.ko (ctl), `xpuctl show -o json`, `xpuctl top -o json` and the
stub's own counters (its heap, its engine's busy time per channel and per
process); the exposition is parsed with prometheus_client's parser, and
fetched once with curl, whose per-slice lines the test prints (-s).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import nvtest
import pytest
import xpudtest
from compute import Worker, busy_ns
from nvclient import abi, stub
from prometheus_client.parser import text_string_to_metric_families
from xpu import ctl
from xpu.usage import RECORD_KINDS
from xpudtest import MIB, WAIT, Xpud, ask, finish, kernel_slices

URL = "http://127.0.0.1:9400/metrics"
MEM, CPU = "m-mem", "m-cpu"


@pytest.fixture(scope="module", autouse=True)
def _require_xpu():
    xpudtest.require_slice_interface()


nodedir = xpudtest.nodedir


@pytest.fixture
def gpu_settings():
    """The GPUs' settings as they were, put back at the end (xpud sets
    its configuration's and leaves them)."""
    with ctl.Ctl(xpudtest.DEV) as c:
        before = c.gpu_list()
    yield
    with ctl.Ctl(xpudtest.DEV) as c:
        for g in before:
            c.gpu_set(g.minor, mode=g.mode, policy=g.policy,
                      period_us=g.period_us)


def scrape():
    """The exposition, once xpud serves it (it starts after the API)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            with urllib.request.urlopen(URL, timeout=WAIT) as r:
                return r.read().decode()
        except ConnectionRefusedError:
            pass
        except urllib.error.URLError as e:
            if not isinstance(e.reason, ConnectionRefusedError):
                raise
        assert time.monotonic() < deadline, "xpud never served /metrics"
        time.sleep(0.1)


def parse(text):
    """{(sample name, slice or gpu): (value, labels)}, and the families'
    types; the parser fails on anything that is not the text format."""
    values, types = {}, {}
    for f in text_string_to_metric_families(text):
        types[f.name] = f.type
        for s in f.samples:
            key = s.labels.get("slice", s.labels.get("gpu"))
            if "kind" in s.labels:      # xpu_slice_records, by kind
                key = (key, s.labels["kind"])
            values[(s.name, key)] = (s.value, s.labels)
    return values, types


def settled(name):
    """The kernel's view of slice NAME once its compute counters stopped
    moving and its last-second share is 0 (its worker is gone)."""
    deadline = time.monotonic() + WAIT
    last = None
    while True:
        k = kernel_slices()[name]
        now = (k.run_ns, k.gated_ns, k.runnable_ns, k.share_obtained)
        if now == last and k.share_obtained == 0:
            return k
        assert time.monotonic() < deadline, now
        last = now
        time.sleep(0.2)  # the next look; the condition decides


def test_metrics_agree_with_the_kernel_xpuctl_and_the_stub(
        tmp_path, nodedir, gpu_settings):
    x = Xpud(tmp_path, nodedir)
    x.config.write_text('[defaults]\npolicy = "fixed"\n')
    x.start()
    p = w = None
    try:
        x.call("create", name=MEM, gpu=0, memory_limit_bytes=64 * MIB,
               compute_share=25)
        x.call("create", name=CPU, gpu=0, memory_limit_bytes=128 * MIB,
               compute_share=30)

        # Memory: a client in MEM takes 32 MiB, then asks past the limit.
        p, seen = x.run_client(MEM)
        assert seen["heap_total"] == 64 * MIB
        heap0, used0 = stub.heap(0)["used"], kernel_slices()[MEM].memory_used
        assert ask(p, f"alloc {32 * MIB}") == {"ok": True}
        assert ask(p, f"alloc {48 * MIB}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        # The stub's heap grew by what the kernel charged the slice.
        assert stub.heap(0)["used"] - heap0 == \
            kernel_slices()[MEM].memory_used - used0 == 32 * MIB

        # Compute: a worker in CPU saturates the engine; its 30 % is fixed.
        cpu = x.call("show", name=CPU)
        w = Worker(cpu["ctl_node"], cpu["gpu_node"], "saturate", 2000)
        w.go()
        deadline = time.monotonic() + WAIT
        while kernel_slices()[CPU].share_obtained == 0:
            assert time.monotonic() < deadline, "the worker never ran"
            time.sleep(0.1)
        # The engine's own measure of the worker over two seconds, and the
        # slice's last-second share as /metrics says at its end.
        b0, _ = busy_ns(0, [w.token])
        t0 = time.monotonic_ns()
        time.sleep(2.0)  # the measured window itself
        b1, _ = busy_ns(0, [w.token])
        engine_share = (b1[w.token] - b0[w.token]) / (time.monotonic_ns()
                                                      - t0)
        during, _ = parse(scrape())
        obtained = during[("xpu_slice_compute_obtained_ratio", CPU)][0]
        assert abs(obtained - engine_share) <= 0.1, (obtained, engine_share)
        assert obtained <= 0.30 + 0.05, obtained
        w.stop()
        pid = w.pid
        w = None
        k_cpu = settled(CPU)
        [engine] = [r for r in stub.processes(0) if r["pid"] == pid]

        # Nothing moves now: every view must show the same figures.
        text = scrape()
        values, types = parse(text)
        shown = {n: json.loads(x.xpuctl("show", n, "-o", "json").stdout)
                 for n in (MEM, CPU)}
        r = x.xpuctl("top", "--once", "-o", "json")
        assert r.returncode == 0, r.stderr
        top = {s["name"]: s for s in json.loads(r.stdout)["slices"]}
        kernel = kernel_slices()
        assert kernel[CPU] == k_cpu
        with open("/sys/module/xpu/parameters/max_handles") as f:
            max_handles = int(f.read())
        with open("/sys/module/xpu/parameters/max_os_events") as f:
            max_os_events = int(f.read())
        max_records = nvtest.xpu_param("max_records")
        max_doorbell_files = nvtest.xpu_param("max_doorbell_files")

        def got(name, key):
            return values[(name, key)][0]

        for n, k in kernel.items():
            s, t = shown[n], top[n]
            assert got("xpu_slice_memory_limit_bytes", n) == k.memory_limit \
                == s["memory_limit_bytes"] == t["memory_limit_bytes"]
            assert got("xpu_slice_memory_used_bytes", n) == k.memory_used \
                == s["memory_used_bytes"] == t["memory_used_bytes"]
            assert got("xpu_slice_memory_peak_bytes", n) == k.memory_peak \
                == t["memory_peak_bytes"]
            assert got("xpu_slice_denied_allocations_total", n) == \
                k.denied_allocs == s["denied_allocs"] == t["denied_allocs"]
            assert got("xpu_slice_processes", n) == k.processes \
                == s["processes"] == t["processes"]
            assert got("xpu_slice_compute_share_ratio", n) == \
                pytest.approx(s["compute_share"] / 100) == \
                t["compute_share"] / 100
            assert got("xpu_slice_compute_obtained_ratio", n) == \
                k.share_obtained / 1000 == t["compute_obtained"] / 100
            for metric, ns, field in (
                    ("xpu_slice_run_seconds_total", k.run_ns, "run_seconds"),
                    ("xpu_slice_gated_seconds_total", k.gated_ns,
                     "gated_seconds"),
                    ("xpu_slice_runnable_seconds_total", k.runnable_ns,
                     "runnable_seconds")):
                assert got(metric, n) == ns / 1e9 == t[field], metric
            # RM's handles of the slice's clients, and xpu.ko's bound
            assert got("xpu_slice_rm_handles", n) == k.rm_handles \
                == s["rm_handles"] == t["rm_handles"]
            assert got("xpu_slice_rm_handles_limit", n) == max_handles \
                == s["rm_handles_limit"] == t["rm_handles_limit"]
            # OS events of the slice's clients, and xpu.ko's bound
            assert got("xpu_slice_os_events", n) == k.os_events \
                == s["os_events"] == t["os_events"]
            assert got("xpu_slice_os_events_limit", n) == max_os_events \
                == s["os_events_limit"] == t["os_events_limit"]
            # the RM objects xpu.ko keeps a record of, by kind, and the
            # files its doorbell page is mapped through, with the bounds
            for kind, field in RECORD_KINDS:
                assert got("xpu_slice_records", (n, kind)) == \
                    getattr(k, field) == t["records"][kind] \
                    == s["records"][kind], kind
            assert got("xpu_slice_records_limit", n) == max_records \
                == t["records_limit"] == s["records_limit"]
            assert got("xpu_slice_doorbell_files", n) == k.doorbell_files \
                == t["doorbell_files"] == s["doorbell_files"]
            assert got("xpu_slice_doorbell_files_limit", n) == \
                max_doorbell_files == t["doorbell_files_limit"] \
                == s["doorbell_files_limit"]
            labels = values[("xpu_slice_memory_used_bytes", n)][1]
            assert labels["slice"] == n and labels["gpu"] == "0"

        # MEM: what the client did.
        assert got("xpu_slice_memory_used_bytes", MEM) == used0 + 32 * MIB
        assert got("xpu_slice_memory_peak_bytes", MEM) >= used0 + 32 * MIB
        assert got("xpu_slice_denied_allocations_total", MEM) >= 1
        assert got("xpu_slice_processes", MEM) >= 1
        # its client, device, subdevice and memory at least
        assert got("xpu_slice_rm_handles", MEM) >= 4
        assert got("xpu_slice_records", (MEM, "devices")) >= 1
        assert got("xpu_slice_memory_limit_bytes", MEM) == 64 * MIB
        assert got("xpu_slice_compute_share_ratio", MEM) == 0.25
        # CPU: held back most of the time it wanted the GPU (30 %, fixed),
        # and it ran about as long as the engine says it was busy.
        gated = got("xpu_slice_gated_seconds_total", CPU)
        runnable = got("xpu_slice_runnable_seconds_total", CPU)
        ran = got("xpu_slice_run_seconds_total", CPU)
        assert 0 < gated <= runnable
        assert gated / runnable >= 0.5, (gated, runnable)
        assert 0.5 <= ran / (engine["busy_ns"] / 1e9) <= 2.0, (ran, engine)
        assert got("xpu_slice_denied_allocations_total", CPU) == 0

        # The GPU: the stub's memory, the slices' limits.
        gpus = {g["index"]: g for g in x.call("gpus")}
        assert got("xpu_gpu_memory_total_bytes", "0") == \
            stub.heap(0)["total"] == gpus[0]["memory_total_bytes"]
        assert got("xpu_gpu_memory_sliced_bytes", "0") == 192 * MIB
        assert got("xpu_gpu_slices", "0") == 2
        assert got("xpu_gpu_slices", "1") == 0
        # the channel ids RM has, as xpu.ko asked it (the rig's stub: 2048)
        assert got("xpu_gpu_channel_ids", "0") == 2048
        labels = values[("xpu_slice_memory_used_bytes", MEM)][1]
        assert labels == {"gpu": "0", "UUID": gpus[0]["gpu_uuid"],
                          "device": f"nvidia{gpus[0]['gpu_minor']}",
                          "modelName": gpus[0]["name"],
                          "Hostname": socket.gethostname(), "slice": MEM}
        # xpud itself.
        assert got("xpu_up", None) == 1
        assert got("xpud_slices_pending", None) == 0
        assert got("xpud_reconcile_errors_total", None) == 0
        assert got("xpud_reconciles_total", None) >= 1
        # xpu.ko's count of retains it could not watch, as xpud last read it
        assert got("xpu_uvm_retains_unwatched_total", None) == \
            nvtest.xpu_param("uvm_retains_unwatched")
        assert types["xpu_slice_gated_seconds"] == "counter"
        assert types["xpu_slice_memory_used_bytes"] == "gauge"
        assert types["xpu_slice_os_events"] == "gauge"
        assert types["xpu_slice_os_events_limit"] == "gauge"

        # curl, as an operator would: the same slice lines.
        curl = shutil.which("curl")
        if curl:
            out = subprocess.run([curl, "-sS", "--max-time", str(WAIT), URL],
                                 check=True, capture_output=True, text=True,
                                 timeout=WAIT).stdout
            again, _ = parse(out)
            for key, (v, _) in values.items():
                if key[0].startswith("xpu_slice_memory"):
                    assert again[key][0] == v, key
            print(f"\n$ curl -s {URL} | grep -e '^xpu_up' -e 'slice=\"{MEM}\"'"
                  f" -e '^xpu_gpu.*gpu=\"0\"' -e 'seconds.*{CPU}'")
            print("\n".join(line for line in out.splitlines()
                            if line.startswith("xpu_up") or
                            f'slice="{MEM}"' in line or
                            (line.startswith("xpu_gpu") and
                             'gpu="0"' in line) or
                            ("seconds" in line and CPU in line)))
            print(f"({CPU}'s last-second share while its worker ran: "
                  f"{obtained}; the engine's: {engine_share:.3f})")
    finally:
        if w is not None:
            w.kill()
        if p is not None:
            assert finish(p) == 0
        x.cleanup()
        print(f"--- xpud's log ---\n{x.log.read_text()}")
