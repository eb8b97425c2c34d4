# SPDX-License-Identifier: Apache-2.0
"""A test API server: the few REST paths xpu-k8s uses, answering as the
Kubernetes API server does (status codes, Status objects with a message):
pods and their binding subresource, ResourceClaims, ResourceSlices.  No
apiserver can be installed here; this one keeps its objects in dicts."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

POD = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)(/binding)?$")
CLAIM = re.compile(
    r"/apis/resource.k8s.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)$")
SLICES = re.compile(r"/apis/resource.k8s.io/v1/resourceslices(?:/([^/]+))?$")


def status(code, message):
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "message": message, "code": code}


class ApiServer:
    def __init__(self):
        self.pods: dict[tuple[str, str], dict] = {}
        self.claims: dict[tuple[str, str], dict] = {}
        self.slices: dict[str, dict] = {}
        self.bindings: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.on_get_pod = None  # called (ns, name) after a pod GET
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _do(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                code, obj = api.handle(self.command, self.path, body)
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _do

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                         daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_pod(self, pod: dict):
        m = pod["metadata"]
        self.pods[(m["namespace"], m["name"])] = pod

    def handle(self, method, path, body):
        m = POD.match(path)
        if m:
            ns, name, binding = m.groups()
            with self.lock:
                pod = self.pods.get((ns, name))
                if pod is None:
                    return status(404, f'pods "{name}" not found')
                if not binding and method == "GET":
                    out = json.loads(json.dumps(pod))
                elif binding and method == "POST":
                    uid = (body.get("metadata") or {}).get("uid")
                    if uid and uid != pod["metadata"]["uid"]:
                        return status(409, "Precondition failed: UID in "
                                      "precondition: " + uid)
                    if pod["spec"].get("nodeName"):
                        return status(409, f"pod {name} is already assigned "
                                      f"to node {pod['spec']['nodeName']}")
                    node = body["target"]["name"]
                    pod["spec"]["nodeName"] = node
                    self.bindings.append((ns, name, node))
                    return 201, {"kind": "Status", "status": "Success"}
                else:
                    return status(405, "method not allowed")
            if self.on_get_pod is not None:
                self.on_get_pod(ns, name)
            return 200, out
        m = CLAIM.match(path)
        if m and method == "GET":
            claim = self.claims.get(m.groups())
            if claim is None:
                return status(404, f'resourceclaims "{m[2]}" not found')
            return 200, claim
        m = SLICES.match(path)
        if m:
            name = m[1]
            with self.lock:
                if method == "POST" and name is None:
                    n = body["metadata"]["name"]
                    if n in self.slices:
                        return status(409, f'resourceslices "{n}" already '
                                      "exists")
                    self.slices[n] = body
                    return 201, body
                if method == "GET" and name in self.slices:
                    return 200, self.slices[name]
                if method == "PUT" and name in self.slices:
                    self.slices[name] = body
                    return 200, body
            return status(404, f'resourceslices "{name}" not found')
        return status(404, f"no path {path}")
