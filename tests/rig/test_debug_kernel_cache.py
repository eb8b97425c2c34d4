# SPDX-License-Identifier: Apache-2.0
"""tests/vm/debug-kernel --cached: how CI learns, before deciding whether the
debug part runs, that the kernel would cost no build (.ci/run).  It must
never install or build anything, and an interrupted build (<key>.tmp) or a
tree without its marker is not a cached kernel.  The source package is
named through XPU_DEBUG_SRCPKG: bash stands for one that is installed."""

import subprocess
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
SCRIPT = TOP / "tests" / "vm" / "debug-kernel"


def run(cache, *args, pkg="bash"):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                               "HOME": str(cache),
                               "XPU_KERNEL_CACHE": str(cache),
                               "XPU_DEBUG_SRCPKG": pkg})


def test_only_a_finished_build_is_cached(tmp_path):
    cache = tmp_path / "kernels"
    r = run(cache, "--cached")
    assert (r.returncode, r.stdout) == (1, ""), r.stderr
    assert not cache.exists()               # nothing made, no lock taken

    key = r.stderr.split("no cached kernel ")[1].split()[0]
    assert key.startswith("bash-"), r.stderr
    tree = cache / key
    # an interrupted build, then a tree without its marker: not cached
    (cache / (key + ".tmp") / "arch/x86/boot").mkdir(parents=True)
    (cache / (key + ".tmp") / "arch/x86/boot/bzImage").write_bytes(b"x")
    (cache / (key + ".tmp") / ".xpu-built").write_text("built\n")
    assert run(cache, "--cached").returncode == 1
    (tree / "arch/x86/boot").mkdir(parents=True)
    (tree / "arch/x86/boot/bzImage").write_bytes(b"x")
    assert run(cache, "--cached").returncode == 1
    (tree / ".xpu-built").write_text("built in 1 s on 2 cores\n")
    r = run(cache, "--cached")
    assert (r.returncode, r.stdout) == (0, f"{tree}\n"), r.stderr


def test_a_source_package_not_installed_is_no_cache(tmp_path):
    r = run(tmp_path, "--cached", pkg="linux-source-xpu-none")
    assert (r.returncode, r.stdout) == (1, ""), r.stderr
