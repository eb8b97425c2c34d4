# SPDX-License-Identifier: Apache-2.0
"""xpu-k8s: xpu's Kubernetes companion (docs/kubernetes.md).

  xpu-k8s node           on every GPU node (DaemonSet, or xpu-k8s.service):
                         the device plugins, the agent the scheduler
                         extender asks, and (--dra) the DRA kubelet plugin
  xpu-k8s extender       the scheduler extender (a Deployment)
  xpu-k8s resourceslice  print this node's ResourceSlice

It asks xpud through its socket; it never talks to xpu.ko itself.  Errors
are one line; SIGTERM and SIGINT stop it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Sequence

from .. import __version__, api, cmdline, model, sizes
from ..errors import UsageError, XpuError
from ..signals import SignalRelay
from . import agent, deviceplugin, dra, extender, kubelet, node, resources
from .apiserver import ApiServer, ApiServerError

PROG = "xpu-k8s"
log = logging.getLogger("xpu")


class Failed(XpuError):
    pass


def _hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not HOST:PORT (e.g. 0.0.0.0:9402)")
    return host.strip("[]") or "0.0.0.0", int(port)


def _unit(text: str) -> int:
    try:
        return resources.parse_memory_unit(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v <= 86400:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a number of seconds from 0 to 86400")
    return v


def _host_memory(text: str) -> int:
    try:
        return model.check_host_memory(sizes.parse_size(text))
    except (TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _vendor(text: str) -> str:
    try:
        return resources.check_vendor(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    p = cmdline.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version",
                   version=f"{PROG} {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="debug messages, and tracebacks with errors")
    p.add_argument("--xpud-socket", default=api.DEFAULT_SOCKET,
                   metavar="PATH", help="xpud's socket (default: %(default)s)")
    p.add_argument("--vendor", type=_vendor, default=resources.DEFAULT_VENDOR,
                   help="the domain of the resource and CDI names "
                   "(default: %(default)s); the same everywhere")
    p.add_argument("--memory-unit", type=_unit, default="1MiB",
                   help="the size of one VENDOR/xpu-memory unit (default: "
                   "1MiB); the same on the nodes and the extender")
    p.add_argument("--policy", choices=node.POLICIES, default=node.BINPACK,
                   help="which GPU a share goes to (default: %(default)s)")
    p.add_argument("--apiserver", metavar="URL",
                   help="the API server (default: in-cluster, from the "
                   "service account)")
    p.add_argument("--apiserver-token-file", metavar="PATH")
    p.add_argument("--apiserver-ca-file", metavar="PATH")
    sub = p.add_subparsers(dest="command", required=True)

    n = sub.add_parser("node", help="device plugins, agent and DRA driver")
    n.add_argument("--node-name", default=os.environ.get("NODE_NAME")
                   or socket.gethostname())
    n.add_argument("--device-plugin-dir", default=kubelet.DEVICE_PLUGIN_DIR)
    n.add_argument("--pod-resources-socket",
                   default=kubelet.POD_RESOURCES_SOCKET)
    n.add_argument("--gc-grace", type=_seconds, default=30.0,
                   metavar="SECONDS",
                   help="how long a pod's slice outlives the pod (kubelet "
                   "records an allocation just after Allocate; default "
                   "%(default)s)")
    n.add_argument("--host-memory", type=_host_memory, default=0,
                   metavar="SIZE",
                   help="the bound on the system memory the driver "
                   "allocates for each slice made here (pinned host pages; "
                   "8GiB, 16Gi), and the loosest a DRA claim may ask; 0 "
                   "(the default): none")
    n.add_argument("--no-device-plugin", action="store_true",
                   help="serve no device plugin (a DRA-only node)")
    n.add_argument("--agent-listen", type=_hostport, default="0.0.0.0:9402",
                   help="where the extender asks this node (default: "
                   "%(default)s)")
    n.add_argument("--no-agent", action="store_true",
                   help="no agent (no extender in this cluster)")
    n.add_argument("--agent-token-file", metavar="PATH",
                   help="a shared secret the extender must present")
    n.add_argument("--state-dir", default="/var/lib/xpu/k8s",
                   help="where reservations are kept (default: %(default)s)")
    n.add_argument("--reservation-ttl", type=_seconds,
                   default=node.DEFAULT_TTL_S,
                   help="seconds a booking waits for its pod")
    n.add_argument("--dra", action="store_true",
                   help="serve the DRA kubelet plugin and publish the "
                   "node's ResourceSlice")
    n.add_argument("--plugins-dir", default=kubelet.PLUGINS_DIR)
    n.add_argument("--plugins-registry-dir",
                   default=kubelet.PLUGINS_REGISTRY_DIR)

    e = sub.add_parser("extender", help="the scheduler extender")
    e.add_argument("--listen", type=_hostport, default="0.0.0.0:8888")
    e.add_argument("--node-url", default="http://{node}:9402",
                   help="each node's agent; {node} is the node's name "
                   "(default: %(default)s)")
    e.add_argument("--agent-token-file", metavar="PATH")
    e.add_argument("--tls-cert", metavar="FILE",
                   help="the extender's certificate (PEM, its chain after "
                   "it): it serves HTTPS")
    e.add_argument("--tls-key", metavar="FILE",
                   help="its private key (PEM, no passphrase)")
    e.add_argument("--client-ca", metavar="FILE",
                   help="the CA (PEM) that signs kube-scheduler's client "
                   "certificate: a connection without a certificate it "
                   "signed is refused; a CA of its own, not the cluster's")
    e.add_argument("--insecure-no-client-auth", action="store_true",
                   help="serve plain HTTP and ask no credentials: anything "
                   "that reaches the port can bind pods and book GPUs")

    r = sub.add_parser("resourceslice", help="print this node's "
                       "ResourceSlice")
    r.add_argument("--node-name", default=os.environ.get("NODE_NAME")
                   or socket.gethostname())
    return p


def _read(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None


def _api(args) -> ApiServer:
    if args.apiserver:
        return ApiServer(args.apiserver, _read(args.apiserver_token_file),
                         args.apiserver_ca_file)
    try:
        return ApiServer.in_cluster()
    except (ApiServerError, OSError) as e:
        raise UsageError(f"no API server: {e}") from None


def _wait(stop: threading.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        stop.wait()
        return
    # stop.set() from a handler of Python's own, in this thread, could wait
    # for the lock stop.wait() holds (signals.py).
    with SignalRelay({signal.SIGTERM: lambda _: stop.set(),
                      signal.SIGINT: lambda _: stop.set()},
                     name="xpu-k8s-signals"):
        stop.wait()


def run_node(args, stop: threading.Event) -> int:
    names = resources.Names(args.vendor)
    try:
        node.ask(args.xpud_socket, "version")
    except node.NodeError as e:
        raise Failed(f"xpud: {e}") from None
    res = node.Reservations(os.path.join(args.state_dir,
                                         "reservations.json"),
                            ttl_s=args.reservation_ttl)
    parts = []
    try:
        if not args.no_device_plugin:
            m = deviceplugin.Manager(deviceplugin.Config(
                args.xpud_socket, names, args.device_plugin_dir,
                args.pod_resources_socket, args.memory_unit, args.policy,
                gc_grace_s=args.gc_grace, host_memory=args.host_memory), res)
            try:
                m.start()
            except ValueError as e:
                raise Failed(str(e)) from None
            parts.append(m)
        if not args.no_agent:
            a = agent.Agent(args.node_name, args.xpud_socket, res,
                            args.policy, args.memory_unit,
                            _read(args.agent_token_file))
            try:
                port = a.serve(*args.agent_listen)
            except OSError as e:
                raise Failed(f"agent: cannot listen on "
                             f"{args.agent_listen}: {e.strerror}") from None
            log.info("agent listening on port %d", port)
            parts.append(a)
        if args.dra:
            d = dra.Driver(args.node_name, args.xpud_socket, _api(args),
                           names, names.vendor, args.plugins_dir,
                           args.plugins_registry_dir,
                           host_memory=args.host_memory)
            d.start()
            parts.append(d)
            try:
                d.publish()
            except (ApiServerError, node.NodeError) as e:
                log.error("the ResourceSlice is not published: %s", e)
        _wait(stop)
    finally:
        for p in reversed(parts):
            p.stop()
    return 0


_TLS_OPTIONS = ("--tls-cert", "--tls-key", "--client-ca")


def _extender_tls(args) -> ssl.SSLContext | None:
    """The extender's TLS, from its options; None: plain HTTP, which must
    be asked for by name."""
    files = dict(zip(_TLS_OPTIONS, (args.tls_cert, args.tls_key,
                                    args.client_ca)))
    given = [o for o, v in files.items() if v]
    if args.insecure_no_client_auth:
        if given:
            raise UsageError(f"--insecure-no-client-auth serves plain HTTP: "
                             f"drop it or {', '.join(given)}")
        log.warning("--insecure-no-client-auth: the extender serves plain "
                    "HTTP and asks no credentials; anything that reaches "
                    "its port can bind pods and book GPUs")
        return None
    if not given:
        raise UsageError("the extender needs --tls-cert, --tls-key and "
                         "--client-ca (mutual TLS with kube-scheduler: "
                         "docs/kubernetes.md), or --insecure-no-client-auth "
                         "to serve plain HTTP to anyone")
    missing = [o for o, v in files.items() if not v]
    if missing:
        raise UsageError(f"{', '.join(given)} without {', '.join(missing)}: "
                         "mutual TLS needs all three")
    try:
        return extender.tls_context(args.tls_cert, args.tls_key,
                                    args.client_ca)
    except extender.TLSError as err:
        raise UsageError(str(err)) from None


def run_extender(args, stop: threading.Event) -> int:
    tls = _extender_tls(args)
    e = extender.Extender(_api(args), resources.Names(args.vendor),
                          args.memory_unit, args.policy, args.node_url,
                          _read(args.agent_token_file))
    try:
        port = e.serve(*args.listen, tls=tls)
    except OSError as err:
        raise Failed(f"cannot listen on {args.listen}: {err.strerror}"
                     ) from None
    log.info("extender listening on port %d (%s)", port,
             "HTTPS, client certificates required" if tls else "plain HTTP")
    try:
        _wait(stop)
    finally:
        e.stop()
    return 0


def run_resourceslice(args) -> int:
    try:
        gpus, _ = node.snapshot(args.xpud_socket)
    except node.NodeError as e:
        raise Failed(f"xpud: {e}") from None
    rs = dra.resource_slice(args.vendor, args.node_name, gpus)
    json.dump(rs, sys.stdout, indent=2)
    print()
    return 0


def main(argv: Sequence[str] | None = None,
         stop: threading.Event | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO,
                        format=f"{PROG}: %(levelname)s: %(message)s")
    stop = stop or threading.Event()

    def body() -> int:
        if args.command == "node":
            return run_node(args, stop)
        if args.command == "extender":
            return run_extender(args, stop)
        return run_resourceslice(args)

    return cmdline.run(PROG, args.debug, body)


if __name__ == "__main__":
    sys.exit(main())
