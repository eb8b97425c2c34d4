# SPDX-License-Identifier: Apache-2.0
"""The node's HTTP face for the scheduler extender: its GPUs' room (xpud's
truth, less reservations) and the reservations themselves.

  GET    /v1/node                -> {"node", "memory_unit", "gpus": [...]}
  POST   /v1/reservations        <- {"uid", "namespace", "name",
                                     "containers": [{"name", "memory",
                                                     "compute"}]}
                                 -> 200 {"reservation": {...}}
                                    409 {"error": "..."}: it does not fit
  DELETE /v1/reservations/UID    -> {"released": true|false}

memory is in bytes, compute in percent.  With a token file, every request
must carry "Authorization: Bearer TOKEN".  Errors are one line in "error".
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import node

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024


class Agent:
    def __init__(self, node_name: str, xpud_socket: str,
                 reservations: node.Reservations, policy: str,
                 memory_unit: int, token: str | None = None):
        self.node_name = node_name
        self.xpud_socket = xpud_socket
        self.reservations = reservations
        self.policy = policy
        self.memory_unit = memory_unit
        self.token = token
        self.httpd: ThreadingHTTPServer | None = None

    def room(self) -> list[node.Gpu]:
        gpus, _ = node.snapshot(self.xpud_socket)
        return self.reservations.held(gpus)

    def handle(self, method: str, path: str, body: bytes | None):
        """(status, JSON object) for one request."""
        if method == "GET" and path == "/v1/node":
            try:
                gpus = self.room()
            except node.NodeError as e:
                return 503, {"error": f"xpud: {e}"}
            return 200, {"node": self.node_name,
                         "memory_unit": self.memory_unit,
                         "gpus": [asdict(g) for g in gpus]}
        if method == "POST" and path == "/v1/reservations":
            try:
                req = json.loads(body or b"")
                uid, ns, name = req["uid"], req["namespace"], req["name"]
                ctrs = [(c["name"], int(c["memory"]), int(c["compute"]))
                        for c in req["containers"]]
                if not all(isinstance(x, str) and x for x in (uid, ns, name)):
                    raise ValueError("uid, namespace and name are strings")
                if any(m < 0 or not 0 <= c <= 100 for _, m, c in ctrs):
                    raise ValueError("memory >= 0 and 0 <= compute <= 100")
            except (ValueError, KeyError, TypeError) as e:
                return 400, {"error": f"bad reservation: {e}"}
            with self.reservations.lock:
                try:
                    gpus, _ = node.snapshot(self.xpud_socket)
                    r = self.reservations.reserve(gpus, uid, ns, name, ctrs,
                                                  self.policy)
                except node.NodeError as e:
                    return 503, {"error": f"xpud: {e}"}
                except node.NoRoom as e:
                    return 409, {"error": f"node {self.node_name}: {e}"}
            log.info("reserved %s for pod %s/%s", [
                (e.container, e.gpu_uuid, e.memory >> 20, e.compute)
                for e in r.entries], ns, name)
            return 200, {"reservation": asdict(r)}
        if method == "DELETE" and path.startswith("/v1/reservations/"):
            uid = path[len("/v1/reservations/"):]
            return 200, {"released": self.reservations.release(uid)}
        return 404, {"error": f"no such endpoint: {method} {path}"}

    def serve(self, host: str, port: int) -> int:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def _do(self):
                if agent.token is not None:
                    got = self.headers.get("Authorization", "")
                    if not hmac.compare_digest(got, f"Bearer {agent.token}"):
                        return self._reply(401, {"error": "a bearer token is "
                                                 "needed"})
                n = int(self.headers.get("Content-Length") or 0)
                if n > MAX_BODY:
                    return self._reply(413, {"error": "request too large"})
                body = self.rfile.read(n) if n else None
                status, obj = agent.handle(self.command, self.path, body)
                self._reply(status, obj)

            def _reply(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _do

            def log_message(self, fmt, *args):
                log.debug("agent: " + fmt, *args)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                         daemon=True,
                         name="agent").start()
        return self.httpd.server_address[1]

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
