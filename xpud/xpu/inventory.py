# SPDX-License-Identifier: Apache-2.0
"""The GPUs of this node: through NVML when it is there, else from
/proc/driver/nvidia.

NVML (the nvidia-ml-py package, imported as pynvml) needs libnvidia-ml.so,
which comes with NVIDIA's user-space driver; the VM's simulated driver has
none.  /proc/driver/nvidia/gpus/<bus id>/information is written by the kernel
driver itself (nv-procfs.c) and gives the model, UUID, bus location and minor
number, but not the memory size.

Indexes are nvidia-smi's: GPUs in PCI bus order, which is also NVML's
enumeration order.  Slices refer to GPUs by UUID, which survives a change of
slots or of the set of GPUs; an index is accepted as input and resolved here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .model import Gpu, GpuRef

DEFAULT_PROC = "/proc/driver/nvidia"

log = logging.getLogger(__name__)


class GpuNotFound(LookupError):
    """A GPU reference that matches no GPU; str() is one line for a person."""


def normalise_bus_id(bus_id: str) -> str:
    """'00000000:18:00.0' (NVML) and '0000:18:00.0' (procfs) alike become
    '0000:18:00.0'."""
    bus_id = bus_id.strip().lower()
    m = re.fullmatch(r"([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])",
                     bus_id)
    if not m:
        return bus_id
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{bus}:{dev}.{fn}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _uuid(value: str) -> str | None:
    value = value.strip()
    if re.fullmatch(r"GPU-[0-9a-fA-F-]{36}", value):
        return "GPU-" + value[4:].lower()
    return None  # the driver prints ??? before it has read the UUID


def _load_pynvml():
    import pynvml  # optional at run time: see NvmlSource
    return pynvml


class NvmlSource:
    """GPUs through NVML.  list() returns None when NVML cannot be used
    (no pynvml, no libnvidia-ml.so, no driver), with the reason in
    self.unavailable."""

    name = "nvml"

    def __init__(self, load: Callable[[], Any] = _load_pynvml):
        self._load = load
        self.unavailable = ""

    def list(self) -> list[Gpu] | None:
        try:
            nvml = self._load()
        except ImportError as e:
            self.unavailable = f"pynvml is not installed ({e})"
            return None
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            self.unavailable = f"NVML: {e}"
            return None
        try:
            gpus = []
            for i in range(nvml.nvmlDeviceGetCount()):
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                gpus.append(Gpu(
                    index=i,
                    uuid=_uuid(_text(nvml.nvmlDeviceGetUUID(h))),
                    name=_text(nvml.nvmlDeviceGetName(h)),
                    minor=int(nvml.nvmlDeviceGetMinorNumber(h)),
                    bus_id=normalise_bus_id(
                        _text(nvml.nvmlDeviceGetPciInfo(h).busId)),
                    memory_total_bytes=int(
                        nvml.nvmlDeviceGetMemoryInfo(h).total),
                    memory_used_bytes=int(
                        nvml.nvmlDeviceGetMemoryInfo(h).used)))
            return gpus
        except nvml.NVMLError as e:
            self.unavailable = f"NVML: {e}"
            return None
        finally:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError as e:
                log.debug("nvmlShutdown: %s", e)


class ProcSource:
    """GPUs from /proc/driver/nvidia/gpus/*/information."""

    name = "procfs"

    def __init__(self, root: str = DEFAULT_PROC):
        self.root = Path(root)
        self.unavailable = ""

    @staticmethod
    def parse(text: str) -> dict[str, str]:
        """'Key: value' lines; the value may hold colons (Bus Location)."""
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        return fields

    def list(self) -> list[Gpu] | None:
        gpus_dir = self.root / "gpus"
        try:
            entries = sorted(gpus_dir.iterdir())
        except FileNotFoundError:
            self.unavailable = f"{gpus_dir} does not exist: no NVIDIA driver"
            return None
        except OSError as e:
            self.unavailable = f"{gpus_dir}: {e.strerror}"
            return None
        found = []
        for entry in entries:
            info = entry / "information"
            try:
                fields = self.parse(info.read_text())
                minor = int(fields["Device Minor"])
            except (OSError, KeyError, ValueError) as e:
                log.warning("%s: cannot read the GPU's minor number (%s); "
                            "leaving it out", info, e)
                continue
            found.append((normalise_bus_id(fields.get("Bus Location",
                                                      entry.name)),
                          fields, minor))
        found.sort(key=lambda f: f[0])
        return [Gpu(index=i, uuid=_uuid(fields.get("GPU UUID", "")),
                    name=fields.get("Model", "unknown"), minor=minor,
                    bus_id=bus_id)
                for i, (bus_id, fields, minor) in enumerate(found)]


class Inventory:
    """The GPUs of this node from the first source that answers."""

    def __init__(self, sources: list | None = None):
        self.sources = sources if sources is not None else [
            NvmlSource(), ProcSource()]
        # Where the last answer came from: nvml, procfs, none; None before
        # the first.  A change is logged.
        self.source: str | None = None

    def list(self) -> list[Gpu]:
        for src in self.sources:
            gpus = src.list()
            if gpus is not None:
                if self.source != src.name:
                    log.info("GPU inventory from %s: %d GPU%s", src.name,
                             len(gpus), "" if len(gpus) == 1 else "s")
                self.source = src.name
                return gpus
        if self.source != "none":
            log.warning("no GPUs found: %s",
                        "; ".join(s.unavailable for s in self.sources))
        self.source = "none"
        return []


def resolve(ref: GpuRef, gpus: list[Gpu]) -> Gpu:
    """The GPU REF names: a UUID or an index.  Raises GpuNotFound."""
    for g in gpus:
        if (isinstance(ref, int) and g.index == ref) or g.uuid == ref:
            return g
    if not gpus:
        have = "this node has no GPU that xpud can see"
    elif len(gpus) == 1:
        have = "this node has GPU 0 only"
    else:
        have = f"this node has GPUs 0 to {len(gpus) - 1}"
    raise GpuNotFound(f"no GPU {ref}: {have} (xpuctl gpus lists them)")
