# SPDX-License-Identifier: Apache-2.0
"""xpu: slices of NVIDIA GPUs -- the node daemon xpud and its CLI xpuctl."""

__version__ = "0.1.0"
