# SPDX-License-Identifier: Apache-2.0
"""tests/nvclient/abi.py against layouts compiled from NVIDIA's headers.

Two kinds of fixture, both computed by compiling NVIDIA/open-gpu-kernel-modules
headers with gcc on x86_64 (tests/fixtures/nvidia-abi/):
- layouts-<version>.txt: the project's shared reference (selected structs);
- layouts-nvclient-<version>.txt: every struct and field abi.py defines, by the
  same C names (tests/nvclient/tools/gen_layouts.py).
Every size and offset abi.py defines must agree with both.
"""

import ctypes
import os
import re
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)

from nvclient import abi

FIXTURES = os.path.join(TESTS, "fixtures", "nvidia-abi")
SHARED_VERSIONS = ["535.288.01", "550.163.01", "570.211.01", "580.126.20",
                   "595.45.04"]
NVCLIENT_VERSIONS = ["535.288.01", "550.163.01", "570.211.01", "580.126.20"]

# Short names in the shared files' status line.
SHARED_STATUS_NAMES = {
    "NV_OK": "NV_OK", "NO_MEMORY": "NV_ERR_NO_MEMORY",
    "INSUFF_RES": "NV_ERR_INSUFFICIENT_RESOURCES",
    "INVALID_ARG": "NV_ERR_INVALID_ARGUMENT",
    "INSUFF_PERM": "NV_ERR_INSUFFICIENT_PERMISSIONS",
    "NOT_SUPPORTED": "NV_ERR_NOT_SUPPORTED",
    "INVALID_CLIENT": "NV_ERR_INVALID_CLIENT",
    "INVALID_OBJECT": "NV_ERR_INVALID_OBJECT",
}


class Layouts:
    """Parsed layouts file: sizes, field (offset, size), status codes."""

    def __init__(self):
        self.sizes = {}         # C type -> sizeof
        self.fields = {}        # (C type, field path) -> (offset, size)
        self.status = {}        # NV_ERR_* name -> value
        self.consts = {}        # macro name -> value
        self.vconsts = {}       # version-dependent macro/sizeof -> value


_HEAD_RE = re.compile(r"^(\w+) sizeof=(\d+)$")
_FIELD_RE = re.compile(r"^\s+([\w.]+)\s+off\s+(\d+)\s+size\s+(\d+)$")
_SIZE_RE = re.compile(r"^(\w+)=(\d+)$")
_DOTTED_RE = re.compile(r"^\s+(\w+)\.([\w.]+) @(\d+) \((\d+)\)$")
_STATUS_RE = re.compile(r"^status (\w+)=(0x[0-9a-f]+)$")
_CONST_RE = re.compile(r"^const (\w+)=(0x[0-9a-f]+)$")
_VCONST_RE = re.compile(r"^vconst ([\w()]+)=(0x[0-9a-f]+)$")


def parse_layouts(path):
    out = Layouts()
    current = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith("NV_OK="):
                for tok in line.split():
                    name, value = tok.split("=")
                    out.status[SHARED_STATUS_NAMES[name]] = int(value, 16)
                continue
            m = _STATUS_RE.match(line)
            if m:
                out.status[m.group(1)] = int(m.group(2), 16)
                continue
            m = _CONST_RE.match(line)
            if m:
                out.consts[m.group(1)] = int(m.group(2), 16)
                continue
            m = _VCONST_RE.match(line)
            if m:
                out.vconsts[m.group(1)] = int(m.group(2), 16)
                continue
            m = _HEAD_RE.match(line)
            if m:
                current = m.group(1)
                out.sizes[current] = int(m.group(2))
                continue
            m = _FIELD_RE.match(line)
            if m:
                out.fields[(current, m.group(1))] = (int(m.group(2)),
                                                     int(m.group(3)))
                continue
            m = _SIZE_RE.match(line)
            if m:
                current = m.group(1)
                out.sizes[current] = int(m.group(2))
                continue
            m = _DOTTED_RE.match(line)
            if m:
                out.fields[(m.group(1), m.group(2))] = (int(m.group(3)),
                                                        int(m.group(4)))
                continue
            raise AssertionError(f"{path}: unparsed line {line!r}")
    return out


def shared(version):
    return parse_layouts(os.path.join(FIXTURES, f"layouts-{version}.txt"))


def nvclient(version):
    return parse_layouts(os.path.join(FIXTURES,
                                      f"layouts-nvclient-{version}.txt"))


def field_layout(cls, prefix="", base=0):
    """{path: (offset, size)} of every named field of a ctypes aggregate."""
    out = {}
    for name, ftype, *_ in cls._fields_:
        desc = getattr(cls, name)
        off = base + desc.offset
        if not name.startswith("_"):
            out[prefix + name] = (off, desc.size)
        if (isinstance(ftype, type)
                and issubclass(ftype, (ctypes.Structure, ctypes.Union))):
            out.update(field_layout(ftype, prefix + name + ".", off))
    return out


def structs_of(version):
    return {abi.c_name(cls): cls for cls in abi.for_version(version).structs()}


@pytest.mark.parametrize("version", NVCLIENT_VERSIONS)
def test_every_struct_matches_the_compiled_headers(version):
    ref = nvclient(version)
    for cname, cls in structs_of(version).items():
        assert cname in ref.sizes, f"{cname} missing from the fixture"
        assert ctypes.sizeof(cls) == ref.sizes[cname], cname
        for path, layout in field_layout(cls).items():
            assert ref.fields.get((cname, path)) == layout, \
                f"{version} {cname}.{path}: abi {layout}, " \
                f"headers {ref.fields.get((cname, path))}"


@pytest.mark.parametrize("version", SHARED_VERSIONS)
def test_structs_match_the_shared_reference(version):
    ref = shared(version)
    mine = structs_of(version)
    checked = 0
    for cname, size in ref.sizes.items():
        if cname not in mine:
            continue    # a struct abi.py does not define
        cls = mine[cname]
        assert ctypes.sizeof(cls) == size, f"{version} {cname}"
        layout = field_layout(cls)
        checked += 1
        for (owner, path), (off, fsize) in ref.fields.items():
            if owner != cname:
                continue
            assert path in layout, f"{version} {cname}.{path} not in abi"
            assert layout[path] == (off, fsize), f"{version} {cname}.{path}"
    # The shared files name these; all must have been compared.
    assert checked >= 12, checked


@pytest.mark.parametrize("version", NVCLIENT_VERSIONS)
def test_status_codes(version):
    for ref in (nvclient(version), shared(version)):
        for name, value in ref.status.items():
            assert abi.NV_STATUS[name] == value, name
    assert set(nvclient(version).status) == set(abi.NV_STATUS)


# Constants abi.py defines that are not NVIDIA macros (derived, or the stub's).
NOT_MACROS = {"IOC_SIZE_MAX", "NV_ABSOLUTE_MAX_IOCTL_SIZE",
              "NV_IOCTL_CARD_INFO_ENTRY", "NV_GPFIFO_ENTRY_SIZE",
              "NVOS32_PARAMETERS_SIZE", "NVOS32_ATTR_PAGE_SIZE_SHIFT",
              "NVOS32_ATTR_LOCATION_SHIFT", "NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT",
              "NVC36F_USERD_GP_GET", "NVC36F_USERD_GP_PUT", "NVC36F_USERD_SIZE",
              "NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT",
              "NVOS32_ATTR2_MEMORY_PROTECTION_SHIFT",
              "NVOS03_FLAGS_HASH_TABLE_SHIFT",
              "NVOS32_ATTR_COHERENCY_SHIFT", "NVOS02_FLAGS_COHERENCY_SHIFT",
              "NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM"}  # an enum value


@pytest.mark.parametrize("version", NVCLIENT_VERSIONS)
def test_constants_match_the_headers(version):
    """Every integer constant of abi.py that NVIDIA's headers define as a
    macro of the same name has the headers' value; the rest are known."""
    consts = nvclient(version).consts
    mine = {name: value for name, value in vars(abi).items()
            if name.isupper() and isinstance(value, int)
            and not name.startswith(("_", "IOCTL_"))
            and name not in abi.NV_STATUS}
    for name, value in consts.items():
        assert mine[name] == value, f"{name}: abi {mine[name]:#x}, " \
                                    f"headers {value:#x}"
    # Some macros exist only in some versions (nv-chardev-numbers.h and
    # WAIT_OPEN_COMPLETE are newer than 535): any version's headers count.
    everywhere = set()
    for v in NVCLIENT_VERSIONS:
        everywhere |= set(nvclient(v).consts)
    unchecked = set(mine) - everywhere
    assert unchecked <= NOT_MACROS, sorted(unchecked - NOT_MACROS)


def test_constants_not_in_the_headers():
    # nv.h (not compiled by the generator): the largest IOCTL_XFER_CMD size
    assert abi.NV_ABSOLUTE_MAX_IOCTL_SIZE == 16384
    # clc36f.h Nvc36fControl: GPGet 0x88-0x8b, GPPut 0x8c-0x8f
    assert (abi.NVC36F_USERD_GP_GET, abi.NVC36F_USERD_GP_PUT) == (0x88, 0x8C)
    assert abi.NVC36F_USERD_SIZE == 0x200      # Ignored05[0x5c] ends there


@pytest.mark.parametrize("version", SHARED_VERSIONS)
def test_other_escape_argument_sizes(version):
    ref = shared(version)
    for nr, (cname, size) in abi.OTHER_ESCAPE_ARGS.items():
        assert ref.sizes[cname] == size, (hex(nr), cname)


def test_status_name():
    assert abi.status_name(0x51) == "NV_ERR_NO_MEMORY (0x51)"
    assert abi.status_name(0x1B) == "NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b)"
    assert "0x12345" in abi.status_name(0x12345)


# On-the-wire command words from shared/reference/nvidia-abi.md.
WIRE = {
    "IOCTL_RM_CONTROL": 0xC020462A,
    "IOCTL_RM_ALLOC_NVOS64": 0xC030462B,
    "IOCTL_RM_ALLOC_NVOS21": 0xC020462B,
    "IOCTL_RM_FREE": 0xC0104629,
    "IOCTL_RM_VID_HEAP_CONTROL": 0xC0B8464A,
    "IOCTL_RM_MAP_MEMORY": 0xC038464E,
    "IOCTL_RM_ALLOC_MEMORY": 0xC0384627,
    "IOCTL_REGISTER_FD": 0xC00446C9,
    "IOCTL_CHECK_VERSION_STR": 0xC04846D2,
}


@pytest.mark.parametrize("name", sorted(WIRE))
def test_ioctl_numbers_on_the_wire(name):
    assert getattr(abi, name) == WIRE[name], f"{getattr(abi, name):#x}"


def test_ioctl_encoding():
    cmd = abi.nv_ioctl(abi.NV_ESC_RM_ALLOC, 48)
    assert abi.ioc_nr(cmd) == 0x2B
    assert abi.ioc_size(cmd) == 48
    assert cmd >> 30 == 3       # _IOC_READ | _IOC_WRITE
    assert (cmd >> 8) & 0xFF == ord("F")
    with pytest.raises(ValueError):
        abi.nv_ioctl(1, abi.IOC_SIZE_MAX + 1)


def test_escape_numbers():
    assert (abi.NV_ESC_CARD_INFO, abi.NV_ESC_REGISTER_FD,
            abi.NV_ESC_CHECK_VERSION_STR, abi.NV_ESC_IOCTL_XFER_CMD,
            abi.NV_ESC_ATTACH_GPUS_TO_FD, abi.NV_ESC_SYS_PARAMS) == \
        (200, 201, 210, 211, 212, 214)
    assert (abi.NV_ESC_RM_ALLOC_MEMORY, abi.NV_ESC_RM_FREE,
            abi.NV_ESC_RM_CONTROL, abi.NV_ESC_RM_ALLOC,
            abi.NV_ESC_RM_DUP_OBJECT, abi.NV_ESC_RM_VID_HEAP_CONTROL,
            abi.NV_ESC_RM_MAP_MEMORY, abi.NV_ESC_RM_UNMAP_MEMORY) == \
        (0x27, 0x29, 0x2A, 0x2B, 0x34, 0x4A, 0x4E, 0x4F)


# The per-version table (docs/nvstub.md, shared/reference/nvidia-abi.md).
@pytest.mark.parametrize("version,fb_v2,mem,chan,sched,check,v1", [
    ("535.288.01", 436, 120, 360, 2, "rdev", True),
    ("545.29.06", 444, 128, 360, 2, "rdev", True),
    ("550.163.01", 444, 128, 360, 2, "fops", False),
    ("555.58.02", 444, 128, 360, 2, "fops", False),
    ("560.35.03", 460, 128, 360, 2, "fops", False),
    ("570.211.01", 460, 128, 368, 2, "fops", False),
    ("575.64.05", 460, 128, 368, 3, "fops", False),
    ("580.126.20", 1028, 128, 368, 3, "fops", False),
    ("595.45.04", 1028, 128, 368, 3, "fops", False),
    ("580.65", 1028, 128, 368, 3, "fops", False),
])
def test_version_table(version, fb_v2, mem, chan, sched, check, v1):
    row = abi.for_version(version)
    assert row.fb_get_info_v1_deprecated == (not v1)
    assert row.version == version
    assert row.fb_info_v2_size == fb_v2
    assert row.mem_alloc_params_size == mem
    assert row.channel_alloc_params_size == chan
    assert ctypes.sizeof(row.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS) == sched
    assert row.device_check == check
    assert row.fb_info_max_list == (fb_v2 - 4) // 8


@pytest.mark.parametrize("version", NVCLIENT_VERSIONS)
def test_version_table_constants(version):
    row = abi.for_version(version)
    ref = nvclient(version).vconsts
    assert ref == {
        "NV2080_CTRL_FB_INFO_MAX_LIST_SIZE": row.fb_info_max_list,
        "NV2080_CTRL_FB_INFO_INDEX_MAX": row.fb_info_index_max,
        "sizeof(NVOS46_PARAMETERS)": row.nvos46_size,
        "sizeof(NVOS47_PARAMETERS)": row.nvos47_size,
    }


def test_version_table_against_shared_sizes():
    for version in SHARED_VERSIONS:
        ref = shared(version)
        row = abi.for_version(version)
        assert row.mem_alloc_params_size == \
            ref.sizes["NV_MEMORY_ALLOCATION_PARAMS"]
        assert row.nvos46_size == ref.sizes["NVOS46_PARAMETERS"]
        assert row.nvos47_size == ref.sizes["NVOS47_PARAMETERS"]
        if "NV2080_CTRL_FB_GET_INFO_V2_PARAMS" in ref.sizes:
            assert row.fb_info_v2_size == \
                ref.sizes["NV2080_CTRL_FB_GET_INFO_V2_PARAMS"]
            assert row.channel_alloc_params_size == \
                ref.sizes["NV_CHANNEL_ALLOC_PARAMS"]


@pytest.mark.parametrize("bad", ["", "580", "abc", "580.x", "1.2.3.4"])
def test_version_parse_refuses(bad):
    with pytest.raises(ValueError):
        abi.for_version(bad)


def test_version_older_than_table():
    with pytest.raises(ValueError, match="older"):
        abi.for_version("530.41.03")


def test_fixed_sizes():
    assert ctypes.sizeof(abi.nv_ioctl_card_info_t) == 72
    assert abi.NV_IOCTL_CARD_INFO_ENTRY == 72
    assert ctypes.sizeof(abi.nv_ioctl_rm_api_version_t) == 72
    for v in NVCLIENT_VERSIONS:
        assert ctypes.sizeof(abi.for_version(v).NVOS32_PARAMETERS) == 184
    assert ctypes.sizeof(abi.NVOS55_PARAMETERS) == 28
    assert ctypes.sizeof(abi.nv_ioctl_xfer_t) == 16
    assert ctypes.sizeof(abi.NvstubWorkItem) == abi.NV_GPFIFO_ENTRY_SIZE


def test_nvos32_attr():
    assert abi.nvos32_attr() == 0
    assert abi.nvos32_attr(abi.NVOS32_ATTR_LOCATION_PCI) == 1 << 25
    assert abi.nvos32_attr(page_size=abi.NVOS32_ATTR_PAGE_SIZE_HUGE) == 3 << 23
