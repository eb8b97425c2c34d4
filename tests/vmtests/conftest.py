# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the conformance suite of nvstub.ko (run inside the VM as root).

    tests/vm/run -- .venv/bin/python -m pytest -q tests/vmtests

The rig loads the stub (and xpu.ko unless --no-xpu), makes the device nodes
and exports XPU_NVSTUB_KO, XPU_NVSTUB_PARAMS, XPU_KO and XPU_KO_PARAMS.  The
whole directory is skipped elsewhere (not root, or no /dev/nvidiactl).
"""

import gc
import os
import sys
import time
import warnings

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nvtest
from nvclient import abi, client, stub


@pytest.fixture(scope="session", autouse=True)
def _require_stub():
    if os.geteuid() != 0:
        pytest.skip("the nvstub conformance suite runs as root in the VM")
    if not os.path.exists(abi.NV_CTL_PATH):
        pytest.skip(f"{abi.NV_CTL_PATH} is missing: is nvstub.ko loaded?")


@pytest.fixture(scope="module")
def require_xpu():
    """Skips a module of xpu.ko's tests where the rig did not load it."""
    if not os.path.exists("/dev/xpuctl"):
        pytest.skip("xpu.ko is not loaded")


@pytest.fixture(autouse=True)
def leak_check(_require_stub):
    """Every test leaves the stub's object and heap counters where it found
    them: whatever a test allocates is freed by the time its files close,
    or soon after where xpu.ko lets go of a destroyed slice's last
    reference from a work item (UVM's retentions, retain.c): the slice's
    probe client goes with the slice (kmod/ledger.c)."""
    gc.collect()
    before = nvtest.snapshot()
    yield
    gc.collect()
    after = [None]

    def settled():
        after[0] = nvtest.snapshot()
        return after[0] == before

    start = time.monotonic()
    try:
        nvtest.wait_for(settled, 10, "the stub's counters to settle")
    except AssertionError:
        pass
    if after[0] == before and time.monotonic() - start > 0.1:
        warnings.warn(f"the stub's counters settled "
                      f"{time.monotonic() - start:.1f} s after the test")
    assert after[0] == before, "the stub's live objects/heap changed over " \
        f"the test: before {before}, after {after[0]}"


@pytest.fixture
def config():
    """The loaded stub's configuration (gpus, memory_mib, version, ...)."""
    return nvtest.StubConfig.current()


@pytest.fixture
def reload_stub():
    """reload_stub(**params): reload nvstub.ko with other parameters.

    Unloads xpu.ko first if it is loaded; at teardown the stub is reloaded
    with the rig's parameters and xpu.ko re-inserted.  Every NVIDIA file the
    test opened must be closed before calling it (rmmod refuses otherwise)."""
    if not os.environ.get("XPU_NVSTUB_KO"):
        pytest.skip("XPU_NVSTUB_KO is not set: run under tests/vm/run")
    loader = nvtest.Loader()
    yield loader.reload
    gc.collect()
    loader.restore()


@pytest.fixture
def uvm_nodes():
    """/dev/nvidia-uvm{,-tools}, made for the test and removed after it."""
    made = nvtest.make_uvm_nodes()
    yield made
    for path in made:
        if os.path.exists(path):
            os.unlink(path)


@pytest.fixture
def ctl(_require_stub):
    with client.Ctl() as c:
        yield c


@pytest.fixture
def rm(ctl):
    rm = client.RmClient(ctl)
    yield rm
    if not ctl.closed:
        rm.close()


@pytest.fixture
def dev0(rm):
    dev = rm.device(0)
    yield dev
    dev.close()


@pytest.fixture
def gpu0(_require_stub):
    with client.GpuFile(0) as g:
        yield g


__all__ = ["stub"]
