#!/usr/bin/env python3
"""Compute, from NVIDIA's own headers, the layout of every struct abi.py defines.

For each driver version, extracts the headers from a git mirror of
NVIDIA/open-gpu-kernel-modules, compiles a program that prints sizeof and
offsetof/sizeof of every field abi.py declares (by the same C names), and the
value of every status code abi.py names.  The result,
tests/fixtures/nvidia-abi/layouts-nvclient-<version>.txt, is what
tests/unit/test_nvclient_abi.py compares abi.py with; the shared layouts-*.txt
files beside it are checked too, and take precedence.

Usage: gen_layouts.py MIRROR_GIT_DIR [VERSION...]
"""

import ctypes
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests"))

from nvclient import abi  # noqa: E402

DEFAULT_VERSIONS = ["535.288.01", "550.163.01", "570.211.01", "580.126.20"]
FIXTURES = os.path.join(REPO, "tests", "fixtures", "nvidia-abi")

HEADER_DIRS = ["src/common/sdk/nvidia/inc", "kernel-open/common/inc",
               "src/nvidia/arch/nvalloc/unix/include"]
INCLUDES = ["nvtypes.h", "nvstatus.h", "nvos.h", "nv-ioctl.h",
            "nv-unix-nvos-params-wrappers.h", "class/cl0080.h",
            "class/cl2080.h", "ctrl/ctrl2080/ctrl2080fb.h",
            "ctrl/ctrl2080/ctrl2080gpu.h", "alloc/alloc_channel.h",
            "ctrl/ctrla06c.h", "ctrl/ctrlc36f.h"]


def field_paths(cls, prefix=""):
    """(path, ctypes field) for every named field, recursing into aggregates."""
    for name, ftype, *_ in cls._fields_:
        if name.startswith("_"):
            continue
        path = prefix + name
        yield path
        if (isinstance(ftype, type)
                and issubclass(ftype, (ctypes.Structure, ctypes.Union))):
            yield from field_paths(ftype, path + ".")


def c_program(structs):
    out = ["#include <stdio.h>", "#include <stddef.h>"]
    out += [f"#include <{h}>" for h in INCLUDES]
    out += ["int main(void) {"]
    for cls in structs:
        cname = abi.c_name(cls)
        out.append(f'printf("{cname} sizeof=%zu\\n", sizeof({cname}));')
        for path in field_paths(cls):
            out.append(
                f'printf("  %-36s off %3zu size %3zu\\n", "{path}", '
                f'offsetof({cname}, {path}), '
                f'sizeof((({cname} *)0)->{path}));')
    for name in abi.NV_STATUS:
        out.append(f'printf("status {name}=0x%x\\n", (unsigned){name});')
    out += ["return 0;", "}"]
    return "\n".join(out) + "\n"


def extract_headers(mirror, version, dest):
    blob = subprocess.run(["git", "-C", mirror, "archive", version]
                          + HEADER_DIRS, check=True,
                          stdout=subprocess.PIPE).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest)


def generate(mirror, version):
    structs = abi.for_version(version).structs()
    with tempfile.TemporaryDirectory() as tmp:
        extract_headers(mirror, version, tmp)
        src = os.path.join(tmp, "layouts.c")
        exe = os.path.join(tmp, "layouts")
        with open(src, "w") as f:
            f.write(c_program(structs))
        cmd = ["gcc", "-std=gnu11", "-w", "-o", exe, src]
        cmd += ["-I" + os.path.join(tmp, d) for d in HEADER_DIRS]
        subprocess.run(cmd, check=True)
        body = subprocess.run([exe], check=True, stdout=subprocess.PIPE,
                              universal_newlines=True).stdout
    header = (f"# x86_64 layouts of the structs tests/nvclient/abi.py defines,"
              f" compiled by tests/nvclient/tools/gen_layouts.py from\n"
              f"# NVIDIA/open-gpu-kernel-modules {version} headers with gcc"
              f" (field offset size)\n")
    path = os.path.join(FIXTURES, f"layouts-nvclient-{version}.txt")
    with open(path, "w") as f:
        f.write(header + body)
    return path


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    for version in argv[2:] or DEFAULT_VERSIONS:
        print(generate(argv[1], version))


if __name__ == "__main__":
    main(sys.argv)
