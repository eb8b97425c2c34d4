# SPDX-License-Identifier: Apache-2.0
"""xpud and xpuctl end to end, on xpu.ko and the simulated driver:
systemd notifications, `xpuctl run`, kill -9 and restarts of xpud, and an
unprivileged caller.

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests/test_xpud_daemon.py

Each xpud here has its own configuration, state directory, socket and node
directory, on the real /dev/xpuctl; every test leaves no slice behind.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from nvclient import abi

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "xpud"))

ctl = pytest.importorskip("xpu.ctl")
uapi = pytest.importorskip("xpu.uapi")

DEV = "/dev/xpuctl"
MIB = 1 << 20
LIMIT = 64 * MIB
NOBODY = 65534
WAIT = 60.0  # seconds, for xpud under software emulation; never slept
CLIENT = str(TOP / "tests" / "vmtests" / "slice_client.py")


@pytest.fixture(scope="module", autouse=True)
def _require_xpu():
    if not os.path.exists(DEV):
        pytest.skip("xpu.ko is not loaded")
    fd = os.open(DEV, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, uapi.XPU_IOC_GPU_LIST, uapi.XpuGpuList(
            argsz=ctypes.sizeof(uapi.XpuGpuList)))
    except OSError as e:
        if e.errno == errno.ENOTTY:
            pytest.skip("this xpu.ko has no slice interface")
        raise
    finally:
        os.close(fd)


def kernel_slices():
    with ctl.Ctl(DEV) as c:
        return {s.name: s for s in c.slices()}


def destroy_all():
    with ctl.Ctl(DEV) as c:
        for s in c.slices():
            c.slice_destroy(s.id, force=True)


class Xpud:
    """xpud (python -m xpu.daemon) with its own files; start() may be
    called again after kill() or stop(): same configuration, state, socket
    and node directory, as a restart by systemd."""

    def __init__(self, tmp: Path, nodedir: Path, notify: str | None = None,
                 watchdog_usec: int | None = None):
        self.tmp = tmp
        self.config = tmp / "xpud.toml"
        self.config.write_text("")
        self.sockdir = Path(tempfile.mkdtemp(prefix="xpud-", dir="/tmp"))
        os.chmod(self.sockdir, 0o755)  # the socket's own mode decides
        self.socket = str(self.sockdir / "xpud.sock")
        self.nodedir = nodedir
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                            "JOURNAL_STREAM")}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(TOP / "xpud"), env.get("PYTHONPATH")]))
        self.env = env
        self.daemon_env = dict(env)
        if notify:
            self.daemon_env["NOTIFY_SOCKET"] = notify
        if watchdog_usec:
            self.daemon_env["WATCHDOG_USEC"] = str(watchdog_usec)
        self.log = tmp / "xpud.log"
        self.proc = None
        self.starts = 0

    def start(self, wait=True):
        self.starts += 1
        argv = [sys.executable, "-m", "xpu.daemon", "--config",
                str(self.config), "--state-dir", str(self.tmp / "state"),
                "--socket", self.socket, "--node-dir", str(self.nodedir)]
        if "NOTIFY_SOCKET" not in self.daemon_env:
            argv.append("--foreground")
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(argv, env=self.daemon_env,
                                         stdout=subprocess.DEVNULL,
                                         stderr=log)
        if wait:
            self.wait_serving()
        return self

    def wait_serving(self):
        deadline = time.monotonic() + WAIT
        while True:
            assert self.proc.poll() is None, \
                f"xpud exited: {self.log.read_text()}"
            r = self.xpuctl("version")
            if r.returncode == 0:
                return
            assert r.returncode == 3, r.stderr  # not yet listening
            assert time.monotonic() < deadline, r.stderr
            time.sleep(0.1)

    def xpuctl(self, *args, user=None, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", WAIT)
        return subprocess.run(
            [sys.executable, "-m", "xpu.cli", "--socket", self.socket,
             *args], env=self.env, check=False, user=user, cwd="/", **kw)

    def run_client(self, name):
        """`xpuctl run NAME -- python slice_client.py`, talking on pipes;
        returns (process, what the client saw)."""
        p = subprocess.Popen(
            [sys.executable, "-m", "xpu.cli", "--socket", self.socket, "run",
             name, "--", sys.executable, CLIENT], env=self.env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd="/")
        line = p.stdout.readline()
        assert line, f"client failed ({p.wait()}): {p.stderr.read()}"
        return p, json.loads(line)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=WAIT)
        return self.proc.returncode

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.sockdir, ignore_errors=True)


def ask(p, command):
    p.stdin.write(command + "\n")
    p.stdin.flush()
    line = p.stdout.readline()
    assert line, f"client died ({p.wait()}): {p.stderr.read()}"
    return json.loads(line)


def finish(p, status=0):
    p.stdin.write(f"exit {status}\n")
    p.stdin.close()
    return p.wait(timeout=WAIT)


@pytest.fixture
def nodedir():
    d = tempfile.mkdtemp(prefix="xpud-nodes-", dir="/dev")
    os.chmod(d, 0o755)
    destroy_all()
    yield Path(d)
    destroy_all()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def xpud(tmp_path, nodedir):
    x = Xpud(tmp_path, nodedir)
    yield x.start()
    x.cleanup()


def create(xpud, name="t-run", memory=LIMIT):
    r = xpud.xpuctl("create", name, "--gpu", "0", "--memory", f"{memory}")
    assert r.returncode == 0, r.stderr
    r = xpud.xpuctl("show", name, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def mounts_of(pid="self"):
    with open(f"/proc/{pid}/mountinfo") as f:
        return f.read()


# -- systemd notifications ----------------------------------------------------

def test_ready_and_watchdog_datagrams(tmp_path, nodedir):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    sock.settimeout(WAIT)
    # 0.4 s: a ping every 0.2 s.
    x = Xpud(tmp_path, nodedir, notify=path, watchdog_usec=400000)
    try:
        x.start(wait=False)
        messages = []
        pings = []
        while len(pings) < 3:
            msg = sock.recv(4096).decode()
            messages.append(msg)
            if msg == "WATCHDOG=1":
                pings.append(time.monotonic())
        ready = [m for m in messages if "READY=1" in m.splitlines()]
        assert ready, messages
        status = [line for line in ready[0].splitlines()
                  if line.startswith("STATUS=")]
        assert status and "2 GPUs" in status[0], ready
        # Ready came before the first ping; the API answers by then.
        assert messages.index(ready[0]) < messages.index("WATCHDOG=1")
        x.wait_serving()
        # Pings at half of WATCHDOG_USEC, not faster than that.
        gaps = [b - a for a, b in itertools.pairwise(pings)]
        assert all(g >= 0.15 for g in gaps), gaps
        assert x.stop() == 0
        rest = []
        sock.settimeout(0.0)
        while True:
            try:
                rest.append(sock.recv(4096).decode())
            except BlockingIOError:
                break
        assert any("STOPPING=1" in m.splitlines() for m in rest), rest
    finally:
        x.cleanup()
        sock.close()


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
        r = xpud.xpuctl("show", "t-run", "-o", "json")
        s = json.loads(r.stdout)
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
        r = xpud.xpuctl("show", "t-run", "-o", "json")
        s2 = json.loads(r.stdout)
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

def test_an_unprivileged_user_gets_a_clear_permission_error(xpud):
    create(xpud)
    for args in (("list",), ("create", "t-u", "--gpu", "0", "--memory",
                             "1GiB"),
                 ("run", "t-run", "--", "true")):
        r = xpud.xpuctl(*args, user=NOBODY)
        assert r.returncode == 4, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        assert r.stderr.startswith("xpuctl: error: permission denied on "
                                   f"{xpud.socket}"), r.stderr
    assert set(kernel_slices()) == {"t-run"}


def test_run_without_cap_sys_admin_is_a_permission_error(xpud):
    """Root may ask xpud, but without CAP_SYS_ADMIN no namespace."""
    create(xpud)
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
