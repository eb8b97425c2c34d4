# SPDX-License-Identifier: Apache-2.0
"""The names xpu gives Kubernetes, and how a request turns into a slice.

Resources (docs/kubernetes.md):
  VENDOR/slice        one whole slice that exists on the node (made with
                      xpuctl or the configuration file); device ID = its name
  VENDOR/xpu-memory   video memory in units of MEMORY_UNIT (1 MiB by default)
  VENDOR/xpu-shares   compute in units of 1 % of one GPU's time

A container's xpu-memory and xpu-shares make one slice on one GPU: memory
units x MEMORY_UNIT bytes, xpu-shares percent of compute.  CDI devices are
named VENDOR/slice=SLICE (one per slice; xpud's CDI spec, docs/containers).
"""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal, InvalidOperation

from .. import cdi, sizes

DEFAULT_VENDOR = cdi.DEFAULT_VENDOR
SLICE_SUFFIX = "slice"
MEMORY_SUFFIX = "xpu-memory"
SHARES_SUFFIX = "xpu-shares"
DEFAULT_MEMORY_UNIT = sizes.MIB
SHARES_PER_GPU = 100
# The DRA driver's name (its DeviceClasses select it).
DEFAULT_DRIVER = DEFAULT_VENDOR

# The names of the slices xpu-k8s makes, reserved to it: what it may
# destroy, and what it never offers as a whole slice.  Not xpud's `owner`
# tag: that makes a slice ephemeral, gone when its container ends, and a
# pod's container may be restarted into the same slice.
DP_SLICE = re.compile(r"k8s-[0-9a-f]{16}")        # the device plugin's
DRA_SLICE = re.compile(r"dra-[0-9a-f]{12}-[0-9]+")  # the DRA driver's

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def check_vendor(vendor: str) -> str:
    """A vendor domain: a DNS subdomain of lower-case labels, e.g. xpu.dev."""
    labels = vendor.split(".")
    if (len(vendor) > 63 or len(labels) < 2
            or not all(_DNS_LABEL.fullmatch(x) for x in labels)):
        raise ValueError(f"'{vendor}' is not a vendor domain: write a DNS "
                         "name of lower-case labels, e.g. xpu.dev")
    return vendor


class Names:
    """The resource and CDI names for one vendor domain."""

    def __init__(self, vendor: str = DEFAULT_VENDOR):
        self.vendor = check_vendor(vendor)
        self.slice = f"{vendor}/{SLICE_SUFFIX}"
        self.memory = f"{vendor}/{MEMORY_SUFFIX}"
        self.shares = f"{vendor}/{SHARES_SUFFIX}"
        self.cdi_kind = cdi.kind(vendor)

    def cdi_device(self, slice_name: str) -> str:
        """The CDI device of SLICE_NAME in the spec xpud writes (xpu.cdi:
        one device per slice); xpud's [cdi] vendor must be VENDOR."""
        return cdi.device_name(self.cdi_kind, slice_name)


def parse_memory_unit(text: str) -> int:
    n = sizes.parse_size(text)
    if n < sizes.MIB or n % sizes.MIB:
        raise ValueError(f"'{text}' is not a memory unit: a whole number of "
                         "MiB, at least 1MiB")
    return n


def ids_hash(ids) -> str:
    """A short stable name for a set of device IDs."""
    h = hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()
    return h[:16]


def dp_slice(ids) -> str:
    """The slice the device plugin makes for a container's xpu-memory
    devices IDS: the same name for the same devices (a repeated Allocate
    finds it)."""
    return "k8s-" + ids_hash(ids)


def dra_slice(claim_uid: str, i: int) -> str:
    return f"dra-{claim_uid.replace('-', '')[:12].lower()}-{i}"


def is_ours(name: str) -> bool:
    return bool(DP_SLICE.fullmatch(name) or DRA_SLICE.fullmatch(name))


def quantity(value) -> int:
    """An integer resource quantity as Kubernetes writes it in a pod's
    requests and limits ("4096", 4096, "1k").  Extended resources are whole
    numbers; anything else raises ValueError."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = re.fullmatch(r"([0-9]+)(k|M|G|T|Ki|Mi|Gi|Ti)?", str(value).strip())
        if not m:
            raise ValueError(f"'{value}' is not a whole quantity")
        mult = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[m[2]]
        n = int(m[1]) * mult
    if n < 0:
        raise ValueError(f"{value!r} is negative")
    return n


_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
           "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": Decimal("0.001")}


def parse_quantity(text) -> Decimal:
    """A Kubernetes quantity ("1Gi", "512Mi", "25", "1.5G", "500m") as a
    number.  Raises ValueError."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Decimal(text)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPEm]?)",
                     str(text).strip())
    if not m:
        raise ValueError(f"'{text}' is not a quantity")
    try:
        return Decimal(m[1]) * _SUFFIX[m[2]]
    except InvalidOperation:
        raise ValueError(f"'{text}' is not a quantity") from None
