# SPDX-License-Identifier: Apache-2.0
"""xpud, the node daemon of xpu.

build() is the one place that makes every component and hands each its
dependencies; Daemon runs them: it reconciles, serves the socket, tells systemd
it is ready, and then waits for signals, device events and timers in one loop.

    SIGTERM, SIGINT  stop: the socket goes, the kernel's slices stay
    SIGHUP           reload the configuration; an invalid one is refused with
                     one log line and the previous one stays

The CDI spec (xpu/cdi) is written at start and after every change, and
removed at a clean stop.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Protocol

from . import __version__, api, cmdline, config, inventory, kernel, netlink, state, udev
from .auth import Authorizer
from .cdi import refresh
from .errors import ConfigError, XpuError
from .metrics import MetricsServer, node_name
from .notify import Notifier
from .server import Dispatcher, Server
from .service import REAP_S, Service
from .signals import SignalRelay

PROG = "xpud"

# Until device events arrive (pyudev) xpud looks again this often; a pending
# slice (its GPU missing, say) is retried then.
RESYNC_S = 60.0

log = logging.getLogger("xpu.daemon")  # not __main__ under python -m


class Watcher(Protocol):
    """Something that tells the daemon the world changed: pyudev watching
    nvidia* and xpu* devices, pyroute2 listening to the `xpu` generic
    netlink family (a lost event is answered by re-listing).  start() runs
    it (in its own thread) until stop(); it calls changed(reason)."""

    def start(self, changed: Callable[[str], None]) -> None: ...

    def stop(self) -> None: ...


class Daemon:
    def __init__(self, *, config_path: str, config_required: bool,
                 service: Service, server: Server, notifier: Notifier,
                 watchers: Sequence[Watcher] = (),
                 resync_s: float = RESYNC_S,
                 metrics: MetricsServer | None = None, cdi=None,
                 reap_s: float = REAP_S):
        self.config_path = config_path
        self.config_required = config_required
        self.service = service
        self.server = server
        self.notifier = notifier
        self.watchers = list(watchers)
        self.metrics = metrics
        self.resync_s = resync_s
        # The CDI face (cdi.refresh.Refresher), or None.
        self.cdi = cdi
        self.reap_s = reap_s
        self.stop_requested = threading.Event()
        self.reload_requested = threading.Event()
        self.reconcile_requested = threading.Event()
        # Set with any of the above: the main loop sleeps on it alone.
        self._wake = threading.Event()

    # Signal handlers (on the relay's thread) and watchers only set events;
    # the loop does the work.
    def stop(self, *_) -> None:
        self.stop_requested.set()
        self._wake.set()

    def request_reload(self, *_) -> None:
        self.reload_requested.set()
        self._wake.set()

    def request_reconcile(self, reason: str) -> None:
        log.debug("reconcile: %s", reason)
        self.reconcile_requested.set()
        self._wake.set()

    def run(self) -> int:
        # Not Python's own handlers: they run between two bytecodes of the
        # main thread, which may hold an Event's lock that stop() takes
        # (signals.py).
        with SignalRelay({signal.SIGTERM: self.stop, signal.SIGINT: self.stop,
                          signal.SIGHUP: self.request_reload},
                         name="xpud-signals"):
            return self._run()

    def _run(self) -> int:
        log.info("starting version %s: configuration %s%s, state in %s",
                 __version__, self.config_path,
                 "" if os.path.exists(self.config_path) else " (none: "
                 "defaults)", self.service.store.directory)
        v = self.service.op_version()
        if v["kernel"]:
            log.info("xpu.ko %s (api %s)", v["kernel"], v["kernel_api"])
            if v["uvm_interposed"] is False:
                log.warning("xpu.ko does not interpose on UVM's node (is "
                            "nvidia-uvm loaded and /dev/nvidia-uvm made?): "
                            "a bound cgroup's tasks' UVM files are no "
                            "slice's until it does (docs/security.md, "
                            "class 39)")
            if v["uvm_retentions_seen"] is False:
                log.warning("xpu.ko does not see UVM's retention of "
                            "channels (no kprobes, or uvm_probes=0): a "
                            "channel registered through a UVM file passed "
                            "into a slice is not charged to it "
                            "(docs/security.md, class 39)")
            if v["call_pages_guarded"] is False:
                log.warning("vm.mmap_min_addr is below 65536: unless "
                            "SELinux refuses low mappings, a tenant may map "
                            "where xpu.ko puts the pages of its calls, and "
                            "on kernels before 6.10 swap one under the "
                            "driver (xpu.ko's call_pages_exposed counts "
                            "them; docs/security.md, class 41)")
        else:
            log.warning("xpu.ko: %s", v["kernel_error"])
        summary = self.service.start()
        if self.stop_requested.is_set():
            return 0
        self.server.start()
        try:
            if self.cdi is not None:
                # Written once xpud serves: the spec's hook asks xpud.
                self.service.add_listener(self.cdi.update)
                self.cdi.update(self.service.op_list(), force=True)
            if self.metrics:
                self.metrics.start()
            for w in self.watchers:
                w.start(self.request_reconcile)
            self.notifier.ready(summary)
            log.info("ready: %s", summary)
            self._loop()
        finally:
            self.notifier.stopping()
            for w in self.watchers:
                w.stop()
            if self.metrics:
                self.metrics.stop()
            self.server.stop()
            if self.cdi is not None:
                self.cdi.remove()
        log.info("stopped; the kernel's slices stay in force")
        return 0

    def _loop(self) -> None:
        interval = self.notifier.watchdog_interval
        now = time.monotonic()
        next_ping = now if interval else None
        next_resync = now + self.resync_s
        next_reap = now + self.reap_s
        while not self.stop_requested.is_set():
            now = time.monotonic()
            if next_ping is not None and now >= next_ping:
                # Alive means serving: a dead server thread gets no pings,
                # and systemd restarts xpud.
                if self.server.alive():
                    self.notifier.watchdog()
                next_ping = now + interval
            if now >= next_reap:
                # Containers' slices and bindings: gone with the container.
                if self.service.reap_due():
                    self._reap()
                next_reap = time.monotonic() + self.reap_s
            deadline = min(t for t in (next_ping, next_resync, next_reap)
                           if t is not None)
            self._wake.wait(max(deadline - time.monotonic(), 0))
            self._wake.clear()
            if self.stop_requested.is_set():
                break
            if self.reload_requested.is_set():
                self.reload_requested.clear()
                self._reload()
            if self.reconcile_requested.is_set() or \
                    time.monotonic() >= next_resync:
                self.reconcile_requested.clear()
                next_resync = time.monotonic() + self.resync_s
                self._reconcile()

    def _reap(self) -> None:
        try:
            self.service.reap()
        except Exception:  # keep serving; the log says why
            log.exception("reaping containers' slices failed")

    def _reconcile(self) -> None:
        try:
            self.notifier.status(self.service.reconcile())
        except Exception:  # keep serving; the log says why
            log.exception("reconcile failed")

    def _reload(self) -> None:
        self.notifier.reloading()
        try:
            cfg = config.load(self.config_path,
                              missing_ok=not self.config_required)
            if self.cdi is not None:
                self.cdi.configure(cfg.cdi)
            summary = self.service.reload(cfg)
        except ConfigError as e:
            log.error("reload refused, the previous configuration stays: "
                      "%s", e)
            self.notifier.ready(f"reload refused: {e}")
            return
        except XpuError as e:
            log.error("reload: %s", e)
            self.notifier.ready(f"reload: {e}")
            return
        log.info("reloaded %s: %s", self.config_path, summary)
        if self.metrics:
            self.metrics.configure(cfg.metrics)
        self.notifier.ready(summary)


def build(args, environ: Mapping[str, str] = os.environ) -> Daemon:
    """Make every component of xpud from the command line ARGS."""
    config_path = args.config or config.DEFAULT_PATH
    required = args.config is not None
    cfg = config.load(config_path, missing_ok=not required)
    inv = inventory.Inventory()
    # KernelBackend when xpu.ko's device is there, else NullBackend; it
    # logs which.
    backend = kernel.select(inv, args.device, args.node_dir)
    service = Service(backend, state.StateStore(args.state_dir), cfg)
    cdi = refresh.Refresher(cfg.cdi, args.socket, service.op_list)
    server = Server(args.socket, Dispatcher(Ops(service, cdi),
                                            Authorizer()))
    watchers = [netlink.NetlinkWatcher(service.events), udev.UdevWatcher()]
    # /metrics: its figures from the service (one kernel read per scrape).
    metrics = MetricsServer(service, cfg.metrics, node_name(environ))
    return Daemon(config_path=config_path, config_required=required,
                  service=service, server=server,
                  notifier=Notifier(environ), watchers=watchers,
                  metrics=metrics, cdi=cdi)


class Ops:
    """The API's handler: the service's ops, and those of the faces (the
    CDI spec's); each op_<name> is looked up in the faces, then the
    service."""

    def __init__(self, service: Service, *faces):
        self._service = service
        self._faces = faces

    def __getattr__(self, name: str):
        if name.startswith("op_"):
            for f in self._faces:
                if hasattr(f, name):
                    return getattr(f, name)
        return getattr(self._service, name)


class _Formatter(logging.Formatter):
    """One line per record: `xpud: warning: ...` on a terminal, with a
    syslog priority prefix (`<4>...`) for the journal, which reads it.
    Tracebacks only with --debug."""

    _PRIO: ClassVar[dict[int, int]] = {
        logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4,
        logging.ERROR: 3, logging.CRITICAL: 2}

    def __init__(self, journal: bool, debug: bool):
        super().__init__()
        self.journal = journal
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info:
            if self.debug:
                msg += "\n" + self.formatException(record.exc_info)
            else:
                e = record.exc_info[1]
                msg += (f": {type(e).__name__}: {e} (run xpud with --debug "
                        "for the traceback)")
        if self.journal:
            return f"<{self._PRIO.get(record.levelno, 6)}>{msg}"
        if record.levelno == logging.INFO:
            return f"{PROG}: {msg}"
        return f"{PROG}: {record.levelname.lower()}: {msg}"


def _logging(debug: bool, environ: Mapping[str, str]) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(bool(environ.get("JOURNAL_STREAM")),
                                    debug))
    logger = logging.getLogger("xpu")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    logger.propagate = False
    return handler


def build_parser() -> cmdline.ArgumentParser:
    parser = cmdline.ArgumentParser(
        prog=PROG,
        description="The xpu node daemon: keeps the kernel's GPU slices as "
                    "configured and serves xpuctl.",
        epilog="xpud never forks into the background: it runs as the "
               "systemd service xpud.service (Type=notify), or by hand with "
               "--foreground.  SIGHUP reloads the configuration; SIGTERM "
               "stops xpud and leaves the slices in force.")
    cmdline.add_common_arguments(parser)
    parser.add_argument(
        "--foreground", action="store_true",
        help="run without systemd, logging to stderr")
    parser.add_argument(
        "--config", metavar="PATH",
        help=f"the configuration file (default: {config.DEFAULT_PATH}, "
             "which may be missing; a file named here must exist)")
    parser.add_argument(
        "--state-dir", metavar="DIR", default=state.DEFAULT_DIR,
        help="where the desired state is kept (default: %(default)s)")
    parser.add_argument(
        "--socket", metavar="PATH", default=api.DEFAULT_SOCKET,
        help="the socket xpuctl talks to (default: %(default)s)")
    parser.add_argument(
        "--node-dir", metavar="DIR", default=kernel.DEFAULT_NODE_DIR,
        help="where the slices' device nodes xpuN and xpuN-ctl are made "
             "(default: %(default)s)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        def versions() -> int:
            cmdline.print_versions(PROG, args.device, sys.stdout)
            return 0
        return cmdline.run(PROG, args.debug, versions)
    if not args.foreground and not os.environ.get("NOTIFY_SOCKET"):
        parser.error("xpud does not fork into the background: run it with "
                     "--foreground, or as the systemd service xpud.service")
    handler = _logging(args.debug, os.environ)
    # A hung xpud that systemd's watchdog ends (SIGABRT) leaves every
    # thread's stack on stderr, in the journal.
    faulthandler.enable()
    try:
        return cmdline.run(PROG, args.debug, lambda: build(args).run())
    finally:
        logging.getLogger("xpu").removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
