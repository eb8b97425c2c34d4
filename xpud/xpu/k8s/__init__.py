# SPDX-License-Identifier: Apache-2.0
"""xpu's Kubernetes face: a device plugin, a scheduler extender and a DRA
kubelet plugin, served by the companion process xpu-k8s (main.py).  They talk
to xpud only through its API socket (xpu.client), never to the kernel.
docs/kubernetes.md describes them."""
