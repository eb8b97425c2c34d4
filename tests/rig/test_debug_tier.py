# SPDX-License-Identifier: Apache-2.0
"""The debug-kernel tier tests itself: on the KASAN/lockdep/kmemleak kernel a
planted use-after-free and a planted leak each fail the run, and a run of the
stub and xpu.ko with nothing planted passes; CI boots once for both plants.

Needs the debug kernel's tree in XPU_DEBUG_KERNEL (`make check-debug` builds
it and sets it); each test is one boot of that kernel (1.5-2 minutes under
software emulation)."""

import os
import subprocess
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
RUN = TOP / "tests" / "vm" / "run"
KERNEL = os.environ.get("XPU_DEBUG_KERNEL", "")

pytestmark = pytest.mark.skipif(
    not KERNEL, reason="needs the debug kernel: make check-debug")

PLANTED = "$XPU_BUILD/tests/vm/planted"


# A boot of the debug kernel takes 1.5-2 minutes on an idle 2-core machine,
# and was seen to take 12 on a loaded one.
TIMEOUT = int(os.environ.get("XPU_DEBUG_BOOT_TIMEOUT", "1800"))


def vm(*args):
    r = subprocess.run([str(RUN), "--kernel", KERNEL,
                        "--timeout", str(TIMEOUT), *args], cwd=TOP,
                       capture_output=True, text=True, timeout=TIMEOUT + 300,
                       check=False)
    # A boot is expensive: keep what it printed for whoever reads a failure.
    name = os.environ.get("PYTEST_CURRENT_TEST", "run").split(" ")[0]
    out = TOP / ".vm-cache" / "logs" / "rig" / (
        name.split("::")[-1].replace("/", "_") + ".out")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"rc={r.returncode}\n--- stdout\n{r.stdout}"
                   f"--- stderr\n{r.stderr}")
    return r


def test_debug_kernel_has_the_checkers_and_a_clean_run_passes():
    # The stub and xpu.ko are loaded and unloaded, kmemleak scans at the end:
    # with nothing planted, the run passes.
    r = vm("--", "sh", "-c",
           'test -w /sys/kernel/debug/kmemleak || exit 3; '
           'test -e /proc/lockdep || exit 4; '
           'grep -q "KernelAddressSanitizer initialized" '
           '"$XPU_REPO/.vm-cache/logs/$XPU_KERNEL/boot.log" || exit 5; '
           'test -c /dev/xpuctl || exit 6')
    assert r.returncode == 0, r.stdout + r.stderr


def test_planted_use_after_free_fails_the_run():
    r = vm("--no-stub", "--", "sh", "-c",
           f'insmod "{PLANTED}/xpu_planted_uaf.ko"')
    assert r.returncode == 120, r.stdout + r.stderr
    assert "KASAN: use-after-free" in r.stdout, r.stdout
    assert "xpu_planted_uaf_read" in r.stdout, r.stdout


@pytest.mark.parametrize("unload", [False, True],
                         ids=["module-loaded", "module-unloaded"])
def test_planted_leak_fails_the_run(unload):
    # Loaded, the report's backtrace names the module; unloaded (as xpu.ko is
    # at the end of every run), its frames are bare addresses.
    cmd = f'insmod "{PLANTED}/xpu_planted_leak.ko"'
    if unload:
        cmd += " && rmmod xpu_planted_leak"
    r = vm("--no-stub", "--", "sh", "-c", cmd)
    assert r.returncode == 120, r.stdout + r.stderr
    assert "kmemleak reports leaks of our modules" in r.stdout, r.stdout
    assert "unreferenced object" in r.stdout and "(size 256)" in r.stdout
    if not unload:
        assert "[xpu_planted_leak]" in r.stdout, r.stdout


def test_planted_faults_fail_the_run_each_by_its_check():
    # CI's self-test (.ci/run): both plants in one boot, which costs half of
    # the two tests above.  Each check prints its own heading when it fails
    # the run -- the kernel log's failure lines, then kmemleak's leaks of our
    # modules -- so each heading, with what it names, shows that check would
    # have failed the run alone.
    r = vm("--no-stub", "--", "sh", "-c",
           f'insmod "{PLANTED}/xpu_planted_uaf.ko" && '
           f'insmod "{PLANTED}/xpu_planted_leak.ko" && '
           'rmmod xpu_planted_leak')
    assert r.returncode == 120, r.stdout + r.stderr
    log, leaks = r.stdout.partition("vm: kmemleak reports leaks")[::2]
    assert "vm: the kernel log gained failure lines:" in log, r.stdout
    assert "KASAN: use-after-free" in log, r.stdout
    assert "xpu_planted_uaf_read" in log, r.stdout
    assert "unreferenced object" in leaks and "(size 256)" in leaks, r.stdout
