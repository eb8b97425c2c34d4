# SPDX-License-Identifier: Apache-2.0
"""What a slice and a GPU's settings are, and which values are valid.

Shared by the configuration file, the state file, the socket API and the
backends, so that a value is checked by one rule wherever it comes from.  The
check_* functions raise ValueError with a one-line message that does not name
the field: the caller knows where the value came from and says so.  A value
of the wrong type raises TypeError, with a message of the same kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from . import sizes

MODES = ("shared", "exclusive")
POLICIES = ("fixed", "weighted", "priority", "native")
PRIORITIES = ("low", "normal", "high")

DEFAULT_MODE = "shared"
DEFAULT_POLICY = "weighted"
DEFAULT_PERIOD_MS = 20
PERIOD_MS_MIN = 1
PERIOD_MS_MAX = 1000

# As cgroup v2's cpu.weight: 1 to 10000, 100 by default.
WEIGHT_MIN = 1
WEIGHT_MAX = 10000
DEFAULT_WEIGHT = 100
DEFAULT_PRIORITY = "normal"
# 0: the slice reserves no share of the GPU's time (docs/xpud.md says what
# each policy makes of that).
DEFAULT_COMPUTE_SHARE = 0

# A limit under 1 MiB is a mistake (512 meant 512MiB), never a workload.
MEMORY_MIN = sizes.MIB

# A slice's bound on the system memory the driver allocates for its clients
# (pinned host pages, charged to no memory cgroup; docs/security.md, class
# 25): 0 is no bound, the default.
NO_HOST_MEMORY_LIMIT = 0

# Slice names become device-node names, cgroup-facing identifiers and a
# fixed-size field of the kernel ABI (XPU_NAME_LEN, 32 with the NUL): letters,
# digits, '_', '.' and '-', not starting with '.' or '-' (so never '.', '..'
# or an option), at most 31 characters.  The same rule as xpu.ko's, so that
# a slice xpud adopts from the kernel is one it accepts.
NAME_MAX = 31
_NAME_RE = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{NAME_MAX - 1}}}")

_UUID_RE = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                      r"[0-9a-f]{12}", re.IGNORECASE)

# A GPU as a person names it: its UUID (str, normalised) or its index (int).
GpuRef = Union[str, int]  # noqa: UP007 -- a run-time value on 3.9 too


def check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{name!r} is not a slice name: write a string")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"'{name}' is not a valid slice name: use 1 to {NAME_MAX} "
            "letters, digits, '_', '.' and '-', not starting with '.' or "
            "'-'")
    return name


def parse_gpu_ref(value: object) -> GpuRef:
    """A GPU's UUID ('GPU-' and 32 hex digits as NVML prints them) or its
    index (an integer, or a string of digits), as xpuctl gpus shows them."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not a GPU: write its UUID or index")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is not a GPU index (0, 1, ...)")
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        if _UUID_RE.fullmatch(text):
            return "GPU-" + text[4:].lower()
        raise ValueError(
            f"'{value}' is not a GPU: write its UUID (GPU-xxxxxxxx-...) or "
            "its index, as xpuctl gpus shows them")
    raise TypeError(f"{value!r} is not a GPU: write its UUID or index")


def check_memory(n: int, what: str = "limit", note: str = "") -> int:
    """A memory limit (WHAT) of at least 1 MiB; NOTE leads the hint."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{n!r} is not a number of bytes")
    if n < MEMORY_MIN:
        raise ValueError(
            f"{sizes.format_size(n)} is below the smallest {what}, 1MiB "
            f"({note}sizes without a unit are bytes: did you mean MiB?)")
    if n > sizes.MAX_BYTES:
        raise ValueError(f"{n} bytes is out of range")
    return n


def check_host_memory(n: int) -> int:
    """A bound on the system memory the driver allocates for a slice: 0
    for none, else at least 1 MiB (as a memory limit)."""
    if isinstance(n, int) and not isinstance(n, bool):
        if n < 0:
            raise ValueError(f"{n} is negative: give a number of bytes, or "
                             "0 for no bound")
        if n == NO_HOST_MEMORY_LIMIT:
            return n
    return check_memory(n, "bound", "0 is no bound; ")


def check_weight(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{n!r} is not a whole number")
    if not WEIGHT_MIN <= n <= WEIGHT_MAX:
        raise ValueError(f"{n} is not between {WEIGHT_MIN} and {WEIGHT_MAX}")
    return n


def check_choice(value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{value!r} is not one of " + ", ".join(choices))
    return value


def check_period_ms(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{n!r} is not a whole number of milliseconds")
    if not PERIOD_MS_MIN <= n <= PERIOD_MS_MAX:
        raise ValueError(
            f"{n} is not between {PERIOD_MS_MIN} and {PERIOD_MS_MAX} ms")
    return n


@dataclass(frozen=True)
class GpuSettings:
    """How a GPU is shared: its mode, its scheduling policy and period."""

    mode: str = DEFAULT_MODE
    policy: str = DEFAULT_POLICY
    period_ms: int = DEFAULT_PERIOD_MS


@dataclass(frozen=True)
class SliceSpec:
    """A slice as the kernel is asked to hold it.  gpu_uuid is resolved:
    backends never see an index."""

    name: str
    gpu_uuid: str
    memory_limit_bytes: int
    compute_share: int = DEFAULT_COMPUTE_SHARE  # tenths of a percent
    weight: int = DEFAULT_WEIGHT
    priority: str = DEFAULT_PRIORITY
    # Bytes of system memory the driver may allocate for the slice's
    # clients; 0: no bound.
    host_memory_limit_bytes: int = NO_HOST_MEMORY_LIMIT


# An owner tag of an ephemeral slice: printable, at most this long.
OWNER_MAX = 256


def check_owner(tag: object) -> str:
    if not isinstance(tag, str):
        raise TypeError(f"{tag!r} is not an owner tag: write a string")
    if not tag or len(tag) > OWNER_MAX or not tag.isprintable():
        raise ValueError(f"owner tag {tag!r} must be 1 to {OWNER_MAX} "
                         "printable characters")
    return tag


@dataclass(frozen=True)
class Owner:
    """What makes a slice ephemeral: the tag `release` names it by (a
    container's id), the process that must bind a cgroup to it before it
    ends (pid, with its start time against a reused pid), whether a cgroup
    was bound to it, and whether its release was asked for."""

    tag: str
    pid: int | None = None
    pid_start: int | None = None
    bound: bool = False
    released: bool = False


@dataclass(frozen=True)
class Gpu:
    """One GPU of this node, as the inventory sees it.

    index is nvidia-smi's (PCI bus order); uuid is None while the driver
    has not read it from the GPU (it prints ???); memory_total_bytes is None
    where the source does not say (/proc/driver/nvidia)."""

    index: int
    uuid: str | None
    name: str
    minor: int
    bus_id: str
    memory_total_bytes: int | None = None
    # Video memory in use on the whole GPU, in slices or not (NVML's);
    # None where the source does not say.
    memory_used_bytes: int | None = None

    def label(self) -> str:
        return f"GPU {self.index} ({self.uuid or 'no UUID'})"
