# SPDX-License-Identifier: Apache-2.0
"""xpud's API: every request, defined once (docs/api.md describes them).

The server (server.py) checks each request against OPS -- its arguments and
whether it reads or changes -- before the service sees it; the client
(client.py) and xpuctl send requests by these names; docs/api.md has a section
for each, which a unit test keeps honest.

Protocol: JSON lines on a UNIX stream socket.  Each request is one line,

    {"op": "create", "args": {"name": "a", "gpu": 0, ...}}

and each gets one line back,

    {"ok": true, "result": ...}
    {"ok": false, "error": {"code": "not_found", "message": "..."}}

A connection may carry any number of requests, one after the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import errors
from .errors import XpuError

API_VERSION = 1
DEFAULT_SOCKET = "/run/xpu/xpud.sock"
SOCKET_GROUP = "xpu"
MAX_REQUEST_BYTES = 64 * 1024
MAX_REPLY_BYTES = 64 * 1024 * 1024

READ = "read"
CHANGE = "change"


@dataclass(frozen=True)
class ErrorCode:
    code: str
    exit_status: int  # xpuctl's
    doc: str


ERRORS = {e.code: e for e in (
    ErrorCode("invalid", errors.EXIT_USAGE,
              "an argument is missing, unknown, of the wrong type or out of "
              "range, or the op is unknown"),
    ErrorCode("not_found", errors.EXIT_NOT_FOUND,
              "the named slice, GPU or cgroup does not exist"),
    ErrorCode("exists", errors.EXIT_ERROR,
              "a slice of that name exists already"),
    ErrorCode("conflict", errors.EXIT_ERROR,
              "the request conflicts with the present state: the GPU's "
              "memory or compute would be over-committed, or the slice "
              "belongs to the configuration file"),
    ErrorCode("busy", errors.EXIT_ERROR,
              "the slice is in use (destroy --force ends that), or xpud has "
              "too many connections"),
    ErrorCode("permission", errors.EXIT_PERMISSION,
              "the caller may not do this (see Authorisation)"),
    ErrorCode("unsupported", errors.EXIT_ERROR,
              "the loaded xpu.ko, or this xpud, cannot do this yet"),
    ErrorCode("backend", errors.EXIT_ERROR,
              "xpu.ko refused or failed the change"),
    ErrorCode("protocol", errors.EXIT_ERROR,
              "the request is not a JSON object on one line of at most "
              f"{MAX_REQUEST_BYTES} bytes"),
    ErrorCode("internal", errors.EXIT_ERROR,
              "xpud failed; its log (journalctl -u xpud) says why"),
)}


class ApiError(XpuError):
    """An error reply: a code from ERRORS and a one-line message."""

    def __init__(self, code: str, message: str):
        if code not in ERRORS:
            raise ValueError(f"unknown API error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def exit_status(self) -> int:
        return ERRORS[self.code].exit_status


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str          # one of KINDS
    required: bool = False
    doc: str = ""


# kind: (JSON types, as the API's errors and docs/api.md name them)
KINDS = {
    "string": ((str,), "a string"),
    "integer": ((int,), "an integer"),
    "number": ((int, float), "a number"),
    "boolean": ((bool,), "true or false"),
    "gpu": ((int, str), "a GPU UUID (string) or index (integer)"),
}


@dataclass(frozen=True)
class Op:
    name: str
    access: str        # READ or CHANGE
    args: tuple[Arg, ...]
    doc: str
    # False: defined here so that names and docs are settled, answered
    # with `unsupported` until its implementation lands.
    available: bool = True


_NAME = Arg("name", "string", True, "the slice's name")
_LIMITS = (
    Arg("memory_limit_bytes", "integer", False,
        "video-memory limit in bytes, at least 1 MiB"),
    Arg("compute_share", "number", False,
        "percentage of the GPU's time, 0 to 100 in steps of 0.1"),
    Arg("weight", "integer", False, "1 to 10000, 100 by default"),
    Arg("priority", "string", False, "low, normal (default) or high"),
    Arg("host_memory_limit_bytes", "integer", False,
        "bound in bytes on the system memory the driver allocates for the "
        "slice's clients (pinned host pages); 0 (default): none, else at "
        "least 1 MiB"),
)

OPS = {op.name: op for op in (
    Op("version", READ, (),
       "the versions of xpud, of this API and of the loaded xpu.ko"),
    Op("gpus", READ, (), "the GPUs of this node and how each is shared"),
    Op("list", READ, (), "every slice"),
    Op("show", READ, (_NAME,), "one slice"),
    Op("create", CHANGE,
       (_NAME, Arg("gpu", "gpu", True, "the GPU: its UUID or index"),
        Arg("memory_limit_bytes", "integer", True, _LIMITS[0].doc))
       + _LIMITS[1:]
       + (Arg("owner", "string", False,
              "makes the slice ephemeral: `release` with this tag destroys "
              "it (a container's id, say)"),
          Arg("owner_pid", "integer", False,
              "with owner: the slice goes when this process ends before a "
              "cgroup was bound to it")),
       "create a slice; the result is the slice as `show` gives it"),
    Op("set", CHANGE, (_NAME,) + _LIMITS,
       "change a slice's limits in place (at least one); running processes "
       "keep running"),
    Op("destroy", CHANGE,
       (_NAME, Arg("force", "boolean", False,
                   "destroy even while processes use the slice")),
       "destroy a slice"),
    Op("bind", CHANGE,
       (_NAME, Arg("cgroup", "string", True,
                   "a cgroup v2 directory, as a path under /sys/fs/cgroup "
                   "or as /proc/PID/cgroup names it"),
        Arg("transient", "boolean", False,
            "the binding lasts while the cgroup has processes (a "
            "container's)")),
       "put processes of a cgroup (and below) into a slice"),
    Op("unbind", CHANGE,
       (_NAME, Arg("cgroup", "string", True, "as for bind")),
       "undo bind"),
    Op("top", READ, (),
       "what each slice uses, from one read of xpu.ko's slice list (the "
       "figures /metrics exports)"),
    Op("events", READ, (),
       "a stream of slice events: the reply, then one event per line"),
    Op("release", CHANGE,
       (Arg("owner", "string", True, "the owner tag given to create"),),
       "destroy the ephemeral slices of an owner"),
    Op("cdi_spec", READ,
       (Arg("slice", "string", False,
            "only this slice's device (a ready slice)"),),
       "the CDI spec of the slices, as xpud writes it"),
    Op("cdi_refresh", CHANGE, (),
       "read NVIDIA's CDI spec again and rewrite xpud's"),
)}


class Stream:
    """A result that goes on: the reply carries FIRST, then the server
    writes each item get(timeout) gives, one JSON line each, until the
    client leaves; then close()."""

    def __init__(self, first: object, get, close):
        self.first = first
        self.get = get
        self.close = close


def check_args(op: Op, args: object) -> dict:
    """ARGS checked against OP's schema; raises ApiError('invalid')."""
    if not isinstance(args, dict):
        raise ApiError("invalid", f"{op.name}: args must be a JSON object")
    known = {a.name: a for a in op.args}
    for key in args:
        if key not in known:
            names = ", ".join(known) or "none"
            raise ApiError("invalid", f"{op.name}: unknown argument '{key}' "
                           f"(it takes: {names})")
    for a in op.args:
        if a.name not in args:
            if a.required:
                raise ApiError("invalid", f"{op.name}: missing argument "
                               f"'{a.name}' ({a.doc})")
            continue
        value = args[a.name]
        types, text = KINDS[a.kind]
        ok = isinstance(value, types)
        if a.kind != "boolean" and isinstance(value, bool):
            ok = False
        if not ok:
            raise ApiError("invalid", f"{op.name}: argument '{a.name}' must "
                           f"be {text}, not {json.dumps(value)}")
    return dict(args)


def encode_request(op: str, args: dict) -> bytes:
    return (json.dumps({"op": op, "args": args}, separators=(",", ":"))
            + "\n").encode()


def decode_request(line: bytes) -> tuple[Op, dict]:
    """The op and raw args of one request line; raises ApiError."""
    try:
        req = json.loads(line)
    except ValueError as e:
        raise ApiError("protocol", f"the request is not JSON: {e}") from None
    if not isinstance(req, dict) or not isinstance(req.get("op"), str):
        raise ApiError("protocol",
                       'the request must be {"op": NAME, "args": {...}}')
    op = OPS.get(req["op"])
    if op is None:
        raise ApiError("invalid", f"unknown op '{req['op']}' (known: "
                       + ", ".join(OPS) + ")")
    return op, req.get("args", {})


def encode_result(result: object) -> bytes:
    return (json.dumps({"ok": True, "result": result},
                       separators=(",", ":")) + "\n").encode()


def encode_error(e: ApiError) -> bytes:
    return (json.dumps({"ok": False, "error": {"code": e.code,
                                               "message": e.message}},
                       separators=(",", ":")) + "\n").encode()


def decode_reply(line: bytes) -> object:
    """The result of one reply line; raises ApiError for an error reply,
    ValueError for a line that is not a reply."""
    rep = json.loads(line)
    ok = rep.get("ok") if type(rep) is dict else None
    if ok is True:
        return rep.get("result")
    err = rep.get("error") if ok is False else None
    if type(err) is not dict:
        raise ValueError("not an xpud reply")
    code = err.get("code")
    message = str(err.get("message", "unknown error"))
    if code not in ERRORS:
        # From a newer xpud: keep its message, count it as a failure.
        raise ApiError("internal", f"{message} ({code})")
    raise ApiError(code, message)
