# SPDX-License-Identifier: Apache-2.0
"""Helpers of the host-integration tests (tests/host)."""

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def installed_kernels() -> list[str]:
    """Releases with headers in /lib/modules, generic ones first."""
    rels = [Path(p).parent.name for p in glob.glob("/lib/modules/*/build")
            if Path(p, "Makefile").exists()]
    return sorted(rels, key=lambda r: ("-rt-" in r, r))


def run(cmd, **kw) -> subprocess.CompletedProcess:
    """Run CMD in the repository; stdout and stderr together in .stdout."""
    kw.setdefault("cwd", REPO)
    return subprocess.run(cmd, check=False, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kw)


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")


def debian_kernel(series: str) -> Path | None:
    """The tree of a Debian kernel of another suite (tests/vm/debian-kernel:
    5.10, 6.12, newest), fetched if need be; None when it cannot be had."""
    r = subprocess.run([str(REPO / "tests/vm/debian-kernel"), series], check=False,
                       text=True, capture_output=True)
    return Path(r.stdout.strip()) if r.returncode == 0 else None


def kernel_cc(kdir) -> list[str]:
    """make's CC=gcc when the compiler KDIR's kernel names is not on this
    host (Debian 11's 5.10 headers name gcc-10), as the Makefile decides."""
    cfg = Path(kdir, ".config").read_text(errors="replace")
    m = re.search(r'^CONFIG_CC_VERSION_TEXT="([A-Za-z0-9_.-]*gcc[0-9.-]*) ', cfg, re.MULTILINE)
    return ["CC=gcc"] if m and not shutil.which(m.group(1)) else []
