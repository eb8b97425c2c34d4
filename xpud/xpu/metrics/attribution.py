# SPDX-License-Identifier: Apache-2.0
"""Who uses a slice: extra labels on the per-slice metrics.

The exporter knows slices, GPUs and the node; which Kubernetes pod and
container a slice was given to is known only to the Kubernetes parts of xpu
(issue 21), which plug an Attribution in (MetricsServer(attribution=...) or
set_attribution()).  With none, the slice metrics carry no such labels.

An Attribution names its labels once (label_names, e.g. ("namespace",
"pod", "container"), as dcgm-exporter names them) and is asked once per
scrape, with the Usage of that scrape, for each slice's values.  It must
answer from what it already knows (a cache of its own), never by waiting
on a remote API: the scrape waits for it.  A slice it does not name gets
empty values; an exception costs that scrape its labels (logged), never
the scrape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol

from ..usage import Usage

_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class Attribution(Protocol):
    label_names: tuple[str, ...]

    def labels(self, usage: Usage) -> Mapping[str, Mapping[str, str]]:
        """{slice name: {label name: value}} for the slices of USAGE that
        this attribution knows."""


def check_label_names(names: tuple[str, ...], taken: tuple[str, ...]) -> None:
    """ValueError unless NAMES are valid Prometheus label names, distinct,
    and none of TAKEN (the exporter's own)."""
    for n in names:
        if not _LABEL_RE.fullmatch(n) or n.startswith("__"):
            raise ValueError(f"'{n}' is not a Prometheus label name")
        if n in taken:
            raise ValueError(f"label '{n}' is the exporter's own")
    if len(set(names)) != len(names):
        raise ValueError(f"labels named twice: {names}")
