# SPDX-License-Identifier: Apache-2.0
"""xpu.ko builds with -Werror and without a modpost warning against every
kernel tree here: Debian's 6.1 headers (generic and PREEMPT_RT) and Debian's
linux-source-6.12 prepared with modules_prepare (tests/host/build-kernels).
"""

import os

import pytest
from hostutil import REPO, installed_kernels, run


@pytest.fixture(scope="module")
def builds():
    if not installed_kernels():
        pytest.skip("no kernel headers in /lib/modules (tests/setup installs them)")
    if not os.path.exists("/usr/src/linux-source-6.12.tar.xz"):
        pytest.skip("linux-source-6.12 is not installed (tests/setup installs it)")
    r = run([str(REPO / "tests/host/build-kernels")])
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("ok ", "FAIL "))]
    return r, {ln.split()[1]: ln for ln in lines}


def test_every_tree_builds(builds):
    r, by_release = builds
    assert r.returncode == 0, r.stdout
    assert by_release and all(ln.startswith("ok ") for ln in by_release.values()), r.stdout


@pytest.mark.parametrize("kind", ["generic 6.1", "PREEMPT_RT 6.1", "6.12 source"])
def test_kernel_built(builds, kind):
    _, by_release = builds
    want = {"generic 6.1": lambda rel, ln: rel.startswith("6.1.") and "-rt-" not in rel,
            "PREEMPT_RT 6.1": lambda rel, ln: rel.startswith("6.1.") and " preempt_rt " in ln,
            "6.12 source": lambda rel, ln: rel.startswith("6.12.")}[kind]
    hits = [ln for rel, ln in by_release.items() if want(rel, ln)]
    assert hits and all(ln.startswith("ok ") for ln in hits), by_release
