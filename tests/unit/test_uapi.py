# SPDX-License-Identifier: Apache-2.0
"""xpud's xpu/uapi.py against kmod/include/uapi/xpu.h as a C compiler sees it.

tests/tools/uapi_dump.c is compiled against the header and prints every number
and struct layout; each must equal Python's.  The header is also read as text,
so that a macro, struct or field added to it but not to the dump program fails
too, and so that the header's rules (only __u32/__u64 fields, no implicit
padding, sizes a multiple of 8) hold.
"""

import ctypes
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from xpu import uapi

TOP = Path(__file__).resolve().parents[2]
HEADER = TOP / "kmod" / "include" / "uapi" / "xpu.h"
DUMP_C = TOP / "tests" / "tools" / "uapi_dump.c"

FIELD_RE = re.compile(r"__u(32|64)\s+(\w+)\s*(?:\[\s*(\w+)\s*\])?\s*;")
UNSIGNED = {ctypes.c_uint32, ctypes.c_uint64}


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to compile tests/tools/uapi_dump.c")
    exe = tmp_path_factory.mktemp("uapi") / "uapi_dump"
    subprocess.run(
        [cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
         "-I", str(HEADER.parent), "-o", str(exe), str(DUMP_C)],
        check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def header_text():
    text = HEADER.read_text()
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)


def header_structs():
    """{struct name: [field name, ...]} as declared in the header."""
    structs = {}
    for m in re.finditer(r"struct\s+(xpu_\w+)\s*\{(.*?)\};", header_text(),
                         flags=re.DOTALL):
        fields = []
        for decl in filter(None, (d.strip() for d in m.group(2).split(";"))):
            f = FIELD_RE.fullmatch(decl + ";")
            assert f, (f"struct {m.group(1)}: '{decl}': fields must be "
                       "__u32/__u64 or arrays of them")
            fields.append(f.group(2))
        structs[m.group(1)] = fields
    return structs


def python_constants():
    return {name: getattr(uapi, name) for name in dir(uapi)
            if re.fullmatch(r"XPU_[A-Z0-9_]+", name)}


def test_dump_lists_every_macro_of_the_header(dumped):
    defined = set(re.findall(r"^\s*#\s*define\s+(XPU_\w+)", header_text(),
                             flags=re.MULTILINE))
    assert set(dumped["constants"]) == defined


def test_dump_lists_every_struct_and_field_of_the_header(dumped):
    declared = header_structs()
    assert set(dumped["structs"]) == set(declared)
    for name, fields in declared.items():
        assert [f["name"] for f in dumped["structs"][name]["fields"]] == fields


def test_constants_match(dumped):
    assert python_constants() == dumped["constants"]


def test_python_has_every_struct(dumped):
    assert set(uapi.STRUCTS) == set(dumped["structs"])


@pytest.mark.parametrize("name", sorted(uapi.STRUCTS))
def test_struct_layout_matches(dumped, name):
    cls = uapi.STRUCTS[name]
    c = dumped["structs"].get(name)
    assert c is not None, f"struct {name} is not in the header"
    assert ctypes.sizeof(cls) == c["size"]
    assert ctypes.alignment(cls) == c["align"]
    py_fields = [{"name": f[0], "offset": getattr(cls, f[0]).offset,
                  "size": getattr(cls, f[0]).size} for f in cls._fields_]
    assert py_fields == c["fields"]
    for fname, ftype in cls._fields_:
        base = getattr(ftype, "_type_", ftype) if issubclass(
            ftype, ctypes.Array) else ftype
        assert base in UNSIGNED, f"{name}.{fname} must be c_uint32/c_uint64"


@pytest.mark.parametrize("name", sorted(uapi.STRUCTS))
def test_struct_follows_the_header_rules(dumped, name):
    c = dumped["structs"][name]
    assert c["size"] % 8 == 0, f"struct {name}: size is not a multiple of 8"
    end = 0
    for f in c["fields"]:
        assert f["offset"] == end, (f"struct {name}: implicit padding before "
                                    f"{f['name']}: make it explicit")
        end = f["offset"] + f["size"]
    assert end == c["size"], f"struct {name}: implicit padding at the end"
