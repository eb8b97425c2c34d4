# SPDX-License-Identifier: Apache-2.0
"""A bound on the connections a threading socketserver serves at once.

socketserver's ThreadingMixIn starts a thread for every connection it
accepts, without end: a client whose requests trickle in a byte at a time
(each read waits the handler's timeout at most, the request as long as
bytes come), or that never finishes a TLS handshake, holds one each.  With
BoundedThreadsMixIn before ThreadingMixIn in a server's bases, at most
max_connections are served at once; the rest are closed as they come,
with no thread made for them.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class BoundedThreadsMixIn:
    max_connections = 16
    # what the log calls the server
    server_label = "server"

    def server_activate(self) -> None:
        super().server_activate()
        self._connections = threading.BoundedSemaphore(self.max_connections)

    def process_request(self, request, client_address) -> None:
        if not self._connections.acquire(blocking=False):
            log.debug("%s: %s: more than %d connections; closed",
                      self.server_label, client_address, self.max_connections)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            # no thread (RuntimeError: the host's limit): not served
            self._connections.release()
            self.shutdown_request(request)
            log.exception("%s: cannot serve %s", self.server_label,
                          client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()
