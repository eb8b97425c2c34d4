# SPDX-License-Identifier: Apache-2.0
"""xpud's figures for `make bench`, on xpu.ko and the simulated driver.

measure() returns a dict that bench.py merges into its JSON:

- xpuctl_create_destroy_ms: p50 and p99 over 64 slices of the `create`
  plus the `destroy` request that `xpuctl create` and `xpuctl destroy` send,
  each on a new connection as xpuctl makes it (xpud's checks, state write and
  reconcile, the kernel's ioctls, the device nodes);
  xpuctl_process_ms: the median of a whole `xpuctl version` process, which
  an operator's script pays on top of each request (mostly Python's start:
  seconds under software emulation, which is why the 64 rounds do not spawn
  128 processes).
- reconcile_256_cold_s: from starting xpud with a configuration of 256
  slices, no state file and no kernel slice, to its READY=1 notification;
  reconcile_256_warm_s: the same restart with the 256 slices already in the
  kernel (nothing to change).
- xpud_rss_mib: xpud's resident memory after that (VmRSS).

Unlike bench.py's ratios these are absolute wall times, taken in the VM
under software emulation: compare them between runs on one machine, not
with figures from another.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "xpud"))

from xpu import ctl as xpu_ctl
from xpu.client import Client

CREATES = 64
PROCESSES = 5
RECONCILE = 256
WAIT = 600.0  # seconds, a bound on a hung xpud; never slept


def _percentile(values, p):
    """The nearest-rank percentile P of VALUES."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * len(s) + 0.5) - 1))
    return s[k]


def _destroy_all():
    with xpu_ctl.Ctl() as c:
        for s in c.slices():
            c.slice_destroy(s.id, force=True)


class _Xpud:
    def __init__(self, work, config_text):
        self.work = work
        self.config = os.path.join(work, "xpud.toml")
        with open(self.config, "w") as f:
            f.write(config_text)
        self.socket = os.path.join(work, "xpud.sock")
        self.notify = os.path.join(work, "notify.sock")
        self.nodes = tempfile.mkdtemp(prefix="xpud-bench-", dir="/dev")
        self.env = dict(os.environ, PYTHONPATH=os.path.join(TOP, "xpud"))
        for k in ("WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"):
            self.env.pop(k, None)
        self.proc = None

    def start(self):
        """Start xpud; returns the seconds until it notified READY=1."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if os.path.exists(self.notify):
            os.unlink(self.notify)
        sock.bind(self.notify)
        sock.settimeout(WAIT)
        env = dict(self.env, NOTIFY_SOCKET=self.notify)
        t0 = time.perf_counter()
        with open(os.path.join(self.work, "xpud.log"), "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "xpu.daemon", "--config", self.config,
                 "--state-dir", os.path.join(self.work, "state"), "--socket",
                 self.socket, "--node-dir", self.nodes],
                env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            while "READY=1" not in sock.recv(65536).decode().splitlines():
                pass
        finally:
            sock.close()
        return time.perf_counter() - t0

    def xpuctl(self, *args):
        subprocess.run([sys.executable, "-m", "xpu.cli", "--socket",
                        self.socket, *args], env=self.env, check=True,
                       stdout=subprocess.DEVNULL)

    def call(self, op, **args):
        with Client(self.socket, timeout=WAIT) as c:
            return c.call(op, **args)

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
        raise RuntimeError("no VmRSS")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            # As systemd's watchdog would: xpud writes every thread's stack
            # to its log (faulthandler), which says where it hung.
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(timeout=WAIT)
            with open(os.path.join(self.work, "xpud.log")) as f:
                tail = f.read()[-6000:]
            raise RuntimeError(f"xpud did not stop within {WAIT:.0f} s of "
                               f"SIGTERM; its log ends:\n{tail}") from None

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.nodes, ignore_errors=True)


def _config(n):
    return "".join(f'[[slice]]\nname = "r{i}"\ngpu = {i % 2}\n'
                   f'memory = "256MiB"\n\n' for i in range(n))


def measure() -> dict:
    """The figures, or {"xpud_bench_error": why}: a failure here must not
    cost bench.py its own figures."""
    try:
        return _measure()
    except Exception as e:  # noqa: BLE001 -- reported in the JSON
        return {"xpud_bench_error": f"{type(e).__name__}: {e}"}


def _measure() -> dict:
    _destroy_all()
    work = tempfile.mkdtemp(prefix="xpud-bench-")
    try:
        x = _Xpud(work, "")
        try:
            x.start()
            times = []
            for i in range(CREATES):
                t0 = time.perf_counter()
                x.call("create", name=f"b{i}", gpu=i % 2,
                       memory_limit_bytes=64 << 20)
                x.call("destroy", name=f"b{i}")
                times.append(time.perf_counter() - t0)
            procs = []
            for _ in range(PROCESSES):
                t0 = time.perf_counter()
                x.xpuctl("version")
                procs.append(time.perf_counter() - t0)
            x.stop()
        finally:
            x.close()
        _destroy_all()
        shutil.rmtree(os.path.join(work, "state"), ignore_errors=True)

        x = _Xpud(work, _config(RECONCILE))
        try:
            cold = x.start()
            with xpu_ctl.Ctl() as c:
                made = len(c.slices())
            if made != RECONCILE:
                raise RuntimeError(f"xpud made {made} of {RECONCILE} "
                                   "slices")
            rss = x.rss_mib()
            x.stop()
            warm = x.start()
            x.stop()
        finally:
            x.close()
    finally:
        _destroy_all()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "xpuctl_create_destroy_ms": {
            "p50": round(statistics.median(times) * 1e3, 1),
            "p99": round(_percentile(times, 99) * 1e3, 1),
            "slices": CREATES},
        "xpuctl_process_ms": round(statistics.median(procs) * 1e3, 1),
        "reconcile_256_cold_s": round(cold, 2),
        "reconcile_256_warm_s": round(warm, 2),
        "xpud_rss_mib": rss,
        "xpud_note": "absolute wall times under software emulation, not "
                     "ratios; create/destroy are API round trips, add "
                     "xpuctl_process_ms per xpuctl command",
    }


if __name__ == "__main__":
    import json
    print(json.dumps(measure(), indent=2))
