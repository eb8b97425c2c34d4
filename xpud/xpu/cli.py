# SPDX-License-Identifier: Apache-2.0
"""xpuctl, the command-line client of xpu."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import cmdline

PROG = "xpuctl"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Manage the GPU slices of this node.",
        epilog="This release implements only --version.  Commands for GPUs "
               "and slices (list, create, destroy, set, bind) are coming in "
               "later releases.")
    cmdline.add_common_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.version:
        parser.error("nothing to do: only --version is implemented so far")

    def body() -> int:
        cmdline.print_versions(PROG, args.device, sys.stdout)
        return 0

    return cmdline.run(PROG, args.debug, body)


if __name__ == "__main__":
    sys.exit(main())
