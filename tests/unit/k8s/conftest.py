# SPDX-License-Identifier: Apache-2.0
"""Fixtures for xpu-k8s's host tests: a real xpud (its service and socket
server) on the in-memory kernel of tests/unit/xpud, kubelet's sockets in a
temporary directory, the test kubelet of tests/testkubelet, and throwaway
certificates for the extender's mutual TLS."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "unit" / "xpud"))

from testkubelet import DraKubelet, Kubelet
from xpu import config, model, sizes
from xpu.auth import Authorizer
from xpu.server import Dispatcher, Server
from xpu.service import Service
from xpu.state import StateStore
from xpud_fakes import UUID0, UUID1, FakeBackend

GIB = sizes.GIB


def small_gpus(mem=(2 * GIB, 2 * GIB), used=(None, None)):
    return [model.Gpu(0, UUID0, "NVIDIA H200", 0, "0000:18:00.0", mem[0],
                      used[0]),
            model.Gpu(1, UUID1, "NVIDIA H200", 1, "0000:19:00.0", mem[1],
                      used[1])]


@pytest.fixture
def tmpdir_short():
    # Not tmp_path: a UNIX socket's path must fit in 108 bytes.
    d = tempfile.mkdtemp(prefix="xpu-k8s-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


class Xpud:
    def __init__(self, directory: Path, gpus):
        self.backend = FakeBackend(gpus)
        cfg = config.parse("", str(directory / "xpud.toml"))
        self.service = Service(self.backend,
                               StateStore(str(directory / "state")), cfg,
                               cgroup_root=str(directory))
        self.service.start()
        self.socket = str(directory / "xpud.sock")
        self.server = Server(self.socket,
                            Dispatcher(self.service, Authorizer()))
        self.server.start()

    def stop(self):
        self.server.stop()


@pytest.fixture
def make_xpud(tmpdir_short):
    made = []

    def make(gpus=None, name="xpud"):
        d = tmpdir_short / name
        d.mkdir()
        x = Xpud(d, gpus or small_gpus())
        made.append(x)
        return x

    yield make
    for x in made:
        x.stop()


@pytest.fixture
def kubelet_dirs(tmpdir_short):
    dp = tmpdir_short / "device-plugins"
    dp.mkdir()
    (tmpdir_short / "plugins_registry").mkdir()
    (tmpdir_short / "plugins").mkdir()
    return tmpdir_short


@pytest.fixture
def test_kubelet(kubelet_dirs):
    k = Kubelet(str(kubelet_dirs / "device-plugins"),
                str(kubelet_dirs / "pod-resources.sock"))
    yield k
    k.close()


@pytest.fixture
def dra_kubelet(kubelet_dirs):
    k = DraKubelet(str(kubelet_dirs / "plugins_registry"))
    yield k
    k.close()


class Certs:
    """A throwaway CA (ca.crt), the extender's certificate from it
    (server.crt/.key, for localhost and 127.0.0.1), kube-scheduler's
    client certificate from it (client.crt/.key), and a client
    certificate from another CA (stranger.crt/.key, other.crt), made with
    the openssl command line."""

    def __init__(self, d: Path):
        self.dir = d
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes"]

        def run(*argv):
            subprocess.run(["openssl", *argv], cwd=d, check=True,
                           capture_output=True)

        def ca(name):
            run("req", "-x509", *ec, "-keyout", f"{name}.key", "-out",
                f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")

        def leaf(name, issuer, usage, san=""):
            (d / f"{name}.ext").write_text(
                "basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                f"extendedKeyUsage={usage}\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid\n" + san)
            run("req", "-new", *ec, "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN={name}")
            run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.crt",
                "-CAkey", f"{issuer}.key", "-CAcreateserial", "-days", "2",
                "-out", f"{name}.crt", "-extfile", f"{name}.ext")

        ca("ca")
        ca("other")
        leaf("server", "ca", "serverAuth",
             "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        leaf("client", "ca", "clientAuth")
        leaf("stranger", "other", "clientAuth")

    def __getattr__(self, name):
        # certs.server_crt -> DIR/server.crt
        stem, _, ext = name.rpartition("_")
        if ext not in ("crt", "key"):
            raise AttributeError(name)
        return str(self.dir / f"{stem}.{ext}")

    def client(self, who: str | None = "client") -> ssl.SSLContext:
        """A client's context that verifies the extender by ca.crt and
        presents WHO's certificate (None: none)."""
        ctx = ssl.create_default_context(cafile=self.ca_crt)
        if who:
            ctx.load_cert_chain(str(self.dir / f"{who}.crt"),
                                str(self.dir / f"{who}.key"))
        return ctx


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))
