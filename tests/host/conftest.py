# SPDX-License-Identifier: Apache-2.0
"""Host-integration tests: install tree, units, udev rules, DKMS, kernels.

They run on the development host (no VM), need root only where they say so,
and leave the host as they found it.
"""

import pytest
from hostutil import installed_kernels


@pytest.fixture(scope="session")
def kver() -> str:
    rels = installed_kernels()
    if not rels:
        pytest.skip("no kernel headers in /lib/modules (tests/setup installs them)")
    return rels[0]
