# SPDX-License-Identifier: Apache-2.0
"""kubelet's gRPC APIs, as our own wire-compatible .proto files, and the
Python grpcio-tools generated from them (`make proto`; never edited by hand)."""
