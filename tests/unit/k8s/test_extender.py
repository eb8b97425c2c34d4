# SPDX-License-Identifier: Apache-2.0
"""The scheduler extender over HTTP with the payloads kube-scheduler sends
(ExtenderArgs with NodeNames, nodeCacheCapable; ExtenderBindingArgs), each
node's agent over HTTP in front of a real xpud on the in-memory kernel, and
the test API server: filter, prioritize, bind; concurrent binds through two
extender replicas; a pod deleted mid-bind; a lost and a repeated bind; the
extender's mutual TLS: only a client certificate of the operator's CA is
served, and a client that never makes its handshake holds no one else's."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import GIB, small_gpus
from testkubelet.apiserver import ApiServer
from xpu.k8s import agent, extender, node, resources
from xpu.k8s.apiserver import ApiServer as Client

MIB = 1 << 20
NAMES = resources.Names()


def pod(name, mem_mib=0, compute=0, uid=None, ns="default"):
    res = {}
    if mem_mib:
        res["xpu.dev/xpu-memory"] = str(mem_mib)
    if compute:
        res["xpu.dev/xpu-shares"] = str(compute)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns,
                         "uid": uid or f"uid-{name}"},
            "spec": {"containers": [{"name": "main", "image": "x",
                                     "resources": {"limits": res,
                                                   "requests": res}}]}}


CLIENT_TIMEOUT_S = 20


def post(url, verb, body, ctx=None):
    req = urllib.request.Request(f"{url}/{verb}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT_S,
                                context=ctx) as r:
        return json.loads(r.read())


@pytest.fixture
def cluster(make_xpud, tmpdir_short):
    """Two nodes (each: xpud + agent), an API server, and make_extender()."""
    api = ApiServer()
    nodes = {}
    agents = []
    for i, gpus in enumerate([small_gpus(), small_gpus(used=(GIB, None))]):
        x = make_xpud(gpus, name=f"xpud{i}")
        a = agent.Agent(f"node{i}", x.socket, node.Reservations(
            str(tmpdir_short / f"res{i}.json"), ttl_s=60), node.BINPACK,
            MIB, token="s3cret")
        port = a.serve("127.0.0.1", 0)
        nodes[f"node{i}"] = (x, a, port)
        agents.append(a)
    ports = {n: p for n, (_, _, p) in nodes.items()}
    exts = []

    handled = []

    def make_extender(policy=node.BINPACK, tls=None):
        # {node} is the agent's port on loopback here (port 1, where
        # nothing listens, for an unknown node); the node's name in a
        # cluster.
        e = extender.Extender(Client(api.url), NAMES, MIB, policy,
                              node_url="http://127.0.0.1:{node}",
                              token="s3cret")
        e.url_of = lambda n: f"http://127.0.0.1:{ports.get(n, 1)}"
        handle = e.handle

        def record(path, body):
            handled.append(path)
            return handle(path, body)
        e.handle = record
        port = e.serve("127.0.0.1", 0, **({"tls": tls} if tls else {}))
        exts.append(e)
        return f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    make_extender.handled = handled   # the paths the extenders answered

    yield api, nodes, make_extender
    for e in exts:
        e.stop()
    for a in agents:
        a.stop()
    api.close()


def args(p, names=("node0", "node1")):
    # What kube-scheduler sends with nodeCacheCapable: true.
    return {"Pod": p, "Nodes": None, "NodeNames": list(names)}


def test_filter(cluster):
    _, nodes, make = cluster
    url = make()
    # node1 has 1 GiB of GPU 0 used outside any slice (NVML's count).
    r = post(url, "filter", args(pod("a", 1536)))
    assert r["NodeNames"] == ["node0", "node1"]
    r = post(url, "filter", args(pod("a", 2048)))
    assert r["NodeNames"] == ["node0", "node1"]   # node1's GPU 1 is free
    nodes["node1"][0].service.op_create("x", 1, 1 * GIB)
    r = post(url, "filter", args(pod("a", 2048)))
    assert r["NodeNames"] == ["node0"]
    assert r["FailedNodes"]["node1"].startswith(
        "container main: no GPU has 2048 MiB and 0 % free (the most free: "
        "GPU 0, 1024 MiB")
    assert r["Error"] == ""
    # The slice goes (its pod deleted): the GPU is free at once.
    nodes["node1"][0].service.op_destroy("x")
    assert post(url, "filter", args(pod("a", 2048)))["NodeNames"] == [
        "node0", "node1"]
    r = post(url, "filter", args(pod("a", 0, 10)))
    assert r["NodeNames"] == []
    assert r["FailedAndUnresolvableNodes"]["node0"] == (
        "container main asks for xpu.dev/xpu-shares without "
        "xpu.dev/xpu-memory: a slice needs its memory; ask for both")


def test_filter_unreachable_node_and_bad_input(cluster):
    _, _, make = cluster
    url = make()
    r = post(url, "filter", args(pod("a", 10), ["node0", "nowhere"]))
    assert r["NodeNames"] == ["node0"]
    assert "xpu-k8s on node nowhere cannot be reached" in \
        r["FailedNodes"]["nowhere"]
    req = urllib.request.Request(f"{url}/filter", b"{not json",
                                 {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 400
    assert json.loads(e.value.read())["Error"].startswith(
        "filter: the body is not JSON")
    bad = pod("a", 10)
    bad["spec"]["containers"][0]["resources"]["limits"][
        "xpu.dev/xpu-memory"] = "1.5"
    r = post(url, "filter", args(bad))
    assert r["FailedAndUnresolvableNodes"]["node0"] == (
        "container main: '1.5' is not a whole quantity")



def test_names_that_are_not_names_are_refused_before_any_url(cluster):
    """A node's name goes into its agent's URL, with the agents' bearer
    token: "host:port/?" names another host, which got the token (found
    by a review in session 57).  A pod's name and namespace go into the API
    server's path.  Neither is formatted into a URL unless it is a DNS-1123
    name, and the request says which one was not."""
    _, _, make = cluster
    url = make()
    seen = []
    import http.server

    class Catch(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass
    trap = http.server.HTTPServer(("127.0.0.1", 0), Catch)
    t = threading.Thread(target=trap.serve_forever, args=(0.05,), daemon=True)
    t.start()
    try:
        evil = f"127.0.0.1:{trap.server_address[1]}/?"
        for verb in ("filter", "prioritize"):
            req = urllib.request.Request(
                f"{url}/{verb}",
                json.dumps(args(pod("a", 10), ["node0", evil])).encode(),
                {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=20) as r:
                    out = json.loads(r.read())
            except urllib.error.HTTPError as e:
                out = json.loads(e.read())
            err = out["Error"] if isinstance(out, dict) else out
            assert "is not a node's name" in err, out
        for field, value in (("Node", evil), ("PodNamespace", "../x?"),
                             ("PodName", "a/b"), ("PodUID", "u/1")):
            b = {"PodName": "a", "PodNamespace": "default",
                 "PodUID": "uid-a", "Node": "node0"}
            b[field] = value
            assert field in post(url, "bind", b)["Error"]
    finally:
        trap.shutdown()
        trap.server_close()
    assert seen == []


@pytest.mark.parametrize("length", ["-1", "x", None])
def test_a_body_without_a_length_is_refused_not_read_to_the_end(
        cluster, length):
    """Content-Length -1 read the body to the end of the stream (the
    client's to make endless); none, or not a number, failed the request
    with a traceback.  Each is refused, 411, at once."""
    import socket
    _, _, make = cluster
    url = make()
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
        head = "POST /filter HTTP/1.1\r\nHost: x\r\n"
        if length is not None:
            head += f"Content-Length: {length}\r\n"
        c.sendall((head + "\r\n{").encode())   # the body never ends
        reply = b""
        while chunk := c.recv(4096):            # it closes the connection
            reply += chunk
        reply = reply.decode()
    assert reply.startswith(("HTTP/1.0 411", "HTTP/1.1 411")), reply
    assert "Content-Length" in reply.split("\r\n\r\n", 1)[1], reply

def test_prioritize_binpack_and_spread(cluster):
    _, nodes, make = cluster
    nodes["node0"][0].service.op_create("x", 0, 1 * GIB)
    r = post(make(node.BINPACK), "prioritize", args(pod("a", 512)))
    scores = {h["Host"]: h["Score"] for h in r}
    # binpack: node0's GPU 0 is 1.5 of 2 GiB full after, node1's GPU 0
    # too (1 GiB outside slices): equal.
    assert scores == {"node0": 8, "node1": 8}
    nodes["node1"][0].service.op_create("y", 0, 512 * MIB)
    r = post(make(node.BINPACK), "prioritize", args(pod("a", 512)))
    assert {h["Host"]: h["Score"] for h in r} == {"node0": 8, "node1": 10}
    r = post(make(node.SPREAD), "prioritize", args(pod("a", 512)))
    # spread: node0 is 1.5 of 4 GiB full after, node1 2 of 4.
    assert {h["Host"]: h["Score"] for h in r} == {"node0": 6, "node1": 5}


def test_bind_books_then_binds(cluster):
    api, nodes, make = cluster
    url = make()
    api.add_pod(pod("a", 1024, 20))
    r = post(url, "bind", {"PodName": "a", "PodNamespace": "default",
                           "PodUID": "uid-a", "Node": "node0"})
    assert r == {"Error": ""}
    assert api.bindings == [("default", "a", "node0")]
    [res] = nodes["node0"][1].reservations.list()
    assert [(e.memory, e.compute) for e in res.entries] == [(GIB, 20)]
    # Repeated (the scheduler retried): no second booking, no error.
    r = post(url, "bind", {"PodName": "a", "PodNamespace": "default",
                           "PodUID": "uid-a", "Node": "node0"})
    assert r == {"Error": ""}
    assert len(nodes["node0"][1].reservations.list()) == 1
    assert len(api.bindings) == 1


def test_pod_deleted_mid_bind(cluster):
    api, nodes, make = cluster
    url = make()
    api.add_pod(pod("a", 1024))
    # The pod is deleted right after the extender read it.
    api.on_get_pod = lambda ns, name: api.pods.pop((ns, name))
    r = post(url, "bind", {"PodName": "a", "PodNamespace": "default",
                           "PodUID": "uid-a", "Node": "node0"})
    assert r["Error"] == ("pod default/a was deleted while being bound; its "
                          "booking on the node is released")
    assert nodes["node0"][1].reservations.list() == []
    # Deleted before: a plain error, nothing booked.
    api.on_get_pod = None
    r = post(url, "bind", {"PodName": "a", "PodNamespace": "default",
                           "PodUID": "uid-a", "Node": "node0"})
    assert r["Error"] == ("pod default/a is gone (deleted before it was "
                          "bound)")
    # Made again under the same name: the old UID binds nothing.
    api.add_pod(pod("a", 1024, uid="uid-new"))
    r = post(url, "bind", {"PodName": "a", "PodNamespace": "default",
                           "PodUID": "uid-a", "Node": "node0"})
    assert "was deleted and made again" in r["Error"]
    assert api.bindings == []


def test_lost_bind_expires(cluster, make_xpud, tmpdir_short):
    # A booking whose binding never came (the extender died) expires.
    now = [1000.0]
    x = make_xpud(name="xpud-t")
    res = node.Reservations(str(tmpdir_short / "r.json"), ttl_s=30,
                            clock=lambda: now[0])
    gpus, _ = node.snapshot(x.socket)
    res.reserve(gpus, "u1", "ns", "p", [("c", 2 * GIB, 0)], node.BINPACK)
    res.reserve(gpus, "u2", "ns", "q", [("c", 2 * GIB, 0)], node.BINPACK)
    with pytest.raises(node.NoRoom):
        res.reserve(gpus, "u3", "ns", "r", [("c", GIB, 0)], node.BINPACK)
    # Kept across a restart of xpu-k8s.
    again = node.Reservations(str(tmpdir_short / "r.json"), ttl_s=30,
                              clock=lambda: now[0])
    assert {r.uid for r in again.list()} == {"u1", "u2"}
    now[0] += 31
    assert again.list() == []
    again.reserve(gpus, "u3", "ns", "r", [("c", GIB, 0)], node.BINPACK)


def test_two_replicas_never_double_book(cluster):
    api, nodes, make = cluster
    urls = [make(), make()]
    # node0: two GPUs of 2 GiB; twelve pods of 1 GiB, bound concurrently,
    # half through each replica: exactly four fit.
    for i in range(12):
        api.add_pod(pod(f"p{i}", 1024, 10))
    results = {}

    def bind(i):
        results[i] = post(urls[i % 2], "bind", {
            "PodName": f"p{i}", "PodNamespace": "default",
            "PodUID": f"uid-p{i}", "Node": "node0"})

    threads = [threading.Thread(target=bind, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [i for i, r in results.items() if r["Error"] == ""]
    assert len(ok) == 4
    for i, r in results.items():
        if i not in ok:
            assert "node node0: container main: no GPU has 1024 MiB" in \
                r["Error"], r
    assert sorted(b[1] for b in api.bindings) == sorted(f"p{i}" for i in ok)
    per_gpu = {}
    for r in nodes["node0"][1].reservations.list():
        for e in r.entries:
            per_gpu[e.gpu_uuid] = per_gpu.get(e.gpu_uuid, 0) + e.memory
    assert sorted(per_gpu.values()) == [2 * GIB, 2 * GIB]


def test_agent_wants_its_token(cluster):
    _, nodes, _ = cluster
    port = nodes["node0"][2]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/node",
                               timeout=10)
    assert e.value.code == 401


# -- mutual TLS (session 58) ---------------------------------------------------
# bind books GPUs with the agents' token and binds with the extender's
# service account: before session 58 anything that reached the Service
# could call it, over plain HTTP, with no credentials.

def server_tls(certs):
    return extender.tls_context(certs.server_crt, certs.server_key,
                                certs.ca_crt)


def refused(url, verb, body, ctx):
    """The call fails before any answer: the handshake (or, in TLS 1.3,
    the first read after it) is refused.  Returns the error."""
    with pytest.raises((OSError, http.client.HTTPException)) as e:
        post(url, verb, body, ctx)
    assert not isinstance(e.value, urllib.error.HTTPError), e.value
    return e.value


BIND_A = {"PodName": "a", "PodNamespace": "default", "PodUID": "uid-a",
          "Node": "node0"}


def test_tls_a_client_without_a_certificate_is_refused(cluster, certs):
    api, nodes, make = cluster
    url = make(tls=server_tls(certs))
    api.add_pod(pod("a", 1024))
    plain = url.replace("https://", "http://")
    for verb, body in (("filter", args(pod("a", 1024))), ("bind", BIND_A)):
        refused(url, verb, body, certs.client(None))   # TLS, no certificate
        refused(plain, verb, body, None)               # plain HTTP
    # Nothing reached the extender's verbs, the agents nor the API server.
    assert make.handled == []
    assert api.bindings == []
    assert [n[1].reservations.list() for n in nodes.values()] == [[], []]
    # The same server answers kube-scheduler's certificate.
    r = post(url, "filter", args(pod("a", 1024)), certs.client())
    assert r["NodeNames"] == ["node0", "node1"]
    assert make.handled == ["/filter"]


def test_tls_a_certificate_of_another_ca_is_refused(cluster, certs):
    api, nodes, make = cluster
    url = make(tls=server_tls(certs))
    api.add_pod(pod("a", 1024))
    for verb, body in (("filter", args(pod("a", 1024))), ("bind", BIND_A)):
        refused(url, verb, body, certs.client("stranger"))
    assert make.handled == []
    assert api.bindings == []
    assert [n[1].reservations.list() for n in nodes.values()] == [[], []]


def test_tls_kube_scheduler_s_certificate_is_served_as_before(cluster,
                                                              certs):
    api, nodes, make = cluster
    url = make(tls=server_tls(certs))
    ctx = certs.client()
    nodes["node1"][0].service.op_create("x", 1, 1 * GIB)
    r = post(url, "filter", args(pod("a", 2048)), ctx)
    assert r["NodeNames"] == ["node0"]
    assert r["FailedNodes"]["node1"].startswith(
        "container main: no GPU has 2048 MiB")
    r = post(url, "prioritize", args(pod("a", 512)), ctx)
    assert {h["Host"] for h in r} == {"node0", "node1"}
    api.add_pod(pod("a", 1024, 20))
    assert post(url, "bind", BIND_A, ctx) == {"Error": ""}
    assert api.bindings == [("default", "a", "node0")]
    [res] = nodes["node0"][1].reservations.list()
    assert [(e.memory, e.compute) for e in res.entries] == [(GIB, 20)]
    # The request checks hold over TLS too.
    bad = dict(BIND_A, Node="127.0.0.1:1/?")
    assert "Node" in post(url, "bind", bad, ctx)["Error"]
    assert make.handled == ["/filter", "/prioritize", "/bind", "/bind"]


def test_tls_a_client_that_never_shakes_hands_holds_no_one_else(
        cluster, certs, monkeypatch):
    """The handshake is made in the connection's thread: made on accept,
    one client that connects and sends nothing would keep every other
    waiting (for ever: an accepted socket has no timeout)."""
    _, _, make = cluster
    # The other client must be answered while the first still waits.
    monkeypatch.setattr(extender, "HANDSHAKE_TIMEOUT_S", 2 * CLIENT_TIMEOUT_S)
    url = make(tls=server_tls(certs))
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=20):
        r = post(url, "filter", args(pod("a", 1024)), certs.client())
        assert r["NodeNames"] == ["node0", "node1"]


def test_tls_a_stalled_handshake_is_dropped_after_the_timeout(
        cluster, certs, monkeypatch):
    _, _, make = cluster
    monkeypatch.setattr(extender, "HANDSHAKE_TIMEOUT_S", 1)
    url = make(tls=server_tls(certs))
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
        # The server closes it (recv returns b"", not a timeout here).
        assert c.recv(1) == b""
    assert make.handled == []


def test_connections_past_the_bound_are_closed_with_no_thread(
        cluster, certs, monkeypatch):
    """Each connection is a thread, held until its handshake is made or
    times out: anyone who reaches the port held as many threads as it
    opened connections.  Now MAX_CONNECTIONS are served at once, one more
    is closed as it comes, and kube-scheduler is served again once they
    go."""
    def serving():
        return sum("process_request_thread" in t.name
                   for t in threading.enumerate())

    _, _, make = cluster
    monkeypatch.setattr(extender, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(extender, "HANDSHAKE_TIMEOUT_S", 2 * CLIENT_TIMEOUT_S)
    url = make(tls=server_tls(certs))
    port = int(url.rsplit(":", 1)[1])
    before = serving()
    held = []
    try:
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", port),
                                                 timeout=CLIENT_TIMEOUT_S))
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while serving() < before + 4:
            assert time.monotonic() < deadline, serving()
            time.sleep(0.01)
        # one at a time (a burst would overflow the listen backlog): each
        # closed at once, long before a handshake would time out
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port),
                                          timeout=CLIENT_TIMEOUT_S) as c:
                assert c.recv(1) == b""
        assert serving() == before + 4
    finally:
        for c in held:
            c.close()
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        try:
            r = post(url, "filter", args(pod("a", 1024)), certs.client())
            break
        except OSError:
            # the held ones' threads may not have seen their close yet
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert r["NodeNames"] == ["node0", "node1"]


DOCS = Path(__file__).resolve().parents[3] / "docs" / "kubernetes.md"


def test_tls_the_certificates_the_docs_make_work(cluster, tmp_path):
    """docs/kubernetes.md's openssl commands ("Installing") make a CA, the
    extender's certificate for its Service's name and kube-scheduler's:
    the extender takes them, and a client checking the name the
    scheduler's urlPrefix gives is served."""
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", DOCS.read_text(),
                                     re.DOTALL) if "xpu-extender-ca" in b]
    subprocess.run(["bash", "-euc", block], cwd=tmp_path, check=True,
                   capture_output=True)
    _, _, make = cluster
    url = make(tls=extender.tls_context(str(tmp_path / "tls.crt"),
                                        str(tmp_path / "tls.key"),
                                        str(tmp_path / "ca.crt")))
    port = int(url.rsplit(":", 1)[1])
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    ctx.load_cert_chain(str(tmp_path / "client.crt"),
                        str(tmp_path / "client.key"))
    body = json.dumps(args(pod("a", 1024))).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw, \
            ctx.wrap_socket(raw,
                            server_hostname="xpu-extender.xpu-system.svc"
                            ) as c:
        c.sendall(b"POST /filter HTTP/1.1\r\nHost: xpu-extender\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        reply = b""
        while chunk := c.recv(65536):
            reply += chunk
    head, _, data = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200"), head
    assert json.loads(data)["NodeNames"] == ["node0", "node1"]
