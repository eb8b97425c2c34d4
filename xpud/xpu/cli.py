# SPDX-License-Identifier: Apache-2.0
"""xpuctl, the command-line client of xpu: a thin client of xpud's API.

Each command is one or a few requests of api.OPS; `-o json` prints the API's
result as it is, so the JSON fields are the API's (docs/api.md).  Errors are
one line on stderr and an exit status of errors.py (docs/xpud.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from . import __version__, api, cmdline, events, model, run, sizes
from .cdi import cli as cdi_cli
from .client import Client
from .errors import UsageError

PROG = "xpuctl"


# -- values typed on the command line --------------------------------------

def _arg_type(parse):
    def convert(text: str):
        try:
            return parse(text)
        except (TypeError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    convert.__name__ = parse.__name__
    return convert


def _memory(text: str) -> int:
    return model.check_memory(sizes.parse_size(text))


def _host_memory(text: str) -> int:
    return model.check_host_memory(sizes.parse_size(text))


def _gpu(text: str):
    return model.parse_gpu_ref(text)


def _share(text: str):
    return sizes.share_percent(sizes.parse_share(text))


def _weight(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a whole number") from None
    return model.check_weight(n)


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a whole number") from None
    if n < 0:
        raise ValueError(f"{n} is negative")
    return n


def _interval(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number of seconds") from None
    if not 0.1 <= s <= 3600:
        raise ValueError(f"{text} is not between 0.1 and 3600 seconds")
    return s


# -- output --------------------------------------------------------------------

def _dash(value) -> str:
    return "-" if value is None or value == [] else str(value)


def _size(n) -> str:
    return "-" if n is None else sizes.format_size(n)


def _host_memory_text(used, limit) -> str:
    """A slice's system memory allocated by the driver: what it holds, and
    its bound when it has one (USED/LIMIT)."""
    if not limit:
        return _size(used)
    return f"{_size(used)}/{_size(limit)}"


def _table(out: TextIO, header: Sequence[str], rows) -> None:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(header)]
    for r in [list(header)] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(),
              file=out)


def _json(out: TextIO, value) -> None:
    print(json.dumps(value, indent=2, sort_keys=False), file=out)


def _gpu_label(s: dict) -> str:
    if s.get("gpu_index") is not None:
        return str(s["gpu_index"])
    return _dash(s.get("gpu_uuid"))


def print_gpus(out: TextIO, gpus: list) -> None:
    _table(out, ("INDEX", "UUID", "NAME", "MEMORY", "MINOR", "MODE",
                 "POLICY", "PERIOD", "SLICES", "STATE"),
           [(g["index"], _dash(g["gpu_uuid"]), g["name"],
             _size(g["memory_total_bytes"]), g["gpu_minor"], g["mode"],
             g["policy"], f"{g['period_ms']}ms", g["slices"], g["state"])
            for g in gpus])


def print_slices(out: TextIO, slices: list) -> None:
    # HOST: system memory the driver allocated for it, /its bound (as top).
    _table(out, ("NAME", "GPU", "MEMORY", "USED", "HOST", "COMPUTE",
                 "WEIGHT", "PRIORITY", "STATE"),
           [(s["name"], _gpu_label(s), _size(s["memory_limit_bytes"]),
             _size(s["memory_used_bytes"]),
             _host_memory_text(s.get("host_memory_used_bytes"),
                               s.get("host_memory_limit_bytes")),
             f"{s['compute_share']}%", s["weight"], s["priority"],
             s["state"])
            for s in slices])


# How `show` names the records' kinds the API gives (usage.RECORD_KINDS).
_RECORD_LABELS = {"va_spaces": "VA spaces",
                  "virtual_allocations": "virtual allocations",
                  "tsgs": "TSGs", "usermode_objects": "usermode objects"}


def _records_text(records: dict | None, limit: int | None) -> str:
    """"devices 1, VA spaces 0, ... (each at most 1024)", or "-"; the
    kinds as the API names them, in its order."""
    if records is None:
        return "-"
    text = ", ".join(f"{_RECORD_LABELS.get(kind, kind)} {n}"
                     for kind, n in records.items())
    return f"{text} (each at most {_dash(limit)})"


def print_slice(out: TextIO, s: dict) -> None:
    gpu = _gpu_label(s)
    if s.get("gpu_uuid") and s.get("gpu_index") is not None:
        gpu += f" ({s['gpu_uuid']}, minor {s['gpu_minor']})"
    rows = [
        ("name", s["name"]),
        ("origin", s["origin"]),
        ("gpu", gpu),
        ("memory", (f"{_size(s['memory_limit_bytes'])} limit, "
                    f"{_size(s['memory_used_bytes'])} used")),
        ("host memory", (f"{_host_limit(s.get('host_memory_limit_bytes'))}, "
                         f"{_size(s.get('host_memory_used_bytes'))} used")),
        # RM's clients and objects the slice's clients hold / xpu.ko's
        # bound on them (max_handles).
        ("RM handles", (f"{_dash(s.get('rm_handles'))} / "
                        f"{_dash(s.get('rm_handles_limit'))}")),
        # OS events (NV_ESC_ALLOC_OS_EVENT) the slice's clients hold /
        # xpu.ko's bound on them (max_os_events).
        ("OS events", (f"{_dash(s.get('os_events'))} / "
                       f"{_dash(s.get('os_events_limit'))}")),
        # The RM objects xpu.ko keeps a record of, by kind, each kind
        # bounded by max_records; the doorbell page's files (a bound each).
        ("records", _records_text(s.get("records"), s.get("records_limit"))),
        ("doorbells", (f"{_dash(s.get('doorbell_files'))} files / "
                       f"{_dash(s.get('doorbell_files_limit'))}")),
        ("compute", f"{s['compute_share']}%"),
        ("weight", s["weight"]),
        ("priority", s["priority"]),
        ("cgroups", ", ".join(s["cgroups"]) or "-"),
        ("nodes", ", ".join(s["nodes"]) or "-"),
        ("state", s["state"]),
    ]
    if s.get("transient_cgroups"):
        rows.append(("containers", ", ".join(s["transient_cgroups"])))
    if s.get("owner"):
        rows.append(("owner", s["owner"]))
    if s.get("error"):
        rows.append(("error", s["error"]))
    if s.get("defined_in"):
        rows.append(("defined in", s["defined_in"]))
    width = max(len(k) for k, _ in rows) + 1
    for k, v in rows:
        print(f"{(k + ':').ljust(width)} {v}", file=out)


def _host_limit(n) -> str:
    """A bound on system memory, as show prints it."""
    if n is None:
        return "-"
    return f"{sizes.format_size(n)} limit" if n else "no limit"


def _limits(s: dict, host: bool = False) -> str:
    """A slice's limits; its bound on system memory when it has one, or
    when HOST (it was just given)."""
    text = (f"memory {_size(s['memory_limit_bytes'])}, compute "
            f"{s['compute_share']}%, weight {s['weight']}, priority "
            f"{s['priority']}")
    bound = s.get("host_memory_limit_bytes")
    if bound or (host and bound is not None):
        text += (f", host memory {sizes.format_size(bound)}" if bound else
                 ", host memory unbounded")
    return text


# -- commands ------------------------------------------------------------------
# Each takes the parsed arguments, a Client and stdout, returns an exit status.

def cmd_gpus(args, c: Client, out: TextIO) -> int:
    gpus = c.call("gpus")
    if args.output == "json":
        _json(out, gpus)
    else:
        print_gpus(out, gpus)
    return 0


def cmd_list(args, c: Client, out: TextIO) -> int:
    slices = c.call("list")
    if args.output == "json":
        _json(out, slices)
    else:
        print_slices(out, slices)
    return 0


def cmd_show(args, c: Client, out: TextIO) -> int:
    s = c.call("show", name=args.name)
    if args.output == "json":
        _json(out, s)
    else:
        print_slice(out, s)
    return 0


def _limit_args(args) -> dict:
    given = {"memory_limit_bytes": args.memory, "compute_share": args.compute,
             "weight": args.weight, "priority": args.priority,
             "host_memory_limit_bytes": args.host_memory}
    return {k: v for k, v in given.items() if v is not None}


def cmd_create(args, c: Client, out: TextIO) -> int:
    s = c.call("create", name=args.name, gpu=args.gpu, **_limit_args(args))
    print(f"created slice '{s['name']}' on GPU {_gpu_label(s)}: "
          f"{_limits(s, args.host_memory is not None)}", file=out)
    return 0


def cmd_set(args, c: Client, out: TextIO) -> int:
    limits = _limit_args(args)
    if not limits:
        raise UsageError("set: nothing to change: give --memory, --compute, "
                         "--weight, --priority or --host-memory")
    s = c.call("set", name=args.name, **limits)
    print(f"updated slice '{s['name']}': "
          f"{_limits(s, args.host_memory is not None)}", file=out)
    return 0


def cmd_destroy(args, c: Client, out: TextIO) -> int:
    c.call("destroy", name=args.name, force=args.force)
    print(f"destroyed slice '{args.name}'", file=out)
    return 0


def cmd_bind(args, c: Client, out: TextIO) -> int:
    c.call("bind", name=args.name, cgroup=args.cgroup)
    print(f"bound cgroup {args.cgroup} to slice '{args.name}'", file=out)
    return 0


def cmd_unbind(args, c: Client, out: TextIO) -> int:
    c.call("unbind", name=args.name, cgroup=args.cgroup)
    print(f"unbound cgroup {args.cgroup} from slice '{args.name}'", file=out)
    return 0


def cmd_release(args, c: Client, out: TextIO) -> int:
    r = c.call("release", owner=args.owner)
    for name in r["released"]:
        print(f"destroyed slice '{name}'", file=out)
    for name in r["pending"]:
        print(f"slice '{name}' is in use: xpud destroys it once it is not",
              file=out)
    if not r["released"] and not r["pending"]:
        print(f"no ephemeral slice of '{args.owner}'", file=out)
    return 0


def cmd_run(args, c: Client, out: TextIO) -> int:
    s = c.call("show", name=args.name)
    c.close()  # nothing of xpuctl's may reach COMMAND
    binds = run.plan(s)
    run.check(binds)
    run.enter(binds)
    out.flush()
    run.execute(args.cmd)
    return 0  # not reached: execute() returns only by raising


TOP_HEADER = ("NAME", "GPU", "USED", "PEAK", "LIMIT", "USE", "HOST",
              "COMPUTE", "GOT", "GATED", "PROCS", "DENIED")


def top_rows(slices: list) -> list:
    """One row per slice of `xpuctl top`, from the `top` op's figures (the
    ones /metrics exports): video memory, system memory, then compute."""
    return [(s["name"], _gpu_label(s), _size(s["memory_used_bytes"]),
             _size(s["memory_peak_bytes"]), _size(s["memory_limit_bytes"]),
             _use(s),
             # HOST: system memory the driver allocated for it, /its bound.
             _host_memory_text(s.get("host_memory_used_bytes"),
                               s.get("host_memory_limit_bytes")),
             _percent(s["compute_share"]),
             # GOT: the share of the GPU's time it held over the last
             # second; GATED: of the time it had work, how much it was
             # held back, since it was made.
             _percent(s["compute_obtained"]), _gated(s),
             s["processes"], s["denied_allocs"])
            for s in slices]


def _percent(value) -> str:
    return "-" if value is None else f"{value:g}%"


def _gated(s: dict) -> str:
    if not s["runnable_seconds"]:
        return "-"
    return f"{100 * s['gated_seconds'] / s['runnable_seconds']:.0f}%"


def cmd_top(args, c: Client, out: TextIO) -> int:
    clear = args.output == "table" and out.isatty()
    count = 1 if args.once else args.count
    n = 0
    try:
        while True:
            usage = c.call("top")
            if args.output == "json":
                print(json.dumps(usage), file=out, flush=True)
            else:
                if clear:
                    print("\033[H\033[J", end="", file=out)
                _table(out, TOP_HEADER, top_rows(usage["slices"]))
                out.flush()
            n += 1
            if count and n >= count:
                return 0
            time.sleep(args.interval)  # the refresh interval, nothing else
    except KeyboardInterrupt:
        return 0


def _use(s: dict) -> str:
    used, limit = s["memory_used_bytes"], s["memory_limit_bytes"]
    if used is None or not limit:
        return "-"
    return f"{100 * used / limit:.0f}%"


def cmd_events(args, c: Client, out: TextIO) -> int:
    stream = c.stream("events")
    next(stream)  # the reply: counters so far
    n = 0
    try:
        for ev in stream:
            if args.output == "json":
                print(json.dumps(ev), file=out, flush=True)
            else:
                when = time.strftime("%H:%M:%S", time.localtime(ev["time"]))
                print(f"{when}  {ev['event']:<15}  {events.describe(ev)}",
                      file=out, flush=True)
            n += 1
            if args.count and n >= args.count:
                return 0
    except KeyboardInterrupt:
        return 0
    return 0  # not reached: the stream ends by an error


def cmd_version(args, c: Client, out: TextIO) -> int:
    if args.output == "table":
        print(f"{PROG} {__version__}", file=out, flush=True)
    v = c.call("version")
    if args.output == "json":
        _json(out, dict({"xpuctl": __version__}, **v))
        return 0
    print(f"xpud {v['xpud']} (api {v['api']})", file=out)
    if v.get("kernel"):
        print(f"xpu.ko {v['kernel']} (api {v['kernel_api']})", file=out)
        if v.get("uvm_interposed") is False:
            print("xpu.ko does not interpose on UVM's node: a bound cgroup's "
                  "tasks' /dev/nvidia-uvm files are no slice's (is "
                  "nvidia-uvm loaded and /dev/nvidia-uvm made? "
                  "docs/security.md, class 39)", file=out)
        if v.get("uvm_retentions_seen") is False:
            print("xpu.ko does not see UVM's retention of channels: a "
                  "channel a slice frees stays charged while a UVM file of "
                  "the slice is open, and one registered through a UVM "
                  "file passed in is not (docs/security.md, class 39)",
                  file=out)
        if v.get("uvm_retains_unwatched"):
            print(f"xpu.ko could not watch {v['uvm_retains_unwatched']} of "
                  "the driver's retains of a channel to their return: "
                  "what they pinned stays charged to their slices until "
                  "UVM lets go of the VA space they named (raise its "
                  "uvm_probe_maxactive; "
                  "docs/security.md, class 44)", file=out)
        if v.get("call_pages_guarded") is False:
            print("vm.mmap_min_addr is below 65536: unless SELinux refuses "
                  "low mappings, a tenant may map where xpu.ko puts the "
                  "pages of its calls, and on kernels before 6.10 swap one "
                  "under the driver (xpu.ko's call_pages_exposed counts "
                  "them; docs/security.md, class 41)", file=out)
    else:
        print(f"xpu.ko unknown: {v.get('kernel_error')}", file=out)
    return 0


# -- the parser ----------------------------------------------------------------

def build_parser() -> cmdline.ArgumentParser:
    parser = cmdline.ArgumentParser(
        prog=PROG,
        description="Manage the GPU slices of this node through xpud.",
        epilog="Exit status: 0 success, 1 xpud refused or failed, 2 usage, "
               "3 xpud cannot be reached, 4 permission denied, 5 no such "
               "slice, GPU or cgroup; run: COMMAND's status, 126/127 when it "
               "cannot be run.  `xpuctl COMMAND --help` describes a "
               "command.")
    cmdline.add_common_arguments(parser)
    parser.add_argument(
        "--socket", metavar="PATH", default=api.DEFAULT_SOCKET,
        help="xpud's socket (default: %(default)s)")
    # The same options after the command: `xpuctl list --socket X`.
    late = argparse.ArgumentParser(add_help=False)
    late.add_argument("--socket", metavar="PATH", default=argparse.SUPPRESS,
                      help="xpud's socket")
    late.add_argument("--debug", action="store_true",
                      default=argparse.SUPPRESS,
                      help="show a traceback on errors")
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("-o", "--output", choices=("table", "json"),
                        default="table",
                        help="table for people (default), json for programs")

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name, func, help, parents=(late,)):
        p = sub.add_parser(name, help=help, description=help,
                           parents=list(parents))
        p.set_defaults(func=func)
        return p

    def limit_options(p, required_memory: bool):
        p.add_argument("--memory", metavar="SIZE", type=_arg_type(_memory),
                       required=required_memory,
                       help="video-memory limit: 512MiB, 8GiB, ... (binary "
                            "units or bytes; GB is refused as ambiguous)")
        p.add_argument("--compute", metavar="PCT", type=_arg_type(_share),
                       help="compute share in percent, steps of 0.1: 25, "
                            "12.5%%")
        p.add_argument("--weight", metavar="N", type=_arg_type(_weight),
                       help=f"{model.WEIGHT_MIN} to {model.WEIGHT_MAX} "
                            f"(default {model.DEFAULT_WEIGHT})")
        p.add_argument("--priority", choices=model.PRIORITIES,
                       help="QoS class (default normal)")
        p.add_argument("--host-memory", metavar="SIZE",
                       type=_arg_type(_host_memory),
                       help="bound on the system memory the driver "
                            "allocates for the slice (pinned host pages), "
                            "as --memory; 0 for none (the default)")

    command("gpus", cmd_gpus, "list the GPUs of this node",
            (late, output))
    command("list", cmd_list, "list the slices", (late, output))
    p = command("show", cmd_show, "show one slice", (late, output))
    p.add_argument("name", metavar="NAME")
    p = command("create", cmd_create, "create a slice")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--gpu", metavar="GPU", required=True,
                   type=_arg_type(_gpu),
                   help="the GPU: its UUID or index (xpuctl gpus)")
    limit_options(p, required_memory=True)
    p = command("set", cmd_set, "change a slice's limits in place")
    p.add_argument("name", metavar="NAME")
    limit_options(p, required_memory=False)
    p = command("destroy", cmd_destroy, "destroy a slice")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--force", action="store_true",
                   help="even while processes use it")
    for name, func, help in (
            ("bind", cmd_bind, "put a cgroup's processes into a slice"),
            ("unbind", cmd_unbind, "take a cgroup out of a slice")):
        p = command(name, func, help)
        p.add_argument("name", metavar="NAME")
        p.add_argument("--cgroup", metavar="PATH", required=True,
                       help="a cgroup v2 directory: /sys/fs/cgroup/... or "
                            "as /proc/PID/cgroup shows it")
    p = command("release", cmd_release,
                "destroy the ephemeral slices of an owner (a container's "
                "id, as xpu-container-runtime tags them)")
    p.add_argument("owner", metavar="OWNER")
    p = command("run", cmd_run,
                "run a command inside a slice (root): the slice's nodes "
                "stand at /dev/nvidiactl and /dev/nvidiaN")
    p.add_argument("name", metavar="NAME")
    p.add_argument("cmd", metavar="COMMAND", nargs=argparse.REMAINDER,
                   help="after --: the command and its arguments")
    p = command("top", cmd_top, "live per-slice memory and compute, as xpu.ko "
                "measures them (the figures of /metrics)",
                (late, output))
    p.add_argument("--interval", metavar="SECONDS", default=1.0,
                   type=_arg_type(_interval),
                   help="between refreshes (default 1)")
    p.add_argument("--count", metavar="N", type=_arg_type(_count),
                   default=0,
                   help="stop after N refreshes (default: until Ctrl-C)")
    p.add_argument("--once", action="store_true",
                   help="one refresh, then stop (as --count 1)")
    p = command("events", cmd_events,
                "stream slice events (Ctrl-C ends it)", (late, output))
    p.add_argument("--count", metavar="N", type=_arg_type(_count),
                   default=0, help="stop after N events")
    command("version", cmd_version,
            "the versions of xpuctl, xpud and xpu.ko", (late, output))
    cdi_cli.add_commands(sub, late)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        def versions() -> int:
            cmdline.print_versions(PROG, args.device, sys.stdout)
            return 0
        return cmdline.run(PROG, args.debug, versions)
    if args.command is None:
        parser.error("no command given")
    if args.command == "run":
        if args.cmd[:1] == ["--"]:
            args.cmd = args.cmd[1:]
        if not args.cmd:
            parser.error("run: no command: write xpuctl run NAME -- "
                         "COMMAND [ARG...]")

    def body() -> int:
        with Client(args.socket) as c:
            return args.func(args, c, sys.stdout)

    return cmdline.run(PROG, args.debug, body)


if __name__ == "__main__":
    sys.exit(main())
