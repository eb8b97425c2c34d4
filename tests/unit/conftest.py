# SPDX-License-Identifier: Apache-2.0
"""Unit tests import xpud's package from the tree when it is not installed."""

import importlib.util
import sys
from pathlib import Path

XPUD = Path(__file__).resolve().parents[2] / "xpud"

if importlib.util.find_spec("xpu") is None:
    sys.path.insert(0, str(XPUD))
