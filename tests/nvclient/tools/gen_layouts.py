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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "tests"))

from nvclient import abi

DEFAULT_VERSIONS = ["535.288.01", "550.163.01", "570.211.01", "580.126.20"]
FIXTURES = os.path.join(REPO, "tests", "fixtures", "nvidia-abi")

HEADER_DIRS = ["src/common/sdk/nvidia/inc", "kernel-open/common/inc",
               "src/nvidia/arch/nvalloc/unix/include"]
INCLUDES = ["nvtypes.h", "nvstatus.h", "nvos.h", "nv-ioctl.h", "nv-chardev-numbers.h", "nv_escape.h", "class/cl00c2.h", "nv-ioctl-numa.h",
            "class/cl0000.h", "class/cl0002.h", "class/cl0005.h", "class/cl0040.h", "class/cl003e.h", "class/cl0070.h", "class/cl50a0.h", "class/cl90f1.h",
            "class/cl9067.h", "class/cla06c.h", "class/clc36f.h", "class/clc86f.h", "class/clc361.h", "class/clc661.h",
            "class/clcbc0.h", "class/clc8b5.h", "class/cl900e.h", "class/clc46f.h", "ctrl/ctrla06f/ctrla06fgpfifo.h",
            "nv-unix-nvos-params-wrappers.h", "class/cl0080.h",
            "class/cl2080.h", "ctrl/ctrl2080/ctrl2080fb.h",
            "ctrl/ctrl2080/ctrl2080gpu.h", "alloc/alloc_channel.h",
            "ctrl/ctrla06c.h", "ctrl/ctrlc36f.h", "rs_access.h",
            "ctrl/ctrl0000/ctrl0000client.h", "ctrl/ctrl0000/ctrl0000unix.h",
            "class/clc365.h", "ctrl/ctrl0000/ctrl0000gpu.h",
            "ctrl/ctrl0080/ctrl0080fifo.h", "class/cl0071.h",
            "ctrl/ctrl0002.h", "class/cl90cd.h", "class/cl003f.h",
            "class/cl00b1.h", "class/cla084.h", "ctrl/ctrl0041.h"]


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
    for h in INCLUDES:
        out += [f"#if __has_include(<{h}>)", f"#include <{h}>", "#endif"]
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
    for name, value in sorted(vars(abi).items()):
        if (name.isupper() and isinstance(value, int)
                and not name.startswith(("_", "IOCTL_"))
                and name not in abi.NV_STATUS):
            out.append(f'#ifdef {name}')
            out.append(f'printf("const {name}=0x%x\\n", (unsigned)({name}));')
            out.append('#endif')
    for name in ("NV2080_CTRL_FB_INFO_MAX_LIST_SIZE", "NV2080_CTRL_FB_INFO_INDEX_MAX",
                 "sizeof(NVOS46_PARAMETERS)", "sizeof(NVOS47_PARAMETERS)"):
        out.append(f'printf("vconst {name}=0x%x\\n", (unsigned)({name}));')
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
        r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, check=False)
        if r.returncode:
            sys.exit(r.stderr[:3000])
        body = subprocess.run([exe], check=True, stdout=subprocess.PIPE,
                              text=True).stdout
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
