# SPDX-License-Identifier: Apache-2.0
"""What the VM tests of xpud share: an xpud process with its own files on
the real /dev/xpuctl, xpuctl as a process, a GPU client run in a slice with
`xpuctl run` (slice_client.py), the kernel's view of the slices."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "xpud"))

from xpu import ctl, uapi
from xpu.client import Client
from xpu.errors import ConnectError

DEV = "/dev/xpuctl"
MIB = 1 << 20
LIMIT = 64 * MIB
NOBODY = 65534
# Seconds, under software emulation on a loaded machine, where one Python
# process takes seconds to start; bounds on waits, never slept.
WAIT = 120.0
CLIENT = str(TOP / "tests" / "vmtests" / "slice_client.py")


def require_slice_interface():
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
            try:
                with Client(self.socket, timeout=WAIT) as c:
                    c.call("version")
                return
            except ConnectError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.1)

    def xpuctl(self, *args, user=None, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", WAIT)
        return subprocess.run(
            [sys.executable, "-m", "xpu.cli", "--socket", self.socket,
             *args], env=self.env, check=False, user=user, cwd="/", **kw)

    def call(self, op, **args):
        """One API request, in this process (no xpuctl to start)."""
        with Client(self.socket, timeout=WAIT) as c:
            return c.call(op, **args)

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
    # Shown by pytest when the test failed.
    print(f"--- xpud's log ---\n{x.log.read_text()}")


def create(xpud, name="t-run", memory=LIMIT):
    """`xpuctl create NAME`; returns the slice as the API shows it."""
    r = xpud.xpuctl("create", name, "--gpu", "0", "--memory", f"{memory}")
    assert r.returncode == 0, r.stderr
    return xpud.call("show", name=name)


def mounts_of(pid="self"):
    with open(f"/proc/{pid}/mountinfo") as f:
        return f.read()


