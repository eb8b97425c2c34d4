# SPDX-License-Identifier: Apache-2.0
"""xpu/inventory.py: GPUs through NVML (a fake pynvml here), else from
/proc/driver/nvidia; GPU references resolved."""

import types

import pytest
from xpu import inventory
from xpu.inventory import Inventory, NvmlSource, ProcSource
from xpu.model import Gpu
from xpu.sizes import GIB

UUIDS = ["GPU-00000000-1111-2222-3333-444444444444",
         "GPU-AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"]


class NVMLError(Exception):
    pass


def fake_pynvml(count=2, init_error=None):
    """The calls of nvidia-ml-py that the inventory makes."""
    calls = []

    def init():
        calls.append("init")
        if init_error:
            raise NVMLError(init_error)

    def pci(h):
        return types.SimpleNamespace(busId=f"00000000:{0x18 + h:02X}:00.0"
                                     .encode())

    return types.SimpleNamespace(
        calls=calls,
        NVMLError=NVMLError,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUUID=lambda h: UUIDS[h],
        nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetMinorNumber=lambda h: 1 - h,
        nvmlDeviceGetPciInfo=pci,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(
            total=141 * GIB, free=141 * GIB - h * GIB, used=h * GIB),
    )


def test_nvml():
    nvml = fake_pynvml()
    gpus = NvmlSource(lambda: nvml).list()
    assert gpus == [
        Gpu(0, UUIDS[0], "NVIDIA H200", 1, "0000:18:00.0", 141 * GIB, 0),
        Gpu(1, UUIDS[1].replace("AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE",
                                "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"),
            "NVIDIA H200", 0, "0000:19:00.0", 141 * GIB, GIB)]
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_unavailable():
    src = NvmlSource(lambda: fake_pynvml(init_error="Driver Not Loaded"))
    assert src.list() is None
    assert src.unavailable == "NVML: Driver Not Loaded"

    def no_module():
        raise ImportError("No module named 'pynvml'")

    src = NvmlSource(no_module)
    assert src.list() is None
    assert src.unavailable.startswith("pynvml is not installed")


INFO = """\
Model: \t\t NVIDIA H200
IRQ:   \t\t 42
GPU UUID: \t {uuid}
Video BIOS: \t ??.??.??.??.??
Bus Type: \t PCIe
DMA Size: \t 47 bits
DMA Mask: \t 0x7fffffffffff
Bus Location: \t {bus}
Device Minor: \t {minor}
GPU Excluded:\t No
"""


def proc_tree(root, gpus):
    for bus, uuid, minor in gpus:
        d = root / "gpus" / bus
        d.mkdir(parents=True)
        (d / "information").write_text(INFO.format(uuid=uuid, bus=bus,
                                                   minor=minor))
    return root


def test_procfs(tmp_path):
    root = proc_tree(tmp_path, [("0000:19:00.0", UUIDS[1], 1),
                                ("0000:18:00.0", UUIDS[0], 0),
                                ("0000:1a:00.0", "???", 2)])
    gpus = ProcSource(str(root)).list()
    assert [(g.index, g.bus_id, g.minor, g.name, g.memory_total_bytes)
            for g in gpus] == [
        (0, "0000:18:00.0", 0, "NVIDIA H200", None),
        (1, "0000:19:00.0", 1, "NVIDIA H200", None),
        (2, "0000:1a:00.0", 2, "NVIDIA H200", None)]
    assert gpus[0].uuid == UUIDS[0]
    assert gpus[1].uuid == UUIDS[1][:4] + UUIDS[1][4:].lower()
    assert gpus[2].uuid is None  # not read from the GPU yet


def test_procfs_without_a_driver(tmp_path):
    src = ProcSource(str(tmp_path / "nvidia"))
    assert src.list() is None
    assert src.unavailable == (f"{tmp_path}/nvidia/gpus does not exist: no "
                               "NVIDIA driver")


def test_nvml_first_then_procfs(tmp_path):
    root = proc_tree(tmp_path, [("0000:18:00.0", UUIDS[0], 0)])
    nvml = NvmlSource(lambda: fake_pynvml(init_error="NVML Shared Library "
                                                     "Not Found"))
    inv = Inventory([nvml, ProcSource(str(root))])
    assert [g.minor for g in inv.list()] == [0]
    assert inv.source == "procfs"
    inv = Inventory([NvmlSource(fake_pynvml), ProcSource(str(root))])
    assert len(inv.list()) == 2 and inv.source == "nvml"
    inv = Inventory([nvml, ProcSource(str(tmp_path / "none"))])
    assert inv.list() == [] and inv.source == "none"


@pytest.mark.parametrize("bus, normal", [
    ("00000000:18:00.0", "0000:18:00.0"),
    ("0000:AB:1F.7", "0000:ab:1f.7"),
    ("0001:18:00.0", "0001:18:00.0"),
])
def test_bus_ids(bus, normal):
    assert inventory.normalise_bus_id(bus) == normal


def test_resolve():
    gpus = [Gpu(0, UUIDS[0], "x", 3, "0000:18:00.0"),
            Gpu(1, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "x", 2,
                "0000:19:00.0")]
    assert inventory.resolve(1, gpus) is gpus[1]
    assert inventory.resolve(UUIDS[0], gpus) is gpus[0]
    with pytest.raises(inventory.GpuNotFound) as e:
        inventory.resolve(2, gpus)
    assert str(e.value) == ("no GPU 2: this node has GPUs 0 to 1 (xpuctl "
                            "gpus lists them)")
    with pytest.raises(inventory.GpuNotFound, match="has GPU 0 only"):
        inventory.resolve(3, gpus[:1])
    with pytest.raises(inventory.GpuNotFound,
                       match="this node has no GPU that xpud can see"):
        inventory.resolve(0, [])
