# SPDX-License-Identifier: Apache-2.0
"""The VM rig's watch over the guest's console (tests/vm/run): a guest whose
CPU has been stuck long enough is killed at once, not at --timeout."""

import importlib.machinery
import importlib.util
import subprocess
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _rig():
    loader = importlib.machinery.SourceFileLoader("vmrun",
                                                  str(REPO / "tests/vm/run"))
    spec = importlib.util.spec_from_loader("vmrun", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _watch(tmp_path, lines):
    """Start a guest stand-in, write LINES to its console, watch it; returns
    whether the watch killed it."""
    rig = _rig()
    console = tmp_path / "console.log"
    console.write_text("")
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    wedged = threading.Event()
    killed = threading.Event()

    def kill():
        killed.set()
        proc.kill()

    t = threading.Thread(target=rig.watch_console,
                         args=(console, proc, wedged, kill, 0.05))
    t.start()
    try:
        with open(console, "a") as f:
            for line in lines:
                f.write(line)
                f.flush()
        # the watch reads the whole file once more after this
        t.join(timeout=2)
        return wedged.is_set() and killed.is_set()
    finally:
        proc.kill()
        proc.wait()
        t.join()


def test_a_cpu_stuck_for_two_minutes_kills_the_guest(tmp_path):
    assert _watch(tmp_path, [
        "[   96.3] watchdog: BUG: soft lockup - CPU#0 stuck for 44s! [x:1]\n",
        "[  160.3] watchdog: BUG: soft lockup - CPU#1 stuck for 1",
        "30s! [podman:301]\n"])          # a line written in two pieces


def test_a_short_stall_or_a_cut_line_does_not(tmp_path):
    assert not _watch(tmp_path, [
        "[   96.3] watchdog: BUG: soft lockup - CPU#0 stuck for 44s! [x:1]\n",
        "[  160.3] watchdog: BUG: soft lockup - CPU#1 stuck for 1"])
