# SPDX-License-Identifier: Apache-2.0
"""/proc/driver/nvidia in nv-procfs.c's format, and the stub's module
parameters taking effect."""

import os
import re
import subprocess

import nvtest
import pytest
from nvclient import abi, client

UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                     r"[0-9a-f]{12}$")


def bus_id(i):
    return f"0000:{nvtest.PCI_BUS_BASE + i:02x}:00.0"


def test_proc_version(config):
    with open(client.PROC_VERSION) as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("NVRM version:")
    assert client.parse_proc_version(lines[0]) == config.version
    assert any(line.startswith("GCC version:") for line in lines)


def test_proc_gpu_information(config):
    assert client.proc_gpu_bus_ids() == [bus_id(i) for i in range(config.gpus)]
    uuids = set()
    for i in range(config.gpus):
        info = client.proc_gpu_information(bus_id(i))
        assert info["Model"] == nvtest.MODEL
        assert UUID_RE.match(info["GPU UUID"]), info["GPU UUID"]
        assert info["Bus Location"] == bus_id(i)
        assert info["Device Minor"] == str(i)
        uuids.add(info["GPU UUID"])
    assert len(uuids) == config.gpus


def test_uuids_are_fixed_across_loads(reload_stub, config):
    before = [client.proc_gpu_information(bus_id(i))["GPU UUID"]
              for i in range(config.gpus)]
    reload_stub()
    after = [client.proc_gpu_information(bus_id(i))["GPU UUID"]
             for i in range(config.gpus)]
    assert before == after


def test_gpus_and_memory_params(reload_stub):
    cfg = reload_stub(gpus=3, memory_mib=1024)
    assert (cfg.gpus, cfg.memory_mib) == (3, 1024)
    assert client.proc_gpu_bus_ids() == [bus_id(i) for i in range(3)]
    with client.Ctl() as ctl:
        infos = ctl.card_info()
        assert [ci.minor_number for ci in infos] == [0, 1, 2]
        rc, _ = ctl.card_info_raw(2)
        assert rc == -22
        rm = client.RmClient(ctl)
        for i in range(3):
            dev = rm.device(i)
            assert dev.heap_info() == (1 << 30, 1 << 30)
            total = abi.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE
            assert dev.fb_info_v2([total]) == {total: 1 << 20}
            dev.close()
        p = rm.alloc_raw(rm.handle, abi.NV01_DEVICE_0,
                         abi.NV0080_ALLOC_PARAMETERS(deviceId=3))
        assert p.status == abi.NV_ERR_INVALID_CLASS
        # the whole GiB, and not a byte more
        dev = rm.device(2)
        mem = dev.alloc_vidmem(1 << 30)
        assert dev.heap_alloc_raw(1).status == abi.NV_ERR_NO_MEMORY
        rm.free(mem.handle)
        dev.close()
        rm.close()


def test_params_as_loaded(config):
    """Without parameters the stub is two 80 GiB GPUs of driver 580.126.20
    (the rig may load it otherwise; then this checks what it loaded)."""
    want = nvtest.StubConfig.from_params(
        nvtest.parse_params(nvtest.Loader.loaded_params))
    assert config == want


def test_version_param(reload_stub):
    reload_stub(version="550.163.01")
    with open(client.PROC_VERSION) as f:
        assert client.parse_proc_version(f.read()) == "550.163.01"


def test_nodes_of_missing_gpus_do_not_open(config):
    with nvtest.extra_node(config.gpus) as path, pytest.raises(OSError):
        os.close(os.open(path, os.O_RDWR))


def test_uuid_is_derived_from_the_index(config):
    for i in range(config.gpus):
        info = client.proc_gpu_information(bus_id(i))
        assert info["GPU UUID"] == f"GPU-6e767374-7562-4000-8000-{i:012x}"


def test_params_are_read_only(config):
    for name in nvtest.DEFAULTS:
        mode = os.stat(os.path.join(nvtest.stub.PARAMS, name)).st_mode
        assert mode & 0o777 == 0o444, name


@pytest.mark.parametrize("param", ["gpus=0", "gpus=17", "memory_mib=0",
                                   "memory_mib=4194304", "version=530.41.03",
                                   "version=580", "version=abc",
                                   "alloc_reread_delay_us=10000001",
                                   "timeslice_us=0", "doorbell_poll_us=0"])
def test_out_of_range_params_fail_the_load(reload_stub, param):
    name, _, value = param.partition("=")
    with pytest.raises(RuntimeError):
        reload_stub(**{name: value})
    assert not nvtest.module_loaded("nvstub")
    log = subprocess.run(["dmesg"], check=True, capture_output=True,
                         text=True).stdout
    assert f"nvstub: {name}={value}: must be" in log
