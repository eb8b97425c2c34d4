# SPDX-License-Identifier: Apache-2.0
"""A user-mode client of NVIDIA's kernel driver, in pure Python (tests only).

abi: the driver's numbers and struct layouts; client: files, RM objects,
memory, mappings and channels; stub: nvstub.ko's debugfs counters."""
