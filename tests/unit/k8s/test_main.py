# SPDX-License-Identifier: Apache-2.0
"""xpu-k8s's command line: bad input is one line and status 2; `node` runs
until stopped, serving kubelet and the agent; `resourceslice` prints;
`extender` serves mutual TLS, or plain HTTP only when told by name."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import urllib.error
import urllib.request

import pytest
from testkubelet import wait_for
from xpu.k8s import main


def test_bad_input_is_one_line(capsys):
    for argv, text in [
            (["--memory-unit", "8G", "node"],
             "argument --memory-unit: '8G' is ambiguous"),
            (["--vendor", "Xpu", "node"],
             "argument --vendor: 'Xpu' is not a vendor domain"),
            (["extender", "--listen", "8888"],
             "argument --listen: '8888' is not HOST:PORT"),
            (["--policy", "pack", "node"], "argument --policy: invalid"),
            (["node", "--gc-grace", "-1"],
             "argument --gc-grace: '-1' is not a number of seconds"),
            (["node", "--host-memory", "16G"],
             "argument --host-memory: '16G' is ambiguous"),
            (["node", "--host-memory", "512KiB"],
             "argument --host-memory: 512KiB is below the smallest bound"),
            (["node", "--host-memory=-1Gi"],
             "argument --host-memory: '-1Gi' is not a size")]:
        try:
            main.main(argv)
        except SystemExit as e:
            assert e.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and text in err, err


def test_host_memory():
    p = main.build_parser()
    assert p.parse_args(["node"]).host_memory == 0    # none by default
    assert p.parse_args(["node", "--host-memory", "16Gi"]).host_memory == \
        16 << 30
    assert p.parse_args(["node", "--host-memory", "0"]).host_memory == 0


def test_xpud_unreachable(capsys, tmpdir_short):
    assert main.main(["--xpud-socket", str(tmpdir_short / "none"),
                      "node"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("xpu-k8s: error: xpud: cannot reach xpud at ")


def test_node_serves_until_stopped(make_xpud, test_kubelet, kubelet_dirs,
                                   capsys):
    x = make_xpud()
    stop = threading.Event()
    rc = []
    t = threading.Thread(target=lambda: rc.append(main.main([
        "--xpud-socket", x.socket, "--memory-unit", "64MiB", "node",
        "--node-name", "n0",
        "--device-plugin-dir", str(kubelet_dirs / "device-plugins"),
        "--pod-resources-socket", str(kubelet_dirs / "pod-resources.sock"),
        "--agent-listen", "127.0.0.1:0", "--host-memory", "2GiB",
        "--state-dir", str(kubelet_dirs / "state")], stop)))
    t.start()
    try:
        wait_for(lambda: len(test_kubelet.plugins) == 3 and all(
            p.updates for p in test_kubelet.plugins.values()),
            what="registration")
        # The node's --host-memory reaches the slices it makes.
        test_kubelet.admit("ns", "p", {"c": {"xpu.dev/xpu-memory": 2}})
        [s] = x.service.op_list()
        assert s["host_memory_limit_bytes"] == 2 << 30
    finally:
        stop.set()
        t.join(timeout=30)
    assert rc == [0]


def test_resourceslice(make_xpud, capsys):
    x = make_xpud()
    assert main.main(["--xpud-socket", x.socket, "resourceslice",
                      "--node-name", "n0"]) == 0
    rs = json.loads(capsys.readouterr().out)
    assert rs["kind"] == "ResourceSlice"
    assert rs["metadata"]["name"] == "n0-xpu.dev"


def test_agent_serves(make_xpud, tmpdir_short):
    x = make_xpud()
    from xpu.k8s import agent, node
    a = agent.Agent("n0", x.socket, node.Reservations(None), node.BINPACK,
                    1 << 20)
    port = a.serve("127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/node",
                                    timeout=10) as r:
            obj = json.loads(r.read())
    finally:
        a.stop()
    assert [g["index"] for g in obj["gpus"]] == [0, 1]
    assert obj["memory_unit"] == 1 << 20


# -- the extender's mutual TLS (session 58) -------------------------------------

def extender_main(argv, capsys):
    """xpu-k8s extender with ARGV, told to stop at once: (status, stderr)."""
    stop = threading.Event()
    stop.set()
    rc = main.main(["--apiserver", "http://127.0.0.1:1", "extender",
                    "--listen", "127.0.0.1:0", *argv], stop)
    return rc, capsys.readouterr().err


def tls_argv(certs, cert=None, key=None, ca=None):
    return ["--tls-cert", cert or certs.server_crt,
            "--tls-key", key or certs.server_key,
            "--client-ca", ca or certs.ca_crt]


def test_extender_without_tls_or_the_insecure_flag_refuses(capsys, caplog,
                                                           certs):
    rc, err = extender_main([], capsys)
    assert rc == 2
    assert err.count("\n") == 1, err
    assert err.startswith("xpu-k8s: error: the extender needs --tls-cert, "
                          "--tls-key and --client-ca"), err
    assert "or --insecure-no-client-auth" in err
    # Part of the TLS options, or both ways at once: refused too.
    rc, err = extender_main(["--tls-cert", certs.server_crt], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert "--tls-cert without --tls-key, --client-ca" in err
    rc, err = extender_main(["--insecure-no-client-auth",
                             *tls_argv(certs)], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert "--insecure-no-client-auth serves plain HTTP" in err
    # Asked for by name, plain HTTP starts (and says what it is).
    rc, err = extender_main(["--insecure-no-client-auth"], capsys)
    assert rc == 0, err
    assert "plain HTTP and asks no credentials" in caplog.text


def test_extender_bad_tls_files_are_one_line(capsys, certs, tmp_path):
    enc = tmp_path / "enc.key"
    subprocess.run(["openssl", "pkey", "-in", certs.server_key, "-aes256",
                    "-passout", "pass:x", "-out", str(enc)], check=True,
                   capture_output=True)
    missing = str(tmp_path / "none.crt")
    for files, text in [
            ({"cert": missing},
             f"--tls-cert {missing}: No such file or directory"),
            ({"key": str(tmp_path)}, f"--tls-key {tmp_path}: Is a directory"),
            ({"ca": missing}, f"--client-ca {missing}: No such file"),
            ({"key": certs.client_key},
             (f"--tls-key {certs.client_key} is not the key of --tls-cert "
              f"{certs.server_crt}'s certificate")),
            ({"cert": certs.server_key},
             f"--tls-cert {certs.server_key}: no certificate (PEM) in it"),
            ({"key": certs.server_crt},
             f"--tls-key {certs.server_crt}: no private key (PEM) in it"),
            ({"ca": certs.server_key},
             f"--client-ca {certs.server_key}: no certificate (PEM) in it"),
            ({"key": str(enc)}, f"--tls-key {enc} is encrypted")]:
        rc, err = extender_main(tls_argv(certs, **files), capsys)
        assert rc == 2, (files, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"xpu-k8s: error: {text}"), (files, err)


def test_extender_serves_mutual_tls(capsys, caplog, certs):
    caplog.set_level(logging.INFO, logger="xpu")
    stop = threading.Event()
    rc = []
    t = threading.Thread(target=lambda: rc.append(main.main([
        "--apiserver", "http://127.0.0.1:1", "extender",
        "--listen", "127.0.0.1:0", *tls_argv(certs)], stop)))
    t.start()
    try:
        rec = wait_for(lambda: next((r for r in caplog.records
                                     if "extender listening" in r.msg),
                                    None), what="the extender")
        assert rec.args[1] == "HTTPS, client certificates required"
        url = f"https://127.0.0.1:{rec.args[0]}/filter"
        body = json.dumps({"Pod": {}, "NodeNames": []}).encode()
        with urllib.request.urlopen(url, body, timeout=20,
                                    context=certs.client()) as r:
            assert json.loads(r.read())["Error"] == ""
        with pytest.raises(OSError) as e:
            urllib.request.urlopen(url, body, timeout=20,
                                   context=certs.client(None))
        assert not isinstance(e.value, urllib.error.HTTPError)
        # The refusal is logged, with OpenSSL's reason.
        wait_for(lambda: any("refused" in r.getMessage()
                             for r in caplog.records), what="the log")
    finally:
        stop.set()
        t.join(timeout=30)
    assert rc == [0]
