# SPDX-License-Identifier: Apache-2.0
"""xpud's xpu/uapi.py against kmod/include/uapi/xpu.h as a C compiler sees it.

tests/tools/uapi_dump.c is compiled against the header and prints every number
and struct layout; each must equal Python's.  The header is also read as text,
so that a macro, struct or field added to it but not to the dump program fails
too, so that each Python field has the C type the header declares, and so that
the header's rules hold: fields are __u32, __s32, __u64, arrays of __u32 or
__u64, or __u8 arrays of a multiple of 8 bytes (strings); padding is
explicit; every __u64 sits at a multiple of 8; every size is a multiple of 8.
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

FIELD_RE = re.compile(
    r"(__u8|__u32|__s32|__u64)\s+(\w+)\s*(?:\[\s*(\w+)\s*\])?\s*;")
# The C type of each field kind, and its ctypes twin.
CTYPES = {"__u8": ctypes.c_uint8, "__u32": ctypes.c_uint32,
          "__s32": ctypes.c_int32, "__u64": ctypes.c_uint64}
# Kinds that may stand alone; __u8 only comes as an array (a string).
SCALAR = ("__u32", "__s32", "__u64")
ARRAY = ("__u8", "__u32", "__u64")


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


def header_struct_decls():
    """{struct name: [(C type, field name, array length or None), ...]} as
    declared in the header; the length as written (a number or a macro)."""
    structs = {}
    for m in re.finditer(r"struct\s+(xpu_\w+)\s*\{(.*?)\};", header_text(),
                         flags=re.DOTALL):
        fields = []
        for decl in filter(None, (d.strip() for d in m.group(2).split(";"))):
            f = FIELD_RE.fullmatch(decl + ";")
            assert f, (f"struct {m.group(1)}: '{decl}': fields must be "
                       "__u32, __s32, __u64, or arrays of __u8, __u32, "
                       "__u64")
            fields.append((f.group(1), f.group(2), f.group(3)))
        structs[m.group(1)] = fields
    return structs


def header_structs():
    """{struct name: [field name, ...]} as declared in the header."""
    return {name: [f[1] for f in fields]
            for name, fields in header_struct_decls().items()}


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


def _ctype_of(ftype):
    """(element ctypes type, array length or None) of a ctypes field type."""
    if issubclass(ftype, ctypes.Array):
        return ftype._type_, ftype._length_
    return ftype, None


def _length(text, constants):
    return int(text, 0) if text[0].isdigit() else constants[text]


@pytest.mark.parametrize("name", sorted(uapi.STRUCTS))
def test_struct_field_types_match(dumped, name):
    """Same C type field by field: the layout alone does not tell __u32
    from __s32, nor __u8[8] from __u64."""
    decls = header_struct_decls()
    assert name in decls, f"struct {name} is not in the header"
    cls = uapi.STRUCTS[name]
    assert [f[0] for f in cls._fields_] == [d[1] for d in decls[name]]
    for (fname, ftype), (ctype, _, length) in zip(cls._fields_, decls[name]):
        base, n = _ctype_of(ftype)
        assert base is CTYPES[ctype], (
            f"{name}.{fname}: the header says {ctype}, Python has "
            f"{base.__name__}")
        want = None if length is None else _length(length,
                                                   dumped["constants"])
        assert n == want, f"{name}.{fname}: array length {n}, header {want}"


@pytest.mark.parametrize("name", sorted(header_structs()))
def test_struct_follows_the_header_rules(dumped, name):
    c = dumped["structs"][name]
    assert c["size"] % 8 == 0, f"struct {name}: size is not a multiple of 8"
    for (ctype, fname, length), f in zip(header_struct_decls()[name],
                                         c["fields"]):
        if length is None:
            assert ctype in SCALAR, (f"struct {name}: {ctype} {fname}: a "
                                     f"{ctype} must be an array")
        else:
            assert ctype in ARRAY, (f"struct {name}: {fname}: no arrays of "
                                    f"{ctype}")
            n = _length(length, dumped["constants"])
            assert n > 0, f"struct {name}: {fname}[{length}] is empty"
            if ctype == "__u8":
                assert n % 8 == 0, (f"struct {name}: __u8 {fname}[{n}]: the "
                                    "length must be a multiple of 8")
        if ctype == "__u64":
            assert f["offset"] % 8 == 0, (
                f"struct {name}: __u64 {fname} at offset {f['offset']}, not "
                "a multiple of 8 (32-bit callers would place it elsewhere)")
    end = 0
    for f in c["fields"]:
        assert f["offset"] == end, (f"struct {name}: implicit padding before "
                                    f"{f['name']}: make it explicit")
        end = f["offset"] + f["size"]
    assert end == c["size"], f"struct {name}: implicit padding at the end"
