# SPDX-License-Identifier: Apache-2.0
"""xpu-k8s's command line: bad input is one line and status 2; `node` runs
until stopped, serving kubelet and the agent; `resourceslice` prints."""

from __future__ import annotations

import json
import threading
import urllib.request

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
