# SPDX-License-Identifier: Apache-2.0
"""A client of xpud's socket: what xpuctl uses, and what any program may.

    with Client() as c:
        for s in c.call("list"):
            print(s["name"], s["memory_limit_bytes"])

call() returns the result, raises api.ApiError for an error reply and
errors.ConnectError when xpud cannot be reached.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Iterator

from . import api
from .api import ApiError
from .errors import ConnectError


class Client:
    def __init__(self, path: str = api.DEFAULT_SOCKET, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._rfile = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._rfile is not None:
            self._rfile.close()
            self._rfile = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
        except OSError as e:
            s.close()
            raise self._connect_error(e) from None
        self._sock = s
        self._rfile = s.makefile("rb")

    def _connect_error(self, e: OSError) -> Exception:
        where = f"cannot reach xpud at {self.path}"
        if e.errno == errno.ENOENT:
            return ConnectError(f"{where}: no such socket; is xpud running? "
                                "(systemctl status xpud)")
        if e.errno == errno.ECONNREFUSED:
            return ConnectError(f"{where}: nothing is listening; is xpud "
                                "running? (systemctl status xpud)")
        if e.errno in (errno.EACCES, errno.EPERM):
            return ApiError(
                "permission",
                f"permission denied on {self.path}: xpuctl needs root, or "
                f"membership in group '{api.SOCKET_GROUP}' for reads")
        if isinstance(e, socket.timeout):  # TimeoutError from 3.10
            return ConnectError(f"{where}: no answer within "
                                f"{self.timeout:g} s")
        return ConnectError(f"{where}: {e.strerror or e}")

    def call(self, op: str, **args) -> object:
        """Send one request and return its result."""
        if self._sock is None:
            self._connect()
        try:
            self._sock.sendall(api.encode_request(op, args))
            line = self._rfile.readline(api.MAX_REPLY_BYTES)
        except socket.timeout:  # noqa: UP041 -- no TimeoutError on 3.9
            self.close()
            raise ConnectError(f"xpud did not answer '{op}' within "
                               f"{self.timeout:g} s") from None
        except OSError as e:
            self.close()
            raise ConnectError(f"lost the connection to xpud: "
                               f"{e.strerror or e}") from None
        if not line:
            self.close()
            raise ConnectError(f"xpud closed the connection during '{op}'")
        try:
            return api.decode_reply(line)
        except ValueError as e:
            self.close()
            raise ConnectError(f"{self.path} did not answer as xpud does: "
                               f"{e}") from None

    def stream(self, op: str, **args) -> Iterator[object]:
        """Send a streaming request (api.Stream); yield its first result,
        then each item that follows, as long as xpud sends them."""
        yield self.call(op, **args)
        self._sock.settimeout(None)  # events come when they come
        while True:
            try:
                line = self._rfile.readline(api.MAX_REPLY_BYTES)
            except OSError as e:
                self.close()
                raise ConnectError(f"lost the connection to xpud: "
                                   f"{e.strerror or e}") from None
            if not line:
                self.close()
                raise ConnectError(f"xpud ended the '{op}' stream (stopped "
                                   "or restarted?)")
            try:
                yield json.loads(line)
            except ValueError as e:
                self.close()
                raise ConnectError(f"{self.path} sent a line that is not "
                                   f"JSON: {e}") from None
