# SPDX-License-Identifier: Apache-2.0
"""xpuctl's CDI commands (xpu/cli.py registers them):

    xpuctl cdi spec [-o json|yaml]   the spec xpud writes, as it would now
    xpuctl cdi refresh               read NVIDIA's spec again, rewrite xpud's
"""

from __future__ import annotations

import json
from typing import TextIO

from . import simpleyaml


def cmd_spec(args, c, out: TextIO) -> int:
    doc = c.call("cdi_spec")
    if args.output == "yaml":
        out.write(simpleyaml.dump(doc))
    else:
        print(json.dumps(doc, indent=2), file=out)
    return 0


def cmd_refresh(args, c, out: TextIO) -> int:
    r = c.call("cdi_refresh")
    n = r["devices"]
    devices = f"{n} device{'' if n == 1 else 's'}"
    if r["path"]:
        libs = (f", NVIDIA's libraries from {r['nvidia_spec']}"
                if r["nvidia_spec"] else "")
        print(f"wrote {r['path']}: {devices}{libs}", file=out)
    else:
        print(f"no spec written ({devices}: xpud writes none while no "
              "slice is ready, or when [cdi] spec_dir is empty)", file=out)
    return 0


def add_commands(sub, late) -> None:
    """The `cdi` command and its subcommands, on xpuctl's subparsers SUB;
    LATE: the options every command takes after its name."""
    p = sub.add_parser("cdi", help="the CDI spec for container runtimes",
                       description="The CDI spec xpud writes for container "
                                   "runtimes (docs/containers.md).")
    cdi = p.add_subparsers(dest="cdi_command", metavar="COMMAND",
                           required=True)
    s = cdi.add_parser("spec", parents=[late],
                       help="print the spec, as xpud writes it",
                       description="Print the CDI spec of the ready slices, "
                                   "as xpud writes it.")
    s.add_argument("-o", "--output", choices=("json", "yaml"),
                   default="json", help="json (default, as written) or "
                                        "yaml")
    s.set_defaults(func=cmd_spec)
    r = cdi.add_parser("refresh", parents=[late],
                       help="read NVIDIA's spec again and rewrite xpud's",
                       description="Read NVIDIA's CDI spec again and "
                                   "rewrite xpud's (what the "
                                   "xpu-cdi-refresh unit runs).")
    r.set_defaults(func=cmd_refresh)
