# SPDX-License-Identifier: Apache-2.0
"""The socket xpuctl talks to: /run/xpu/xpud.sock.

An accept loop in one thread, a thread per connection, at most
max_connections at once, and ROOT_SLOTS more for root's alone (a member of
group `xpu`, which may only read, could otherwise hold every slot -- event
streams, or a byte every timeout_s -- and keep root's changes out); requests of at most api.MAX_REQUEST_BYTES; a
connection idle for `timeout_s` seconds is closed.  Every request is
authorised with the peer's credentials (auth.py) before anything else is done
with it, and an op that is refused gets a `permission` error, never an empty
result.

The socket file is made root-owned (xpud runs as root), mode 0660, group `xpu`
when that group exists: the kernel then lets only root and group `xpu`
connect, and xpud checks again per op.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import select
import selectors
import socket
import stat
import threading
from pathlib import Path
from typing import Any

from . import api
from .api import ApiError
from .auth import Authorizer, PeerCred, peer_credentials
from .errors import XpuError

log = logging.getLogger(__name__)


class Dispatcher:
    """Checks and runs one request for a peer: authorise, check the
    arguments against api.OPS, call the handler's op_<name>(**args)."""

    def __init__(self, handler: Any, authorizer: Authorizer):
        self.handler = handler
        self.authorizer = authorizer

    def handle_line(self, line: bytes, peer: PeerCred) -> bytes:
        reply, stream = self.handle(line, peer)
        if stream is not None:
            stream.close()
        return reply

    def handle(self, line: bytes,
               peer: PeerCred) -> tuple[bytes, api.Stream | None]:
        """The reply to LINE, and the stream that follows it, if any."""
        op = None
        try:
            op, raw = api.decode_request(line)
            self.authorizer.check(op, peer)
            if not op.available:
                raise ApiError("unsupported",
                               f"'{op.name}' is not available yet: "
                               f"{op.doc}")
            args = api.check_args(op, raw)
            result = getattr(self.handler, "op_" + op.name)(**args)
        except ApiError as e:
            if op is not None and (op.access == api.CHANGE
                                   or e.code == "permission"):
                log.info("uid %d pid %d: %s refused: %s", peer.uid,
                         peer.pid, op.name, e.message)
            return api.encode_error(e), None
        except Exception as e:  # one bad request must not stop xpud
            log.exception("uid %d pid %d: %s failed", peer.uid, peer.pid,
                          op.name if op else "request")
            return api.encode_error(ApiError(
                "internal", f"xpud failed: {type(e).__name__}: {e} "
                "(journalctl -u xpud has the details)")), None
        if op.access == api.CHANGE:
            log.info("uid %d pid %d: %s %s", peer.uid, peer.pid, op.name,
                     " ".join(f"{k}={v}" for k, v in args.items()))
        if isinstance(result, api.Stream):
            return api.encode_result(result.first), result
        return api.encode_result(result), None


# Connections kept for root once max_connections are taken (session 57).
ROOT_SLOTS = 8


class Server:
    """Serves DISPATCHER on the UNIX socket PATH."""

    def __init__(self, path: str, dispatcher: Dispatcher,
                 group: str = api.SOCKET_GROUP, timeout_s: float = 30.0,
                 max_connections: int = 64):
        self.path = path
        self.dispatcher = dispatcher
        self.group = group
        self.timeout_s = timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._root_slots = threading.BoundedSemaphore(ROOT_SLOTS)
        # The open connections, so that stop() can end them.
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        self._bound = False

    def _clear_stale(self) -> None:
        p = Path(self.path)
        try:
            st = p.lstat()
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise XpuError(f"{self.path} exists and is not a socket: move it "
                           "away or choose another --socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(self.path)
        except OSError as e:
            if e.errno != errno.ECONNREFUSED:
                raise XpuError(f"{self.path}: {e.strerror}") from None
            p.unlink()  # left by an xpud that did not stop cleanly
        else:
            raise XpuError(f"another xpud is serving {self.path}: stop it "
                           "first (systemctl stop xpud)")
        finally:
            probe.close()

    def start(self) -> None:
        d = Path(self.path).parent
        try:
            d.mkdir(mode=0o755, parents=True, exist_ok=True)
        except OSError as e:
            raise XpuError(f"cannot make {d}: {e.strerror}") from None
        self._clear_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Born 0600 so that nobody connects before the group is right.
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        except OSError as e:
            sock.close()
            raise XpuError(f"cannot bind {self.path}: {e.strerror}") from None
        finally:
            os.umask(old)
        self._sock = sock
        self._bound = True
        gid = Authorizer(self.group).group_id()
        if gid is None:
            log.warning("group '%s' does not exist: only root can use "
                        "xpuctl (groupadd --system %s, then restart xpud, "
                        "lets its members read)", self.group, self.group)
        else:
            try:
                os.chown(self.path, -1, gid)
            except PermissionError:
                log.warning("cannot give %s to group '%s' (xpud is not "
                            "root): only its owner can connect", self.path,
                            self.group)
        os.chmod(self.path, 0o660)
        sock.listen(64)
        sock.setblocking(False)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._accept_loop,
                                        name="xpud-api", daemon=True)
        self._thread.start()
        log.info("serving xpuctl on %s", self.path)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop accepting, end the open connections, remove the socket."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
            os.close(self._wake_r)
            os.close(self._wake_w)
        with self._open_lock:
            for conn in self._open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # gone already
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._bound:
            self._bound = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    if key.fileobj == self._wake_r:
                        return
                    self._accept()

    def _accept(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as e:  # out of file descriptors, say
            log.error("cannot accept a connection: %s", e)
            return
        slots = self._slots
        if not slots.acquire(blocking=False):
            slots = self._root_slots
            if not (self._is_root(conn) and slots.acquire(blocking=False)):
                slots = None
        if slots is None:
            try:
                conn.settimeout(1.0)
                conn.sendall(api.encode_error(ApiError(
                    "busy", "xpud has too many connections; try again")))
            except OSError:
                pass  # the client has gone already
            conn.close()
            return
        with self._open_lock:
            self._open.add(conn)
        try:
            threading.Thread(target=self._serve, args=(conn, slots),
                             name="xpud-conn", daemon=True).start()
        except RuntimeError as e:
            # no thread to be had (the host's limit): this connection is
            # not served, and the accept loop goes on
            log.error("cannot serve a connection: %s", e)
            with self._open_lock:
                self._open.discard(conn)
            slots.release()
            conn.close()

    @staticmethod
    def _is_root(conn: socket.socket) -> bool:
        try:
            return peer_credentials(conn).uid == 0
        except OSError:
            return False

    def _serve(self, conn: socket.socket,
               slots: threading.BoundedSemaphore) -> None:
        try:
            self._converse(conn)
        except Exception:  # a bug in one connection must not stop xpud
            log.exception("a connection failed")
        finally:
            # Free the slot before the client can see the connection end.
            with self._open_lock:
                self._open.discard(conn)
            slots.release()
            conn.close()

    def _converse(self, conn: socket.socket) -> None:
        conn.settimeout(self.timeout_s)
        try:
            peer = peer_credentials(conn)
        except OSError as e:
            log.warning("cannot read a client's credentials: %s", e)
            return
        limit = api.MAX_REQUEST_BYTES
        try:
            with conn.makefile("rb") as rfile:
                while True:
                    line = rfile.readline(limit + 1)
                    if not line:
                        return
                    if len(line) > limit and not line.endswith(b"\n"):
                        conn.sendall(api.encode_error(ApiError(
                            "protocol", "request longer than "
                            f"{limit} bytes")))
                        return
                    reply, stream = self.dispatcher.handle(line, peer)
                    conn.sendall(reply)
                    if stream is not None:
                        self._stream(conn, stream)
                        return
        except OSError as e:  # timeouts and resets included
            log.debug("connection of pid %d closed: %s", peer.pid, e)

    def _stream(self, conn: socket.socket, stream: api.Stream) -> None:
        """Write STREAM's items until the client hangs up (or writes: a
        stream takes no more requests) or stop() shuts the connection."""
        try:
            while True:
                item = stream.get(0.5)
                if item is not None:
                    conn.sendall(json.dumps(item).encode() + b"\n")
                readable, _, _ = select.select([conn], [], [], 0)
                if readable:
                    return
        finally:
            stream.close()
