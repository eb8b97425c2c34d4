# SPDX-License-Identifier: Apache-2.0
"""xpu.ko's link to the driver on the kernel the VM booted (run on every
kernel of the matrix, docs/testing.md): the stub exports nvidia_get_rm_ops
as NVIDIA's nvidia.ko does, with plain EXPORT_SYMBOL, which symbol_get()
refuses from 6.6; xpu.ko links against it instead, with the version the
export has, and holds the driver while it is loaded."""

import os
import platform
import re
import subprocess

import pytest

SYM = "nvidia_get_rm_ops"


@pytest.fixture(scope="module", autouse=True)
def _modules(require_xpu):
    for var in ("XPU_NVSTUB_KO", "XPU_KO"):
        if not os.environ.get(var):
            pytest.skip(f"{var} is not set: run under tests/vm/run")


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True,
                          text=True).stdout


def test_the_running_kernel_is_the_one_the_modules_were_built_for():
    for var in ("XPU_NVSTUB_KO", "XPU_KO"):
        magic = subprocess.run(["modinfo", "-F", "vermagic", os.environ[var]], check=True,
                               capture_output=True, text=True).stdout.split()
        assert magic[0] == platform.release(), (var, magic)


def test_the_stub_exports_the_rm_interface_plainly_as_nvidia_does():
    ko = os.environ["XPU_NVSTUB_KO"]
    syms = {f[7]: f[6] for f in (ln.split() for ln in readelf("-s", ko).splitlines())
            if len(f) >= 8}
    assert f"__ksymtab_{SYM}" in syms, "not exported"
    ndx = syms[f"__ksymtab_{SYM}"]
    sections = dict(re.findall(r"^\s*\[\s*(\d+)\]\s+(\S+)", readelf("-S", ko), re.MULTILINE))
    # __ksymtab (6.x) or ___ksymtab+nvidia_get_rm_ops (5.10); _gpl if GPL-only
    assert "ksymtab" in sections[ndx] and "gpl" not in sections[ndx], sections[ndx]


def test_xpu_links_against_it_with_its_version_and_holds_the_driver():
    assert os.path.exists("/sys/module/nvstub/holders/xpu"), \
        "xpu.ko holds no reference on the driver"
    depends = subprocess.run(["modinfo", "-F", "depends", os.environ["XPU_KO"]], check=True,
                             capture_output=True, text=True).stdout.strip()
    assert depends == "nvstub"
    # The version xpu.ko was built with is the one the loader compared with
    # the stub's export, and accepted (xpu is loaded): on a MODVERSIONS kernel
    # a non-zero CRC, the same as the stub's build recorded.
    versions = subprocess.run(["modprobe", "--dump-modversions", os.environ["XPU_KO"]],
                              check=False, capture_output=True, text=True).stdout
    crcs = [ln.split()[0] for ln in versions.splitlines() if ln.split()[1:] == [SYM]]
    symvers = os.path.join(os.path.dirname(os.environ["XPU_NVSTUB_KO"]), "Module.symvers")
    with open(symvers) as f:
        stub = [ln.split()[0] for ln in f if ln.split()[1:2] == [SYM]]
    if versions.strip():        # a MODVERSIONS kernel (Debian's 5.10 to 6.12)
        assert crcs == stub and int(stub[0], 16) != 0, (crcs, stub)
    else:                       # none (Debian 13's): no version to agree on
        assert stub == ["0x00000000"], stub
    # The driver cannot go while xpu.ko uses it.
    r = subprocess.run(["rmmod", "nvstub"], check=False, capture_output=True, text=True)
    assert r.returncode != 0 and os.path.exists("/sys/module/nvstub"), r.stderr
