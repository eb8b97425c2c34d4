# SPDX-License-Identifier: Apache-2.0
"""tests/nvclient/uvm.py against UVM's layouts, compiled with gcc from
NVIDIA/open-gpu-kernel-modules' kernel-open/nvidia-uvm/uvm_ioctl.h and
uvm_types.h at 535.288.01 and 580.126.20 (offsetof/sizeof on x86_64; the
same at both tags except UVM_MAX_GPUS: 32, then 256 from 550.40.53)."""

import ctypes
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nvclient import uvm

# struct: (sizeof, {field: offset})
LAYOUTS = {
    uvm.UVM_INITIALIZE_PARAMS: (16, {"flags": 0, "rmStatus": 8}),
    uvm.UVM_REGISTER_GPU_PARAMS: (40, {
        "gpu_uuid": 0, "numaEnabled": 16, "numaNodeId": 20, "rmCtrlFd": 24,
        "hClient": 28, "hSmcPartRef": 32, "rmStatus": 36}),
    uvm.UVM_UNREGISTER_GPU_PARAMS: (20, {"gpu_uuid": 0, "rmStatus": 16}),
    uvm.UVM_REGISTER_GPU_VASPACE_PARAMS: (32, {
        "gpuUuid": 0, "rmCtrlFd": 16, "hClient": 20, "hVaSpace": 24,
        "rmStatus": 28}),
    uvm.UVM_UNREGISTER_GPU_VASPACE_PARAMS: (20, {"gpuUuid": 0,
                                                 "rmStatus": 16}),
    uvm.UVM_CREATE_EXTERNAL_RANGE_PARAMS: (24, {"base": 0, "length": 8,
                                                "rmStatus": 16}),
    uvm.UVM_FREE_PARAMS: (24, {"base": 0, "length": 8, "rmStatus": 16}),
    uvm.UvmGpuMappingAttributes: (36, {
        "gpuUuid": 0, "gpuMappingType": 16, "gpuCachingType": 20,
        "gpuFormatType": 24, "gpuElementBits": 28, "gpuCompressionType": 32}),
    uvm.UVM_REGISTER_CHANNEL_PARAMS: (56, {
        "gpuUuid": 0, "rmCtrlFd": 16, "hClient": 20, "hChannel": 24,
        "base": 32, "length": 40, "rmStatus": 48}),
    uvm.UVM_UNREGISTER_CHANNEL_PARAMS: (28, {
        "gpuUuid": 0, "hClient": 16, "hChannel": 20, "rmStatus": 24}),
}


@pytest.mark.parametrize("cls", list(LAYOUTS), ids=lambda c: c.__name__)
def test_layout(cls):
    size, fields = LAYOUTS[cls]
    assert ctypes.sizeof(cls) == size
    for name, off in fields.items():
        assert getattr(cls, name).offset == off, name


@pytest.mark.parametrize("version,max_gpus,size,count_at", [
    ("535.288.01", 32, 1200, 1176), ("545.29.06", 32, 1200, 1176),
    ("550.163.01", 256, 9264, 9240), ("580.126.20", 256, 9264, 9240)])
def test_map_external_allocation_grew_in_550(version, max_gpus, size,
                                             count_at):
    assert uvm.uvm_max_gpus(version) == max_gpus
    cls = uvm.map_external_params(max_gpus)
    assert ctypes.sizeof(cls) == size
    assert cls.gpuAttributesCount.offset == count_at
    assert cls.rmStatus.offset == size - 4
    assert cls.perGpuAttributes.offset == 24


def test_command_numbers():
    """uvm_ioctl.h: raw numbers, no _IOC encoding."""
    assert (uvm.UVM_REGISTER_GPU, uvm.UVM_UNREGISTER_GPU,
            uvm.UVM_REGISTER_GPU_VASPACE, uvm.UVM_UNREGISTER_GPU_VASPACE,
            uvm.UVM_CREATE_EXTERNAL_RANGE, uvm.UVM_MAP_EXTERNAL_ALLOCATION,
            uvm.UVM_FREE, uvm.UVM_REGISTER_CHANNEL,
            uvm.UVM_UNREGISTER_CHANNEL) == (37, 38, 25, 26, 73, 33, 34, 27, 28)
    assert uvm.UVM_INITIALIZE == 0x30000001
