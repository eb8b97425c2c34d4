# SPDX-License-Identifier: Apache-2.0
"""Readers for nvstub.ko's own test interfaces (docs/nvstub.md).

The simulated driver publishes its state under /sys/kernel/debug/nvstub:
``gpuN/engine``, ``gpuN/channels``, ``gpuN/processes``, ``gpuN/heap``,
``objects`` and ``controls``, as lines of space-separated ``key=value``
fields.  Values that parse as integers (decimal or 0x-prefixed) are returned
as ints.
"""

import contextlib
import os

DEBUGFS = "/sys/kernel/debug/nvstub"
PARAMS = "/sys/module/nvstub/parameters"


def _value(text):
    try:
        return int(text, 0)
    except ValueError:
        return text


def parse_records(text):
    """One dict per non-empty line that has key=value fields."""
    records = []
    for line in text.splitlines():
        fields = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep:
                fields[key] = _value(value)
        if fields:
            records.append(fields)
    return records


def parse_kv(text):
    """All key=value fields of ``text`` merged into one dict."""
    out = {}
    for rec in parse_records(text):
        out.update(rec)
    return out


def _read(*parts):
    with open(os.path.join(DEBUGFS, *parts)) as f:
        return f.read()


def engine(gpu=0):
    """The engine's counters of GPU ``gpu``."""
    return parse_kv(_read(f"gpu{gpu}", "engine"))


def channels(gpu=0):
    """One record per channel of GPU ``gpu``."""
    return parse_records(_read(f"gpu{gpu}", "channels"))


def processes(gpu=0):
    """One record per process the engine has charged time to on GPU ``gpu``."""
    return parse_records(_read(f"gpu{gpu}", "processes"))


def heap(gpu=0):
    """The simulated video-memory heap of GPU ``gpu``."""
    return parse_kv(_read(f"gpu{gpu}", "heap"))


def objects():
    """The stub's live-object counters."""
    return parse_kv(_read("objects"))


def controls():
    """How often each RM control the stub's table knows reached its handler
    since the stub was loaded: {cmd: calls}, commands never called left
    out."""
    return {r["cmd"]: r["calls"] for r in parse_records(_read("controls"))}


def pid_info_walked():
    """How many memory objects GET_PID_INFO looked at since the stub was
    loaded (RM walks every memory object of each client of the process
    asked about)."""
    return int(_read("pid_info_walked"))


def available():
    return os.path.isdir(DEBUGFS)


def param(name):
    """A module parameter of the loaded stub, as text."""
    with open(os.path.join(PARAMS, name)) as f:
        return f.read().strip()


@contextlib.contextmanager
def param_set(name, value):
    """A writable module parameter of the loaded stub (close_delay_us) set
    to VALUE while the block runs, then back to what it was."""
    before = param(name)
    with open(os.path.join(PARAMS, name), "w") as f:
        f.write(str(value))
    try:
        yield
    finally:
        with open(os.path.join(PARAMS, name), "w") as f:
            f.write(before)
