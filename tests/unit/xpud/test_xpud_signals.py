# SPDX-License-Identifier: Apache-2.0
"""Signal handlers that may take locks (xpu/signals.py), which xpud and
xpu-k8s stop and reload by.

Python runs its own handlers in the main thread, between two bytecodes of
whatever that thread was doing.  xpud's SIGTERM handler set an Event, and
threading.Event takes an internal lock that the main thread holds in
wait() and clear(): a SIGTERM in that window left xpud waiting for itself
for ever.  Each case runs in a child process, so that a deadlock is a
timeout here, not a hung test run.
"""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from xpu.signals import SignalRelay

TOP = Path(__file__).resolve().parents[3]
WAIT = 20.0  # seconds; never slept

# The main thread holds a lock when the signal comes, and runs bytecodes
# (where a handler of Python's own would run) until the handler could not
# have run without the lock; the handler takes the same lock.
HOLDER = """
import os, signal, threading
from contextlib import nullcontext
from xpu.signals import SignalRelay
lock = threading.Lock()
ran = threading.Event()
where = []
def handler(signum):
    with lock:
        where.append(threading.current_thread() is threading.main_thread())
    ran.set()
if RELAY:
    catching = SignalRelay({signal.SIGUSR1: handler})
else:                                   # Python's own, in the main thread
    signal.signal(signal.SIGUSR1, lambda signum, frame: handler(signum))
    catching = nullcontext()
with catching:
    with lock:
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(100000):
            pass
    assert ran.wait(10), "the handler never ran"
print("ran", "main" if where[0] else "relay", flush=True)
"""


def run_child(relay, timeout=WAIT):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(TOP / "xpud"), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [sys.executable, "-c", HOLDER.replace("RELAY", str(relay))],
        env=env, capture_output=True, text=True, timeout=timeout,
        check=False)


def test_a_handler_may_take_a_lock_the_main_thread_holds():
    r = run_child(relay=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran relay\n"


def test_python_s_own_handler_would_wait_for_itself():
    """What the relay is for: the same handler installed as Python's own
    runs in the main thread while it holds the lock, and never returns.
    (Should this stop hanging, the interpreter changed, not xpud.)"""
    with pytest.raises(subprocess.TimeoutExpired):
        run_child(relay=False, timeout=5)


def test_handlers_and_the_wakeup_fd_come_back():
    before = signal.getsignal(signal.SIGUSR2)
    fd_before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd_before)
    seen = []
    got = threading.Event()

    def handler(signum):
        seen.append(signum)
        got.set()

    with SignalRelay({signal.SIGUSR2: handler}):
        assert signal.getsignal(signal.SIGUSR2) is not before
        os.kill(os.getpid(), signal.SIGUSR2)
        assert got.wait(WAIT)
    assert seen == [signal.SIGUSR2]
    assert signal.getsignal(signal.SIGUSR2) is before
    assert signal.set_wakeup_fd(fd_before) == fd_before


def test_a_failing_handler_does_not_stop_the_relay(caplog):
    failed = threading.Event()
    got = threading.Event()

    def handler(signum):
        if not failed.is_set():
            failed.set()
            raise RuntimeError("boom")
        got.set()

    with SignalRelay({signal.SIGUSR2: handler}):
        os.kill(os.getpid(), signal.SIGUSR2)
        assert failed.wait(WAIT)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert got.wait(WAIT)
    assert "the handler of signal" in caplog.text


def test_only_the_main_thread_may_catch_signals():
    errors = []

    def enter():
        try:
            with SignalRelay({signal.SIGUSR2: lambda s: None}):
                pass
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=enter)
    t.start()
    t.join(WAIT)
    assert errors == ["signals are caught in the main thread only"]
