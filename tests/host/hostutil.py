# SPDX-License-Identifier: Apache-2.0
"""Helpers of the host-integration tests (tests/host)."""

import glob
import os
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
