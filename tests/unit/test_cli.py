# SPDX-License-Identifier: Apache-2.0
"""The command lines of xpuctl and xpud: --help, --version and their errors.

No root and no kernel module: the device is a path that does not exist,
/dev/null (which knows no xpu command), or a file whose ioctl is faked.
"""

import ctypes
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import xpu
from xpu import ctl, uapi

TOP = Path(__file__).resolve().parents[2]
PROGS = [("xpuctl", "xpu.cli"), ("xpud", "xpu.daemon")]
# The container programs (their command lines: tests/unit/xpud/test_cdi_*).
CONTAINER_PROGS = [("xpu-container-runtime", "xpu.cdi.runtime"),
                   ("xpu-cdi-hook", "xpu.cdi.hook")]


@pytest.fixture(params=PROGS, ids=[p for p, _ in PROGS])
def prog(request):
    name, module = request.param
    return name, importlib.import_module(module)


def test_help(prog, capsys):
    name, mod = prog
    with pytest.raises(SystemExit) as e:
        mod.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {name} ")
    assert "--version" in out
    assert ("--foreground" if name == "xpud" else "create") in out


def test_nothing_to_do_is_a_usage_error(prog, capsys, monkeypatch):
    name, mod = prog
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    with pytest.raises(SystemExit) as e:
        mod.main([])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{name}: error: ") and err.count("\n") == 1
    assert err.endswith(f"(see {name} --help)\n")


def test_version_without_the_module(prog, capsys, tmp_path):
    name, mod = prog
    missing = tmp_path / "xpuctl"
    assert mod.main(["--version", "--device", str(missing)]) == 1
    out, err = capsys.readouterr()
    assert out == f"{name} {xpu.__version__}\n"
    assert err == (f"{name}: error: {missing} does not exist: "
                   "is xpu.ko loaded?\n")


def test_version_on_a_device_that_is_not_xpu(prog, capsys):
    name, mod = prog
    assert mod.main(["--version", "--device", "/dev/null"]) == 1
    out, err = capsys.readouterr()
    assert out == f"{name} {xpu.__version__}\n"
    assert err.count("\n") == 1
    assert err.startswith(f"{name}: error: /dev/null does not know "
                          "XPU_IOC_VERSION")


def test_version_with_debug_shows_the_traceback(prog, capsys, tmp_path):
    name, mod = prog
    assert mod.main(["--version", "--debug",
                     "--device", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.endswith(f"{name}: error: {tmp_path / 'none'} does not exist: "
                        "is xpu.ko loaded?\n")


def test_version_reports_the_kernel_module(prog, capsys, tmp_path,
                                           monkeypatch):
    name, mod = prog
    dev = tmp_path / "xpuctl"
    dev.touch()
    calls = []

    def fake_ioctl(fd, cmd, arg):
        calls.append((cmd, arg.argsz, arg.flags))
        arg.api, arg.major, arg.minor, arg.patch = uapi.XPU_API_VERSION, 1, 2, 3
        return 0

    monkeypatch.setattr(ctl.fcntl, "ioctl", fake_ioctl)
    assert mod.main(["--version", "--device", str(dev)]) == 0
    assert calls == [(uapi.XPU_IOC_VERSION, ctypes.sizeof(uapi.XpuVersion), 0)]
    out, err = capsys.readouterr()
    assert out == (f"{name} {xpu.__version__}\n"
                   f"xpu.ko 1.2.3 (api {uapi.XPU_API_VERSION})\n")
    assert err == ""


def test_unexpected_errors_are_one_line(prog, capsys, tmp_path, monkeypatch):
    name, mod = prog
    dev = tmp_path / "xpuctl"
    dev.touch()

    def broken_ioctl(fd, cmd, arg):
        raise ValueError("boom")

    monkeypatch.setattr(ctl.fcntl, "ioctl", broken_ioctl)
    assert mod.main(["--version", "--device", str(dev)]) == 1
    err = capsys.readouterr().err
    assert err == (f"{name}: internal error: ValueError: boom "
                   "(run with --debug for details)\n")


@pytest.mark.parametrize("module", [m for _, m in PROGS])
def test_run_as_a_program(module, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(TOP / "xpud"), env.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, "-m", module, "--version",
                        "--device", str(tmp_path / "none")],
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 1
    assert r.stdout.endswith(f" {xpu.__version__}\n")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_entry_points_name_these_mains():
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((TOP / "xpud" / "pyproject.toml").read_text())
    scripts = meta["project"]["scripts"]
    # xpu-k8s (tests/unit/k8s) takes subcommands, not these programs' options.
    assert scripts.pop("xpu-k8s") == "xpu.k8s.main:main"
    assert scripts == {name: f"{module}:main"
                       for name, module in PROGS + CONTAINER_PROGS}
