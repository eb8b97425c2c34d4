# SPDX-License-Identifier: Apache-2.0
"""`make install DESTDIR=... PREFIX=...` and `make uninstall`: the tree, and
that each installed file is accepted by the tool that reads it."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hostutil import REPO, run

PREFIX = "/opt/xpu"
PYLIB = f"{PREFIX}/lib/xpu/python"

# Every file `make install` writes outside the Python library directory.
EXPECTED = {
    "lib/modules/{kver}/extra/xpu.ko",
    "opt/xpu/bin/xpud",
    "opt/xpu/bin/xpuctl",
    "opt/xpu/bin/xpu-container-runtime",
    "opt/xpu/bin/xpu-cdi-hook",
    "opt/xpu/bin/xpu-k8s",
    "opt/xpu/lib/systemd/system/xpud.service",
    "opt/xpu/lib/systemd/system/xpu-cdi-refresh.service",
    "opt/xpu/lib/systemd/system/xpu-cdi-refresh.path",
    "opt/xpu/lib/systemd/system/xpu-k8s.service",
    "opt/xpu/lib/udev/rules.d/60-xpu.rules",
    "opt/xpu/lib/modules-load.d/xpu.conf",
    "opt/xpu/lib/modprobe.d/xpu.conf",
    "opt/xpu/lib/tmpfiles.d/xpu.conf",
    "opt/xpu/lib/sysusers.d/xpu.conf",
    "opt/xpu/share/bash-completion/completions/xpuctl",
    "opt/xpu/share/doc/xpu/xpud.toml.example",
    "opt/xpu/share/doc/xpu/README.md",
    "opt/xpu/share/doc/xpu/xpud.md",
    "opt/xpu/share/doc/xpu/api.md",
    "opt/xpu/share/doc/xpu/kubernetes.md",
    "opt/xpu/share/doc/xpu/containers.md",
    "etc/xpu/xpud.toml",
}


LAUNCHERS = ("xpud", "xpuctl", "xpu-container-runtime", "xpu-cdi-hook",
             "xpu-k8s")


def files_under(root: Path, skip: str = "") -> set[str]:
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            if not (skip and rel.startswith(skip)):
                out.add(rel)
    return out


@pytest.fixture(scope="module")
def dest(tmp_path_factory, kver):
    d = tmp_path_factory.mktemp("destdir")
    r = run(["make", "--no-print-directory", "install", f"DESTDIR={d}",
             f"PREFIX={PREFIX}", f"KVER={kver}"])
    assert r.returncode == 0, r.stdout
    return d


def launcher(dest: Path, name: str, tmp_path: Path) -> Path:
    """The installed launcher, pointed at DESTDIR's copy of the library."""
    text = (dest / PREFIX.lstrip("/") / "bin" / name).read_text()
    p = tmp_path / name
    p.write_text(text.replace(PYLIB, str(dest) + PYLIB))
    p.chmod(0o755)
    return p


def test_tree(dest, kver):
    want = {p.format(kver=kver) for p in EXPECTED}
    assert files_under(dest, skip=PYLIB.lstrip("/")) == want
    lib = dest / PYLIB.lstrip("/")
    for mod in ("xpu/__init__.py", "xpu/daemon.py",
                "xpu/metrics/__init__.py", "xpu/cdi/runtime.py",
                "pyudev", "pyroute2", "sdnotify", "pynvml.py", "ioctl_opt",
                "prometheus_client", "grpc", "google/protobuf",
                "xpu/k8s/_proto/deviceplugin_v1beta1.proto",
                "xpu/k8s/_proto/deviceplugin_v1beta1_pb2.py"):
        assert (lib / mod).exists(), mod
    ko = dest / f"lib/modules/{kver}/extra/xpu.ko"
    vermagic = subprocess.run(["modinfo", "-F", "vermagic", str(ko)],
                              check=True, capture_output=True, text=True).stdout
    assert vermagic.split()[0] == kver
    for name in LAUNCHERS:
        assert os.access(dest / PREFIX.lstrip("/") / "bin" / name, os.X_OK)
    # pip built from a copy: nothing left in the source tree.
    assert not (REPO / "xpud/build").exists()


def test_unit_paths_follow_prefix(dest):
    unit = (dest / "opt/xpu/lib/systemd/system/xpud.service").read_text()
    assert f"ExecStart={PREFIX}/bin/xpud\n" in unit
    assert f"file://{PREFIX}/share/doc/xpu/xpud.md" in unit
    assert "/usr/bin/xpud" not in unit
    refresh = (dest / "opt/xpu/lib/systemd/system/"
               "xpu-cdi-refresh.service").read_text()
    assert f"ExecStart={PREFIX}/bin/xpuctl cdi refresh\n" in refresh


def test_launchers_run(dest, tmp_path):
    for name in LAUNCHERS:
        p = launcher(dest, name, tmp_path)
        first = p.read_text().splitlines()[0]
        assert first == "#!/usr/bin/python3 -I", first
        r = run([str(p), "--help"], env={"PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stdout
        assert f"usage: {name}" in r.stdout


def test_default_config_is_valid(dest):
    cfg = dest / "etc/xpu/xpud.toml"
    assert cfg.read_bytes() == (REPO / "packaging/xpud.toml").read_bytes()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from xpu import config; "
            "c = config.load(sys.argv[2]); print(c.defaults.mode, len(c.slices))")
    r = run(["/usr/bin/python3", "-I", "-c", code, str(dest) + PYLIB, str(cfg)])
    assert r.returncode == 0, r.stdout
    assert r.stdout.split() == ["shared", "0"]


def test_modprobe_softdep(dest):
    r = run(["modprobe", "-c", "-C", str(dest / "opt/xpu/lib/modprobe.d")])
    assert "softdep xpu pre: nvidia" in r.stdout.splitlines(), r.stdout
    lines = (dest / "opt/xpu/lib/modules-load.d/xpu.conf").read_text().splitlines()
    assert [ln for ln in lines if ln and not ln.startswith("#")] == ["xpu"]


def test_tmpfiles_and_sysusers(dest, tmp_path):
    if not shutil.which("systemd-tmpfiles"):
        pytest.skip("systemd-tmpfiles is not installed")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    r = run(["systemd-tmpfiles", f"--root={root}", "--create",
             str(dest / "opt/xpu/lib/tmpfiles.d/xpu.conf")])
    assert r.returncode == 0 and r.stdout == "", r.stdout
    for d in ("var/lib/xpu", "etc/cdi", "run/cdi"):
        assert (root / d).is_dir(), d
    r = run(["systemd-sysusers", f"--root={root}",
             str(dest / "opt/xpu/lib/sysusers.d/xpu.conf")])
    assert r.returncode == 0, r.stdout
    groups = [ln.split(":")[0] for ln in (root / "etc/group").read_text().splitlines()]
    assert "xpu" in groups


def test_edited_config_survives_reinstall_and_uninstall(tmp_path, kver):
    d = tmp_path / "d"
    common = [f"DESTDIR={d}", f"PREFIX={PREFIX}", f"KVER={kver}", "PYDEPS=system"]
    r = run(["make", "--no-print-directory", "install-tools", *common])
    assert r.returncode == 0, r.stdout
    cfg = d / "etc/xpu/xpud.toml"
    cfg.write_text('[defaults]\nmode = "exclusive"\n')
    r = run(["make", "--no-print-directory", "install-tools", *common])
    assert r.returncode == 0, r.stdout
    assert "KEEP" in r.stdout
    assert cfg.read_text() == '[defaults]\nmode = "exclusive"\n'
    r = run(["make", "--no-print-directory", "uninstall", *common])
    assert r.returncode == 0, r.stdout
    assert files_under(d) == {"etc/xpu/xpud.toml"}


def test_uninstall_removes_an_unedited_config(tmp_path, kver):
    d = tmp_path / "d"
    common = [f"DESTDIR={d}", f"PREFIX={PREFIX}", f"KVER={kver}", "PYDEPS=system"]
    assert run(["make", "--no-print-directory", "install-tools", *common]).returncode == 0
    assert (d / "etc/xpu/xpud.toml").exists()
    r = run(["make", "--no-print-directory", "uninstall", *common])
    assert r.returncode == 0, r.stdout
    assert files_under(d) == set()
