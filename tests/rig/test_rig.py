# SPDX-License-Identifier: Apache-2.0
"""The VM rig tests itself: exit statuses come back, kernel warnings fail a run.

Each test is one VM boot (about 30 s under software emulation); the last is
two."""

import subprocess
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
RUN = TOP / "tests" / "vm" / "run"


def vm(*args, timeout=600):
    return subprocess.run([str(RUN), *args], cwd=TOP, check=False,
                          capture_output=True, text=True, timeout=timeout)


def test_true_exits_0_with_the_host_s_files_over_virtio_fs():
    # tests/setup fetches virtiofsd (tests/vm/virtiofsd), and the rig then
    # shares the root and the repository over virtio-fs, not 9p
    r = vm("--", "sh", "-c", 'grep -q "^ROOTFS / virtiofs " /proc/mounts && '
           'grep -q " $XPU_REPO virtiofs " /proc/mounts')
    assert r.returncode == 0, r.stdout + r.stderr
    assert "software emulation, virtio-fs)" in r.stderr or \
        "KVM, virtio-fs)" in r.stderr, r.stderr


def test_command_status_comes_back_and_runs_as_root_in_repo():
    # a failing command's own status (7 here, 1 for false) comes back; one
    # boot for both, a boot being the cost of a rig test.  --fs 9p: the
    # share the rig falls back to without virtiofsd
    r = vm("--fs", "9p", "--", "sh", "-c",
           'test "$(id -u)" = 0 && test "$PWD" = "$XPU_REPO" && '
           'grep -q " $XPU_REPO 9p " /proc/mounts && '
           'test -c /dev/nvidiactl && exit 7')
    assert r.returncode == 7, r.stdout + r.stderr


def test_warn_in_kernel_log_fails_the_run():
    # The rig builds the modules per kernel, under $XPU_BUILD in the guest.
    r = vm("--no-xpu", "--", "sh", "-c",
           'insmod "$XPU_BUILD/tests/vm/selftest/xpu_rigtest_warn.ko"')
    assert r.returncode == 120, r.stdout + r.stderr
    assert "WARNING:" in r.stdout


def test_a_cleared_kernel_log_fails_the_run():
    # a warning before the clear would otherwise go unseen
    r = vm("--no-xpu", "--", "sh", "-c",
           'insmod "$XPU_BUILD/tests/vm/selftest/xpu_rigtest_warn.ko" && '
           'dmesg -C')
    assert r.returncode == 120, r.stdout + r.stderr
    assert "lost the run's first line" in r.stdout


def test_timeout_kills_the_run():
    r = vm("--timeout", "45", "--", "sleep", "600", timeout=200)
    assert r.returncode == 124, r.stdout + r.stderr


def test_a_crash_in_the_command_fails_the_run_and_shows_the_console():
    # The guest dies in the command: not booted again; what the command said
    # and the kernel's last words come back.  "Said" is what the guest's tee
    # has passed on (tests/vm/guest): a line still in tee's pipe dies with the
    # guest, and a crash at once after the echo lost it once in CI.  So the
    # command waits until tee has written the line to XPU_OUTPUT, which tee
    # does after its write to the console, a write that returns once the host
    # has taken the bytes (virtio_console's blocking send).
    r = vm("--no-stub", "--", "sh", "-c",
           "echo xpu-before-the-crash; "
           "until grep -qF xpu-before-the-crash \"$XPU_OUTPUT\"; do "
           "sleep 0.05; done; "
           "echo c >/proc/sysrq-trigger; echo xpu-after-the-crash")
    assert r.returncode == 122, r.stdout + r.stderr
    assert "in the command" in r.stderr, r.stderr
    assert "xpu-before-the-crash" in r.stdout, r.stdout
    assert "xpu-after-the-crash" not in r.stdout, r.stdout
    assert "Kernel panic" in r.stderr, r.stderr
    assert "booting once more" not in r.stderr, r.stderr


def test_a_boot_that_dies_is_tried_once_more():
    # Neither the initramfs's init nor a root file system: the kernel panics
    # before the command can start, on both boots.
    r = vm("--no-stub", "--append", "rdinit=/xpu-none",
           "--append", "root=/dev/xpu-none", "--", "true")
    assert r.returncode == 122, r.stdout + r.stderr
    assert r.stderr.count("booting once more") == 1, r.stderr
    assert r.stderr.count("in the boot") == 2, r.stderr
    assert "Unable to mount root fs" in r.stderr, r.stderr
