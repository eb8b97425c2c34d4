# SPDX-License-Identifier: Apache-2.0
"""tests/vm/virtiofsd --cached: what tests/vm/run asks before every boot,
so it must fetch nothing, and take only a daemon that runs: one that does not
(a broken unpack, a library missing) would fail every boot, where the rig
should fall back to 9p."""

import subprocess
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
SCRIPT = TOP / "tests" / "vm" / "virtiofsd"


def cached(cache):
    return subprocess.run([str(SCRIPT), "--cached"], capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin",
                               "XPU_VIRTIOFSD_CACHE": str(cache)})


def daemon(dir_, body):
    (dir_ / "bin").mkdir(parents=True)
    (dir_ / "bin" / "virtiofsd").write_text(f"#!/bin/sh\n{body}\n")
    (dir_ / "bin" / "virtiofsd").chmod(0o755)


def test_an_empty_cache_is_none_and_stays_empty(tmp_path):
    cache = tmp_path / "virtiofsd"
    r = cached(cache)
    assert (r.returncode, r.stdout) == (1, ""), r.stderr
    assert not cache.exists()


def test_only_a_daemon_that_runs_is_cached(tmp_path):
    cache = tmp_path / "virtiofsd"
    broken, good = cache / "1.0-broken", cache / "1.0"
    daemon(broken, "exit 127")
    (cache / "current").write_text(f"{broken}\n")
    assert cached(cache).returncode == 1
    daemon(good, 'echo "virtiofsd 1.0"')
    (cache / "current").write_text(f"{good}\n")
    r = cached(cache)
    assert (r.returncode, r.stdout) == (0, f"{good / 'bin'}\n"), r.stderr


def test_an_unknown_argument_is_refused():
    r = subprocess.run([str(SCRIPT), "--fetch"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 1 and "usage" in r.stderr
