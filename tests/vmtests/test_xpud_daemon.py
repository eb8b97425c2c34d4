# SPDX-License-Identifier: Apache-2.0
"""xpud and xpuctl end to end, on xpu.ko and the simulated driver:
systemd notifications, `xpuctl run`, kill -9 and restarts of xpud, and an
unprivileged caller.

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests/test_xpud_daemon.py

Each xpud here has its own configuration, state directory, socket and node
directory, on the real /dev/xpuctl; every test leaves no slice behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import xpudtest
from nvclient import abi
from xpudtest import (
    LIMIT,
    MIB,
    NOBODY,
    WAIT,
    Xpud,
    ask,
    create,
    finish,
    kernel_slices,
    mounts_of,
)


@pytest.fixture(scope="module", autouse=True)
def _require_xpu():
    xpudtest.require_slice_interface()


nodedir = xpudtest.nodedir
xpud = xpudtest.xpud


# -- systemd notifications ----------------------------------------------------

class Manager:
    """The service manager's end of NOTIFY_SOCKET: a thread keeps every
    datagram with the time it came, as systemd reads them."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.got = []            # (monotonic time, message)
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            with self.cond:
                self.got.append((time.monotonic(), data.decode()))
                self.cond.notify_all()

    def wait(self, pred):
        with self.cond:
            assert self.cond.wait_for(lambda: pred(self.messages()), WAIT), \
                self.messages()

    def messages(self):
        return [m for _, m in self.got]

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def test_ready_and_watchdog_datagrams(tmp_path, nodedir):
    m = Manager(str(tmp_path / "notify.sock"))
    # 0.4 s: a ping every 0.2 s.
    x = Xpud(tmp_path, nodedir, notify=m.sock.getsockname(),
             watchdog_usec=400000)
    try:
        x.start(wait=False)
        m.wait(lambda ms: ms.count("WATCHDOG=1") >= 6)
        msgs = m.messages()
        ready = [i for i, msg in enumerate(msgs)
                 if "READY=1" in msg.splitlines()]
        assert ready, msgs
        status = [line for line in msgs[ready[0]].splitlines()
                  if line.startswith("STATUS=")]
        assert status == ["STATUS=0 slices ready, 2 GPUs"], msgs
        # READY before the first ping; the API answers by then.
        assert ready[0] < msgs.index("WATCHDOG=1")
        x.wait_serving()
        # Pings at half of WATCHDOG_USEC (0.2 s), not faster; on average,
        # since a loaded guest may read two at once.
        pings = [t for t, msg in m.got if msg == "WATCHDOG=1"]
        assert (pings[-1] - pings[0]) / (len(pings) - 1) >= 0.15, pings
        assert x.stop() == 0
        m.wait(lambda ms: "STOPPING=1" in ms[-1].splitlines())
    finally:
        x.cleanup()
        m.close()


# -- xpuctl run ---------------------------------------------------------------

def test_run_puts_the_command_in_the_slice(xpud, nodedir):
    s = create(xpud)
    assert s["state"] == "ready"
    assert s["gpu_node"] == str(nodedir / f"xpu{s['id']}")
    assert s["ctl_node"] == str(nodedir / f"xpu{s['id']}-ctl")
    host_mounts = mounts_of()
    host_ctl = os.stat("/dev/nvidiactl")
    p, seen = xpud.run_client("t-run")
    try:
        # The client sees the slice's memory, through the standard names.
        assert seen["heap_total"] == LIMIT
        assert seen["fb_total_kib"] == LIMIT >> 10
        assert seen["nodes"]["nvidiactl"] == [195, 255]
        assert seen["nodes"]["nvidia0"] == [195, 0]
        assert seen["nodes"]["nvidia1"] == [1, 3]   # hidden: /dev/null
        # Its opens are in the slice: the kernel counts its memory.
        assert ask(p, f"alloc {LIMIT // 2}") == {"ok": True}
        k = kernel_slices()["t-run"]
        assert k.memory_used == LIMIT // 2
        assert k.processes >= 1
        # Refused past the limit, with the driver's own status.
        assert ask(p, f"alloc {LIMIT // 2 + MIB}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        assert ask(p, f"alloc {LIMIT // 2}") == {"ok": True}
        assert kernel_slices()["t-run"].memory_used == LIMIT
        s = xpud.call("show", name="t-run")
        assert s["memory_used_bytes"] == LIMIT
        assert s["denied_allocs"] >= 1
        # Nothing of the client's namespace reached the host.
        assert mounts_of() == host_mounts
        assert "nvidiactl" in mounts_of(seen["pid"])
        st = os.stat("/dev/nvidiactl")
        assert (st.st_ino, st.st_rdev) == (host_ctl.st_ino,
                                           host_ctl.st_rdev)
        # xpuctl exec'd the client: the pid is xpuctl's.
        assert seen["pid"] == p.pid
    finally:
        assert finish(p, 7) == 7   # exit status passed through
    assert kernel_slices()["t-run"].memory_used == 0


RUN_UVM = """
import json, os, sys
sys.path.insert(0, TESTS)
from nvclient.uvm import Uvm
from xpu import ctl
st = os.stat("/dev/nvidia-uvm")
u = Uvm("580.126.20")
with ctl.Ctl() as c:
    held = {s.name: s.uvm_files for s in c.slices()}["t-run"]
print(json.dumps({"rdev": [os.major(st.st_rdev), os.minor(st.st_rdev)],
                  "held": held}))
"""


def test_run_puts_the_slice_s_uvm_node_at_nvidia_uvm(xpud, nodedir,
                                                     uvm_nodes):
    """xpud makes the slice's UVM node (xpuN-uvm, xpu.ko's misc device)
    and `xpuctl run` binds it over /dev/nvidia-uvm: the command's UVM file
    is held for the slice while it runs, and let go after (class 39)."""
    s = create(xpud)
    assert s["uvm_node"] == str(nodedir / f"xpu{s['id']}-uvm")
    # UVM's node is there: xpu.ko interposes on its open (xpud asks)
    r = xpud.xpuctl("version", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["uvm_interposed"] is True
    # and it sees UVM's retentions (its probes on the driver)
    assert json.loads(r.stdout)["uvm_retentions_seen"] is True
    # and tenants may not map where xpu.ko puts the pages of its calls
    assert json.loads(r.stdout)["call_pages_guarded"] is True
    # and it tells how many retains it could not watch to their return
    with open("/sys/module/xpu/parameters/uvm_retains_unwatched") as f:
        assert json.loads(r.stdout)["uvm_retains_unwatched"] == int(f.read())
    with open("/sys/class/misc/xpu-uvm/dev") as f:
        want = [int(n) for n in f.read().split(":")]
    code = RUN_UVM.replace("TESTS", repr(str(xpudtest.TOP / "tests")))
    r = xpud.xpuctl("run", "t-run", "--", sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"rdev": want, "held": 1}
    deadline = time.monotonic() + WAIT
    while kernel_slices()["t-run"].uvm_files:
        assert time.monotonic() < deadline, "the UVM file was never let go"
        time.sleep(0.05)


def test_run_passes_the_exit_status_and_signals(xpud):
    create(xpud)
    r = xpud.xpuctl("run", "t-run", "--", "sh", "-c", "exit 42")
    assert (r.returncode, r.stderr) == (42, "")
    r = xpud.xpuctl("run", "t-run", "--", "sh", "-c", "kill -9 $$")
    assert r.returncode == -signal.SIGKILL
    shell = (f"{sys.executable} -m xpu.cli --socket {xpud.socket} "
             "run t-run -- sh -c 'kill -TERM $$'; echo $?")
    r = subprocess.run(["sh", "-c", shell], env=xpud.env, check=False,
                       capture_output=True, text=True, timeout=WAIT)
    assert r.stdout.strip() == str(128 + signal.SIGTERM)
    r = xpud.xpuctl("run", "t-run", "--", "no-such-command-xpu")
    assert r.returncode == 127
    assert r.stderr == ("xpuctl: error: no-such-command-xpu: command not "
                        "found\n")
    r = xpud.xpuctl("run", "t-nope", "--", "true")
    assert r.returncode == 5 and r.stderr.count("\n") == 1


# -- xpud goes away; the kernel keeps enforcing ---------------------------------

def test_kill_9_and_restart_leave_slices_and_workloads_alone(xpud):
    s = create(xpud)
    p, _ = xpud.run_client("t-run")
    try:
        assert ask(p, f"alloc {LIMIT // 2}") == {"ok": True}
        before = kernel_slices()["t-run"]

        xpud.proc.send_signal(signal.SIGKILL)
        xpud.proc.wait()
        # No xpud: the limit holds, the workload runs.
        assert ask(p, f"alloc {LIMIT}") == {
            "ok": False, "status": abi.NV_ERR_NO_MEMORY}
        assert ask(p, f"alloc {LIMIT // 4}") == {"ok": True}
        assert xpud.xpuctl("list").returncode == 3

        xpud.start()
        after = kernel_slices()["t-run"]
        assert after.id == before.id == s["id"]
        assert (after.memory_limit, after.gpu_minor, after.compute_share,
                after.weight, after.priority) == (
            before.memory_limit, before.gpu_minor, before.compute_share,
            before.weight, before.priority)
        assert after.memory_used == LIMIT // 2 + LIMIT // 4
        assert p.poll() is None
        s2 = xpud.call("show", name="t-run")
        assert (s2["id"], s2["state"], s2["memory_used_bytes"]) == (
            s["id"], "ready", LIMIT // 2 + LIMIT // 4)
        assert s2["nodes"] == s["nodes"]

        # A clean stop and start: the same.
        assert xpud.stop() == 0
        xpud.start()
        assert kernel_slices()["t-run"].id == s["id"]
        assert ask(p, f"alloc {LIMIT // 4 + MIB}")["ok"] is False
        assert ask(p, f"alloc {LIMIT // 4}") == {"ok": True}
        # The slice is in use: destroy says so and changes nothing.
        r = xpud.xpuctl("destroy", "t-run")
        assert r.returncode == 1 and "--force" in r.stderr
        assert "t-run" in kernel_slices()
    finally:
        assert finish(p) == 0
    assert xpud.xpuctl("destroy", "t-run").returncode == 0
    assert kernel_slices() == {}


# -- permissions ----------------------------------------------------------------

def test_permission_errors(xpud):
    """An unprivileged user, and root without CAP_SYS_ADMIN for run."""
    create(xpud)
    for args in (("list",), ("create", "t-u", "--gpu", "0", "--memory",
                             "1GiB"),
                 ("run", "t-run", "--", "true")):
        r = xpud.xpuctl(*args, user=NOBODY)
        assert r.returncode == 4, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        # Refused by the socket's mode, or by xpud on its credentials.
        assert r.stderr.startswith("xpuctl: error: permission denied"), \
            r.stderr
    assert set(kernel_slices()) == {"t-run"}
    # Root may ask xpud, but makes no namespace without CAP_SYS_ADMIN.
    r = subprocess.run(
        ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps",
         "-sys_admin", "--", sys.executable, "-m", "xpu.cli", "--socket",
         xpud.socket, "run", "t-run", "--", "true"],
        env=xpud.env, check=False, capture_output=True, text=True,
        timeout=WAIT)
    assert r.returncode == 4, r.stderr
    assert r.stderr.startswith("xpuctl: error: xpuctl run needs root "
                               "(CAP_SYS_ADMIN)"), r.stderr
    assert r.stderr.count("\n") == 1


# -- a tenant in its own pid namespace (issue 18, rule 3) ----------------------

PIDNS_FILL = """
import json, os, sys
sys.path.insert(0, TESTS)
from nvclient import abi, client
rm = client.RmClient(client.Ctl()); dev = rm.device(0)
got, status = 0, None
for _ in range(32):                       # up to 2 GiB in a 1 GiB slice
    try:
        dev.alloc_vidmem(64 << 20)
        got += 64 << 20
    except client.NvStatusError as e:
        status = e.status
        break
print(json.dumps({"pid": os.getpid(), "got": got, "status": status}))
"""


@pytest.mark.parametrize("version", ["535.288.01", "580.126.20"])
def test_a_tenant_in_its_own_pid_namespace_fills_its_slice_exactly(
        version, reload_stub, tmp_path, nodedir):
    """`unshare --pid --fork` inside `xpuctl run`: the tenant is pid 1 of its
    own namespace. Up to 560 RM names processes by global pid, from 565 as
    the caller's namespace sees them (xpu's queries run in the tenant's own
    calls): at both, the slice's 1 GiB is filled exactly, then the driver's
    own out-of-memory status."""
    reload_stub(version=version)
    subprocess.run(["insmod", os.environ["XPU_KO"],
                    *os.environ.get("XPU_KO_PARAMS", "").split()], check=True)
    x = xpudtest.Xpud(tmp_path, nodedir).start()
    try:
        create(x, name="t-pidns", memory=1 << 30)
        code = PIDNS_FILL.replace("TESTS", repr(str(xpudtest.TOP / "tests")))
        r = x.xpuctl("run", "t-pidns", "--", "unshare", "--pid", "--fork",
                     sys.executable, "-c", code)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out == {"pid": 1, "got": 1 << 30,
                       "status": abi.NV_ERR_NO_MEMORY}, out
        k = kernel_slices()["t-pidns"]
        assert (k.memory_used, k.memory_peak) == (0, 1 << 30)
        assert x.xpuctl("destroy", "t-pidns").returncode == 0
    finally:
        x.cleanup()
