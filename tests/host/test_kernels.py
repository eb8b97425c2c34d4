# SPDX-License-Identifier: Apache-2.0
"""xpu.ko and the stub build with -Werror and without a modpost warning
against every kernel of the matrix (tests/host/build-kernels): Debian 12's
6.1 headers (generic and PREEMPT_RT), Debian 11's 5.10 and Debian 12's 6.12
headers (tests/vm/debian-kernel), and the newest Debian kernel's source
(trixie-backports) prepared by tests/host/kernel-tree. And the compile
probes (kmod/conftest.sh) answer as the kernels' histories say they must:
each feature present from the release that brought it, absent before.
"""

import os
import re

import pytest
from hostutil import REPO, installed_kernels, run

# probe -> the first release that has it (kmod/conftest.sh cites the change)
SINCE = {"linux_hex_h": (6, 4), "vm_flags_set": (6, 3), "release_fault_lock": (6, 6),
         "zap_special_vma_range": (7, 1), "module_import_ns_string": (6, 13),
         "vm_ops_mprotect": (5, 11)}


@pytest.fixture(scope="module")
def builds():
    if not installed_kernels():
        pytest.skip("no kernel headers in /lib/modules (tests/setup installs them)")
    r = run([str(REPO / "tests/host/build-kernels")])
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("ok ", "FAIL "))]
    return r, {ln.split()[1]: ln for ln in lines}


def test_every_tree_builds(builds):
    r, by_release = builds
    assert r.returncode == 0, r.stdout
    assert by_release and all(ln.startswith("ok ") for ln in by_release.values()), r.stdout


KINDS = {
    "generic 6.1": lambda rel, ln: rel.startswith("6.1.") and "-rt-" not in rel,
    "PREEMPT_RT 6.1": lambda rel, ln: rel.startswith("6.1.") and " preempt_rt " in ln,
    "Debian 11 5.10": lambda rel, ln: rel.startswith("5.10."),
    "Debian 12 6.12": lambda rel, ln: rel.startswith("6.12."),
    "newest": lambda rel, ln: version(rel) >= (7, 1),
}


def version(rel: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", rel)
    return (int(m.group(1)), int(m.group(2)))


@pytest.mark.parametrize("kind", KINDS)
def test_kernel_built(builds, kind):
    _, by_release = builds
    hits = [ln for rel, ln in by_release.items() if KINDS[kind](rel, ln)]
    assert hits and all(ln.startswith("ok ") for ln in hits), by_release


def test_the_probes_answer_by_each_kernel_s_history(builds):
    _, by_release = builds
    assert len(by_release) >= len(KINDS), by_release
    for rel, ln in by_release.items():
        found = set(ln.split("probes:", 1)[1].split()) - {"none"}
        want = {p for p, since in SINCE.items() if version(rel) >= since}
        assert found == want, (rel, ln)
        # what the stub was given is what xpu.ko was
        stub = (REPO / ".vm-cache/kbuild" / rel / "tests/nvstub/conftest.h").read_text()
        kmod = (REPO / ".vm-cache/kbuild" / rel / "kmod/conftest.h").read_text()
        assert stub == kmod, rel


def test_no_core_file_tests_a_kernel_version():
    """Kernel differences live in kmod/compat.h, decided by probes: no
    LINUX_VERSION_CODE anywhere, no XPU_HAVE_ outside compat.h."""
    files = [f for d in ("kmod", "tests/nvstub") for f in sorted((REPO / d).glob("*.[ch]"))
             if f.name != "conftest.h"]
    assert any(f.name == "compat.h" for f in files)
    for f in files:
        text = f.read_text()
        directives = [ln for ln in text.splitlines() if re.match(r"\s*#\s*(if|elif)", ln)]
        assert not [ln for ln in directives if re.search(r"LINUX_VERSION_CODE|KERNEL_VERSION",
                                                          ln)], f
        if f.name != "compat.h":
            assert "XPU_HAVE_" not in text, f
    assert os.access(REPO / "kmod/conftest.sh", os.X_OK)
