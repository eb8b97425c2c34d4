# SPDX-License-Identifier: Apache-2.0
"""A real DKMS cycle against the installed headers: `make dkms-install`
(dkms add, build, install) and `make dkms-remove`, with KVER given, since
the running kernel need not have headers. The host is left as it was: the
module, the DKMS tree, /usr/src/xpu-VERSION, and the MOK key pair dkms
makes on first use unless it existed before."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hostutil import REPO, need_root, run

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
    assert 'BUILD_EXCLUSIVE_KERNEL_MIN="6.1"' in text


@pytest.mark.parametrize("release, built", [
    ("6.1.0-56-amd64", True), ("6.1.0-56-rt-amd64", True), ("6.12.117+deb12-amd64", True),
    ("6.0.12-amd64", False), ("5.10.0-30-amd64", False), ("4.19.0-1-amd64", False),
    ("10.1.0", True), ("6.10.3", True)])
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
