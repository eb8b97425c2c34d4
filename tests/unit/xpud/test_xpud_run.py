# SPDX-License-Identifier: Apache-2.0
"""xpuctl run: which mounts it plans, what it checks, how it fails.  The
namespace itself is made in the VM (tests/vmtests/test_xpud_daemon.py)."""

import errno
import os
import stat

import pytest
from xpu import run
from xpu.errors import EXIT_PERMISSION

SLICE = {"name": "train", "state": "ready", "error": None, "gpu_minor": 1,
         "gpu_node": "/dev/xpu3", "ctl_node": "/dev/xpu3-ctl"}
DEV = ["nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm",
       "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps", "xpu3",
       "xpu3-ctl", "nvidia10", "nvidia1x"]


def test_plan_puts_the_slice_at_the_nvidia_names():
    binds = run.plan(SLICE, "/dev", lambda d: list(DEV))
    assert [(b.source, b.target) for b in binds] == [
        ("/dev/xpu3-ctl", "/dev/nvidiactl"),
        ("/dev/xpu3", "/dev/nvidia1"),
        # Every other GPU is hidden; uvm, modeset, caps stay.
        ("/dev/null", "/dev/nvidia0"),
        ("/dev/null", "/dev/nvidia10"),
        ("/dev/null", "/dev/nvidia2")]


def test_plan_puts_the_slice_s_uvm_node_at_nvidia_uvm():
    """Where the slice has a UVM node (xpu.ko's), it stands at
    /dev/nvidia-uvm, if the host has UVM: its UVM files are held for the
    slice (class 39)."""
    s = dict(SLICE, uvm_node="/dev/xpu3-uvm")
    binds = run.plan(s, "/dev", lambda d: list(DEV))
    assert ("/dev/xpu3-uvm", "/dev/nvidia-uvm") in \
        [(b.source, b.target) for b in binds]
    no_uvm = [e for e in DEV if e != "nvidia-uvm"]
    assert all(b.target != "/dev/nvidia-uvm"
               for b in run.plan(s, "/dev", lambda d: list(no_uvm)))


@pytest.mark.parametrize("change, message", [
    ({"state": "pending", "error": "GPU 7 is missing"},
     "slice 'train' is pending: GPU 7 is missing (xpuctl show train"),
    ({"gpu_node": None}, "slice 'train' has no device nodes yet"),
    ({"ctl_node": None}, "slice 'train' has no device nodes yet"),
    ({"gpu_minor": None}, "slice 'train' has no device nodes yet"),
])
def test_plan_refuses_a_slice_not_ready(change, message):
    with pytest.raises(run.RunError) as e:
        run.plan(dict(SLICE, **change), "/dev", lambda d: list(DEV))
    assert str(e.value).startswith(message)
    assert e.value.exit_status == 1


def _lstat_of(files):
    def lstat(path):
        if path not in files:
            raise FileNotFoundError(errno.ENOENT, "no", path)
        return os.stat_result((files[path], 0, 0, 1, 0, 0, 0, 0, 0, 0))
    return lstat


CHR = stat.S_IFCHR | 0o660


def test_check():
    binds = run.plan(SLICE, "/dev", lambda d: ["nvidia0", "nvidia1"])
    files = {"/dev/xpu3": CHR, "/dev/xpu3-ctl": CHR, "/dev/nvidia0": CHR,
             "/dev/nvidia1": CHR, "/dev/nvidiactl": CHR, "/dev/null": CHR}
    run.check(binds, _lstat_of(files))
    with pytest.raises(run.RunError, match=r"^/dev/xpu3 \(the slice's GPU "
                       r"node\) is missing: restart xpud"):
        run.check(binds, _lstat_of({k: v for k, v in files.items()
                                    if k != "/dev/xpu3"}))
    with pytest.raises(run.RunError, match=r"^/dev/nvidiactl is missing: "
                       r"the NVIDIA device nodes must exist"):
        run.check(binds, _lstat_of({k: v for k, v in files.items()
                                    if k != "/dev/nvidiactl"}))
    with pytest.raises(run.RunError, match=r"^/dev/nvidia1 is not a "
                       r"character device"):
        run.check(binds, _lstat_of(dict(files, **{
            "/dev/nvidia1": stat.S_IFREG | 0o644})))


class FakeLibc:
    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail or {}

    def unshare(self, flags):
        self.calls.append(("unshare", flags))
        if "unshare" in self.fail:
            raise OSError(self.fail["unshare"], os.strerror(
                self.fail["unshare"]))

    def mount(self, source, target, flags):
        self.calls.append(("mount", source, target, flags))
        if target in self.fail:
            raise OSError(self.fail[target], os.strerror(self.fail[target]))


def test_enter_makes_everything_private_before_binding():
    libc = FakeLibc()
    binds = run.plan(SLICE, "/dev", lambda d: ["nvidia0", "nvidia1"])
    run.enter(binds, libc)
    assert libc.calls == [
        ("unshare", run.CLONE_NEWNS),
        ("mount", None, "/", run.MS_REC | run.MS_PRIVATE),
        ("mount", "/dev/xpu3-ctl", "/dev/nvidiactl", run.MS_BIND),
        ("mount", "/dev/xpu3", "/dev/nvidia1", run.MS_BIND),
        ("mount", "/dev/null", "/dev/nvidia0", run.MS_BIND)]


def test_enter_without_privilege_is_a_permission_error():
    with pytest.raises(run.RunPermissionError) as e:
        run.enter([], FakeLibc({"unshare": errno.EPERM}))
    assert e.value.exit_status == EXIT_PERMISSION == 4
    assert str(e.value).startswith("xpuctl run needs root (CAP_SYS_ADMIN)")
    with pytest.raises(run.RunError, match="cannot prepare the slice's "
                       "namespace: No such file"):
        run.enter(run.plan(SLICE, "/dev", list),
                  FakeLibc({"/dev/nvidia1": errno.ENOENT}))


def test_the_real_unshare_refuses_the_unprivileged():
    if os.geteuid() == 0:
        pytest.skip("root may unshare")
    with pytest.raises(OSError) as e:
        run.Libc().unshare(run.CLONE_NEWNS)
    assert e.value.errno == errno.EPERM


@pytest.mark.parametrize("exc, status, message", [
    (FileNotFoundError(errno.ENOENT, "x"), 127, "cmd: command not found"),
    (PermissionError(errno.EACCES, "x"), 126, "cmd: permission denied"),
    (OSError(errno.ENOEXEC, "Exec format error"), 126,
     "cmd: cannot execute: Exec format error"),
])
def test_execute_fails_as_a_shell(exc, status, message):
    def execvp(file, argv):
        assert (file, argv) == ("cmd", ["cmd", "a"])
        raise exc
    with pytest.raises(run.ExecError) as e:
        run.execute(["cmd", "a"], execvp)
    assert e.value.exit_status == status
    assert str(e.value).startswith(message)
