# SPDX-License-Identifier: Apache-2.0
"""kube-scheduler's HTTP extender for xpu's fractional resources.

kube-scheduler (KubeSchedulerConfiguration `extenders`, deploy/kubernetes/
scheduler-config.yaml) POSTs, for pods that ask for a managed resource
(VENDOR/xpu-memory, VENDOR/xpu-shares):

  URLPREFIX/filter      ExtenderArgs {Pod, Nodes, NodeNames}
                        -> ExtenderFilterResult {NodeNames, FailedNodes,
                           FailedAndUnresolvableNodes, Error}
  URLPREFIX/prioritize  ExtenderArgs -> HostPriorityList [{Host, Score}]
  URLPREFIX/bind        ExtenderBindingArgs {PodName, PodNamespace, PodUID,
                        Node} -> ExtenderBindingResult {Error}

(the field names of k8s.io/kube-scheduler/extender/v1, which has no JSON
tags: Go writes the field names; requests are read case-insensitively as Go
does).  nodeCacheCapable: the scheduler sends node names only, and every
answer comes from the nodes themselves: each node's xpu-k8s agent (agent.py)
says what its GPUs have free now, from xpud, including memory used outside
any slice and slices made outside Kubernetes.  The extender keeps no cache,
so nothing stale can block an idle GPU after a pod is deleted.

bind reads the pod from the API server (so any replica can bind what
another filtered), books it on the node (the node refuses what no longer
fits: two replicas cannot double-book), then binds it with the pod's UID as
a precondition.  When the binding fails (the pod was deleted mid-bind) the
booking is released; a booking whose bind was lost expires on the node.  A
repeated bind of a pod already on that node succeeds and books nothing new.
The node does not need the booking to admit the pod: nothing is handed over
in annotations.

bind books GPUs with the agents' token and binds pods with this extender's
service account, so only kube-scheduler may call: the extender serves HTTPS
and takes a connection only with a client certificate signed by the CA the
operator gives (tls_context; kube-scheduler's extender tlsConfig certFile
and keyFile).  The handshake is made in the connection's own thread, with
the request's timeout.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import ssl
import threading
import urllib.error
import urllib.request
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..bounded import BoundedThreadsMixIn
from . import node, resources
from .apiserver import ApiServer, ApiServerError

log = logging.getLogger(__name__)

MAX_BODY = 16 * 1024 * 1024
# A request's socket reads wait this long at most (a client that stalls
# holds a thread: ThreadingHTTPServer makes one per connection).
REQUEST_TIMEOUT_S = 30
# A TLS handshake, which kube-scheduler makes in milliseconds, this long.
HANDSHAKE_TIMEOUT_S = 5
# Connections served at once, a thread each; more are closed as they come.
# Before a handshake anyone who reaches the port holds one, for
# HANDSHAKE_TIMEOUT_S: without the bound, as many threads as connections.
MAX_CONNECTIONS = 64
# Node, pod and namespace names are DNS-1123 subdomains (namespaces are
# labels, a subset), 253 characters at most; a pod's UID is a UUID.  They
# go into URLs (the node's agent's, the API server's paths): anything else
# in a request is refused, never formatted into one -- a "node" named
# "attacker:80/?" sent the agents' bearer token there.
_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                      r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_UID_RE = re.compile(r"[0-9A-Za-z-]{1,64}\Z")


def _is_name(s) -> bool:
    return isinstance(s, str) and len(s) <= 253 and bool(_NAME_RE.match(s))


MAX_PRIORITY = 10


class BadRequest(Exception):
    pass


class TLSError(ValueError):
    """A file for TLS the extender cannot use; the message is one line
    that names the option and the file."""


def tls_context(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
    """The extender's side of mutual TLS: CERT (PEM, its chain after it)
    and its KEY (PEM, no passphrase) for TLS 1.2 or later, and a client
    certificate signed by a CA of CLIENT_CA (PEM) required of every
    connection.  Raises TLSError."""
    texts = {}
    for opt, path in (("--tls-cert", cert), ("--tls-key", key),
                      ("--client-ca", client_ca)):
        try:
            with open(path, "rb") as f:
                texts[opt] = f.read().decode("ascii", "replace")
        except OSError as e:
            raise TLSError(f"{opt} {path}: {e.strerror}") from None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_verify_locations(cadata=texts["--client-ca"])
    except (ssl.SSLError, ValueError):
        raise TLSError(f"--client-ca {client_ca}: no certificate (PEM) in "
                       "it") from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(
            cadata=texts["--tls-cert"])
    except (ssl.SSLError, ValueError):
        raise TLSError(f"--tls-cert {cert}: no certificate (PEM) in "
                       "it") from None

    def passphrase():
        raise TLSError(f"--tls-key {key} is encrypted: give the key "
                       "without a passphrase")
    try:
        ctx.load_cert_chain(cert, key, password=passphrase)
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            raise TLSError(f"--tls-key {key} is not the key of --tls-cert "
                           f"{cert}'s certificate") from None
        raise TLSError(f"--tls-key {key}: no private key (PEM) in it"
                       ) from None
    except OSError as e:   # the file went since it was read
        raise TLSError(f"--tls-cert {cert} or --tls-key {key}: "
                       f"{e.strerror}") from None
    return ctx


def _ci(obj: dict, key: str):
    """obj[key], matched without case as Go's encoding/json does."""
    if not isinstance(obj, dict):
        return None
    if key in obj:
        return obj[key]
    low = key.lower()
    return next((v for k, v in obj.items() if k.lower() == low), None)


class Request:
    """What a pod asks of xpu: per container (name, memory bytes,
    compute %)."""

    def __init__(self, pod: dict, names: resources.Names, unit: int):
        if not isinstance(pod, dict):
            raise BadRequest("the request has no Pod")
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.uid = meta.get("uid", "")
        self.namespace = meta.get("namespace", "default")
        self.name = meta.get("name", "")
        self.containers: list[tuple[str, int, int]] = []
        self.invalid = ""
        # Regular containers: kubelet hands an init container's devices on
        # to them, so counting both would book twice.
        for c in spec.get("containers") or []:
            res = c.get("resources") or {}
            want = dict(res.get("requests") or {})
            want.update(res.get("limits") or {})
            try:
                mem = resources.quantity(want.get(names.memory, 0))
                cpt = resources.quantity(want.get(names.shares, 0))
            except ValueError as e:
                self.invalid = f"container {c.get('name')}: {e}"
                continue
            if cpt > 100:
                self.invalid = (f"container {c.get('name')} asks for {cpt} "
                                f"{names.shares}: at most 100 (one GPU)")
            elif cpt and not mem:
                self.invalid = (f"container {c.get('name')} asks for "
                                f"{names.shares} without {names.memory}: a "
                                "slice needs its memory; ask for both")
            if mem or cpt:
                self.containers.append((c.get("name", ""), mem * unit, cpt))

    def place(self, gpus: list[node.Gpu], policy: str) -> tuple[float, float]:
        """Place every container on GPUS (as the node would).  Returns the
        fill of the GPUs used and of the whole node afterwards, 0 to 1 each
        (by memory).  Raises NoRoom."""
        gpus = [node.Gpu(**vars(g)) for g in gpus]
        used = []
        for cname, mem, cpt in self.containers:
            try:
                g = node.pick(gpus, mem, cpt, policy)
            except node.NoRoom as e:
                raise node.NoRoom(f"container {cname}: {e}") from None
            g.memory_free -= mem
            g.compute_free -= cpt
            used.append(g)
        total = sum(g.memory_total for g in gpus) or 1
        whole = 1 - sum(g.memory_free for g in gpus) / total
        if not used:
            return 0.0, whole
        return sum(1 - g.memory_free / g.memory_total
                   for g in used) / len(used), whole


class Extender:
    def __init__(self, api: ApiServer | None, names: resources.Names,
                 memory_unit: int = resources.DEFAULT_MEMORY_UNIT,
                 policy: str = node.BINPACK,
                 node_url: str = "http://{node}:9402",
                 token: str | None = None, timeout: float = 5.0):
        self.api = api
        self.names = names
        self.unit = memory_unit
        self.policy = policy
        self.node_url = node_url
        self.token = token
        self.timeout = timeout
        self.pool = futures.ThreadPoolExecutor(max_workers=16)
        self.httpd: ThreadingHTTPServer | None = None

    # -- the nodes ---------------------------------------------------------------

    def _node(self, name: str, method: str, path: str, body=None):
        """(status, JSON) from node NAME's agent; status 0: unreachable."""
        url = self.url_of(name) + path
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read())
            except ValueError:
                return e.code, {"error": f"{e.code} {e.reason}"}
        except (urllib.error.URLError, http.client.HTTPException, OSError,
                ValueError) as e:
            return 0, {"error": f"xpu-k8s on node {name} cannot be reached "
                       f"({url}): {getattr(e, 'reason', e)}"}

    def url_of(self, name: str) -> str:
        return self.node_url.format(node=name)

    def room(self, name: str) -> list[node.Gpu]:
        status, obj = self._node(name, "GET", "/v1/node")
        if status != 200:
            raise node.NodeError(obj.get("error", f"status {status}"))
        unit = obj.get("memory_unit")
        if unit != self.unit:
            raise node.NodeError(
                f"node {name} counts {self.names.memory} in units of {unit} "
                f"bytes, this extender in {self.unit}: give both the same "
                "--memory-unit")
        return [node.Gpu(**g) for g in obj["gpus"]]

    # -- the verbs -----------------------------------------------------------------

    def _args(self, body: dict):
        pod = _ci(body, "Pod")
        names = _ci(body, "NodeNames")
        if names is None:
            nodes = _ci(body, "Nodes") or {}
            names = [(n.get("metadata") or {}).get("name")
                     for n in (nodes.get("items") or [])]
        if not isinstance(names, list):
            raise BadRequest("NodeNames must be a list")
        for n in names:
            if not _is_name(n):
                raise BadRequest(f"{n!r} is not a node's name (a DNS-1123 "
                                 "subdomain)")
        return Request(pod, self.names, self.unit), names

    def filter(self, body: dict) -> dict:
        try:
            req, names = self._args(body)
        except BadRequest as e:
            return {"NodeNames": [], "FailedNodes": {},
                    "FailedAndUnresolvableNodes": {}, "Error": str(e)}
        ok, failed, never = [], {}, {}
        if req.invalid:
            never = {n: req.invalid for n in names}
        else:
            def check(n):
                try:
                    req.place(self.room(n), self.policy)
                    return n, None
                except (node.NodeError, node.NoRoom) as e:
                    return n, str(e)
            for n, err in self.pool.map(check, names):
                if err is None:
                    ok.append(n)
                else:
                    failed[n] = err
        return {"NodeNames": ok, "FailedNodes": failed,
                "FailedAndUnresolvableNodes": never, "Error": ""}

    def prioritize(self, body: dict) -> list:
        req, names = self._args(body)

        def score(n):
            # binpack: the GPUs it lands on are full after (a partly used
            # GPU before an idle one); spread: the node stays empty.
            try:
                gpu_fill, node_fill = req.place(self.room(n), self.policy)
            except (node.NodeError, node.NoRoom):
                return {"Host": n, "Score": 0}
            s = gpu_fill if self.policy == node.BINPACK else 1 - node_fill
            return {"Host": n, "Score": round(s * MAX_PRIORITY)}

        return list(self.pool.map(score, names))

    def bind(self, body: dict) -> dict:
        name = _ci(body, "PodName")
        ns = _ci(body, "PodNamespace")
        uid = _ci(body, "PodUID")
        target = _ci(body, "Node")
        if not all(isinstance(x, str) and x for x in (name, ns, uid, target)):
            return {"Error": "ExtenderBindingArgs needs PodName, "
                    "PodNamespace, PodUID and Node"}
        for what, x in (("PodName", name), ("PodNamespace", ns),
                        ("Node", target)):
            if not _is_name(x):
                return {"Error": f"{what} {x!r} is not a DNS-1123 name"}
        if not _UID_RE.match(uid):
            return {"Error": f"PodUID {uid!r} is not a UID"}
        where = f"pod {ns}/{name}"
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        try:
            pod = self.api.get(path)
        except ApiServerError as e:
            if e.status == 404:
                return {"Error": f"{where} is gone (deleted before it was "
                        "bound)"}
            return {"Error": f"{where}: {e}"}
        meta = pod.get("metadata") or {}
        if meta.get("uid") != uid:
            return {"Error": f"{where} was deleted and made again (UID "
                    f"{meta.get('uid')}, not {uid}): nothing bound"}
        if meta.get("deletionTimestamp"):
            return {"Error": f"{where} is being deleted"}
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            if bound == target:
                return {"Error": ""}  # a repeated bind: done already
            return {"Error": f"{where} is bound to {bound} already"}
        req = Request(pod, self.names, self.unit)
        if req.invalid:
            return {"Error": f"{where}: {req.invalid}"}
        booked = False
        if req.containers:
            status, obj = self._node(target, "POST", "/v1/reservations", {
                "uid": uid, "namespace": ns, "name": name,
                "containers": [{"name": c, "memory": m, "compute": p}
                               for c, m, p in req.containers]})
            if status != 200:
                return {"Error": obj.get("error", f"status {status}")}
            booked = True
        try:
            self.api.post(f"{path}/binding", {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node",
                           "name": target}})
        except ApiServerError as e:
            if booked:
                self._node(target, "DELETE", f"/v1/reservations/{uid}")
            if e.status == 404:
                return {"Error": f"{where} was deleted while being bound; "
                        "its booking on the node is released"}
            return {"Error": f"{where}: binding failed, booking released: "
                    f"{e}"}
        log.info("bound %s to %s", where, target)
        return {"Error": ""}

    # -- HTTP -----------------------------------------------------------------------

    def handle(self, path: str, body: bytes) -> tuple[int, object]:
        verb = path.rstrip("/").rsplit("/", 1)[-1]
        fn = {"filter": self.filter, "prioritize": self.prioritize,
              "bind": self.bind}.get(verb)
        if fn is None:
            return 404, {"Error": f"no verb '{verb}': filter, prioritize "
                         "or bind"}
        try:
            args = json.loads(body)
        except ValueError as e:
            return 400, {"Error": f"{verb}: the body is not JSON: {e}"}
        if not isinstance(args, dict):
            return 400, {"Error": f"{verb}: the body is not a JSON object"}
        try:
            return 200, fn(args)
        except BadRequest as e:
            return 400, {"Error": f"{verb}: {e}"}

    def serve(self, host: str, port: int,
              tls: ssl.SSLContext | None = None) -> int:
        """Serve on HOST:PORT (0: any free port; returns the port): HTTPS
        with TLS (tls_context), plain HTTP without (anyone who reaches the
        port can bind pods)."""
        ext = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_S

            def do_POST(self):
                length = self.headers.get("Content-Length")
                try:
                    n = int(length)
                except (TypeError, ValueError):
                    n = -1
                if n < 0:
                    # read(-1) would read to the end of the stream
                    status, obj = 411, {"Error": "a request needs its "
                                        "Content-Length (a whole number "
                                        f"of bytes), not {length!r}"}
                    self.close_connection = True
                elif n > MAX_BODY:
                    status, obj = 413, {"Error": "request too large"}
                    self.close_connection = True
                else:
                    status, obj = ext.handle(self.path, self.rfile.read(n))
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, fmt, *args):
                log.debug("extender: " + fmt, *args)

        class Server(BoundedThreadsMixIn, ThreadingHTTPServer):
            daemon_threads = True
            max_connections = MAX_CONNECTIONS
            server_label = "extender"

            def finish_request(self, request, client_address):
                # In the connection's own thread, not the accept loop (the
                # listening socket makes no handshake on accept): a client
                # that connects and says nothing holds this thread for
                # HANDSHAKE_TIMEOUT_S, and no one else's connection.
                if tls is not None:
                    request.settimeout(HANDSHAKE_TIMEOUT_S)
                    try:
                        request.do_handshake()
                    except (ssl.SSLEOFError, ConnectionError,
                            TimeoutError) as e:
                        # TCP probes, clients gone, stalls
                        log.debug("extender: %s: no TLS handshake: %s",
                                  client_address[0], e)
                        return
                    except (ssl.SSLError, OSError) as e:
                        log.warning("extender: %s refused: %s",
                                    client_address[0],
                                    getattr(e, "verify_message", None)
                                    or getattr(e, "reason", None) or e)
                        return
                super().finish_request(request, client_address)

        self.httpd = Server((host, port), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(
                self.httpd.socket, server_side=True,
                do_handshake_on_connect=False)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                         daemon=True,
                         name="extender").start()
        return self.httpd.server_address[1]

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
        self.pool.shutdown(wait=False)
