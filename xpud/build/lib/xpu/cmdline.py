# SPDX-License-Identifier: Apache-2.0
"""What xpud and xpuctl share on the command line: the common options, the
version report, usage errors on one line, and turning errors into one line
and an exit status."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn, TextIO

from . import __version__
from .ctl import DEFAULT_PATH, Ctl
from .errors import EXIT_ERROR, EXIT_USAGE, XpuError


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as one line that says where help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see "
                              f"{self.prog} --help)\n")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version", action="store_true",
        help="print the version of this program and of the loaded xpu.ko")
    parser.add_argument(
        "--device", default=DEFAULT_PATH, metavar="PATH",
        help="the admin device of xpu.ko (default: %(default)s)")
    parser.add_argument(
        "--debug", action="store_true", help="show a traceback on errors")


def print_versions(prog: str, device: str, out: TextIO) -> None:
    """Print this program's version, then the kernel module's.

    Raises CtlError when the module cannot be asked."""
    print(f"{prog} {__version__}", file=out, flush=True)
    with Ctl(device) as ctl:
        ver = ctl.version()
    print(f"xpu.ko {ver} (api {ver.api})", file=out, flush=True)


def run(prog: str, debug: bool, body: Callable[[], int]) -> int:
    """Run BODY; report an error as one line on stderr and return its exit
    status (errors.py lists them)."""
    try:
        return body()
    except XpuError as e:
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.exit_status
    except Exception as e:  # noqa: BLE001 -- any failure ends as one line
        if debug:
            traceback.print_exc()
            msg = f"{type(e).__name__}: {e}"
        else:
            msg = f"{type(e).__name__}: {e} (run with --debug for details)"
        print(f"{prog}: internal error: {msg}", file=sys.stderr)
        return EXIT_ERROR
