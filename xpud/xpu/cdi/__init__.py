# SPDX-License-Identifier: Apache-2.0
"""Containers: xpu's slices as CDI devices, and an OCI runtime that gives a
container a slice asked for in its environment (docs/containers.md).

Like nvidia-container-toolkit's pkg/nvcdi, the spec is made by a pure
function and written by a separate, atomic step:

    spec.build_spec(slices, options=SpecOptions(), nvidia_spec=None) -> dict
        The CDI spec of SLICES, a list of API Slice objects (docs/api.md,
        what `list` returns): one device per ready slice, named after it,
        whose edits put the slice's nodes at /dev/nvidiactl and
        /dev/nvidia<minor>, set XPU_SLICE=<name>, and add a createRuntime
        hook that binds the container's cgroup to the slice.  OPTIONS
        (spec.SpecOptions) gives the vendor, the hook's path, xpud's socket
        and the host's extra nodes (/dev/nvidia-uvm...); NVIDIA_SPEC,
        NVIDIA's own parsed spec, lends its library mounts and hooks (never
        its device nodes).  cdiVersion is the lowest the fields allow.
    spec.device_edits(slice, options) -> dict
        The containerEdits of one slice's device.
    spec.minimum_version(spec) -> str
        The lowest cdiVersion that allows SPEC's fields.
    device_name(kind, slice_name) -> str
        "xpu.dev/slice=train": what `podman run --device` takes.
    kind(vendor) -> str
        "xpu.dev/slice".
    writer.SpecWriter(directory).write(spec) / .remove()
        The atomic step: a temporary file in the same directory, fsync,
        rename, fsync of the directory.

The rest: refresh.py keeps xpud's spec file current (xpud calls it after
every change); oci.py applies CDI edits to an OCI config.json and reads a
container's XPU_* variables; runtime.py is xpu-container-runtime, hook.py
xpu-cdi-hook; simpleyaml.py reads and writes the YAML that CDI specs use.
They depend on xpud's API (xpu.api, xpu.client), never on other faces.
"""

from __future__ import annotations

DEFAULT_VENDOR = "xpu.dev"
CLASS = "slice"
SPEC_FILE = "xpu.json"
DEFAULT_SPEC_DIR = "/var/run/cdi"
HOOK_NAME = "xpu-cdi-hook"
RUNTIME_NAME = "xpu-container-runtime"


def kind(vendor: str = DEFAULT_VENDOR) -> str:
    """The CDI kind of xpu's devices: VENDOR/slice."""
    return f"{vendor}/{CLASS}"


def device_name(kind: str, slice_name: str) -> str:
    """The fully qualified CDI device name of a slice: KIND=NAME."""
    return f"{kind}={slice_name}"
