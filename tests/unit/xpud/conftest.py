# SPDX-License-Identifier: Apache-2.0
"""Fixtures for xpud's unit tests: an in-memory kernel (xpud_fakes.py), a
service on it, and a real server on a socket in a temporary directory."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from xpu import config
from xpu.auth import Authorizer
from xpu.server import Dispatcher, Server
from xpu.service import Service
from xpu.state import StateStore
from xpud_fakes import FakeBackend


@pytest.fixture
def backend():
    return FakeBackend()


@pytest.fixture
def cgroup_root(tmp_path):
    root = tmp_path / "cgroup"
    (root / "jobs" / "a").mkdir(parents=True)
    (root / "jobs" / "b").mkdir(parents=True)
    return root


@pytest.fixture
def make_service(tmp_path, backend, cgroup_root):
    """make_service(config_text="") -> a started Service on `backend`,
    its state in tmp_path/state."""

    def make(config_text: str = "", start: bool = True) -> Service:
        cfg = config.parse(config_text, str(tmp_path / "xpud.toml"))
        svc = Service(backend, StateStore(str(tmp_path / "state")), cfg,
                      cgroup_root=str(cgroup_root))
        if start:
            svc.start()
        return svc

    return make


@pytest.fixture
def sockdir():
    # Not tmp_path: a UNIX socket's path must fit in 108 bytes.
    d = tempfile.mkdtemp(prefix="xpu-test-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def serve(sockdir):
    """serve(handler, authorizer=None) -> the path of a running server."""
    servers = []

    def start(handler, authorizer=None, **kw) -> str:
        path = str(sockdir / f"xpud{len(servers)}.sock")
        srv = Server(path, Dispatcher(handler, authorizer or Authorizer()),
                     **kw)
        srv.start()
        servers.append(srv)
        return path

    yield start
    for srv in servers:
        srv.stop()


@pytest.fixture
def served(make_service, serve):
    """A started service on FakeBackend, served on a socket: (path,
    service)."""
    svc = make_service()
    return serve(svc), svc
