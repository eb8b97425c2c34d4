# SPDX-License-Identifier: Apache-2.0
"""The few calls xpu-k8s makes to the Kubernetes API server, over plain
HTTPS with the pod's service account (in-cluster), or a URL and token given
on the command line.  No client library: get, post, put, JSON in and out."""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiServerError(Exception):
    """A failed call; status is the HTTP status (0: not reached)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ApiServer:
    def __init__(self, url: str, token: str | None = None,
                 ca_file: str | None = None, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.ctx = None
        if self.url.startswith("https://"):
            self.ctx = ssl.create_default_context(cafile=ca_file)

    @classmethod
    def in_cluster(cls) -> ApiServer:
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ApiServerError(0, "not in a cluster (KUBERNETES_SERVICE_"
                                 "HOST is unset): give --apiserver URL")
        with open(os.path.join(SA_DIR, "token")) as f:
            token = f.read().strip()
        if ":" in host:
            host = f"[{host}]"
        return cls(f"https://{host}:{port}", token,
                   os.path.join(SA_DIR, "ca.crt"))

    def _call(self, method: str, path: str, body=None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data,
                                     method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout,
                                        context=self.ctx) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read()).get("message") or e.reason
            except ValueError:
                msg = e.reason
            raise ApiServerError(e.code, f"{method} {path}: {e.code} "
                                 f"{msg}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ApiServerError(0, f"cannot reach the API server at "
                                 f"{self.url}: {reason}") from None

    def get(self, path: str) -> dict:
        return self._call("GET", path)

    def post(self, path: str, body: dict) -> dict:
        return self._call("POST", path, body)

    def put(self, path: str, body: dict) -> dict:
        return self._call("PUT", path, body)

    def delete(self, path: str) -> dict:
        return self._call("DELETE", path)
