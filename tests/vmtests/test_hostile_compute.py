# SPDX-License-Identifier: Apache-2.0
"""Hostile tenants against compute gating (issue 17, docs/compute.md).

Three ways around the doorbell gate, each under fixed and weighted, a 10 %
hostile slice beside a 90 % honest one that saturates the engine:

- manymaps: the hostile process maps the usermode region 71 times (each a
  fresh GPU file, RM_MAP_MEMORY, mmap) and rings through the last mapping.
  Every doorbell file of a slice must be zapped, not only the first 64.
- kwrite: before each doorbell write the hostile process has the kernel read
  the doorbell page (a write(2) into a pipe from it).  A kernel-mode fault
  must not re-install the page of a slice that waits: the write fails with
  EFAULT, counts as demand, and the user-mode doorbell write still faults.

- rostruct: the hostile process maps the usermode region once more with
  the RM_MAP_MEMORY struct on a read-only page (RM makes the mapping's
  context, then the driver's copy-back fails with EFAULT) and rings through
  that mapping.  What RM did counts, not what the ioctl returned: the file
  is a doorbell file all the same.

Under fixed the channels' lever alone holds the slice; under weighted an
escaped doorbell makes the slice look idle, so it would run beside the other.
Shares are the simulated engine's busy counters, as in test_xpu_compute.py,
with its tolerances."""

import pytest
from test_xpu_compute import LOSS, TOL, admin, nodedir, policy, run, slices  # noqa: F401

uapi = pytest.importorskip("xpu.uapi")

pytestmark = pytest.mark.usefixtures("require_xpu")


@pytest.mark.parametrize("pol", [uapi.XPU_POLICY_FIXED,
                                 uapi.XPU_POLICY_WEIGHTED],
                         ids=["fixed", "weighted"])
@pytest.mark.parametrize("mode", ["manymaps", "kwrite", "rostruct"])
def test_a_hostile_slice_is_held_to_its_share(admin, slices, mode,  # noqa: F811
                                              pol):
    policy(admin, pol)
    slices.make(100, mode=mode)
    slices.make(900)
    shares, _, results = run(slices)
    assert shares[0] <= 0.10 + TOL, shares
    assert shares[1] >= 0.90 - LOSS, shares
    if mode == "kwrite":
        # the kernel's read of a waiting slice's doorbell page failed
        assert results[0]["efault"] > 0, results[0]
