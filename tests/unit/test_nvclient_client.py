# SPDX-License-Identifier: Apache-2.0
"""tests/nvclient's host-side logic: parsers, errors, ioctl plumbing.

No driver here: the ioctl plumbing is exercised on /dev/null, which refuses
every ioctl with ENOTTY."""

import ctypes
import errno
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nvclient import abi, client, stub

PROC_VERSION_TEXT = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.126.20  "
    "Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Oct 30 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def test_parse_proc_version():
    assert client.parse_proc_version(PROC_VERSION_TEXT) == "580.126.20"
    assert client.parse_proc_version(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.288.01  Mon\n") \
        == "535.288.01"
    assert client.parse_proc_version("GCC version: 12.2.0\n") is None


def test_status_error_names_the_status():
    e = client.NvStatusError(abi.NV_ERR_NO_MEMORY, "RM_ALLOC class 0x40")
    assert e.status == 0x51
    assert str(e) == "RM_ALLOC class 0x40: NV_ERR_NO_MEMORY (0x51)"


def test_check_raises_only_on_error():
    p = abi.NVOS00_PARAMETERS(status=abi.NV_OK)
    assert client._check(p, "x") is p
    p.status = abi.NV_ERR_INVALID_CLIENT
    with pytest.raises(client.NvStatusError, match="NV_ERR_INVALID_CLIENT"):
        client._check(p, "x")
    assert client._check(p, "x", check=False) is p


def test_ioctl_raw_returns_negative_errno():
    fd = os.open("/dev/null", os.O_RDWR)
    try:
        p = abi.NVOS00_PARAMETERS(1, 2, 3)
        assert client.ioctl_raw(fd, abi.IOCTL_RM_FREE, p) == -errno.ENOTTY
        # wrong-size path keeps the caller's struct intact
        assert client.escape_raw(fd, abi.NV_ESC_RM_FREE, p, size=15) \
            == -errno.ENOTTY
        assert (p.hRoot, p.hObjectParent, p.hObjectOld) == (1, 2, 3)
        with pytest.raises(OSError, match="NV_ESC_RM_FREE") as info:
            client.escape(fd, abi.NV_ESC_RM_FREE, p)
        assert info.value.errno == errno.ENOTTY
    finally:
        os.close(fd)


def test_round_up():
    assert client.round_up(1, 65536) == 65536
    assert client.round_up(65536, 65536) == 65536
    assert client.round_up(0, 4096) == 0


def test_parse_colon_pairs():
    text = ("Model: \t\t NVIDIA H200\nIRQ:   \t\t 0\n"
            "GPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\n"
            "Bus Location: \t 0000:18:00.0\nDevice Minor: \t 0\n")
    info = client.parse_colon_pairs(text)
    assert info["Model"] == "NVIDIA H200"
    assert info["Bus Location"] == "0000:18:00.0"
    assert info["Device Minor"] == "0"
    assert info["GPU UUID"].startswith("GPU-")


def test_stub_parsers():
    recs = stub.parse_records("id=1 token=0x10 busy_us=5 state=run\n\n"
                              "id=2 token=0x11 busy_us=0 state=idle\n")
    assert recs == [{"id": 1, "token": 16, "busy_us": 5, "state": "run"},
                    {"id": 2, "token": 17, "busy_us": 0, "state": "idle"}]
    assert stub.parse_kv("busy_us=10\nitems=3\n") == {"busy_us": 10,
                                                      "items": 3}


def test_work_item_bytes():
    item = abi.NvstubWorkItem(duration_us=1000)
    assert bytes(item) == (1000).to_bytes(4, "little") + bytes(4)
    assert ctypes.sizeof(item) == abi.NV_GPFIFO_ENTRY_SIZE
