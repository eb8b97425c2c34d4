# SPDX-License-Identifier: Apache-2.0
"""The errors xpud and xpuctl show to people.

Each carries a message that is one line, fit to print as it is, and the exit
status a command line ends with when the error reaches it.  The statuses are
xpuctl's documented ones (docs/xpud.md, "Exit status"):

    0  success
    1  xpud (or xpu.ko) refused or failed the request
    2  usage: the command line or a value in it is wrong
    3  xpud cannot be reached (no socket, nothing listening, no answer)
    4  permission denied
    5  the named slice, GPU or cgroup does not exist

`xpuctl run` ends with COMMAND's status, or 126/127 as a shell when COMMAND
cannot be executed or is not found (run.py).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_PERMISSION = 4
EXIT_NOT_FOUND = 5


class XpuError(Exception):
    """An error for a person: str(e) is one line that says what is wrong
    and, where it can, what to do."""

    exit_status = EXIT_ERROR


class UsageError(XpuError):
    """A command line, or a value written on it, is wrong."""

    exit_status = EXIT_USAGE


class ConfigError(XpuError):
    """The configuration file is wrong.  The message starts with
    FILE:LINE: FIELD: where those are known."""


class StateError(XpuError):
    """The state directory cannot be used (not a corrupt file, which is
    moved aside: a file xpud must not overwrite, or an I/O error)."""


class ConnectError(XpuError):
    """xpud cannot be reached."""

    exit_status = EXIT_UNREACHABLE
