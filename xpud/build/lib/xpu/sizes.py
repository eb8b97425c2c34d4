# SPDX-License-Identifier: Apache-2.0
"""Memory sizes and compute shares as people write them.

Sizes take binary units only: a number of bytes, or a number with KiB, MiB,
GiB or TiB (also written Ki, Mi, Gi, Ti as Kubernetes does; any case), e.g.
``512MiB``, ``8GiB``, ``1.5GiB``.  ``8G`` and ``8GB`` are refused, not guessed:
GB means 10^9 bytes to a disk vendor and 2^30 to many tools, the two differ by
7 %, and a memory limit that is silently 7 % off is worse than an error.  GPU
memory is reported in binary units (nvidia-smi prints MiB), so that is what a
limit is written in.

Compute shares are percentages of a GPU in steps of 0.1 %: ``25``, ``25%``,
``12.5%``.  They are kept as an integer number of tenths of a percent
(per mille), so that sums are exact.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

# The largest size the kernel's __u64 fields can carry; Python's ints cannot
# overflow, the ABI can.
MAX_BYTES = (1 << 64) - 1

_IEC = {"": 1, "b": 1,
        "k": None, "kb": None, "ki": KIB, "kib": KIB,
        "m": None, "mb": None, "mi": MIB, "mib": MIB,
        "g": None, "gb": None, "gi": GIB, "gib": GIB,
        "t": None, "tb": None, "ti": TIB, "tib": TIB}

_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")
_UNITS_HINT = "a number of bytes, or a number with KiB, MiB, GiB or TiB"

SHARE_MAX = 1000  # per mille: 100 %


def parse_size(text: str | int) -> int:
    """Return the number of bytes TEXT stands for.

    Raises ValueError with a one-line message fit for a person."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise TypeError(f"{text!r} is not a size: write {_UNITS_HINT}")
    if isinstance(text, int):
        n = text
    else:
        m = _SIZE_RE.fullmatch(text)
        if not m:
            raise ValueError(
                f"'{text}' is not a size: write {_UNITS_HINT}, e.g. 512MiB")
        number, unit = m.groups()
        key = unit.lower()
        if key not in _IEC:
            raise ValueError(f"'{text}': unknown unit '{unit}' "
                             f"(write {_UNITS_HINT})")
        mult = _IEC[key]
        if mult is None:
            binary = unit[0].upper() + "iB"
            raise ValueError(
                f"'{text}' is ambiguous ({unit} may mean powers of 1000 or of "
                f"1024): write {number}{binary} for binary units, or the "
                f"number of bytes")
        exact = Decimal(number) * mult
        if exact != exact.to_integral_value():
            raise ValueError(f"'{text}' is not a whole number of bytes")
        n = int(exact)
    if n < 0 or n > MAX_BYTES:
        raise ValueError(f"{n} bytes is out of range (0 to 2^64-1)")
    return n


def format_size(n: int) -> str:
    """A short, readable form of N bytes: 8GiB, 1.5GiB, 1025MiB, 100B.

    Exact where it can be: in the largest unit with up to two decimals, or
    in a smaller unit as a whole number below 10000.  Otherwise cut (not
    rounded: a limit never shows more than it is) to two decimals, which are
    then always shown: 7.99GiB, 1.00TiB."""
    units = [(u, m) for u, m in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB),
                                 ("KiB", KIB)) if n >= m]
    if not units:
        return f"{n}B"
    unit, mult = units[0]
    hundredths, rest = divmod(n * 100, mult)
    if rest == 0:
        text = f"{hundredths // 100}.{hundredths % 100:02d}"
        return text.rstrip("0").rstrip(".") + unit
    for u, m in units[1:]:
        if n % m == 0 and n // m < 10000:
            return f"{n // m}{u}"
    if n < 10000:
        return f"{n}B"
    return f"{hundredths // 100}.{hundredths % 100:02d}{unit}"


_SHARE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*%?\s*")


def parse_share(value: str | float) -> int:
    """Return the compute share VALUE stands for, in tenths of a percent.

    VALUE is a percentage from 0 to 100 in steps of 0.1: 25, "25%", 12.5,
    "12.5%".  Floats are taken at the decimal they print as, so 12.5 is
    exact and 0.1 + 0.2 is accepted as 0.3.  Raises ValueError, or
    TypeError for a value of another type."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(f"{value!r} is not a percentage")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a percentage")
        tenths = Decimal(repr(value)) * 10
        rounded = tenths.to_integral_value()
        # Tolerate the binary noise of a float computed by a client.
        if abs(tenths - rounded) > Decimal("0.000001"):
            raise ValueError(f"{value}% is finer than the 0.1 % steps of "
                             "compute shares")
    else:
        m = _SHARE_RE.fullmatch(value)
        if not m:
            raise ValueError(f"'{value}' is not a percentage: write a number "
                             "from 0 to 100, e.g. 25 or 12.5%")
        try:
            tenths = Decimal(m.group(1)) * 10
        except InvalidOperation as e:  # cannot happen after the regex
            raise ValueError(f"'{value}' is not a percentage") from e
        rounded = tenths.to_integral_value()
        if tenths != rounded:
            raise ValueError(f"'{value}' is finer than the 0.1 % steps of "
                             "compute shares")
    share = int(rounded)
    if share < 0 or share > SHARE_MAX:
        raise ValueError(f"{format_share(share)} is not between 0 and 100%")
    return share


def share_percent(share: int) -> float | int:
    """The percentage for SHARE (tenths of a percent) as a JSON number:
    an int when whole (25), else a float with one decimal (12.5)."""
    if share % 10 == 0:
        return share // 10
    return share / 10


def format_share(share: int) -> str:
    """12.5%, 25%."""
    return f"{share_percent(share)}%"
