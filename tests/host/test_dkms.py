# SPDX-License-Identifier: Apache-2.0
"""A real DKMS cycle against the installed headers: `make dkms-install`
(dkms add, build, install) and `make dkms-remove`, with KVER given, since
the running kernel need not have headers. The host is left as it was: the
module, the DKMS tree, /usr/src/xpu-VERSION, and the MOK key pair dkms
makes on first use unless it existed before.

And the same against Debian 11's 5.10 and Debian 12's 6.12 headers
(tests/vm/debian-kernel), with the driver itself a DKMS module as on GPU
hosts: the stub, registered as the package "nvstub", which exports
nvidia_get_rm_ops as nvidia.ko does. Those cycles use DKMS trees of their own
(dkms's --sourcetree, --dkmstree, --installtree), so nothing of the host's
DKMS is touched."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hostutil import REPO, debian_kernel, kernel_cc, need_root, run

VERSION = re.search(r'^PACKAGE_VERSION="([^"]+)"', (REPO / "dkms.conf").read_text(),
                    re.MULTILINE).group(1)
MOK = [Path("/var/lib/dkms/mok.key"), Path("/var/lib/dkms/mok.pub")]


def dkms_status(kver: str) -> str:
    return run(["dkms", "status", f"xpu/{VERSION}", "-k", kver]).stdout


def test_dkms_conf_has_no_deprecated_fields():
    """None of the fields dkms 3 warns about, nor MAKE/CLEAN (dkms's own
    commands build the flat source), and a minimum kernel stated."""
    text = (REPO / "dkms.conf").read_text()
    fields = set(re.findall(r"^([A-Z_]+)(?:\[\d+\])?=", text, re.MULTILINE))
    assert fields == {"PACKAGE_NAME", "PACKAGE_VERSION", "BUILT_MODULE_NAME",
                      "DEST_MODULE_LOCATION", "AUTOINSTALL", "BUILD_EXCLUSIVE_KERNEL",
                      "BUILD_EXCLUSIVE_KERNEL_MIN", "BUILD_EXCLUSIVE_ARCH"}
    assert 'BUILD_EXCLUSIVE_KERNEL_MIN="5.10"' in text


@pytest.mark.parametrize("release, built", [
    ("6.1.0-56-amd64", True), ("6.1.0-56-rt-amd64", True), ("6.12.117+deb12-amd64", True),
    ("5.10.0-46-amd64", True), ("5.14.0-427.13.1.el9_4.x86_64", True),
    ("5.15.0-91-generic", True), ("6.8.0-45-generic", True), ("7.3.4+deb13-amd64", True),
    ("6.0.12-amd64", True), ("10.1.0", True), ("6.10.3", True),
    ("5.9.16", False), ("5.4.0-150-generic", False), ("5.1.0", False),
    ("4.19.0-1-amd64", False), ("4.18.0-553.el8_10.x86_64", False)])
def test_minimum_kernel_regex(release, built):
    rx = re.search(r'^BUILD_EXCLUSIVE_KERNEL="([^"]+)"', (REPO / "dkms.conf").read_text(),
                   re.MULTILINE).group(1)
    # dkms matches with bash's [[ =~ ]], an extended regular expression.
    r = subprocess.run(["bash", "-c", '[[ $1 =~ $2 ]]', "_", release, rx], check=False)
    assert (r.returncode == 0) == built


def test_dkms_cycle(kver):
    need_root()
    if not shutil.which("dkms"):
        pytest.skip("dkms is not installed (tests/setup installs it)")
    if Path(f"/var/lib/dkms/xpu/{VERSION}").exists() or Path(f"/usr/src/xpu-{VERSION}").exists():
        pytest.skip(f"xpu/{VERSION} is registered with DKMS on this host already")
    mok_before = [p.exists() for p in MOK]
    ko = Path(f"/lib/modules/{kver}/updates/dkms/xpu.ko")
    try:
        r = run(["make", "--no-print-directory", "dkms-install", f"KVER={kver}"])
        assert r.returncode == 0, r.stdout
        assert re.search(rf"^xpu/{re.escape(VERSION)}, {re.escape(kver)}, x86_64: installed$",
                         dkms_status(kver), re.MULTILINE), dkms_status(kver)
        assert ko.is_file()
        vermagic = run(["modinfo", "-F", "vermagic", str(ko)]).stdout.split()
        assert vermagic[0] == kver
        dep = Path(f"/lib/modules/{kver}/modules.dep").read_text()
        assert "updates/dkms/xpu.ko:" in dep, "depmod did not run"
        # The DKMS source is dkms.conf and kmod/'s sources only.
        src = sorted(p.name for p in Path(f"/usr/src/xpu-{VERSION}").iterdir())
        assert "dkms.conf" in src and "Kbuild" in src and not any(
            n.endswith((".o", ".ko")) for n in src)
    finally:
        r = run(["make", "--no-print-directory", "dkms-remove", f"KVER={kver}"])
        for p, existed in zip(MOK, mok_before):
            if not existed:
                p.unlink(missing_ok=True)
    assert r.returncode == 0, r.stdout
    assert dkms_status(kver).strip() == ""
    assert not ko.exists()
    assert not Path(f"/usr/src/xpu-{VERSION}").exists()
    assert not Path(f"/var/lib/dkms/xpu/{VERSION}").exists()
    assert "xpu.ko" not in Path(f"/lib/modules/{kver}/modules.dep").read_text()


# The "driver" package: the stub as NVIDIA's own DKMS packages ship their
# driver, built in a subdirectory (NVIDIA's kernel-open/, here tests/nvstub/
# beside the kmod/ headers it shares).  POST_BUILD keeps the Module.symvers
# modpost made, which dkms deletes with the build directory: the test's
# oracle for the version xpu.ko must carry.
DRIVER_CONF = """PACKAGE_NAME="nvstub"
PACKAGE_VERSION="1.0"
BUILT_MODULE_NAME[0]="nvstub"
BUILT_MODULE_LOCATION[0]="tests/nvstub/"
DEST_MODULE_LOCATION[0]="/updates/dkms"
AUTOINSTALL="yes"
MAKE[0]="make -C ${kernel_source_dir} M=${dkms_tree}/nvstub/1.0/build/tests/nvstub modules"
CLEAN="make -C ${kernel_source_dir} M=${dkms_tree}/nvstub/1.0/build/tests/nvstub clean"
POST_BUILD="keep-symvers"
"""


def driver_package(src: Path, oracle: Path) -> None:
    pkg = src / "nvstub-1.0"
    for sub, pats in (("tests/nvstub", ("*.c", "*.h", "Kbuild")),
                      ("kmod", ("*.h", "*.sh", "*.mk"))):
        (pkg / sub).mkdir(parents=True)
        for pat in pats:
            for f in (REPO / sub).glob(pat):
                if f.name != "conftest.h":
                    shutil.copy(f, pkg / sub / f.name)
    (pkg / "dkms.conf").write_text(DRIVER_CONF)
    keep = pkg / "keep-symvers"
    keep.write_text(f"#!/bin/sh\ncp tests/nvstub/Module.symvers {oracle}\n")
    keep.chmod(0o755)


def symvers_crc(text: str, sym: str = "nvidia_get_rm_ops") -> int:
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1] == sym:
            return int(f[0], 16)
    raise AssertionError(f"{sym} not in {text!r}")


@pytest.mark.parametrize("series", ["5.10", "6.12"])
def test_dkms_cycle_after_the_driver_s_own_dkms_module(series, tmp_path):
    """`make dkms-install` against another Debian's headers on a host where
    the driver is a DKMS module: BUILD_DEPENDS names it, xpu.ko is built
    against the module it installed (its nvidia_get_rm_ops version is the
    one the driver's build recorded, and modinfo says it depends on it),
    and `make dkms-remove` takes xpu out again, leaving the driver."""
    need_root()
    if not shutil.which("dkms"):
        pytest.skip("dkms is not installed (tests/setup installs it)")
    root = debian_kernel(series)
    if root is None:
        pytest.skip(f"Debian's {series} kernel cannot be fetched (tests/setup fetches it)")
    kver = root.name
    kdir = root / "lib" / "modules" / kver / "build"
    src, tree, sysroot = tmp_path / "src", tmp_path / "dkms", tmp_path / "root"
    inst = sysroot / "lib" / "modules"
    (inst / kver).mkdir(parents=True)
    tree.mkdir()
    oracle = tmp_path / "driver.symvers"
    driver_package(src, oracle)
    mok_before = [p.exists() for p in MOK]
    # The kernel's compiler, or gcc (5.10's gcc-10 is not in Debian 12); as
    # a make command-line variable it reaches the builds dkms runs.
    cc = kernel_cc(kdir)
    env = dict(os.environ, MAKEFLAGS=" ".join(cc))
    dkms = ["dkms", "--sourcetree", str(src), "--dkmstree", str(tree),
            "--installtree", str(inst), "--no-depmod"]
    mk = ["make", "--no-print-directory", f"KVER={kver}", f"KDIR={kdir}",
          f"DKMS_SOURCETREE={src}", f"DKMS_TREE={tree}", f"DKMS_INSTALLTREE={inst}",
          "DKMS_OPTS=--no-depmod", f"NVIDIA_MODULES_ROOT={sysroot}", *cc]
    try:
        for verb in ("add", "build", "install"):
            r = run([*dkms, verb, "nvstub/1.0", *(["-k", kver, "--kernelsourcedir", str(kdir)]
                                                   if verb != "add" else [])], env=env)
            assert r.returncode == 0, r.stdout
        # dkms's own depmod would read the host's /lib/modules: ours, here
        r = run(["depmod", "-b", str(sysroot), kver])
        assert r.returncode == 0, r.stdout
        crc = symvers_crc(oracle.read_text())
        assert crc != 0, "Debian's kernels have MODVERSIONS: the driver's export has a CRC"

        r = run([*mk, "dkms-install"])
        assert r.returncode == 0, r.stdout
        assert 'BUILD_DEPENDS[0]="nvstub"' in r.stdout, r.stdout
        conf = (src / f"xpu-{VERSION}" / "dkms.conf").read_text()
        assert conf.rstrip().endswith('BUILD_DEPENDS[0]="nvstub"'), conf
        status = run([*dkms, "status", "-k", kver]).stdout
        for m in ("nvstub/1.0", f"xpu/{VERSION}"):
            assert re.search(rf"^{re.escape(m)}, {re.escape(kver)}, x86_64: installed$",
                             status, re.MULTILINE), status
        ko = inst / kver / "updates" / "dkms" / "xpu.ko"
        assert ko.is_file(), sorted(p.name for p in ko.parent.iterdir())
        info = {k: run(["modinfo", "-F", k, str(ko)]).stdout.strip()
                for k in ("vermagic", "depends")}
        assert info["vermagic"].split()[0] == kver, info
        assert info["depends"] == "nvstub", info
        versions = run(["modprobe", "--dump-modversions", str(ko)]).stdout
        assert symvers_crc(versions) == crc, versions   # "0xCRC<TAB>name" lines
    finally:
        r = run([*mk, "dkms-remove"])
        run([*dkms, "remove", "nvstub/1.0", "--all"])
        for p, existed in zip(MOK, mok_before):
            if not existed:
                p.unlink(missing_ok=True)
    assert r.returncode == 0, r.stdout
    assert not (inst / kver / "updates" / "dkms" / "xpu.ko").exists()
    assert not (src / f"xpu-{VERSION}").exists()
    assert not (tree / "xpu").exists()
