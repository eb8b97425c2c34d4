# SPDX-License-Identifier: Apache-2.0
"""xpud's Prometheus endpoint: GET /metrics on the address of [metrics].

An HTTP server in a thread of its own, a thread per scrape, at most
MAX_SCRAPES at once (one more is answered 503 at once); a client that says
nothing for TIMEOUT_S seconds is dropped.  A scrape reads xpu.ko once
(Service.usage(), which takes no lock of the service's), so it never waits
for the API or a reconcile, and they never wait for it.

Not being able to listen (the port is taken: dcgm-exporter's default is
9400 too) is logged as an error and costs the metrics only; a reload
(SIGHUP) tries again, with the address the configuration names then.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import socketserver
import threading
from collections.abc import Mapping
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app

from ..bounded import BoundedThreadsMixIn
from ..config import MetricsConfig
from .attribution import Attribution
from .collector import Source, XpuCollector

log = logging.getLogger(__name__)

PATH = "/metrics"
MAX_SCRAPES = 4
TIMEOUT_S = 10.0
# Connections served at once, each in a thread of its own: the rest are
# closed as they come.  The scrape bound (MAX_SCRAPES) is taken only once
# a request's line and headers are read, and TIMEOUT_S bounds each read,
# not the request, so without this any local user's connections that
# trickle a byte every few seconds made a thread each, without end (found
# by a review in session 57).
MAX_CONNECTIONS = 16


def node_name(environ: Mapping[str, str] = os.environ) -> str:
    """The Hostname label: NODE_NAME (what Kubernetes' downward API sets,
    as for dcgm-exporter), else the host name."""
    return environ.get("NODE_NAME") or socket.gethostname()


class _Handler(WSGIRequestHandler):
    timeout = TIMEOUT_S

    def log_message(self, format, *args):
        log.debug("metrics: %s: " + format, self.address_string(), *args)


class _HTTPServer(BoundedThreadsMixIn, ThreadingMixIn, WSGIServer):
    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    server_label = "metrics"

    def server_bind(self) -> None:
        # HTTPServer's asks the resolver for the address's name (getfqdn),
        # which can hang xpud's start on a node with a broken resolver.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
        self.setup_environ()


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


class MetricsServer:
    """Serves SOURCE's metrics as SETTINGS say; start(), configure() on a
    reload, stop()."""

    def __init__(self, source: Source, settings: MetricsConfig,
                 hostname: str | None = None,
                 attribution: Attribution | None = None):
        self.settings = settings
        self.collector = XpuCollector(source, hostname or node_name(),
                                      attribution)
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(self.collector)
        # xpud's own CPU, memory and file descriptors.
        ProcessCollector(namespace="xpud", registry=self.registry)
        self._metrics_app = make_wsgi_app(self.registry)
        self._slots = threading.BoundedSemaphore(MAX_SCRAPES)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_attribution(self, attribution: Attribution | None) -> None:
        """Plug in the Kubernetes labels (attribution.py); ValueError for
        label names that are not Prometheus's or are the exporter's own."""
        self.collector.set_attribution(attribution)

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, port) being served, None when not serving."""
        httpd = self._httpd
        return None if httpd is None else httpd.server_address[:2]

    def _app(self, environ, start_response):
        if environ.get("PATH_INFO") != PATH:
            start_response("404 Not Found",
                           [("Content-Type", "text/plain; charset=utf-8")])
            return [f"xpud serves its metrics at {PATH}\n".encode()]
        if not self._slots.acquire(blocking=False):
            start_response("503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8"),
                            ("Retry-After", "1")])
            return [f"more than {MAX_SCRAPES} scrapes at once\n".encode()]
        try:
            return self._metrics_app(environ, start_response)
        finally:
            self._slots.release()

    def start(self) -> bool:
        """Listen and serve, in a thread; False (logged) when off or the
        address cannot be had."""
        s = self.settings
        if not s.enabled:
            log.info("metrics: off ([metrics] enabled = false)")
            return False
        cls = _HTTPServer6 if ":" in s.host else _HTTPServer
        try:
            httpd = make_server(s.host, s.port, self._app, server_class=cls,
                                handler_class=_Handler)
        except OSError as e:
            hint = ""
            if e.errno == errno.EADDRINUSE:
                hint = (" (dcgm-exporter listens on 9400 too: give xpud "
                        "another port in [metrics] listen, then systemctl "
                        "reload xpud)")
            elif e.errno == errno.EADDRNOTAVAIL:
                hint = " (no interface of this node has that address)"
            log.error("metrics: cannot listen on %s: %s%s; xpud runs on "
                      "without metrics", s.listen, e.strerror, hint)
            return False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever,
                                        kwargs={"poll_interval": 0.5},
                                        name="xpud-metrics", daemon=True)
        self._thread.start()
        host, port = httpd.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        log.info("metrics: http://%s:%d%s", shown, port, PATH)
        return True

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def configure(self, settings: MetricsConfig) -> None:
        """Take SETTINGS (a reload): serve anew when they changed, or when
        the last try could not listen."""
        if settings == self.settings and \
                (self._httpd is not None or not settings.enabled):
            return
        self.stop()
        self.settings = settings
        self.start()
