# SPDX-License-Identifier: Apache-2.0
"""xpud --foreground as a process: systemd notifications on a real datagram
socket (READY, STATUS, WATCHDOG, RELOADING, STOPPING), SIGHUP reloads,
SIGTERM stops, a corrupt state file is set aside.

No root, no kernel: xpu.ko's device is a path that does not exist, so xpud
runs with its NullBackend; slices stay pending, which is enough to see what
the configuration asked for.  Every wait is on the notification socket, the
API socket or the process, with a timeout.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from xpu import daemon
from xpu.client import Client
from xpu.notify import Notifier

TOP = Path(__file__).resolve().parents[3]
WAIT = 20.0  # seconds: generous for a loaded CI machine; never slept

CONFIG_A = """\
[defaults]
policy = "fixed"

[[slice]]
name = "a"
gpu = 0
memory = "1GiB"

[metrics]
enabled = false
[cdi]
spec_dir = ""   # no CDI spec from these: the host's /var/run/cdi is not theirs
"""

CONFIG_B = CONFIG_A.replace('name = "a"', 'name = "b"')


class Xpud:
    """One xpud process with its own configuration, state and sockets."""

    def __init__(self, tmp_path, sockdir, config=CONFIG_A, watchdog_usec=None,
                 notify=True):
        self.config = tmp_path / "xpud.toml"
        self.config.write_text(config)
        self.state = tmp_path / "state"
        self.socket = str(sockdir / "xpud.sock")
        self.notify = None
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                            "JOURNAL_STREAM")}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(TOP / "xpud"), env.get("PYTHONPATH")]))
        if notify:
            path = str(sockdir / "notify.sock")
            self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.notify.bind(path)
            self.notify.settimeout(WAIT)
            env["NOTIFY_SOCKET"] = path
        if watchdog_usec:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        self.argv = [sys.executable, "-m", "xpu.daemon", "--foreground",
                     "--config", str(self.config), "--state-dir",
                     str(self.state), "--socket", self.socket,
                     "--device", str(tmp_path / "no-xpuctl")]
        self.env = env
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.argv, env=self.env,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        return self

    def message(self):
        """The next notification, as {VARIABLE: value}."""
        data = self.notify.recv(4096).decode()
        return dict(line.split("=", 1) for line in data.splitlines())

    def until(self, variable):
        """Notifications up to the first that sets VARIABLE."""
        seen = []
        while True:
            m = self.message()
            seen.append(m)
            if variable in m:
                return seen

    def call(self, op, **args):
        with Client(self.socket, timeout=WAIT) as c:
            return c.call(op, **args)

    def stop(self):
        """SIGTERM; returns (exit status, stderr)."""
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=WAIT)
        return self.proc.returncode, err

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        if self.notify:
            self.notify.close()


@pytest.fixture
def xpud(tmp_path, sockdir):
    made = []

    def make(**kw):
        x = Xpud(tmp_path, sockdir, **kw)
        made.append(x)
        return x

    yield make
    for x in made:
        x.close()


def test_ready_watchdog_and_a_clean_stop(xpud):
    x = xpud(watchdog_usec=200000).start()  # pings every 0.1 s
    [ready] = x.until("READY")
    assert ready["READY"] == "1"
    assert ready["STATUS"] == "0 slices ready, 1 pending, 0 GPUs"
    # Ready means serving.
    assert x.call("version")["kernel_error"].endswith("is xpu.ko loaded?")
    pings = [x.message() for _ in range(3)]
    assert pings == [{"WATCHDOG": "1"}] * 3
    status, err = x.stop()
    assert status == 0
    assert not os.path.exists(x.socket)
    assert x.until("STOPPING")[-1] == {"STOPPING": "1", "STATUS": "stopping"}
    lines = err.splitlines()
    assert lines[-1] == "xpud: stopped; the kernel's slices stay in force"
    assert "Traceback" not in err


def test_a_hung_xpud_ended_by_the_watchdog_leaves_its_stacks(xpud):
    """systemd ends an xpud that stopped pinging with SIGABRT: what every
    thread was doing goes to stderr (the journal)."""
    x = xpud().start()
    x.until("READY")
    x.call("list")          # settled: every thread it starts has started
    x.proc.send_signal(signal.SIGABRT)
    _, err = x.proc.communicate(timeout=WAIT)
    # faulthandler re-raises the abort once it has written the stacks; its
    # walk of the other threads' frames is best effort (the docs say it may
    # crash), and once in CI it ended in SIGSEGV instead.  What matters is
    # that the stacks were written first.
    assert x.proc.returncode in (-signal.SIGABRT, -signal.SIGSEGV), \
        (x.proc.returncode, err)
    assert "Fatal Python error: Aborted" in err, err
    assert "(most recent call first)" in err, err
    # the main thread, started first, is walked last: a walk that crashed
    # on a running thread's frames (CI saw one in typing.py) never reaches
    # it, having written the others'
    if x.proc.returncode == -signal.SIGABRT:
        assert "xpu/daemon.py" in err, err


def test_no_watchdog_pings_unless_asked(xpud):
    x = xpud().start()
    x.until("READY")
    x.notify.settimeout(0.5)
    with pytest.raises(socket.timeout):  # TimeoutError from 3.10
        x.message()
    assert x.stop()[0] == 0


def test_sighup_reloads_and_refuses_a_bad_configuration(xpud):
    x = xpud().start()
    x.until("READY")
    assert [s["name"] for s in x.call("list")] == ["a"]
    assert x.call("gpus") == []

    x.config.write_text(CONFIG_B)
    x.proc.send_signal(signal.SIGHUP)
    reloading, ready = x.until("READY")[-2:]
    assert reloading["RELOADING"] == "1" and "MONOTONIC_USEC" in reloading
    assert ready["STATUS"] == "0 slices ready, 1 pending, 0 GPUs"
    assert [s["name"] for s in x.call("list")] == ["b"]

    x.config.write_text(CONFIG_B.replace('"fixed"', '"fastest"'))
    x.proc.send_signal(signal.SIGHUP)
    ready = x.until("READY")[-1]
    assert ready["STATUS"].startswith("reload refused: ")
    assert [s["name"] for s in x.call("list")] == ["b"]  # kept

    status, err = x.stop()
    assert status == 0
    refused = [line for line in err.splitlines() if "refused" in line]
    assert refused == [
        ("xpud: error: reload refused, the previous configuration stays: "
         f"{x.config}:2: defaults.policy: 'fastest' is not one of fixed, "
         "weighted, priority, native")]


def test_a_corrupt_state_file_is_set_aside(xpud):
    x = xpud()
    x.state.mkdir()
    (x.state / "state.json").write_text('{"schema": 1, "slices": [')
    x.start()
    x.until("READY")
    assert [s["name"] for s in x.call("list")] == ["a"]  # from the config
    names = sorted(os.listdir(x.state))
    assert names[0] == "state.json"
    assert names[1].startswith("state.json.corrupt-")
    assert len(names) == 2
    _, err = x.stop()
    [line] = [ln for ln in err.splitlines() if " is corrupt " in ln]
    assert line.startswith(f"xpud: warning: state file {x.state}/state.json "
                           "is corrupt (not JSON: ")
    assert line.endswith(f"moved it to {names[1]}; starting from the "
                         "configuration")


def test_an_invalid_configuration_at_start(xpud):
    x = xpud(config=CONFIG_A.replace('memory = "1GiB"', 'memory = "1GB"'),
             notify=False).start()
    _, err = x.proc.communicate(timeout=WAIT)
    assert x.proc.returncode == 1
    assert err == (f"xpud: error: {x.config}:7: slice[0].memory: '1GB' is "
                   "ambiguous (GB may mean powers of 1000 or of 1024): write "
                   "1GiB for binary units, or the number of bytes\n")


def test_a_second_xpud_on_the_same_socket(xpud, tmp_path):
    first = xpud().start()
    first.until("READY")
    (tmp_path / "second").mkdir()
    second = Xpud(tmp_path / "second", Path(first.socket).parent,
                  notify=False)
    second.start()
    try:
        _, err = second.proc.communicate(timeout=WAIT)
        assert second.proc.returncode == 1
        assert err.splitlines()[-1] == (
            f"xpud: error: another xpud is serving {first.socket}: stop it "
            "first (systemctl stop xpud)")
    finally:
        second.close()
    assert first.call("list")  # the first one is untouched
    assert first.stop()[0] == 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=WAIT) as r:
        return {f.name: f for f in
                text_string_to_metric_families(r.read().decode())}


def test_metrics_follow_the_configuration(xpud):
    """Served once ready; a reload moves them, or turns them off."""
    port = free_port()
    on = CONFIG_A.replace("enabled = false",
                          f'listen = "127.0.0.1:{port}"')
    x = xpud(config=on).start()
    x.until("READY")
    fams = scrape(port)
    # No xpu.ko here: down, and the configured slice pending.
    assert fams["xpu_up"].samples[0].value == 0
    assert fams["xpud_slices_pending"].samples[0].value == 1
    assert fams["xpud_reconcile_errors"].samples[0].value >= 1
    assert fams["xpu_slice_memory_used_bytes"].samples == []

    port2 = free_port()
    x.config.write_text(on.replace(str(port), str(port2)))
    x.proc.send_signal(signal.SIGHUP)
    x.until("READY")
    assert scrape(port2)["xpud_reconciles"].samples[0].value >= 2
    with pytest.raises(urllib.error.URLError):
        scrape(port)

    x.config.write_text(CONFIG_A)
    x.proc.send_signal(signal.SIGHUP)
    x.until("READY")
    with pytest.raises(urllib.error.URLError):
        scrape(port2)
    status, err = x.stop()
    assert status == 0
    lines = err.splitlines()
    assert f"xpud: metrics: http://127.0.0.1:{port}/metrics" in lines
    assert f"xpud: metrics: http://127.0.0.1:{port2}/metrics" in lines
    assert "xpud: metrics: off ([metrics] enabled = false)" in lines
    assert "Traceback" not in err


def test_watchdog_interval():
    env = {"NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "3000000"}
    assert Notifier(env, factory=object).watchdog_interval == 1.5
    env["WATCHDOG_PID"] = str(os.getpid())
    assert Notifier(env, factory=object).watchdog_interval == 1.5
    env["WATCHDOG_PID"] = "1"  # meant for another process
    assert Notifier(env, factory=object).watchdog_interval is None
    assert Notifier({"WATCHDOG_USEC": "3000000"}).watchdog_interval is None
    assert not Notifier({}).enabled


def test_a_manager_that_does_not_read_never_blocks_xpud(sockdir,
                                                        monkeypatch):
    """Notifications to a full queue are dropped: xpud's main loop (which
    also stops it on SIGTERM) must never wait on the manager."""
    path = str(sockdir / "deaf.sock")
    deaf = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    deaf.bind(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    n = Notifier({"NOTIFY_SOCKET": path})
    done = threading.Event()

    def flood():
        for _ in range(5000):  # far more than a datagram queue holds
            n.watchdog()
        done.set()

    threading.Thread(target=flood, daemon=True).start()
    assert done.wait(WAIT), "sending to a full queue blocked"
    assert deaf.recv(4096) == b"WATCHDOG=1"  # what fitted was sent
    deaf.close()


def test_xpud_does_not_fork(monkeypatch, capsys):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    with pytest.raises(SystemExit) as e:
        daemon.main([])
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "xpud: error: xpud does not fork into the background: run it with "
        "--foreground, or as the systemd service xpud.service (see xpud "
        "--help)\n")
